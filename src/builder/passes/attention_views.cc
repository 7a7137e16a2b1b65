// The transposes and reshapes around a FusedAttention become strides of its operands:
//
//   X -> Reshape -> Transpose -> Gather(0) -> Reshape -> Transpose -> Q
//                             -> Gather(1) -> ...                  -> K      FusedAttention(X, X, X, [M])
//                             -> Gather(2) -> ...                  -> V  ->  with Q, K, V views of X,
//   FusedAttention -> Y -> Transpose -> Reshape -> Z                         writing Z through a view
//
// (PyTorch's export of nn.MultiheadAttention: per layer five Transposes that copy Q, K, V and Y
// between [seq, batch, heads * d] and [batch, heads, seq, d], one of them K's transpose.)
// Each op of such a chain maps indices of its output to elements of its input as a strided view
// (ir/strided.h): Transpose permutes the strides; Reshape, Flatten, Squeeze, Unsqueeze and
// Identity re-stride when the dims they merge are adjacent in memory; a Gather of one constant
// index and a Slice with constant starts and positive steps move the offset. A chain that
// composes into one view is absorbed: the node reads the chain's source directly, and the chain
// dies when nothing else reads it. For Y, the ops after it must be bijections (Transpose and the
// reshapes), and Y is written straight into the last one's buffer.
//
// Kept only where every tactic can read the result: Q, V and Y with their last dim contiguous, K
// with one of its two matrix dims contiguous (its rows before the transpose, or its columns).
#include <algorithm>

#include "builder/passes/fusion_common.h"
#include "ir/strided.h"

