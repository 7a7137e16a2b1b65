// Reference kernels: Resize (opsets 10-19+) and Upsample.
//
// Follows onnx/reference/ops/op_resize.py: every output coordinate is mapped back to an input
// coordinate x_ori per axis; a 1-D filter (nearest / linear / cubic, optionally antialiased)
// gives weights for a window of input indices (edge-clamped); the N-D result is the nested
// (separable) application, innermost axis first, computed in double.
// Opset < 11 Resize and Upsample use the 'asymmetric' transform with floor (upsampling) or
// ceil (downsampling) for nearest, as onnxruntime does for those opsets.
#include <algorithm>
#include <cmath>

#include "reference/helpers.h"
#include "reference/resize_filter.h"
#include "reference/ops_shape_internal.h"

namespace tac::ref {

namespace {

using ir::OpKind;

using namespace resize;  // Params, Tap, make_tap: the filter shared with the CUDA tactic

struct Interp {
  const std::vector<std::vector<Tap>>& taps;
  const std::vector<double>& data;
  const std::vector<int64_t>& strides;
  const std::vector<int64_t>& out_idx;
  double extrapolation;

  double eval(size_t d, int64_t off) const {
    if (d == taps.size()) return data[static_cast<size_t>(off)];
    const Tap& t = taps[d][static_cast<size_t>(out_idx[d])];
    if (t.extrapolate) return extrapolation;
    double s = 0;
    for (size_t k = 0; k < t.w.size(); ++k)
      if (t.w[k] != 0) s += t.w[k] * eval(d + 1, off + t.idx[k] * strides[d]);
    return s;
  }
};

// Resizes x; `scale`/`out_shape` per dim (all dims), `resized` marks the dims that are
// interpolated (the others are copied), roi per dim for tf_crop_and_resize.
void run_resize(KernelContext& ctx, const Params& p, const Tensor& x, const std::vector<double>& scale,
                const Shape& out_shape, const std::vector<bool>& resized, const std::vector<double>& roi_start,
                const std::vector<double>& roi_end) {
  const size_t r = static_cast<size_t>(x.rank());
  if (dtype_size(x.dtype()) == 0 || x.dtype() == DType::boolean)
    ctx.fail_invalid("Resize does not take " + dtype_name(x.dtype()));
  for (size_t d = 0; d < r; ++d)
    if (resized[d] && x.shape()[d] == 0 && out_shape[d] > 0) ctx.fail_invalid("cannot resize an empty axis");
  Tensor& out = ctx.make_output(0, x.dtype(), out_shape);
  if (out.numel() == 0) return;
  std::vector<std::vector<Tap>> taps(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t in = x.shape()[d];
    for (int64_t o = 0; o < out_shape[d]; ++o) {
      if (!resized[d]) {
        Tap t;
        t.idx = {o};
        t.w = {1.0};
        taps[d].push_back(t);
      } else {
        taps[d].push_back(make_tap(p, o, in, out_shape[d], scale[d], roi_start[d], roi_end[d]));
      }
    }
  }
  const std::vector<double> data = to_double_vector(x);
  const std::vector<int64_t> strides = strides_of(x.shape());
  for_each_index(out_shape, [&](int64_t k, const std::vector<int64_t>& idx) {
    Interp it{taps, data, strides, idx, p.extrapolation};
    out.set_f64(k, it.eval(0, 0));
  });
}

std::vector<double> float_input(const KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (!dtype_is_float(t.dtype())) ctx.fail_invalid(std::string(what) + " must be a float tensor");
  return to_double_vector(t);
}

// Resize-10 and Upsample: per-dim scales on all dims, asymmetric transform.
void resize_legacy(KernelContext& ctx, const std::vector<double>& scales) {
  const Tensor& x = ctx.input(0);
  const size_t r = static_cast<size_t>(x.rank());
  if (scales.size() != r)
    ctx.fail_invalid("scales has " + std::to_string(scales.size()) + " entries for rank " + std::to_string(r));
  Params p;
  const std::string mode = ctx.attr_string("mode", "nearest");
  if (mode == "nearest") p.mode = Mode::nearest;
  else if (mode == "linear" || mode == "bilinear") p.mode = Mode::linear;
  else ctx.fail_invalid("unknown mode '" + mode + "'");
  p.coord = Coord::asymmetric;
  p.nearest = Nearest::simple;
  Shape os(r);
  for (size_t d = 0; d < r; ++d) {
    if (!(scales[d] > 0) || !std::isfinite(scales[d])) ctx.fail_invalid("scales must be positive");
    const double o = std::floor(scales[d] * static_cast<double>(x.shape()[d]));
    if (o > 1e12) ctx.fail_invalid("output is too large");
    os[d] = static_cast<int64_t>(o);
  }
  std::vector<double> zeros(r, 0.0), ones(r, 1.0);
  run_resize(ctx, p, x, scales, os, std::vector<bool>(r, true), zeros, ones);
}

void upsample_kernel(KernelContext& ctx) {
  std::vector<double> scales;
  if (ctx.opset >= 9) {
    scales = float_input(ctx, 1, "scales");
  } else {
    if (ctx.opset < 7) ctx.fail_unsupported("Upsample-1 (height_scale/width_scale) is not supported");
    if (!ctx.has_attr("scales")) ctx.fail_invalid("attribute 'scales' is required");
    for (float f : ctx.attr_floats("scales")) scales.push_back(f);
  }
  resize_legacy(ctx, scales);
}

void resize_kernel(KernelContext& ctx) {
  if (ctx.opset < 11) {
    resize_legacy(ctx, float_input(ctx, 1, "scales"));
    return;
  }
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  const size_t r = static_cast<size_t>(rank);
  Params p;
  const std::string mode = ctx.attr_string("mode", "nearest");
  if (mode == "nearest") p.mode = Mode::nearest;
  else if (mode == "linear") p.mode = Mode::linear;
  else if (mode == "cubic") p.mode = Mode::cubic;
  else ctx.fail_invalid("unknown mode '" + mode + "'");
  const std::string coord = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") p.coord = Coord::half_pixel;
  else if (coord == "half_pixel_symmetric") p.coord = Coord::half_pixel_symmetric;
  else if (coord == "pytorch_half_pixel") p.coord = Coord::pytorch_half_pixel;
  else if (coord == "align_corners") p.coord = Coord::align_corners;
  else if (coord == "asymmetric") p.coord = Coord::asymmetric;
  else if (coord == "tf_half_pixel_for_nn") p.coord = Coord::tf_half_pixel_for_nn;
  else if (coord == "tf_crop_and_resize") p.coord = Coord::tf_crop_and_resize;
  else ctx.fail_invalid("unknown coordinate_transformation_mode '" + coord + "'");
  const std::string nm = ctx.attr_string("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") p.nearest = Nearest::round_prefer_floor;
  else if (nm == "round_prefer_ceil") p.nearest = Nearest::round_prefer_ceil;
  else if (nm == "floor") p.nearest = Nearest::floor;
  else if (nm == "ceil") p.nearest = Nearest::ceil;
  else ctx.fail_invalid("unknown nearest_mode '" + nm + "'");
  p.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75f);
  p.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
  p.extrapolation = ctx.attr_float("extrapolation_value", 0.0f);
  p.antialias = ctx.opset >= 18 && ctx.attr_int("antialias", 0) != 0;
  if (p.antialias && p.mode == Mode::nearest) ctx.fail_invalid("antialias is not defined for mode 'nearest'");
  const std::string policy = ctx.opset >= 18 ? ctx.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    ctx.fail_invalid("unknown keep_aspect_ratio_policy '" + policy + "'");

