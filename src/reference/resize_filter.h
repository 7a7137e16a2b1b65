// The 1-D filter of Resize / Upsample as the reference computes it (onnx/reference/ops/op_resize.py):
// the input indices and weights behind one output coordinate on one axis. Shared by the reference
// kernel (ops_shape_resize.cc) and the CUDA tactic, which tabulates these taps at prepare
// (kernels/resize/cuda_resize.cc): both compute the same numbers by construction.
#pragma once

#include <cstdint>
#include <vector>

namespace tac::ref::resize {

enum class Mode { nearest, linear, cubic };
enum class Coord { half_pixel, half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize };
enum class Nearest { round_prefer_floor, round_prefer_ceil, floor, ceil, simple };

struct Params {
  Mode mode = Mode::nearest;
  Coord coord = Coord::half_pixel;
  Nearest nearest = Nearest::round_prefer_floor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  bool antialias = false;
};

// The input indices (edge-clamped) and weights that produce one output coordinate on one axis.
struct Tap {
  bool extrapolate = false;
  std::vector<int64_t> idx;
  std::vector<double> w;
};

// One output coordinate x on an axis of input size `in`, output size `out_int`, scale factor
// `scale` and (for tf_crop_and_resize) roi [r0, r1].
Tap make_tap(const Params& p, int64_t x, int64_t in, int64_t out_int, double scale, double r0, double r1);

}  // namespace tac::ref::resize
