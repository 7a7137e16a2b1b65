// The geometry of a FusedAttention step (made by the fuse_attention pass): y = softmax(scale *
// Q·K + M) · V per batch index, Q [..., sq, d], K [..., d, sk] (already transposed), V [..., sk,
// dv], the mask M broadcasting to the scores [..., sq, sk]. Q, K, V and Y are views of the input
// and output buffers (ir/strided.h: contiguous unless the attention_views pass absorbed the
// transposes and reshapes around them). Shared by the CPU and CUDA tactics (each checks its
// element types and which strides it takes).
#pragma once

#include <vector>

#include "ir/strided.h"
#include "kernels/tactic.h"

namespace tac::kernels::attention {

struct Geometry {
  int64_t batches = 0, sq = 0, d = 0, sk = 0, dv = 0;
  float scale = 1;
  bool has_mask = false;
  std::vector<int64_t> batch_dims;   // leading dims of the scores
  std::vector<int64_t> mask_stride;  // per scores dim (rank r): the mask's stride, 0 to broadcast
  std::array<ir::StridedView, 4> op;  // Q, K, V, Y: logical shapes, strides and offsets
  // Stride of the matrix dims (row, column) of operand `o` (0: Q, 1: K, 2: V, 3: Y).
  int64_t rs(size_t o) const { return op[o].strides[batch_dims.size()]; }
  int64_t cs(size_t o) const { return op[o].strides[batch_dims.size() + 1]; }
  bool strided() const;  // any operand not contiguous at offset 0
};

// not_applicable for shapes the fused tactics do not take (broadcast batch dims, empty tensors,
// a mask that does not broadcast); element types are not checked here.
Result<Geometry> geometry(const StepDesc& s);

}  // namespace tac::kernels::attention
