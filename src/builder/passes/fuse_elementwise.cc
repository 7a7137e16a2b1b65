// Chains of float elementwise ops over one shape become one FusedElementwise node:
//
//   Sub(x, m) -> Mul(., s) -> Sigmoid -> Mul(., x2)     ->  FusedElementwise(x, m, s, x2)
//
// Each link's result has the next link as its only user; a binary link's other operand is a
// scalar constant (kept in the program) or a tensor of the chain's shape (an input of the fused
// node). The fused kernel applies the whole chain to cache-sized blocks, so the intermediates
// never reach memory. Runs last: the Conv/MatMul epilogues take their activations first.
#include <algorithm>

#include "builder/passes/fusion_common.h"
#include "ir/elementwise_chain.h"

namespace tac::builder {

namespace {

bool known_float_shape(const ir::ValueType& t) {
  if (t.dtype != DType::float32 || !t.has_shape) return false;
  for (const ir::Dim& d : t.dims)
    if (!d.known()) return false;
  return true;
}

// Node `n` as a link applied to the running value `x` (one of its inputs), with `shape` the
// chain's type; extra tensor operands are appended to `inputs`. nullopt when `n` cannot be one.
std::optional<ir::ChainOp> as_link(const ir::Graph& g, const ir::Node& n, int x, const ir::ValueType& shape,
                                   std::vector<int>& inputs) {
  ir::ChainOp op;
  if (!n.domain.empty() || n.outputs.size() != 1 || !ir::chain_kind(n.op_type, op.kind, op.binary)) return std::nullopt;
  if (!same_known_shape(g.values[static_cast<size_t>(n.outputs[0])].type, shape) ||
      g.values[static_cast<size_t>(n.outputs[0])].type.dtype != DType::float32)
    return std::nullopt;
  if (!op.binary) {
    if (n.inputs.size() != 1 || n.inputs[0] != x) return std::nullopt;
    return op;
  }
  if (n.inputs.size() != 2 || (n.inputs[0] == x) == (n.inputs[1] == x)) return std::nullopt;
  const bool x_left = n.inputs[0] == x;
  const int other = n.inputs[x_left ? 1 : 0];
  ir::ChainOp::Operand o;
  const Tensor* c = constant_of(g, other);
  const ir::ValueType& ot = g.values[static_cast<size_t>(other)].type;
  if (c && c->numel() == 1 && c->dtype() == DType::float32) {
    o.from = ir::ChainOp::Operand::From::constant;
    o.value = static_cast<float>(c->get_f64(0));
  } else if (same_known_shape(ot, shape) && ot.dtype == DType::float32) {
    o.from = ir::ChainOp::Operand::From::input;
    auto it = std::find(inputs.begin(), inputs.end(), other);
    o.input = static_cast<int>(it - inputs.begin());
    if (it == inputs.end()) inputs.push_back(other);
  } else {
    return std::nullopt;
  }
  (x_left ? op.rhs : op.lhs) = o;
  return op;
}

}  // namespace

Status fuse_elementwise(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false), claimed(g.nodes.size(), false);
  int fused = 0;
  for (ir::Node& first : g.nodes) {
    if (claimed[static_cast<size_t>(first.index)] || first.outputs.size() != 1 || first.inputs.empty()) continue;
    const ir::ValueType shape = g.values[static_cast<size_t>(first.outputs[0])].type;
    if (!known_float_shape(shape)) continue;
    // The running value enters as the first input of that shape.
    int x = ir::kNoValue;
    for (int in : first.inputs)
      if (in != ir::kNoValue && same_known_shape(g.values[static_cast<size_t>(in)].type, shape) &&
          g.values[static_cast<size_t>(in)].type.dtype == DType::float32) {
        x = in;
        break;
      }
    if (x == ir::kNoValue) continue;
    std::vector<int> inputs = {x};
    std::vector<ir::ChainOp> ops;
    std::vector<ir::Node*> links;
    auto op = as_link(g, first, x, shape, inputs);
    if (!op) continue;
    ops.push_back(*op);
    links.push_back(&first);
    int y = first.outputs[0];
    while (ir::Node* next = sole_user(g, users, y)) {
      if (claimed[static_cast<size_t>(next->index)]) break;
      std::vector<int> more = inputs;
      auto link = as_link(g, *next, y, shape, more);
      if (!link) break;
      inputs = std::move(more);
      ops.push_back(*link);
      links.push_back(next);
      y = next->outputs[0];
    }
    if (links.size() < 2) continue;
    std::string what;
    ir::Attribute prog;
    prog.type = ir::Attribute::Type::strings;
    for (size_t i = 0; i < links.size(); ++i) {
      claimed[static_cast<size_t>(links[i]->index)] = true;
      if (i + 1 < links.size()) dead[static_cast<size_t>(links[i]->index)] = true;
      what += (i ? " + " : "") + links[i]->label();
      prog.strings.push_back(ir::chain_entry(ops[i]));
    }
    ir::Node& last = *links.back();
    last.op = ir::OpKind::FusedElementwise;
    last.op_type = "FusedElementwise";
    last.domain = ir::kInternalDomain;
    last.inputs = inputs;
    last.attrs.clear();
    last.attrs["ops"] = prog;
    ctx.log.push_back("fuse_elementwise: " + what + " -> FusedElementwise");
    ++fused;
  }
  return fused ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
