// Strided views of a buffer, and the operand views a FusedAttention node can carry.
//
// A view maps the index (i_0, ..., i_{r-1}) of a logical tensor to the element offset + sum_k i_k *
// strides[k] of a buffer. Chains of Transpose, Reshape and kin, Gathers of one constant index and
// constant Slices compose into such views, so a kernel that takes strided operands can read the
// chain's source directly (builder/passes/attention_views.cc).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace tac::ir {

struct StridedView {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
};

// Row-major strides of `shape`.
StridedView contiguous_view(const std::vector<int64_t>& shape);

// FusedAttention's operands as views, from the attributes the attention_views pass writes:
//   dims      [batch dims..., sq, d, sk, dv]: Q is [batch, sq, d], K [batch, d, sk] (transposed),
//             V [batch, sk, dv], Y [batch, sq, dv]
//   strides   the strides of Q's, K's, V's and Y's dims in that order (4 x rank)
//   offsets   their element offsets (4)
//   out_shape the shape of the output buffer Y is written into (every element written once)
// Without them the operands are the inputs themselves, contiguous, and Y is [batch, sq, dv].
struct AttentionViews {
  std::vector<int64_t> batch_dims;
  int64_t sq = 0, d = 0, sk = 0, dv = 0;
  std::array<StridedView, 4> op;  // Q, K, V, Y (shape = logical shape)
  std::vector<int64_t> out_shape;
};
inline constexpr const char* kAttnDims = "dims";
inline constexpr const char* kAttnStrides = "strides";
inline constexpr const char* kAttnOffsets = "offsets";
inline constexpr const char* kAttnOutShape = "out_shape";

// The views of node `n` (nullopt when it carries none); an error naming the node when the
// attributes are inconsistent.
Result<std::optional<AttentionViews>> attention_views(const Node& n);
// Writes `v` as `n`'s attributes.
void set_attention_views(Node& n, const AttentionViews& v);
// The highest element offset view `v` reads (offset when empty).
int64_t view_extent(const StridedView& v);
// The offset of matrix `b` of a view whose leading dims (all but the last two) are batch dims,
// numbered row-major.
int64_t batch_offset(const StridedView& v, int64_t b);

}  // namespace tac::ir
