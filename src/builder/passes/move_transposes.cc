// Transposes and Reshapes that keep every row of a tensor whole (a Transpose whose perm leaves the
// last axis in place; a Reshape whose output keeps the input's last dim) commute with row-wise
// ops: a MatMul by a constant matrix, a Gemm by one (turned into MatMul + Add for the move), and
// Add/Sub/Mul/Div with a constant that varies along the last axis only. This pass moves such a
// Transpose or Reshape across those ops toward the view chains that attention_views absorbs:
//   - down (sink): a Transpose whose row-wise successors end at view ops (Reshape, Transpose,
//     Slice, Gather, ...). PyTorch's batch_first MultiheadAttention: x [B,S,E] -> Transpose ->
//     [S,B,E] -> in-projection MatMul + bias -> the head split. After the move the Transpose is
//     part of the head split, which FusedAttention reads through strides.
//   - up (hoist): a Transpose or Reshape whose row-wise predecessors start at a view op: the
//     attention output -> head merge -> out-projection Gemm -> Reshape -> Transpose -> residual
//     Add. After the move the Reshape and Transpose are part of the head merge, and the residual
//     Add directly follows the out-projection, so fuse_matmul takes it into the GEMM's epilogue.
// A moved op only changes the width of its rows (E vs 3E above), so when nothing absorbs it
// afterwards (pass.fuse_attention=off) it can cost more than before: the pass is a knob.
#include <cstring>

#include "builder/passes/fusion_common.h"

namespace tac::builder {

namespace {

bool is_view_op(const ir::Node& n) {
  using ir::OpKind;
  if (!n.domain.empty()) return false;
  return n.op == OpKind::Reshape || n.op == OpKind::Flatten || n.op == OpKind::Squeeze ||
         n.op == OpKind::Unsqueeze || n.op == OpKind::Transpose || n.op == OpKind::Slice ||
         n.op == OpKind::Gather || n.op == OpKind::Split;
}

const ir::ValueType& type_of(const ir::Graph& g, int v) { return g.values[static_cast<size_t>(v)].type; }

bool ranked(const ir::ValueType& t, size_t min_rank) { return t.has_shape && t.dims.size() >= min_rank; }


// The Reshape's target shape when it is a constant whose last entry is a plain size.
std::optional<std::vector<int64_t>> reshape_target(const ir::Graph& g, const ir::Node& n) {
  const Tensor* s = constant_of(g, n.inputs[1]);
  if (!s || s->rank() != 1 || s->numel() < 2 || s->dtype() != DType::int64) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < s->numel(); ++i) out.push_back(s->get_i64(i));
  const bool allowzero = int_attr(n, "allowzero", 0) != 0;
  for (int64_t d : out)
    if (d == 0 && allowzero) return std::nullopt;
  if (out.back() <= 0) return std::nullopt;
  return out;
}

// Keeps every row of its input whole: a Transpose that leaves the last axis in place, or a
// Reshape (rank >= 2 on both sides) to a constant shape whose last entry is the input's last dim.
bool keeps_rows(const ir::Graph& g, const ir::Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] == ir::kNoValue) return false;
  if (!ranked(type_of(g, n.inputs[0]), 2) || !ranked(type_of(g, n.outputs[0]), 2)) return false;
  if (is_op(n, ir::OpKind::Transpose, 1)) {
    auto p = transpose_perm(g, n);
    return p && p->back() == static_cast<int64_t>(p->size()) - 1;
  }
  if (is_op(n, ir::OpKind::Reshape, 2)) {
    auto s = reshape_target(g, n);
    const int64_t last = last_dim(type_of(g, n.inputs[0]));
    return s && last > 0 && s->back() == last && last_dim(type_of(g, n.outputs[0])) == last;
  }
  return false;
}

// A Gemm that is MatMul(A, B') + C: A 2-D, transA = 0, alpha = beta = 1, B a 2-D constant, C
// absent or a constant bias over the last dim.
bool gemm_is_matmul(const ir::Graph& g, const ir::Node& n) {
  if (!is_plain_gemm(g, n)) return false;
  const Tensor* b = constant_of(g, n.inputs[1]);
  if (!b || b->rank() != 2) return false;
  if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    const Tensor* c = constant_of(g, n.inputs[2]);
    const int64_t cols = int_attr(n, "transB", 0) ? b->dim(0) : b->dim(1);
    if (!c || c->numel() != cols || c->rank() > 2 || (c->rank() == 2 && c->dim(0) != 1)) return false;
  }
  return true;
}

