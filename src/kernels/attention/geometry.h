// The geometry of a FusedAttention step (made by the fuse_attention pass): y = softmax(scale *
// Q·K + M) · V per batch index, Q [..., sq, d], K [..., d, sk] (already transposed), V [..., sk,
// dv], the mask M broadcasting to the scores [..., sq, sk]. Shared by the CPU and CUDA tactics
// (each checks its element types).
#pragma once

#include <vector>

#include "kernels/tactic.h"

namespace tac::kernels::attention {

struct Geometry {
  int64_t batches = 0, sq = 0, d = 0, sk = 0, dv = 0;
  float scale = 1;
  bool has_mask = false;
  std::vector<int64_t> batch_dims;   // leading dims of the scores
  std::vector<int64_t> mask_stride;  // per scores dim (rank r): the mask's stride, 0 to broadcast
};

// not_applicable for shapes the fused tactics do not take (broadcast batch dims, empty tensors,
// a mask that does not broadcast); element types are not checked here.
Result<Geometry> geometry(const StepDesc& s);

}  // namespace tac::kernels::attention
