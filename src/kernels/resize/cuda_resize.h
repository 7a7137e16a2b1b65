// Our own CUDA Resize kernel (cuda_resize.cu), callable from host code that includes no CUDA header
// (conventions of elementwise/cuda_kernels.h).
#pragma once

#include <cstdint>

#include "kernels/elementwise/cuda_kernels.h"

namespace tac::cuda::kern {

// One input index and its weight. An output coordinate on one dim reads `taps[d]` of them, from
// entry tap_off[d] + coordinate * taps[d] of the table; a first entry with idx < 0 marks a
// coordinate outside tf_crop_and_resize's roi (the output element is the extrapolation value).
struct ResizeTap {
  int32_t idx;
  float w;
};
// y[i] = sum over the taps of every dim of (product of the weights) * x[sum of idx * in_strides],
// terms of weight 0 skipped (the reference's separable filter, as a product).
struct ResizeDesc {
  int rank = 0;
  int64_t out_dims[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
  int taps[kMaxDims] = {};
  int64_t tap_off[kMaxDims] = {};
  float extrapolation = 0;
};
// x, y of type t; `table` in device memory.
int resize(Elem t, const void* x, void* y, const ResizeTap* table, const ResizeDesc& d, int64_t n, void* stream);

}  // namespace tac::cuda::kern
