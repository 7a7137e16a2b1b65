// NCHW pooling, float32: MaxPool (no Indices output) and AveragePool with 2-D windows, strides,
// pads / auto_pad, ceil_mode, count_include_pad either way, dilations 1; GlobalAveragePool and
// GlobalMaxPool as row reductions over each plane. Rows per op: "avx512" and "avx2". Planes are
// split over threads.
#include <omp.h>

#include "kernels/elementwise/common.h"

namespace tac::kernels::ew {
namespace {

using ir::OpKind;

constexpr int64_t kMaxLanes = 16;  // the widest V::N; sizes the per-thread row buffer

bool is_global(OpKind op) { return op == OpKind::GlobalAveragePool || op == OpKind::GlobalMaxPool; }

Status pool_check(const StepDesc& s) {
  if (Status st = all_f32(s, {0}); !st) return st;
  if (!only_first_output(s)) return not_applicable("no Indices output");
  const Shape& x = s.in_shapes[0];
  if (is_global(s.node->op)) {
    if (x.size() < 3) return not_applicable("rank below 3");
    return Status::ok();
  }
  if (x.size() != 4) return not_applicable("2-D pooling (NCHW) only");
  if (attr_ints(s, "kernel_shape", {}).size() != 2) return not_applicable("kernel_shape must have 2 dims");
  for (int64_t d : attr_ints(s, "dilations", {1, 1}))
    if (d != 1) return not_applicable("dilations other than 1");
  for (int64_t v : attr_ints(s, "strides", {1, 1}))
    if (v < 1) return not_applicable("bad strides");
  if (s.out_shapes[0].size() != 4 || s.out_shapes[0][2] < 1 || s.out_shapes[0][3] < 1) return not_applicable("empty output");
  return Status::ok();
}

template <Isa I>
Status pool_applies(const StepDesc& s) {
  if (Status st = isa_applies(I); !st) return st;
  return pool_check(s);
}

PoolGeom pool_geom(const StepDesc& s) {
  const Shape& x = s.in_shapes[0];
  const Shape& y = s.out_shapes[0];
  const auto k = attr_ints(s, "kernel_shape", {});
  const auto st = attr_ints(s, "strides", {1, 1});
  auto pads = attr_ints(s, "pads", {0, 0, 0, 0});
  const std::string ap = attr_s(s, "auto_pad", "NOTSET");
  PoolGeom g{};
  g.ih = x[2], g.iw = x[3], g.oh = y[2], g.ow = y[3], g.kh = k[0], g.kw = k[1], g.sh = st[0], g.sw = st[1];
  if (ap == "VALID") pads = {0, 0, 0, 0};
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (int j = 0; j < 2; ++j) {
      const int64_t in = x[2 + j], out = y[2 + j];
      const int64_t total = std::max<int64_t>(0, (out - 1) * st[j] + k[j] - in);
      pads[j] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[j + 2] = total - pads[j];
    }
  }
  g.ph = pads[0], g.pw = pads[1], g.pe_h = pads[2], g.pe_w = pads[3];
  g.max = s.node->op == OpKind::MaxPool;
  g.include_pad = attr_i(s, "count_include_pad", 0) != 0;
  return g;
}

int64_t plane_ws_floats(const PoolGeom& g) {
  const int64_t L = std::max((g.ow - 1) * g.sw + g.kw, g.pw + g.iw);
  return (L + 2 * kMaxLanes + g.ow + kMaxLanes + 15) / 16 * 16;  // 64-byte multiple
}

template <Isa I>
double pool_cost(const StepDesc& s) {
  const double in = static_cast<double>(shape_numel(s.in_shapes[0]));
  const double out = static_cast<double>(shape_numel(s.out_shapes[0]));
  double work = in;
  if (!is_global(s.node->op)) {
    const auto k = attr_ints(s, "kernel_shape", {1, 1});
    const auto st = attr_ints(s, "strides", {1, 1});
    // vertical pass kh per input row element, horizontal kw per output (scalar beyond stride 2)
    work = out * static_cast<double>(k[0] * st[0]) * (st[1] > 0 ? static_cast<double>(st[1]) : 1) +
           out * static_cast<double>(k[1]) * (st[1] > 2 ? 8 : 1);
  }
  return stream_cost_ns(4 * (in + out), work * 0.06 * isa_factor(I), s.threads, static_cast<int64_t>(work));
}

template <Isa I>
Result<std::unique_ptr<Kernel>> pool_prepare(const StepDesc& s) {
  const IsaKernels& k = isa_kernels(I);
  const int threads = s.threads;
  const Shape& x = s.in_shapes[0];
  const int64_t planes = x[0] * x[1];
  if (is_global(s.node->op)) {
    const int64_t d = shape_numel(x) / std::max<int64_t>(1, planes);
    const bool max = s.node->op == OpKind::GlobalMaxPool;
    const float mul = static_cast<float>(1.0 / static_cast<double>(d));
    return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void*) -> Status {
      const float* xp = in[0].as<float>();
      float* yp = out[0].as<float>();
      parallel_for(planes, d, threads, [&](int64_t b, int64_t e) { k.reduce_rows(xp + b * d, yp + b, e - b, d, mul, max); });
      return Status::ok();
    });
  }
  const PoolGeom g = pool_geom(s);
  const int64_t per = plane_ws_floats(g);
  const int64_t isz = g.ih * g.iw, osz = g.oh * g.ow;
  const int64_t work = std::max<int64_t>(isz * g.kh / std::max<int64_t>(1, g.sh), osz * g.kw);
  return make_kernel([=, &k](std::span<const TensorView> in, std::span<const TensorView> out, void* ws) -> Status {
    const float* xp = in[0].as<float>();
    float* yp = out[0].as<float>();
    parallel_for(planes, work, threads, [&](int64_t b, int64_t e) {
      float* tmp = static_cast<float*>(ws) + omp_get_thread_num() * per;
      for (int64_t p = b; p < e; ++p) k.pool_plane(g, xp + p * isz, yp + p * osz, tmp);
    });
    return Status::ok();
  }, static_cast<size_t>(per * std::max(1, threads)) * sizeof(float));
}

}  // namespace

std::vector<Tactic> pool_tactics() {
  std::vector<Tactic> t;
  for (OpKind op : {OpKind::MaxPool, OpKind::AveragePool, OpKind::GlobalAveragePool, OpKind::GlobalMaxPool}) {
    t.push_back(Tactic{"avx512", op, "AVX-512 separable window (rows combined, then a strided row pass)", pool_applies<Isa::avx512>,
                       pool_cost<Isa::avx512>, pool_prepare<Isa::avx512>});
    t.push_back(Tactic{"avx2", op, "AVX2 separable window (rows combined, then a strided row pass)", pool_applies<Isa::avx2>,
                       pool_cost<Isa::avx2>, pool_prepare<Isa::avx2>});
  }
  return t;
}

}  // namespace tac::kernels::ew