// Where `v` enters the row-wise op `r` (its input index), or -1 when `r` is not row-wise in `v`.
// `gemms`: whether a Gemm that gemm_is_matmul counts.
int row_input(const ir::Graph& g, const ir::Node& r, int v, bool gemms) {
  using ir::OpKind;
  if (!r.domain.empty() || r.outputs.size() != 1 || r.inputs.empty() || v == ir::kNoValue) return -1;
  if (r.op == OpKind::MatMul && r.inputs.size() == 2 && r.inputs[0] == v && r.inputs[1] != v) {
    const Tensor* w = constant_of(g, r.inputs[1]);
    return w && w->rank() == 2 ? 0 : -1;
  }
  if (gemms && r.op == OpKind::Gemm && r.inputs[0] == v) return gemm_is_matmul(g, r) ? 0 : -1;
  if ((r.op == OpKind::Add || r.op == OpKind::Sub || r.op == OpKind::Mul || r.op == OpKind::Div) &&
      r.inputs.size() == 2) {
    for (int i = 0; i < 2; ++i)
      if (r.inputs[static_cast<size_t>(i)] == v && r.inputs[static_cast<size_t>(1 - i)] != v) {
        const Tensor* c = constant_of(g, r.inputs[static_cast<size_t>(1 - i)]);
        return c && c->rank() <= 1 ? i : -1;
      }
  }
  return -1;
}

// The input through which `r` is row-wise (see row_input), or -1.
int row_operand(const ir::Graph& g, const ir::Node& r) {
  for (size_t i = 0; i < r.inputs.size(); ++i)
    if (row_input(g, r, r.inputs[i], true) == static_cast<int>(i)) return static_cast<int>(i);
  return -1;
}

// Row-wise ops keep the rank: the output's type with its leading dims taken from `lead`.
ir::ValueType with_leading(const ir::ValueType& out, const ir::ValueType& lead) {
  ir::ValueType t = out;
  t.dims = lead.dims;
  t.dims.back() = out.dims.back();
  return t;
}

// Gemm(A, B, C) -> MatMul(A, B or Bᵀ) [-> Add C], in place; the Add is appended to g.nodes.
void gemm_to_matmul(ir::Graph& g, size_t index) {
  ir::Node& mm = g.nodes[index];
  Tensor b = *constant_of(g, mm.inputs[1]);
  if (int_attr(mm, "transB", 0)) {  // store Bᵀ
    const int64_t k = b.dim(1), m = b.dim(0);
    Tensor t = Tensor::create(b.dtype(), {k, m}).value();
    const size_t e = dtype_size(b.dtype());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j)
        std::memcpy(static_cast<char*>(t.raw()) + static_cast<size_t>(j * m + i) * e,
                    static_cast<const char*>(b.raw()) + static_cast<size_t>(i * k + j) * e, e);
    b = std::move(t);
  }
  const int w = add_constant(g, g.values[static_cast<size_t>(mm.inputs[1])].name + ".matmul", std::move(b));
  const int c = mm.inputs.size() > 2 ? mm.inputs[2] : ir::kNoValue;
  const int y = mm.outputs[0];
  mm.op = ir::OpKind::MatMul;
  mm.op_type = "MatMul";
  mm.attrs.clear();
  mm.inputs = {mm.inputs[0], w};
  if (c == ir::kNoValue) return;
  const int mid = add_value(g, g.values[static_cast<size_t>(y)].name + ".matmul", type_of(g, y));
  mm.outputs[0] = mid;
  ir::Node add;
  add.name = mm.name + ".bias";
  add.op_type = "Add";
  add.op = ir::OpKind::Add;
  add.opset = mm.opset;
  const Tensor bias = *constant_of(g, c);
  add.inputs = {mid, add_constant(g, g.values[static_cast<size_t>(c)].name + ".row", bias.reshaped({bias.numel()}))};
  add.outputs = {y};
  add.index = static_cast<int>(g.nodes.size());
  g.nodes.push_back(std::move(add));
}

// Sinks Transpose `t` below its single row-wise user when the row-wise chain below it ends at view
// ops (and `t` does not already follow one). True when it moved.
bool try_sink(ir::Graph& g, const std::vector<std::vector<int>>& users, ir::Node& t, std::string& what) {
  if (!is_op(t, ir::OpKind::Transpose, 1) || !keeps_rows(g, t)) return false;
  if (ir::Node* p = producer_of(g, t.inputs[0]); p && is_view_op(*p)) return false;
  ir::Node* r = sole_user(g, users, t.outputs[0]);
  if (!r) return false;
  const int idx = row_input(g, *r, t.outputs[0], false);
  if (idx < 0 || !ranked(type_of(g, r->outputs[0]), 2) ||
      type_of(g, r->outputs[0]).dims.size() != type_of(g, t.outputs[0]).dims.size())
    return false;
  // Down the row-wise chain to the first value read by something else.
  int v = r->outputs[0];
  for (ir::Node* u; (u = sole_user(g, users, v)) && row_input(g, *u, v, false) >= 0;) v = u->outputs[0];
  const auto& us = users[static_cast<size_t>(v)];
  if (us.empty()) return false;
  for (int u : us)
    if (u < 0 || !is_view_op(g.nodes[static_cast<size_t>(u)])) return false;
  const int x = t.inputs[0], y = r->outputs[0];
  const int mid =
      add_value(g, g.values[static_cast<size_t>(y)].name + ".rows", with_leading(type_of(g, y), type_of(g, x)));
  r->inputs[static_cast<size_t>(idx)] = x;
  r->outputs[0] = mid;
  t.inputs[0] = mid;
  t.outputs[0] = y;
  what = t.label() + " moved below " + r->label();
  return true;
}

