#include "kernels/resize/resize_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/elementwise/common.h"  // attr_i, attr_f, attr_s

namespace tac::kernels {

namespace {

using ew::attr_f;
using ew::attr_i;
using ew::attr_s;
using ir::OpKind;
using namespace ref::resize;  // Params, Mode, Coord, Nearest

// A constant float input as doubles (empty when absent); not_applicable when present but not constant.
Result<std::vector<double>> const_floats(const StepDesc& s, size_t i, const char* what) {
  if (!s.has_input(i)) return std::vector<double>{};
  if (!s.constants[i]) return not_applicable(std::string(what) + " must be a constant");
  if (!dtype_is_float(s.in_dtypes[i])) return not_applicable(std::string(what) + " must be a float tensor");
  std::vector<double> v;
  for (int64_t k = 0; k < s.constants[i]->numel(); ++k) v.push_back(s.constants[i]->get_f64(k));
  return v;
}

}  // namespace

Result<ResizePlan> resize_plan(const StepDesc& s, size_t max_rank) {
  if (!s.has_input(0) || s.out_dtypes.size() != 1 || s.out_dtypes[0] != s.in_dtypes[0] || s.out_shapes.size() != 1)
    return not_applicable("one input and an output of its type");
  const Shape& x = s.in_shapes[0];
  const size_t r = x.size();
  if (r > max_rank) return not_applicable("rank above " + std::to_string(max_rank));
  for (int64_t d : x)
    if (d < 0) return not_applicable("unknown dims");
  for (int64_t d : s.out_shapes[0])
    if (d < 0) return not_applicable("unknown dims");
  ResizePlan pl;
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
      const double o = std::floor(scales[d] * static_cast<double>(x[d]));
      if (o > 1e12) return not_applicable("output is too large");
      pl.out[d] = static_cast<int64_t>(o);
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
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return not_applicable("keep_aspect_ratio_policy " + policy);

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
    if (p.coord == Coord::tf_crop_and_resize) {  // roi matters to tf_crop_and_resize only
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
      const double o = std::floor(pl.scale[d] * static_cast<double>(x[d]));
      if (o > 1e12) return not_applicable("output is too large");
      pl.out[d] = static_cast<int64_t>(o);
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
  if (pl.out != s.out_shapes[0]) return not_applicable("output shape disagrees with scales / sizes");
  for (size_t d = 0; d < r; ++d)
    if (pl.resized[d] && x[d] == 0 && pl.out[d] > 0) return not_applicable("an empty axis resized");
  return pl;
}

}  // namespace tac::kernels
