// Identity, inference-mode Dropout (no mask output used) and a Pad that pads nothing (all pads 0:
// torch exports AvgPool2d as Pad(0) + AveragePool) only forward their input.
#include <algorithm>

#include "builder/passes/pass.h"

namespace tac::builder {

namespace {

// A Pad whose pads (the constant input 1, or the attribute before opset 11) are all 0.
bool pads_nothing(const ir::Graph& g, const ir::Node& n) {
  if (n.op != ir::OpKind::Pad || !n.domain.empty()) return false;
  if (const ir::Attribute* a = n.attr("pads"); a && a->type == ir::Attribute::Type::ints)
    return std::all_of(a->ints.begin(), a->ints.end(), [](int64_t p) { return p == 0; });
  if (n.inputs.size() < 2) return false;
  const Tensor* p = constant_of(g, n.inputs[1]);
  if (!p) return false;
  for (int64_t i = 0; i < p->numel(); ++i)
    if (p->get_i64(i) != 0) return false;
  return true;
}

}  // namespace

Status eliminate_identity(ir::Graph& g, PassContext& ctx) {
  std::vector<bool> dead(g.nodes.size(), false);
  auto users = value_users(g);
  int removed = 0;
  for (ir::Node& n : g.nodes) {
    bool dropout = n.op == ir::OpKind::Dropout && n.domain.empty() &&
                   (n.outputs.size() < 2 || n.outputs[1] == ir::kNoValue || users[static_cast<size_t>(n.outputs[1])].empty());
    if (dropout) {
      // Training mode (a constant true input, or the old is_test=0 attribute) must stay.
      if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
        const Tensor* t = constant_of(g, n.inputs[2]);
        if (!t || t->numel() != 1 || t->get_i64(0) != 0) continue;
      }
      if (const ir::Attribute* a = n.attr("is_test"); a && a->type == ir::Attribute::Type::i && a->i == 0) continue;
    }
    if (!(n.op == ir::OpKind::Identity && n.domain.empty()) && !dropout && !pads_nothing(g, n)) continue;
    if (n.inputs.empty() || n.inputs[0] == ir::kNoValue || n.outputs.empty() || n.outputs[0] == ir::kNoValue) continue;
    const ir::Value& in = g.values[static_cast<size_t>(n.inputs[0])];
    if (in.type.kind != ir::ValueKind::tensor) continue;
    int out = n.outputs[0];
    bool is_graph_output = false;
    for (int v : g.outputs) is_graph_output |= v == out;
    // A graph output keeps its name: only when the input is an ordinary intermediate value can
    // the producer write the output directly; otherwise leave the node.
    if (is_graph_output) continue;
    replace_uses(g, out, n.inputs[0]);
    dead[static_cast<size_t>(n.index)] = true;
    ++removed;
  }
  if (removed) ctx.log.push_back("eliminate_identity: " + std::to_string(removed) + " nodes");
  return removed ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
