#include "reference/resize_filter.h"

#include <algorithm>
#include <cmath>

namespace tac::ref::resize {

namespace {

double cubic_kernel(double x, double A) {
  x = std::fabs(x);
  const double x2 = x * x, x3 = x * x2;
  if (x <= 1) return (A + 2) * x3 - (A + 3) * x2 + 1;
  if (x < 2) return A * x3 - 5 * A * x2 + 8 * A * x - 4 * A;
  return 0.0;
}

// Filter weights for the window of input indices around x_ori; `ratio` in (0, 1] is the
// distance from the index just left of x_ori (1 when x_ori is an integer).
std::vector<double> coeffs(const Params& p, double ratio, double scale) {
  switch (p.mode) {
    case Mode::nearest: {
      if (ratio == 1.0) return {0, 1};
      switch (p.nearest) {
        case Nearest::round_prefer_floor: return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
        case Nearest::round_prefer_ceil: return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
        case Nearest::floor: return {1, 0};
        case Nearest::ceil: return {0, 1};
        case Nearest::simple: return scale < 1 ? std::vector<double>{0, 1} : std::vector<double>{1, 0};
      }
      return {0, 1};
    }
    case Mode::linear: {
      if (!p.antialias) return {1 - ratio, ratio};
      const double s = std::min(scale, 1.0);
      const int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1);
      const int64_t footprint = 2 - 2 * start;
      std::vector<double> c;
      double sum = 0;
      for (int64_t i = 0; i < footprint; ++i) {
        double a = (static_cast<double>(start + i) - ratio) * s;
        c.push_back(std::clamp(1 - std::fabs(a), 0.0, 1.0));
        sum += c.back();
      }
      for (double& v : c) v /= sum;
      return c;
    }
    case Mode::cubic: {
      const double A = p.cubic_a;
      if (!p.antialias) {
        const double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
        return {((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A, ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
                ((A + 2) * q - (A + 3)) * q * q + 1, ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A};
      }
      const double s = std::min(scale, 1.0);
      const int64_t i_start = static_cast<int64_t>(std::floor(-2 / s) + 1);
      const int64_t i_end = 2 - i_start;
      std::vector<double> c;
      double sum = 0;
      for (int64_t i = i_start; i < i_end; ++i) {
        c.push_back(cubic_kernel(s * (static_cast<double>(i) - ratio), A));
        sum += c.back();
      }
      for (double& v : c) v /= sum;
      return c;
    }
  }
  return {};
}

}  // namespace

Tap make_tap(const Params& p, int64_t x, int64_t in, int64_t out_int, double scale, double r0, double r1) {
  Tap t;
  const double xd = static_cast<double>(x), ind = static_cast<double>(in);
  const double out_w = scale * ind;  // the (fractional) output width, as the ONNX reference uses
  double x_ori = 0;
  switch (p.coord) {
    case Coord::align_corners: x_ori = out_w == 1 ? 0.0 : xd * (ind - 1) / (out_w - 1); break;
    case Coord::asymmetric: x_ori = xd / scale; break;
    case Coord::tf_half_pixel_for_nn: x_ori = (xd + 0.5) / scale; break;
    case Coord::tf_crop_and_resize:
      x_ori = out_w == 1 ? (r1 - r0) * (ind - 1) / 2 : xd * (r1 - r0) * (ind - 1) / (out_w - 1);
      x_ori += r0 * (ind - 1);
      if (x_ori < 0 || x_ori > ind - 1) {
        t.extrapolate = true;
        return t;
      }
      break;
    case Coord::pytorch_half_pixel: x_ori = out_w == 1 ? -0.5 : (xd + 0.5) / scale - 0.5; break;
    case Coord::half_pixel: x_ori = (xd + 0.5) / scale - 0.5; break;
    case Coord::half_pixel_symmetric: {
      const double adjustment = static_cast<double>(out_int) / out_w;
      const double center = ind / 2;
      const double offset = center * (1 - adjustment);
      x_ori = offset + (xd + 0.5) / scale - 0.5;
      break;
    }
  }
  const double fl = std::floor(x_ori);
  const bool integral = x_ori == fl;
  const double ratio = integral ? 1.0 : x_ori - fl;
  t.w = coeffs(p, ratio, scale);
  const int64_t n = static_cast<int64_t>(t.w.size());
  // The n input indices nearest to x_ori (ties to the smaller), within the edge-padded range
  // [-pad, in + pad): a window starting just right of base - n/2.
  const int64_t base = static_cast<int64_t>(fl) - (integral ? 1 : 0);
  const int64_t pad = (n + 1) / 2;
  int64_t start = base + 1 - n / 2;
  start = std::max(start, -pad);
  start = std::min(start, in + pad - n);
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = start + k;
    if (p.exclude_outside && (i < 0 || i >= in)) t.w[static_cast<size_t>(k)] = 0;
    sum += t.w[static_cast<size_t>(k)];
    t.idx.push_back(std::clamp<int64_t>(i, 0, in - 1));
  }
  if (p.exclude_outside)
    for (double& v : t.w) v /= sum;
  return t;
}

}  // namespace tac::ref::resize
