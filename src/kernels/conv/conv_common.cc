#include "kernels/conv/conv_common.h"

#include "kernels/elementwise/common.h"

#include <omp.h>

#include <string>

namespace tac::kernels::conv {

namespace {

std::vector<int64_t> ints_attr(const ir::Node& n, const char* key, size_t count, int64_t fill) {
  const ir::Attribute* a = n.attr(key);
  if (!a || a->type != ir::Attribute::Type::ints) return std::vector<int64_t>(count, fill);
  return a->ints;
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace

Result<ConvGeom> conv_geom(const StepDesc& step) {
  const ir::Node& n = *step.node;
  if (n.op != ir::OpKind::Conv && n.op != ir::OpKind::FusedConv) return not_applicable("not a convolution");
  if (step.in_shapes.size() < 2 || step.out_shapes.empty()) return not_applicable("missing inputs");
  if (step.in_dtypes[0] != DType::float32 || step.in_dtypes[1] != DType::float32 || step.out_dtypes[0] != DType::float32)
    return not_applicable("only float32");
  const Shape& xs = step.in_shapes[0];
  const Shape& ws = step.in_shapes[1];
  if (xs.size() != 4 || ws.size() != 4) return not_applicable("only 2-D convolution (rank-4 X and W)");
  ConvGeom g;
  g.N = xs[0], g.C = xs[1], g.H = xs[2], g.W = xs[3];
  g.M = ws[0], g.KH = ws[2], g.KW = ws[3];
  if (const ir::Attribute* a = n.attr("group"); a && a->type == ir::Attribute::Type::i) g.G = a->i;
  if (g.G < 1 || g.C % g.G != 0 || g.M % g.G != 0 || ws[1] * g.G != g.C) return not_applicable("bad group / channel counts");
  auto st = ints_attr(n, "strides", 2, 1), dil = ints_attr(n, "dilations", 2, 1), pads = ints_attr(n, "pads", 4, 0);
  if (st.size() != 2 || dil.size() != 2 || pads.size() != 4) return not_applicable("attribute lengths do not match 2-D");
  g.SH = st[0], g.SW = st[1], g.DH = dil[0], g.DW = dil[1];
  if (g.SH < 1 || g.SW < 1 || g.DH < 1 || g.DW < 1 || g.KH < 1 || g.KW < 1) return not_applicable("bad strides/dilations");
  std::string auto_pad = "NOTSET";
  if (const ir::Attribute* a = n.attr("auto_pad"); a && a->type == ir::Attribute::Type::s) auto_pad = a->s;
  int64_t in[2] = {g.H, g.W}, k[2] = {g.KH, g.KW}, s[2] = {g.SH, g.SW}, d[2] = {g.DH, g.DW}, pb[2], pe[2], out[2];
  for (int i = 0; i < 2; ++i) {
    const int64_t ek = (k[i] - 1) * d[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + s[i] - 1) / s[i];
      int64_t total = std::max<int64_t>(0, (out[i] - 1) * s[i] + ek - in[i]);
      pb[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[i] = total - pb[i];
    } else if (auto_pad == "VALID" || auto_pad == "NOTSET") {
      pb[i] = auto_pad == "NOTSET" ? pads[static_cast<size_t>(i)] : 0;
      pe[i] = auto_pad == "NOTSET" ? pads[static_cast<size_t>(i) + 2] : 0;
      if (pb[i] < 0 || pe[i] < 0) return not_applicable("negative pads");
      out[i] = floor_div(in[i] + pb[i] + pe[i] - ek, s[i]) + 1;
    } else {
      return not_applicable("unknown auto_pad");
    }
  }
  g.PT = pb[0], g.PL = pb[1], g.PB = pe[0], g.PR = pe[1], g.OH = out[0], g.OW = out[1];
  if (step.out_shapes[0] != Shape{g.N, g.M, g.OH, g.OW}) return not_applicable("output shape differs from the geometry");
  if (g.N * g.C * g.H * g.W == 0 || g.OH <= 0 || g.OW <= 0 || g.M == 0) return not_applicable("empty tensors");
  g.has_bias = step.has_input(2);
  if (g.has_bias && (step.in_dtypes[2] != DType::float32 || step.in_shapes[2] != Shape{g.M}))
    return not_applicable("bias must be float32 [M]");
  if (n.op == ir::OpKind::FusedConv) {
    g.has_res = step.has_input(3);
    if (g.has_res && (step.in_dtypes[3] != DType::float32 || step.in_shapes[3] != step.out_shapes[0]))
      return not_applicable("residual must be float32 with the output's shape (no broadcasting)");
    auto ep = ir::epilogue_of(n);
    if (!ep) return ep.status();
    g.ep = *ep;
  }
  g.threads = std::max(1, step.threads);
  return g;
}

namespace {

// y = act(y) with the elementwise family's vector kernels (ew::unary_of); false where the CPU has
// neither AVX-512 nor AVX2 or the activation has no vector kernel.
bool vector_act(const ir::Epilogue& ep, float* y, int64_t n) {
  const std::optional<ew::UnaryOp> op = ew::unary_of(ep.act);
  const CpuFeatures& f = cpu_features();
  if (!op || (!f.avx512 && !f.avx2_fma)) return false;
  ew::isa_kernels(f.avx512 ? ew::Isa::avx512 : ew::Isa::avx2).unary(*op, y, y, n, ep.alpha, ep.beta);
  return true;
}

}  // namespace

// Cloned per ISA: the loops below auto-vectorise (-O3 on this function) for AVX-512 / AVX2.
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3"))) void finish_row(
    float* y, const float* res, int64_t n, float bias, const ir::Epilogue& ep) {
  if (res) {
    for (int64_t i = 0; i < n; ++i) y[i] = (y[i] + bias) + res[i];
  } else if (bias != 0.0f) {
    for (int64_t i = 0; i < n; ++i) y[i] += bias;
  }
  const float a = ep.alpha, b = ep.beta;
  switch (ep.act) {
    case ir::Epilogue::Act::none: break;
    case ir::Epilogue::Act::relu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
      break;
    case ir::Epilogue::Act::clip:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] < a ? a : (y[i] > b ? b : y[i]);
      break;
    case ir::Epilogue::Act::leaky_relu:
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] >= 0.0f ? y[i] : a * y[i];
      break;
    case ir::Epilogue::Act::hard_sigmoid:
      for (int64_t i = 0; i < n; ++i) {
        float v = a * y[i] + b;
        y[i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
      }
      break;
    default:  // transcendental: the elementwise family's vector kernels (the scalar double definition
              // of ir::Epilogue cost ~5 ns per element: efficientnet_b1's stem with SiLU took 2.3 ms)
      if (!vector_act(ep, y, n))
        for (int64_t i = 0; i < n; ++i) y[i] = ep.apply(y[i]);
      break;
  }
}

void finish_planes(const ConvGeom& g, float* y_image, const float* res_image, const float* bias, int64_t m0,
                   int64_t m1) {
  const int64_t p = g.ohw();
  for (int64_t m = m0; m < m1; ++m)
    finish_row(y_image + m * p, res_image ? res_image + m * p : nullptr, p, bias ? bias[m] : 0.0f, g.ep);
}

ScopedOmpThreads::ScopedOmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
ScopedOmpThreads::~ScopedOmpThreads() { omp_set_num_threads(saved_); }

double peak_flops_per_ns() {
  const CpuFeatures& f = cpu_features();
  return f.avx512 ? 250.0 : f.avx2_fma ? 125.0 : 30.0;
}

double cost_ns(double flops, double eff, double bytes, int threads) {
  const double t = std::max(1, threads);
  return flops / (peak_flops_per_ns() * eff * t) + bytes / (kBytesPerNsPerThread * std::min(t, 4.0));
}

double epilogue_ns(const ConvGeom& g) {
  const double n = static_cast<double>(g.N * g.M * g.ohw());
  bool scalar = g.ep.act == ir::Epilogue::Act::sigmoid || g.ep.act == ir::Epilogue::Act::tanh ||
                g.ep.act == ir::Epilogue::Act::gelu || g.ep.act == ir::Epilogue::Act::silu;
  bool any = g.has_bias || g.has_res || g.ep.act != ir::Epilogue::Act::none;
  return (scalar ? n * 5.0 : any ? n * 0.1 : 0.0) / g.threads;
}

}  // namespace tac::kernels::conv
