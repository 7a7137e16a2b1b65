// CUDA tactic of Resize (opsets 10 to 19+) and Upsample: our own kernel (cuda_resize.cu), one
// launch, fp32 / fp16 / bf16. Every mode (nearest with each nearest_mode, linear, cubic, with
// antialias and exclude_outside), every coordinate_transformation_mode, axes and
// keep_aspect_ratio_policy, as the reference (reference/ops_shape_resize.cc) computes them: the
// filter taps of each output coordinate on each dim are computed here at prepare with the
// reference's formulas (in double; weights of 0 dropped) and uploaded as a table; the kernel sums
// the product of the taps. scales / sizes (and roi for tf_crop_and_resize) must be constants.
// Tactic name "cuda".
#include <algorithm>
#include <cmath>
#include <memory>

#include "backends/cuda/kernel_util.h"
#include "kernels/elementwise/common.h"  // attr_i, attr_f, attr_s
#include "kernels/resize/cuda_resize.h"
#include "reference/resize_filter.h"

namespace tac::kernels {

namespace {

using cuda::kern::ResizeDesc;
using cuda::kern::ResizeTap;
using ew::attr_f;
using ew::attr_i;
using ew::attr_s;
using ir::OpKind;


// The reference's filter itself (reference/resize_filter.h): the same taps by construction.
using namespace ref::resize;

// What the kernel needs: per dim the scale, whether it is resized, roi; the parameters.
struct Plan {
  Params p;
  std::vector<double> scale, roi_start, roi_end;
  std::vector<bool> resized;
  Shape out;
};

// A constant float input as doubles; nullopt-like empty when absent. not_applicable when present
// but not constant.
Result<std::vector<double>> const_floats(const StepDesc& s, size_t i, const char* what) {
  if (!s.has_input(i)) return std::vector<double>{};
  if (!s.constants[i]) return not_applicable(std::string(what) + " must be a constant");
  std::vector<double> v;
  for (int64_t k = 0; k < s.constants[i]->numel(); ++k) v.push_back(s.constants[i]->get_f64(k));
  return v;
}

// The reference's reading of the attributes and inputs (resize_kernel, resize_legacy).
Result<Plan> resize_plan(const StepDesc& s) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1 || s.out_dtypes[0] != s.in_dtypes[0])
    return not_applicable("one input and an output of its type");
  TAC_RETURN_IF_ERROR(cuda::elem_of(s.in_dtypes[0]).status());
  const Shape& x = s.in_shapes[0];
  const size_t r = x.size();
  if (r > static_cast<size_t>(cuda::kern::kMaxDims)) return not_applicable("rank above 8");
  for (int64_t d : x)
    if (d < 0 || d >= (int64_t{1} << 31)) return not_applicable("dims of 0 to 2^31 - 1");
  Plan pl;
  pl.roi_start.assign(r, 0.0);
  pl.roi_end.assign(r, 1.0);
  const bool legacy = s.node->op == OpKind::Upsample || s.node->opset < 11;
  if (legacy) {
    std::vector<double> scales;
    if (s.node->op == OpKind::Upsample && s.node->opset < 9) {
      if (s.node->opset < 7) return not_applicable("Upsample-1");
      const ir::Attribute* a = s.node->attr("scales");
      if (!a) return not_applicable("no scales");
      for (float f : a->floats) scales.push_back(f);
    } else {
      TAC_ASSIGN_OR_RETURN(scales, const_floats(s, 1, "scales"));
    }
    if (scales.size() != r) return not_applicable("scales of the wrong length");
    const std::string mode = attr_s(s, "mode", "nearest");
    if (mode == "nearest") pl.p.mode = Mode::nearest;
    else if (mode == "linear" || mode == "bilinear") pl.p.mode = Mode::linear;
    else return not_applicable("mode " + mode);
    pl.p.coord = Coord::asymmetric;
    pl.p.nearest = Nearest::simple;
    pl.out.resize(r);
    for (size_t d = 0; d < r; ++d) {
      if (!(scales[d] > 0) || !std::isfinite(scales[d])) return not_applicable("scales must be positive");
      pl.out[d] = static_cast<int64_t>(std::floor(scales[d] * static_cast<double>(x[d])));
    }
    pl.scale = scales;
    pl.resized.assign(r, true);
    return pl;
  }
  Params& p = pl.p;
  const std::string mode = attr_s(s, "mode", "nearest");
  if (mode == "nearest") p.mode = Mode::nearest;
  else if (mode == "linear") p.mode = Mode::linear;
  else if (mode == "cubic") p.mode = Mode::cubic;
  else return not_applicable("mode " + mode);
  const std::string coord = attr_s(s, "coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") p.coord = Coord::half_pixel;
  else if (coord == "half_pixel_symmetric") p.coord = Coord::half_pixel_symmetric;
  else if (coord == "pytorch_half_pixel") p.coord = Coord::pytorch_half_pixel;
  else if (coord == "align_corners") p.coord = Coord::align_corners;
  else if (coord == "asymmetric") p.coord = Coord::asymmetric;
  else if (coord == "tf_half_pixel_for_nn") p.coord = Coord::tf_half_pixel_for_nn;
  else if (coord == "tf_crop_and_resize") p.coord = Coord::tf_crop_and_resize;
  else return not_applicable("coordinate_transformation_mode " + coord);
  const std::string nm = attr_s(s, "nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") p.nearest = Nearest::round_prefer_floor;
  else if (nm == "round_prefer_ceil") p.nearest = Nearest::round_prefer_ceil;
  else if (nm == "floor") p.nearest = Nearest::floor;
  else if (nm == "ceil") p.nearest = Nearest::ceil;
  else return not_applicable("nearest_mode " + nm);
  p.cubic_a = attr_f(s, "cubic_coeff_a", -0.75f);
  p.exclude_outside = attr_i(s, "exclude_outside", 0) != 0;
  p.extrapolation = attr_f(s, "extrapolation_value", 0.0f);
  p.antialias = s.node->opset >= 18 && attr_i(s, "antialias", 0) != 0;
  if (p.antialias && p.mode == Mode::nearest) return not_applicable("antialias with mode nearest");
  const std::string policy = s.node->opset >= 18 ? attr_s(s, "keep_aspect_ratio_policy", "stretch") : "stretch";
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") return not_applicable("keep_aspect_ratio_policy " + policy);