  // axes (opset 18): the dims that scales / sizes / roi refer to.
  std::vector<int64_t> axes;
  if (ctx.opset >= 18 && ctx.has_attr("axes")) {
    std::vector<bool> seen(r, false);
    for (int64_t a : ctx.attr_ints("axes")) {
      int64_t n = normalize_axis(ctx, a, rank);
      if (seen[static_cast<size_t>(n)]) ctx.fail_invalid("axis " + std::to_string(a) + " is repeated");
      seen[static_cast<size_t>(n)] = true;
      axes.push_back(n);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  const size_t na = axes.size();
  std::vector<bool> resized(r, false);
  for (int64_t a : axes) resized[static_cast<size_t>(a)] = true;

  std::vector<double> scales_in;
  std::vector<int64_t> sizes_in;
  if (ctx.has_input(2)) scales_in = float_input(ctx, 2, "scales");
  if (ctx.has_input(3)) sizes_in = int_input(ctx, 3, "sizes");
  if (!scales_in.empty() && !sizes_in.empty()) ctx.fail_invalid("only one of scales and sizes may be given");
  if (scales_in.empty() && sizes_in.empty()) ctx.fail_invalid("one of scales and sizes must be given");

  std::vector<double> roi_start(r, 0.0), roi_end(r, 1.0);
  if (ctx.has_input(1) && ctx.input(1).numel() > 0) {
    std::vector<double> roi = float_input(ctx, 1, "roi");
    if (roi.size() != 2 * na) {
      if (p.coord == Coord::tf_crop_and_resize)
        ctx.fail_invalid("roi has " + std::to_string(roi.size()) + " entries, expected " + std::to_string(2 * na));
    } else {
      for (size_t i = 0; i < na; ++i) {
        roi_start[static_cast<size_t>(axes[i])] = roi[i];
        roi_end[static_cast<size_t>(axes[i])] = roi[na + i];
      }
    }
  } else if (p.coord == Coord::tf_crop_and_resize) {
    ctx.fail_invalid("tf_crop_and_resize needs roi");
  }

  std::vector<double> scale(r, 1.0);
  Shape os = x.shape();
  if (!scales_in.empty()) {
    if (scales_in.size() != na)
      ctx.fail_invalid("scales has " + std::to_string(scales_in.size()) + " entries, expected " + std::to_string(na));
    for (size_t i = 0; i < na; ++i) {
      const size_t d = static_cast<size_t>(axes[i]);
      if (!(scales_in[i] > 0) || !std::isfinite(scales_in[i])) ctx.fail_invalid("scales must be positive");
      scale[d] = scales_in[i];
      const double o = std::floor(scale[d] * static_cast<double>(x.shape()[d]));
      if (o > 1e12) ctx.fail_invalid("output is too large");
      os[d] = static_cast<int64_t>(o);
    }
  } else {
    if (sizes_in.size() != na)
      ctx.fail_invalid("sizes has " + std::to_string(sizes_in.size()) + " entries, expected " + std::to_string(na));
    for (size_t i = 0; i < na; ++i) {
      const size_t d = static_cast<size_t>(axes[i]);
      if (sizes_in[i] < 0) ctx.fail_invalid("sizes must be non-negative");
      if (x.shape()[d] == 0) ctx.fail_invalid("cannot resize an empty axis");
      os[d] = sizes_in[i];
      scale[d] = static_cast<double>(sizes_in[i]) / static_cast<double>(x.shape()[d]);
    }
    if (policy != "stretch" && na > 0) {
      double s = scale[static_cast<size_t>(axes[0])];
      for (int64_t a : axes)
        s = policy == "not_larger" ? std::min(s, scale[static_cast<size_t>(a)]) : std::max(s, scale[static_cast<size_t>(a)]);
      for (int64_t a : axes) {
        const size_t d = static_cast<size_t>(a);
        scale[d] = s;
        os[d] = static_cast<int64_t>(s * static_cast<double>(x.shape()[d]) + 0.5);
      }
    }
  }
  run_resize(ctx, p, x, scale, os, resized, roi_start, roi_end);
}

}  // namespace

void add_shape_resize_kernels(KernelTable& t) {
  t.add(OpKind::Resize, resize_kernel);
  t.add(OpKind::Upsample, upsample_kernel);
}

}  // namespace tac::ref
