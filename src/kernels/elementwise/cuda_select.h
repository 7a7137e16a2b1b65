// Our own CUDA kernels of selection and shape-subgraph ops (cuda_select.cu): comparisons and
// logic with bool outputs, Where, Pad. Conventions of cuda_kernels.h (enqueued on `stream`,
// cudaError_t returned as int, device pointers). Element types are ONNX dtype codes here, since
// these ops take integers and bools too.
#pragma once

#include <cstdint>

#include "kernels/elementwise/cuda_kernels.h"

namespace tac::cuda::kern {

// y[i] (bool, one byte 0 / 1) = a[ia] op b[ib] over the broadcast output (d's strides, as for
// binary()). Comparisons of numbers in their own type (fp16 / bf16 through fp32, NaN unequal
// and unordered); and / or / xor of bools. cudaErrorInvalidValue for a type compare_supported
// refuses.
enum class Compare : int { eq, lt, gt, le, ge, logical_and, logical_or, logical_xor };
bool compare_supported(int dtype);  // float, float16, bfloat16, double, int64, int32, int8, uint8, bool
int compare(int dtype, Compare op, const void* a, const void* b, void* y, int64_t n, const BroadcastDesc& d, void* stream);
// y = !x over n bools.
int logical_not(const void* x, void* y, int64_t n, void* stream);

// Where: y[i] = c[ic] ? x[ix] : y[iy] (c bool), elements of elem_bytes (1, 2, 4 or 8).
struct WhereDesc {
  int rank = 0;
  int64_t out_dims[kMaxDims] = {};
  int64_t c_strides[kMaxDims] = {}, x_strides[kMaxDims] = {}, y_strides[kMaxDims] = {};
};
int where(const void* c, const void* x, const void* y, void* out, int elem_bytes, int64_t n, const WhereDesc& d,
          void* stream);

// Pad: output coordinate o on dim k reads source coordinate s = o - before[k] of the (cropped)
// input of in_dims[k] elements: inside, x[base + sum s * in_strides]; outside, mode 0 (constant)
// writes `fill` (the element's bytes, little-endian), 1 (edge) clamps, 2 (reflect) mirrors without
// repeating the edge, 3 (wrap) wraps around, as the reference's pad_source.
struct PadDesc {
  int rank = 0, mode = 0;
  int64_t out_dims[kMaxDims] = {}, in_dims[kMaxDims] = {}, before[kMaxDims] = {}, in_strides[kMaxDims] = {};
  int64_t base = 0;
  uint64_t fill = 0;
};
int pad(const void* x, void* y, int elem_bytes, int64_t n, const PadDesc& d, void* stream);

}  // namespace tac::cuda::kern
