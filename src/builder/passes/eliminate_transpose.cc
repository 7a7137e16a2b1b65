// Transpose chains collapse: Transpose(Transpose(x, p1), p2) = Transpose(x, c) with
// c[j] = p1[p2[j]], and a Transpose whose (composed) perm is the identity disappears. Each
// Transpose is a full copy of its tensor, so a chain of k costs k copies where one (or none)
// will do. The first Transpose stays when it has other users.
// Not here, as they are covered elsewhere: a Transpose of a constant (fold_constants evaluates
// it, so MatMul(A, Transpose(W)) multiplies by the transposed constant, which the GEMM tactics
// prepack like any weight).
#include "builder/passes/fusion_common.h"

namespace tac::builder {

namespace {

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

std::string perm_text(const std::vector<int64_t>& perm) {
  std::string s = "[";
  for (size_t i = 0; i < perm.size(); ++i) s += (i ? "," : "") + std::to_string(perm[i]);
  return s + "]";
}

}  // namespace

Status eliminate_transpose(ir::Graph& g, PassContext& ctx) {
  std::vector<bool> dead(g.nodes.size(), false);
  int changed = 0;
  // Topological order: an inner Transpose is already rewritten (to read from the chain's start)
  // when the outer one looks at it.
  for (ir::Node& t : g.nodes) {
    if (!is_op(t, ir::OpKind::Transpose, 1) || t.inputs[0] == ir::kNoValue) continue;
    auto perm = transpose_perm(g, t);
    if (!perm) continue;
    int src = t.inputs[0];
    std::string what;
    if (ir::Node* p = producer_of(g, src); p && is_op(*p, ir::OpKind::Transpose, 1) && !dead[static_cast<size_t>(p->index)]) {
      if (auto inner = transpose_perm(g, *p)) {
        std::vector<int64_t> c(perm->size());
        for (size_t j = 0; j < c.size(); ++j) c[j] = (*inner)[static_cast<size_t>((*perm)[j])];
        what = p->label() + " + " + t.label() + " -> perm " + perm_text(c);
        perm = std::move(c);
        src = p->inputs[0];
      }
    }
    const int out = t.outputs[0];
    bool is_graph_output = false;
    for (int v : g.outputs) is_graph_output |= v == out;
    if (is_identity(*perm)) {
      if (is_graph_output) {  // the output keeps its name: a copy under it
        t.op = ir::OpKind::Identity;
        t.op_type = "Identity";
        t.inputs = {src};
        t.attrs.clear();
      } else {
        replace_uses(g, out, src);
        dead[static_cast<size_t>(t.index)] = true;
      }
      what = (what.empty() ? t.label() : what) + " (identity: removed)";
    } else if (src != t.inputs[0]) {
      t.inputs = {src};
      ir::Attribute a;
      a.type = ir::Attribute::Type::ints;
      a.ints = *perm;
      t.attrs["perm"] = a;
    } else {
      continue;
    }
    ctx.log.push_back("eliminate_transpose: " + what);
    ++changed;
  }
  return changed ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
