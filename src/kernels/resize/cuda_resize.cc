// CUDA tactic of Resize (opsets 10 to 19+) and Upsample: our own kernel (cuda_resize.cu), one
// launch, fp32 / fp16 / bf16. Every mode (nearest with each nearest_mode, linear, cubic, with
// antialias and exclude_outside), every coordinate_transformation_mode, axes and
// keep_aspect_ratio_policy, as the reference (reference/ops_shape_resize.cc) computes them: the
// filter taps of each output coordinate on each dim are computed here at prepare with the
// reference's formulas (in double; weights of 0 dropped) and uploaded as a table; the kernel sums
// the product of the taps. scales / sizes (and roi for tf_crop_and_resize) must be constants.
// Tactic name "cuda".
#include "kernels/resize/cuda_resize.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/cuda_util.h"
#include "kernels/resize/resize_plan.h"
#include "reference/resize_filter.h"

namespace tac::kernels {

namespace {

using cuda::kern::ResizeDesc;
using cuda::kern::ResizeTap;
using ir::OpKind;

// The reference's filter itself (reference/resize_filter.h): the same taps by construction.
using namespace ref::resize;

// The kernel's tap table: per dim, per output coordinate, the taps of nonzero weight (padded with
// weight-0 taps to the dim's widest).
struct Table {
  ResizeDesc d;
  std::vector<ResizeTap> taps;
};
Result<Table> resize_table(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(ResizePlan pl, resize_plan(s, static_cast<size_t>(cuda::kern::kMaxDims)));
  TAC_RETURN_IF_ERROR(cuda::elem_of(s.in_dtypes[0]).status());
  const Shape& x = s.in_shapes[0];
  for (int64_t d : x)
    if (d >= (int64_t{1} << 31)) return not_applicable("dims of 0 to 2^31 - 1");
  Table tb;
  tb.d.rank = static_cast<int>(x.size());
  tb.d.extrapolation = static_cast<float>(pl.p.extrapolation);
  int64_t stride = 1;
  for (size_t d = x.size(); d-- > 0;) {
    tb.d.in_strides[d] = stride;
    stride *= x[d];
  }
  for (size_t d = 0; d < x.size(); ++d) {
    std::vector<std::vector<ResizeTap>> per(static_cast<size_t>(pl.out[d]));
    size_t width = 1;
    for (int64_t o = 0; o < pl.out[d]; ++o) {
      std::vector<ResizeTap>& v = per[static_cast<size_t>(o)];
      if (!pl.resized[d]) {
        v.push_back({static_cast<int32_t>(o), 1.f});
        continue;
      }
      const Tap t = make_tap(pl.p, o, x[d], pl.out[d], pl.scale[d], pl.roi_start[d], pl.roi_end[d]);
      if (t.extrapolate) {
        v.push_back({-1, 0.f});
        continue;
      }
      for (size_t k = 0; k < t.w.size(); ++k)
        if (t.w[k] != 0) v.push_back({static_cast<int32_t>(t.idx[k]), static_cast<float>(t.w[k])});
      if (v.empty()) v.push_back({0, 0.f});
      width = std::max(width, v.size());
    }
    tb.d.out_dims[d] = pl.out[d];
    tb.d.taps[d] = static_cast<int>(width);
    tb.d.tap_off[d] = static_cast<int64_t>(tb.taps.size());
    for (auto& v : per) {
      const int32_t pad_idx = v[0].idx < 0 ? 0 : v[0].idx;
      v.resize(width, ResizeTap{pad_idx, 0.f});
      tb.taps.insert(tb.taps.end(), v.begin(), v.end());
    }
  }
  return tb;
}

Status resize_applies(const StepDesc& s) { return resize_table(s).status(); }

Result<std::unique_ptr<Kernel>> resize_prepare(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Table tb, resize_table(s));
  TAC_ASSIGN_OR_RETURN(cuda::kern::Elem t, cuda::elem_of(s.in_dtypes[0]));
  auto table = std::make_shared<cuda::DeviceBuffer>();
  if (!tb.taps.empty()) {
    TAC_ASSIGN_OR_RETURN(*table, cuda::DeviceBuffer::allocate(tb.taps.size() * sizeof(ResizeTap)));
    TAC_RETURN_IF_ERROR(cuda::copy_to_device(table->get(), tb.taps.data(), tb.taps.size() * sizeof(ResizeTap)));
    TAC_RETURN_IF_ERROR(cuda::synchronize());  // tb.taps goes out of scope
  }
  TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
  void* st = c->stream;
  const ResizeDesc d = tb.d;
  return cuda::make_kernel([t, d, table, st](auto in, auto out, void*) {
    return cuda::launch_status(cuda::kern::resize(t, in[0].data, out[0].data, static_cast<const ResizeTap*>(table->get()), d,
                                                  out[0].numel(), st),
                               "resize kernel");
  });
}

// Memory-bound: every output element reads its taps (the product of the dims' widths).
double resize_cost(const StepDesc& s) {
  const double e = static_cast<double>(dtype_size(s.in_dtypes[0]));
  const double b = e * static_cast<double>(std::max<int64_t>(0, shape_numel(s.in_shapes[0]))) +
                   e * static_cast<double>(std::max<int64_t>(0, shape_numel(s.out_shapes[0])));
  return cuda::memory_bound_ns(b);
}

}  // namespace

std::span<const Tactic> cuda_resize_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (OpKind op : {OpKind::Resize, OpKind::Upsample})
      t.push_back({"cuda", op, "own CUDA kernel, one thread per output, the reference's filter taps precomputed per dim",
                   resize_applies, resize_cost, resize_prepare, Backend::cuda});
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