  const int64_t rank = static_cast<int64_t>(r);
  std::vector<int64_t> axes;
  const ir::Attribute* axes_attr = s.node->opset >= 18 ? s.node->attr("axes") : nullptr;
  if (axes_attr) {
    std::vector<bool> seen(r, false);
    for (int64_t a : axes_attr->ints) {
      const int64_t n = a < 0 ? a + rank : a;
      if (n < 0 || n >= rank || seen[static_cast<size_t>(n)]) return not_applicable("axes out of range or repeated");
      seen[static_cast<size_t>(n)] = true;
      axes.push_back(n);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  const size_t na = axes.size();
  pl.resized.assign(r, false);
  for (int64_t a : axes) pl.resized[static_cast<size_t>(a)] = true;

  TAC_ASSIGN_OR_RETURN(std::vector<double> scales_in, const_floats(s, 2, "scales"));
  std::vector<int64_t> sizes_in;
  if (s.has_input(3)) {
    if (!s.constants[3]) return not_applicable("sizes must be a constant");
    for (int64_t k = 0; k < s.constants[3]->numel(); ++k) sizes_in.push_back(s.constants[3]->get_i64(k));
  }
  if (scales_in.empty() == sizes_in.empty()) return not_applicable("exactly one of scales and sizes");

  if (s.has_input(1) && shape_numel(s.in_shapes[1]) > 0) {
    if (p.coord == Coord::tf_crop_and_resize) {
      TAC_ASSIGN_OR_RETURN(std::vector<double> roi, const_floats(s, 1, "roi"));
      if (roi.size() != 2 * na) return not_applicable("roi of the wrong length");
      for (size_t i = 0; i < na; ++i) {
        pl.roi_start[static_cast<size_t>(axes[i])] = roi[i];
        pl.roi_end[static_cast<size_t>(axes[i])] = roi[na + i];
      }
    }
  } else if (p.coord == Coord::tf_crop_and_resize) {
    return not_applicable("tf_crop_and_resize needs roi");
  }

  pl.scale.assign(r, 1.0);
  pl.out = x;
  if (!scales_in.empty()) {
    if (scales_in.size() != na) return not_applicable("scales of the wrong length");
    for (size_t i = 0; i < na; ++i) {
      const size_t d = static_cast<size_t>(axes[i]);
      if (!(scales_in[i] > 0) || !std::isfinite(scales_in[i])) return not_applicable("scales must be positive");
      pl.scale[d] = scales_in[i];
      pl.out[d] = static_cast<int64_t>(std::floor(pl.scale[d] * static_cast<double>(x[d])));
    }
  } else {
    if (sizes_in.size() != na) return not_applicable("sizes of the wrong length");
    for (size_t i = 0; i < na; ++i) {
      const size_t d = static_cast<size_t>(axes[i]);
      if (sizes_in[i] < 0 || x[d] == 0) return not_applicable("negative sizes or an empty axis");
      pl.out[d] = sizes_in[i];
      pl.scale[d] = static_cast<double>(sizes_in[i]) / static_cast<double>(x[d]);
    }
    if (policy != "stretch" && na > 0) {
      double sc = pl.scale[static_cast<size_t>(axes[0])];
      for (int64_t a : axes)
        sc = policy == "not_larger" ? std::min(sc, pl.scale[static_cast<size_t>(a)]) : std::max(sc, pl.scale[static_cast<size_t>(a)]);
      for (int64_t a : axes) {
        const size_t d = static_cast<size_t>(a);
        pl.scale[d] = sc;
        pl.out[d] = static_cast<int64_t>(sc * static_cast<double>(x[d]) + 0.5);
      }
    }
  }
  return pl;
}

// The kernel's tap table: per dim, per output coordinate, the taps of nonzero weight (padded with
// weight-0 taps to the dim's widest).
struct Table {
  ResizeDesc d;
  std::vector<ResizeTap> taps;
};
Result<Table> resize_table(const StepDesc& s) {
  TAC_ASSIGN_OR_RETURN(Plan pl, resize_plan(s));
  const Shape& x = s.in_shapes[0];
  if (pl.out != s.out_shapes[0]) return not_applicable("output shape disagrees with scales / sizes");
  for (size_t d = 0; d < x.size(); ++d)
    if (pl.resized[d] && x[d] == 0 && pl.out[d] > 0) return not_applicable("an empty axis resized");
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
  return cuda::not_yet_run_on_a_gpu(cuda::memory_bound_ns(b));
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
