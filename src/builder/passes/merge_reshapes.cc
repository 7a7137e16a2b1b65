// Chains of shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze) become one Reshape to the
// chain's final, known shape; a chain that ends in its input's shape disappears. Each of these
// ops is a step (and, out of place, a copy); one will do. Needs fully known shapes (the builder
// binds input dims before the passes), so the new shape is a literal constant without 0 or -1.
#include "builder/passes/fusion_common.h"

namespace tac::builder {

namespace {

bool is_shape_op(const ir::Node& n) {
  if (!n.domain.empty() || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue || n.inputs.empty() ||
      n.inputs[0] == ir::kNoValue)
    return false;
  return n.op == ir::OpKind::Reshape || n.op == ir::OpKind::Flatten || n.op == ir::OpKind::Squeeze ||
         n.op == ir::OpKind::Unsqueeze;
}

bool fully_known_nonempty(const ir::ValueType& t) {
  if (t.kind != ir::ValueKind::tensor || !t.has_shape) return false;
  for (const ir::Dim& d : t.dims)
    if (!d.known() || d.value <= 0) return false;
  return true;
}

}  // namespace

Status merge_reshapes(ir::Graph& g, PassContext& ctx) {
  std::vector<bool> dead(g.nodes.size(), false);
  int changed = 0;
  // Topological order: an inner op is already rewritten to read from the chain's start.
  for (ir::Node& n : g.nodes) {
    if (!is_shape_op(n) || n.opset < 5) continue;  // Reshape takes its shape as an input from opset 5
    ir::Node* p = producer_of(g, n.inputs[0]);
    if (!p || !is_shape_op(*p) || dead[static_cast<size_t>(p->index)]) continue;
    const int src = p->inputs[0];
    const ir::ValueType& st = g.values[static_cast<size_t>(src)].type;
    const ir::ValueType& ot = g.values[static_cast<size_t>(n.outputs[0])].type;
    if (!fully_known_nonempty(st) || !fully_known_nonempty(ot)) continue;
    std::string what = p->label() + " + " + n.label();
    bool is_graph_output = false;
    for (int v : g.outputs) is_graph_output |= v == n.outputs[0];
    if (same_known_shape(st, ot) && !is_graph_output) {
      replace_uses(g, n.outputs[0], src);
      dead[static_cast<size_t>(n.index)] = true;
      what += " (no-op: removed)";
    } else {
      Tensor shape = Tensor::create(DType::int64, {static_cast<int64_t>(ot.dims.size())}).value();
      for (size_t i = 0; i < ot.dims.size(); ++i) shape.data<int64_t>()[i] = ot.dims[i].value;
      const int sv = add_constant(g, (n.name.empty() ? "reshape" : n.name) + ".shape", std::move(shape));
      n.op = ir::OpKind::Reshape;
      n.op_type = "Reshape";
      n.inputs = {src, sv};
      n.attrs.clear();
      what += " -> Reshape";
    }
    ctx.log.push_back("merge_reshapes: " + what);
    ++changed;
  }
  return changed ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