// Hoists `n` (a Transpose or Reshape keeping rows) above its row-wise producer when the row-wise
// chain above starts at a view op (and the row-keeping chain below `n` does not end at view ops). A Gemm on the
// way is first turned into MatMul + Add, which counts as the move (the next round moves `n`).
bool try_hoist(ir::Graph& g, const std::vector<std::vector<int>>& users, ir::Node& n, std::string& what) {
  if (!keeps_rows(g, n)) return false;
  // Not when the row-keeping chain from `n` down already ends at view ops (a sunk Transpose).
  int end = n.outputs[0];
  for (ir::Node* u; (u = sole_user(g, users, end)) && keeps_rows(g, *u);) end = u->outputs[0];
  const auto& eu = users[static_cast<size_t>(end)];
  bool views_only = !eu.empty();
  for (int u : eu) views_only &= u >= 0 && is_view_op(g.nodes[static_cast<size_t>(u)]);
  if (views_only) return false;
  const int v = n.inputs[0];
  ir::Node* r = producer_of(g, v);
  if (!r || sole_user(g, users, v) != &n) return false;
  const int idx = row_operand(g, *r);
  if (idx < 0) return false;
  // Up the row-wise chain to its start.
  int a = r->inputs[static_cast<size_t>(idx)];
  for (int hops = 0; hops < 16; ++hops) {
    ir::Node* p = producer_of(g, a);
    if (!p || sole_user(g, users, a) == nullptr) break;
    const int pi = row_operand(g, *p);
    if (pi < 0) break;
    a = p->inputs[static_cast<size_t>(pi)];
  }
  ir::Node* top = producer_of(g, a);
  if (!top || !is_view_op(*top)) return false;
  const int x = r->inputs[static_cast<size_t>(idx)];
  if (!ranked(type_of(g, x), 2) || type_of(g, x).dims.size() != type_of(g, v).dims.size() ||
      last_dim(type_of(g, x)) <= 0)
    return false;
  if (r->op == ir::OpKind::Gemm) {
    what = r->label() + " became MatMul + Add (to move " + n.label() + " above it)";
    gemm_to_matmul(g, static_cast<size_t>(r->index));
    return true;
  }
  const int w = n.outputs[0];
  const int mid =
      add_value(g, g.values[static_cast<size_t>(w)].name + ".rows", with_leading(type_of(g, x), type_of(g, w)));
  if (n.op == ir::OpKind::Reshape) {
    std::vector<int64_t> s = *reshape_target(g, n);
    s.back() = last_dim(type_of(g, x));
    Tensor st = Tensor::create(DType::int64, {static_cast<int64_t>(s.size())}).value();
    for (size_t i = 0; i < s.size(); ++i) st.set_i64(static_cast<int64_t>(i), s[i]);
    n.inputs[1] = add_constant(g, g.values[static_cast<size_t>(n.inputs[1])].name + ".rows", std::move(st));
  }
  n.inputs[0] = x;
  n.outputs[0] = mid;
  r->inputs[static_cast<size_t>(idx)] = mid;
  r->outputs[0] = w;
  what = n.label() + " moved above " + r->label();
  return true;
}

}  // namespace

Status move_transposes(ir::Graph& g, PassContext& ctx) {
  // One move per round (the graph is re-sorted between): a Transpose crosses a few ops, so the
  // rounds are few; the bound only guards against a pattern the direction rules missed.
  const size_t max_rounds = 4 * g.nodes.size() + 16;
  for (size_t round = 0; round < max_rounds; ++round) {
    auto users = value_users(g);
    std::string what;
    for (size_t i = 0; i < g.nodes.size() && what.empty(); ++i)
      if (!try_sink(g, users, g.nodes[i], what)) try_hoist(g, users, g.nodes[i], what);
    if (what.empty()) return Status::ok();
    ctx.log.push_back("move_transposes: " + what);
    TAC_RETURN_IF_ERROR(g.sort_topologically());
  }
  return Status::ok();
}

}  // namespace tac::builder