namespace tac::builder {

namespace {

bool is_reshape_like(const ir::Node& n) {
  using ir::OpKind;
  if (!n.domain.empty() || n.outputs.size() != 1) return false;
  return n.op == OpKind::Reshape || n.op == OpKind::Flatten || n.op == OpKind::Squeeze ||
         n.op == OpKind::Unsqueeze || n.op == OpKind::Identity;
}

std::optional<std::vector<int64_t>> constant_ints(const ir::Graph& g, const ir::Node& n, size_t input) {
  if (input >= n.inputs.size()) return std::nullopt;
  const Tensor* t = constant_of(g, n.inputs[input]);
  if (!t || !(t->dtype() == DType::int64 || t->dtype() == DType::int32)) return std::nullopt;
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t->numel(); ++i) v.push_back(static_cast<int64_t>(t->get_f64(i)));
  return v;
}

// A view whose dims may each be several strided factors (outermost first): a reshape that merges
// dims not adjacent in memory ([S, B, H*D] -> [S, B*H, D] after a Gather) is still a view of this
// kind, and a later reshape or transpose may split the factors apart again. Size-1 factors are
// dropped.
struct Factor {
  int64_t size, stride;
};
struct FView {
  std::vector<std::vector<Factor>> dims;
  int64_t offset = 0;
};

FView contiguous(const std::vector<int64_t>& shape) {
  FView v;
  const ir::StridedView c = ir::contiguous_view(shape);
  for (size_t i = 0; i < shape.size(); ++i) {
    v.dims.emplace_back();
    if (shape[i] != 1) v.dims.back().push_back({shape[i], c.strides[i]});
  }
  return v;
}

int64_t dim_size(const std::vector<Factor>& fs) {
  int64_t n = 1;
  for (const Factor& f : fs) n *= f.size;
  return n;
}

// The factors of `v` regrouped into dims of `shape` (same element count), splitting factors where
// a dim boundary falls inside one; nullopt when a boundary does not divide a factor.
std::optional<FView> regroup(const FView& v, const std::vector<int64_t>& shape) {
  std::vector<Factor> flat;
  for (const auto& d : v.dims) flat.insert(flat.end(), d.begin(), d.end());
  FView out;
  out.offset = v.offset;
  size_t next = 0;
  for (int64_t n : shape) {
    out.dims.emplace_back();
    if (n < 1) return std::nullopt;
    int64_t rem = n;
    while (rem > 1) {
      if (next == flat.size()) return std::nullopt;
      Factor& f = flat[next];
      if (rem % f.size == 0) {
        out.dims.back().push_back(f);
        rem /= f.size;
        ++next;
      } else if (f.size % rem == 0) {
        out.dims.back().push_back({rem, f.stride * (f.size / rem)});
        f.size /= rem;
        rem = 1;
      } else {
        return std::nullopt;
      }
    }
  }
  if (next != flat.size()) return std::nullopt;
  return out;
}

// Adjacent factors that are one run in memory merged.
std::vector<Factor> collapse(const std::vector<Factor>& fs) {
  std::vector<Factor> out;
  for (const Factor& f : fs) {
    if (!out.empty() && out.back().stride == f.size * f.stride) out.back() = {out.back().size * f.size, f.stride};
    else out.push_back(f);
  }
  return out;
}

// The view of node n's output, given the view `in` of its data input; nullopt when n is not a view
// op or its output cannot be expressed in factors.
std::optional<FView> forward(const ir::Graph& g, const ir::Node& n, const FView& in) {
  auto out_shape = known_shape(g, n.outputs.empty() ? ir::kNoValue : n.outputs[0]);
  if (!out_shape) return std::nullopt;
  if (is_reshape_like(n)) return regroup(in, *out_shape);
  const int64_t r = static_cast<int64_t>(in.dims.size());
  FView v = in;
  if (is_op(n, ir::OpKind::Transpose, 1)) {
    auto perm = transpose_perm(g, n);
    if (!perm || perm->size() != in.dims.size()) return std::nullopt;
    for (size_t i = 0; i < perm->size(); ++i) v.dims[i] = in.dims[static_cast<size_t>((*perm)[i])];
    return v;
  }
  auto dim_of = [&](int64_t axis) -> std::optional<size_t> {
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return std::nullopt;
    return static_cast<size_t>(axis);
  };
  if (is_op(n, ir::OpKind::Gather, 2)) {
    auto idx = constant_ints(g, n, 1);
    const ir::Attribute* a = n.attr("axis");
    auto ax = dim_of(a ? a->i : 0);
    if (!idx || idx->size() != 1 || !ax) return std::nullopt;
    const std::vector<Factor>& fs = in.dims[*ax];
    int64_t i = (*idx)[0];
    if (i < 0) i += dim_size(fs);
    if (i < 0 || i >= dim_size(fs)) return std::nullopt;
    for (size_t f = fs.size(); f-- > 0;) {  // mixed radix, innermost factor first
      v.offset += (i % fs[f].size) * fs[f].stride;
      i /= fs[f].size;
    }
    // 1-element indices of rank k put k dims of size 1 in the axis's place.
    v.dims.erase(v.dims.begin() + static_cast<std::ptrdiff_t>(*ax));
    v.dims.insert(v.dims.begin() + static_cast<std::ptrdiff_t>(*ax),
                  static_cast<size_t>(constant_of(g, n.inputs[1])->rank()), std::vector<Factor>{});
    return v.dims.size() == out_shape->size() ? std::optional<FView>(v) : std::nullopt;
  }
  if (is_op(n, ir::OpKind::Slice) && n.opset >= 10 && out_shape->size() == in.dims.size()) {
    auto opt = [&](size_t i) { return n.inputs.size() > i && n.inputs[i] != ir::kNoValue; };
    auto starts = constant_ints(g, n, 1);
    auto axes = opt(3) ? constant_ints(g, n, 3) : std::nullopt;
    auto steps = opt(4) ? constant_ints(g, n, 4) : std::nullopt;
    if (!starts || (opt(3) && !axes) || (opt(4) && !steps)) return std::nullopt;
    for (size_t j = 0; j < starts->size(); ++j) {
      auto ax = dim_of(axes ? (*axes)[j] : static_cast<int64_t>(j));
      const int64_t step = steps ? (*steps)[j] : 1;
      if (!ax || step < 1 || in.dims[*ax].size() > 1) return std::nullopt;  // one factor per sliced dim
      if (in.dims[*ax].empty()) continue;                                    // a size-1 dim
      const Factor f = in.dims[*ax][0];
      const int64_t start = std::clamp<int64_t>((*starts)[j] < 0 ? (*starts)[j] + f.size : (*starts)[j], 0, f.size);
      v.offset += start * f.stride;
      const int64_t size = (*out_shape)[*ax];
      v.dims[*ax].clear();
      if (size != 1) v.dims[*ax].push_back({size, f.stride * step});
    }
    for (size_t i = 0; i < v.dims.size(); ++i)
      if (dim_size(v.dims[i]) != (*out_shape)[i]) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

// The view of node n's data input that makes its output the view `out` (n a bijection: Transpose
// or a reshape); nullopt otherwise.
std::optional<FView> backward(const ir::Graph& g, const ir::Node& n, const FView& out) {
  auto in_shape = known_shape(g, n.inputs.empty() ? ir::kNoValue : n.inputs[0]);
  if (!in_shape) return std::nullopt;
  if (is_reshape_like(n)) return regroup(out, *in_shape);
  if (is_op(n, ir::OpKind::Transpose, 1)) {
    auto perm = transpose_perm(g, n);
    if (!perm || perm->size() != in_shape->size()) return std::nullopt;
    FView v = out;
    for (size_t i = 0; i < perm->size(); ++i) v.dims[static_cast<size_t>((*perm)[i])] = out.dims[i];
    return v;
  }
  return std::nullopt;
}

// Whether the last two dims (the matrix) are one factor each, and which of them is contiguous.
bool matrix_ok(const FView& v, bool either_contiguous) {
  const size_t r = v.dims.size();
  for (size_t i = r - 2; i < r; ++i)
    if (collapse(v.dims[i]).size() > 1) return false;
  auto unit = [&](size_t i) {
    const auto c = collapse(v.dims[i]);
    return c.empty() || c[0].stride == 1;
  };
  return unit(r - 1) || (either_contiguous && unit(r - 2));
}

struct Source {
  int value;
  FView view;
  int absorbed = 0;  // ops of the chain
};

// The farthest source of operand `v` (logical shape `shape`) reachable through view ops whose
// composed view has an acceptable matrix; the operand itself when none.
Source trace_back(ir::Graph& g, int v, const std::vector<int64_t>& shape, bool k_operand) {
  std::vector<ir::Node*> chain;  // producer of v first
  for (int cur = v; chain.size() < 16;) {
    ir::Node* p = producer_of(g, cur);
    if (!p || p->inputs.empty() || p->outputs.size() != 1 || !known_shape(g, p->inputs[0])) break;
    if (!is_reshape_like(*p) && !is_op(*p, ir::OpKind::Transpose, 1) && !is_op(*p, ir::OpKind::Gather, 2) &&
        !is_op(*p, ir::OpKind::Slice))
      break;
    chain.push_back(p);
    cur = p->inputs[0];
  }
  for (size_t start = chain.size(); start > 0; --start) {  // the longest chain that composes
    const int src = chain[start - 1]->inputs[0];
    std::optional<FView> view = contiguous(*known_shape(g, src));
    for (size_t i = start; i-- > 0 && view;) view = forward(g, *chain[i], *view);
    if (view && matrix_ok(*view, k_operand)) return {src, *view, static_cast<int>(start)};
  }
  return {v, contiguous(shape), 0};
}

// Splits the batch dims so that every operand's batch dims are one stride each: the common
// refinement of the operands' factor boundaries (prefix products of the collapsed factors). The
// refined sizes per original batch dim, or nullopt when the operands' boundaries do not nest.
std::optional<std::vector<std::vector<int64_t>>> refine(const std::vector<const FView*>& ops, size_t nbatch) {
  std::vector<std::vector<int64_t>> sizes(nbatch);
  for (size_t i = 0; i < nbatch; ++i) {
    std::vector<int64_t> bounds;  // prefix products, outermost first
    int64_t total = 0;
    for (const FView* o : ops) {
      int64_t p = 1;
      for (const Factor& f : collapse(o->dims[i])) bounds.push_back(p *= f.size);
      total = p;
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    int64_t prev = 1;
    for (int64_t b : bounds) {
      if (b % prev) return std::nullopt;
      if (b != prev) sizes[i].push_back(b / prev);
      prev = b;
    }
    if (prev != total && total != 0) return std::nullopt;
  }
  return sizes;
}

// The strided view of `v` with its batch dims split into `sizes` (each piece one factor).
std::optional<ir::StridedView> strided(const FView& v, const std::vector<std::vector<int64_t>>& sizes) {
  std::vector<int64_t> shape;
  for (const auto& s : sizes) shape.insert(shape.end(), s.begin(), s.end());
  const size_t r = v.dims.size();
  for (size_t i = r - 2; i < r; ++i) shape.push_back(dim_size(v.dims[i]));
  auto fine = regroup(v, shape);
  if (!fine) return std::nullopt;
  ir::StridedView out;
  out.shape = shape;
  out.offset = v.offset;
  for (const auto& d : fine->dims) {
    const auto c = collapse(d);
    if (c.size() > 1) return std::nullopt;
    out.strides.push_back(c.empty() ? 0 : c[0].stride);
  }
  return out;
}

}  // namespace

Status attention_views(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int changed = 0;
  for (ir::Node& at : g.nodes) {
    if (at.domain != ir::kInternalDomain || at.op != ir::OpKind::FusedAttention || at.inputs.size() < 3 ||
        at.attr(ir::kAttnDims))
      continue;
    auto q = known_shape(g, at.inputs[0]), k = known_shape(g, at.inputs[1]), v = known_shape(g, at.inputs[2]),
         y = known_shape(g, at.outputs[0]);
    if (!q || !k || !v || !y || q->size() < 2 || k->size() != q->size() || v->size() != q->size()) continue;
    const size_t r = q->size(), nbatch = r - 2;
    const Source sq = trace_back(g, at.inputs[0], *q, false);
    const Source sk = trace_back(g, at.inputs[1], *k, true);
    const Source sv = trace_back(g, at.inputs[2], *v, false);
    // Forward from Y through bijections, each the only reader of the previous value.
    std::vector<ir::Node*> fwd;
    for (int cur = at.outputs[0]; fwd.size() < 16;) {
      ir::Node* u = sole_user(g, users, cur);
      if (!u || u->inputs.empty() || u->inputs[0] != cur || u->outputs.size() != 1 ||
          !(is_reshape_like(*u) || is_op(*u, ir::OpKind::Transpose, 1)) || dead[static_cast<size_t>(u->index)])
        break;
      fwd.push_back(u);
      cur = u->outputs[0];
    }
    int out = at.outputs[0];
    size_t taken = 0;
    FView yview = contiguous(*y);
    std::vector<int64_t> out_shape = *y;
    for (size_t end = fwd.size(); end > 0; --end) {  // the longest chain that inverts
      auto z = known_shape(g, fwd[end - 1]->outputs[0]);
      std::optional<FView> view;
      if (z) view = contiguous(*z);
      for (size_t i = end; i-- > 0 && view;) view = backward(g, *fwd[i], *view);
      if (view && matrix_ok(*view, false)) {
        out = fwd[end - 1]->outputs[0];
        yview = *view;
        taken = end;
        out_shape = *z;
        break;
      }
    }
    if (!sq.absorbed && !sk.absorbed && !sv.absorbed && !taken) continue;
    const std::vector<const FView*> ops = {&sq.view, &sk.view, &sv.view, &yview};
    auto sizes = refine(ops, nbatch);
    if (!sizes) continue;
    bool split = false;
    for (size_t i = 0; i < nbatch; ++i) split |= (*sizes)[i].size() > 1;
    // A mask broadcasts against the node's batch dims: they may only be split where it has none.
    if (split && at.inputs.size() > 3 && at.inputs[3] != ir::kNoValue) {
      auto m = known_shape(g, at.inputs[3]);
      bool batchless = m.has_value();
      for (size_t i = 0; m && i + 2 < m->size(); ++i) batchless &= (*m)[i] == 1;
      if (!batchless) continue;
    }
    ir::AttentionViews av;
    for (const auto& s : *sizes) av.batch_dims.insert(av.batch_dims.end(), s.begin(), s.end());
    av.sq = (*q)[r - 2], av.d = (*q)[r - 1], av.sk = (*k)[r - 1], av.dv = (*v)[r - 1];
    av.out_shape = out_shape;
    bool ok = true;
    for (size_t o = 0; o < 4 && ok; ++o) {
      auto sv_o = strided(*ops[o], *sizes);
      ok = sv_o.has_value();
      if (ok) av.op[o] = *sv_o;
    }
    if (!ok) continue;
    for (size_t i = 0; i < taken; ++i) dead[static_cast<size_t>(fwd[i]->index)] = true;
    at.inputs[0] = sq.value, at.inputs[1] = sk.value, at.inputs[2] = sv.value;
    at.outputs[0] = out;
    ir::set_attention_views(at, av);
    ctx.log.push_back("attention_views: " + at.label() + " reads Q, K, V through " + std::to_string(sq.absorbed) +
                      ", " + std::to_string(sk.absorbed) + ", " + std::to_string(sv.absorbed) +
                      " view ops, writes Y through " + std::to_string(taken));
    ++changed;
  }
  return changed ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
