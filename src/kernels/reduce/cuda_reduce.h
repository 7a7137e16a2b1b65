// Our own CUDA reduction kernels (cuda_reduce.cu), callable from host code that includes no CUDA
// header (conventions of elementwise/cuda_kernels.h: enqueued on `stream`, cudaError_t returned
// as int, device pointers, loads in the element type and arithmetic in fp32).
#pragma once

#include <cstdint>

#include "kernels/elementwise/cuda_kernels.h"

namespace tac::cuda::kern {

// Reduce* and ArgMax / ArgMin. Formulas of the reference (reference/ops_reduce.cc), accumulated in
// fp32: Mean divides the sum by the count (NaN when empty), L2 = sqrt(sum of squares), LogSum =
// log(sum), LogSumExp = m + log(sum exp(x - m)) with m the maximum (m itself when not finite),
// Max / Min propagate NaN; ArgMax / ArgMin write int64 indices, NaN counting as the most extreme
// value, ties to the first (or, select_last, the last) index.
enum class Reduce : int { sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square, arg_max, arg_min };

// The input seen as coalesced groups of dims (size-1 dims dropped, neighbours of the same kind
// merged). Outputs enumerate the kept groups row-major; each output reduces `count` elements at
// offsets enumerated row-major over the reduced groups.
// Rows (`columns` false): the innermost group is reduced (or there is none); output o starts at
// the offset of its coordinates over kept_dims / kept_strides.
// Columns (`columns` true): the innermost group is kept, `inner` elements at stride 1, and is not
// in kept_dims; output o = ko * inner + ki starts at offset(ko) + ki.
struct ReduceDesc {
  Reduce op = Reduce::sum;
  bool select_last = false;  // ArgMax / ArgMin
  bool columns = false;
  int64_t outputs = 0, count = 1, inner = 1;
  int n_kept = 0, n_red = 0;
  int64_t kept_dims[kMaxDims] = {}, kept_strides[kMaxDims] = {};
  int64_t red_dims[kMaxDims] = {}, red_strides[kMaxDims] = {};
};
// x of type t; y of type t, or int64 for ArgMax / ArgMin.
int reduce(Elem t, const void* x, void* y, const ReduceDesc& d, void* stream);

}  // namespace tac::cuda::kern
