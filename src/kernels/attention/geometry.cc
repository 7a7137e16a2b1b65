#include "kernels/attention/geometry.h"

namespace tac::kernels::attention {

bool Geometry::strided() const {
  for (const ir::StridedView& v : op) {
    const ir::StridedView c = ir::contiguous_view(v.shape);
    if (v.offset != 0 || v.strides != c.strides) return true;
  }
  return false;
}

Result<Geometry> geometry(const StepDesc& s) {
  if (s.in_shapes.size() < 3) return invalid_argument("FusedAttention needs Q, K and V");
  TAC_ASSIGN_OR_RETURN(std::optional<ir::AttentionViews> views, ir::attention_views(*s.node));
  Geometry g;
  if (views) {
    g.sq = views->sq, g.d = views->d, g.sk = views->sk, g.dv = views->dv;
    g.batch_dims = views->batch_dims;
    g.op = views->op;
    for (size_t o = 0; o < 4; ++o) {
      const Shape& buf = o < 3 ? s.in_shapes[o] : s.out_shapes.at(0);
      int64_t n = 1;
      for (int64_t x : buf) n *= x;
      if (ir::view_extent(g.op[o]) >= n) return invalid_argument(s.node->label() + ": an operand view reads past its buffer");
    }
  } else {
    const Shape &q = s.in_shapes[0], &k = s.in_shapes[1], &v = s.in_shapes[2];
    const size_t r = q.size();
    if (r < 2 || k.size() != r || v.size() != r) return not_applicable("Q, K, V of one rank >= 2");
    g.sq = q[r - 2];
    g.d = q[r - 1];
    g.sk = k[r - 1];
    g.dv = v[r - 1];
    if (k[r - 2] != g.d || v[r - 2] != g.sk) return invalid_argument("FusedAttention: Q·K·V shapes do not chain");
    for (size_t i = 0; i + 2 < r; ++i) {
      if (q[i] != k[i] || q[i] != v[i]) return not_applicable("batch dims must be equal (no broadcasting)");
      g.batch_dims.push_back(q[i]);
    }
    Shape y = q;
    y[r - 1] = g.dv;
    g.op = {ir::contiguous_view(q), ir::contiguous_view(k), ir::contiguous_view(v), ir::contiguous_view(y)};
  }
  g.batches = 1;
  for (int64_t b : g.batch_dims) g.batches *= b;
  if (g.sq < 1 || g.d < 1 || g.sk < 1 || g.dv < 1 || g.batches < 1) return not_applicable("empty tensors");
  const ir::Attribute* a = s.node->attr("scale");
  g.scale = a ? a->f : 1.0f;
  g.has_mask = s.has_input(3);
  if (g.has_mask) {
    Shape scores = g.batch_dims;
    scores.push_back(g.sq);
    scores.push_back(g.sk);
    const size_t r = scores.size();
    // Leading 1s of the mask broadcast over nothing: operand views drop the batch dims of size 1
    // (BERT at batch 1: scores [heads, sq, sk], mask [1, 1, 1, sk]).
    Shape m = s.in_shapes[3];
    while (m.size() > r && m.front() == 1) m.erase(m.begin());
    if (m.size() > r) return not_applicable("mask of higher rank than the scores");
    g.mask_stride.assign(r, 0);
    int64_t stride = 1;
    for (size_t i = 0; i < m.size(); ++i) {  // right-aligned
      const size_t mi = m.size() - 1 - i, si = r - 1 - i;
      if (m[mi] != 1 && m[mi] != scores[si]) return not_applicable("mask does not broadcast to the scores");
      g.mask_stride[si] = m[mi] == 1 ? 0 : stride;
      stride *= m[mi];
    }
  }
  return g;
}

}  // namespace tac::kernels::attention
