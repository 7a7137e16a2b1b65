// Lower-precision convolution tactics (steps made by the builder's precision rewrite, see
// src/builder/precision.h): the oneDNN convolution kernel of onednn_conv.h in these data types,
// formats of oneDNN's choice (blocked), src/dst reordered from/to NCHW in the workspace;
// onednn_bf16 in the layout rewrite's regions (nhwc, nChw16c/nChw8c: builder/layout.h) reads and
// writes them as they are:
//   onednn_bf16: bf16 X, W and Y, fp32 bias, bf16 residual (sum post-op), AVX512-BF16;
//   onednn_int8: u8/s8 X, s8 W, fp32 Y with per-output-channel scales x_scale * w_scales[m]
//                (node attributes), fp32 bias and residual, AVX512-VNNI.
// The geometry is conv_geom's, read from the step with its dtypes set aside (conv_geom accepts
// fp32 only, so every fp32 tactic rejects these steps).
#include <cstring>
#include <dnnl.hpp>
#include <unordered_map>

#include "kernels/conv/onednn_conv.h"
#include "kernels/onednn_common.h"

namespace tac::kernels::conv {

namespace {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

enum class Lowp { bf16, int8 };

Result<ConvGeom> lowp_geom(const StepDesc& s, Lowp kind) {
  const ir::OpKind op = s.node->op;
  if (op != ir::OpKind::Conv && op != ir::OpKind::FusedConv) return not_applicable("not a convolution");
  if (s.in_dtypes.size() < 2 || s.out_dtypes.empty()) return not_applicable("missing inputs");
  const bool res = op == ir::OpKind::FusedConv && s.has_input(3);
  if (kind == Lowp::bf16) {
    if (!cpu_features().avx512_bf16) return not_applicable("needs AVX512-BF16");
    if (s.in_dtypes[0] != DType::bfloat16 || s.in_dtypes[1] != DType::bfloat16 || s.out_dtypes[0] != DType::bfloat16)
      return not_applicable("bf16 only (X, W and Y)");
    if (res && s.in_dtypes[3] != DType::bfloat16) return not_applicable("the residual must be bf16");
    if (s.node->attr("x_scale")) return not_applicable("an int8 step");
  } else {
    if (!cpu_features().avx512_vnni) return not_applicable("needs AVX512-VNNI");
    if (op != ir::OpKind::FusedConv || !s.node->attr("x_scale") || !s.node->attr("w_scales"))
      return not_applicable("not an int8 step (FusedConv with x_scale / w_scales)");
    // With y_scale the output is quantized (u8 / s8 for the next int8 node), else fp32.
    const bool y_q = s.node->attr("y_scale") != nullptr;
    const DType y = s.out_dtypes[0];
    if ((s.in_dtypes[0] != DType::uint8 && s.in_dtypes[0] != DType::int8) || s.in_dtypes[1] != DType::int8 ||
        (y_q ? y != DType::uint8 && y != DType::int8 : y != DType::float32))
      return not_applicable("int8 needs u8/s8 X, s8 W, fp32 Y (u8/s8 with y_scale)");
    if (res && (y_q || s.in_dtypes[3] != DType::float32)) return not_applicable("the residual must be fp32, without y_scale");
    if (y_q && !(s.node->attr("y_scale")->f > 0)) return not_applicable("y_scale must be positive");
  }
  if (!s.constants[1]) return not_applicable("weights are not constant (reordered at prepare)");
  if (kind == Lowp::int8 && !s.plain()) return not_applicable("int8 reads and writes nchw only");
  if (res && s.in_layout(3) != s.out_layout(0)) return not_applicable("the residual in the output's layout");
  StepDesc f = s;
  for (DType& d : f.in_dtypes)
    if (d != DType::undefined) d = DType::float32;
  f.out_dtypes[0] = DType::float32;
  auto g = conv_geom(f);
  if (!g) return g.status();
  if (g->has_bias && s.in_dtypes[2] != DType::float32) return not_applicable("bias must be fp32");
  if (kind == Lowp::int8 && static_cast<int64_t>(s.node->attr("w_scales")->floats.size()) != g->M)
    return not_applicable("w_scales must have one entry per output channel");
  return g;
}

// The step as a oneDNN convolution (onednn_conv.h) in its data types, formats oneDNN's choice where
// the step is nchw.
OnednnConv lowp_conv(const ConvGeom& g, const StepDesc& s, Lowp kind) {
  OnednnConv c;
  c.g = g;
  c.x = dnnl_type(s.in_dtypes[0]);
  c.w = dnnl_type(s.in_dtypes[1]);
  c.y = dnnl_type(s.out_dtypes[0]);
  c.src_layout = s.in_layout(0);
  c.dst_layout = s.out_layout(0);
  if (kind == Lowp::int8) {
    const float xs = s.node->attr("x_scale")->f;
    for (float ws : s.node->attr("w_scales")->floats) c.scales.push_back(xs * ws);
    if (g.has_bias) c.bias = s.constants[2];
    if (const ir::Attribute* ys = s.node->attr("y_scale")) c.y_scale = ys->f;
  }
  return c;
}

template <Lowp K>
Status lowp_applies(const StepDesc& s) {
  auto g = lowp_geom(s, K);
  return g ? Status::ok() : g.status();
}

// Relative to onednn's fp32 formula (0.62 of peak on C, M >= 16): bf16 doubles the FMA rate
// and halves the bytes, int8 (VNNI) doubles it again; depthwise gains little (memory bound).
template <Lowp K>
double lowp_cost(const StepDesc& s) {
  auto g = lowp_geom(s, K);
  if (!g) return 1e30;
  const double speed = K == Lowp::bf16 ? 1.7 : 3.0;
  const bool dw = g->G > 1 && g->G == g->C && g->G == g->M;
  const double eff = (g->Cg() >= 16 && g->Mg() >= 16 ? 0.62 : g->Cg() >= 3 ? 0.5 : 0.05) * (dw ? 1.0 : speed);
  const double bytes = K == Lowp::bf16 ? 2.0 : 1.0;
  // src and dst (with the residual) are reordered when nchw, read and written as they are otherwise.
  const bool rs = s.in_layout(0) == ir::Layout::nchw, rd = s.out_layout(0) == ir::Layout::nchw;
  const double reorders = bytes * 2 * g->N * ((rs ? g->C * g->hw() : 0) + (rd ? g->M * g->ohw() * (g->has_res ? 2 : 1) : 0));
  return cost_ns(g->flops(), eff, g->io_bytes() * bytes / 4.0 + reorders, g->threads);
}

template <Lowp K>
Result<std::unique_ptr<Kernel>> lowp_prepare(const StepDesc& s) {
  auto g = lowp_geom(s, K);
  if (!g) return g.status();
  return make_onednn_conv(lowp_conv(*g, s, K), *s.constants[1]);
}

}  // namespace

std::span<const Tactic> lowp_conv_tactics() {
  static const Tactic kTactics[] = {
      {"onednn_bf16", ir::OpKind::Conv,
       "oneDNN convolution in bf16 (AVX512-BF16), blocked formats, fp32 bias; nhwc / blocked layouts (layout.*) "
       "read and written directly",
       lowp_applies<Lowp::bf16>, lowp_cost<Lowp::bf16>, lowp_prepare<Lowp::bf16>, Backend::cpu, /*layouts=*/true},
      {"onednn_bf16", ir::OpKind::FusedConv,
       "oneDNN convolution in bf16 (AVX512-BF16), blocked formats, fp32 bias, residual/activation post-ops; nhwc / "
       "blocked layouts (layout.*) read and written directly",
       lowp_applies<Lowp::bf16>, lowp_cost<Lowp::bf16>, lowp_prepare<Lowp::bf16>, Backend::cpu, /*layouts=*/true},
      {"onednn_int8", ir::OpKind::FusedConv,
       "oneDNN convolution in int8 (VNNI): u8/s8 X, s8 W, fp32 Y with per-channel scales, fp32 post-ops",
       lowp_applies<Lowp::int8>, lowp_cost<Lowp::int8>, lowp_prepare<Lowp::int8>},
  };
  return kTactics;
}

}  // namespace tac::kernels::conv
