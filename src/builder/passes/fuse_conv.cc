// Conv -> [Add residual] -> [activation] becomes one FusedConv (domain "tactician"):
//   y = act(conv(X, W) + B + R)
// The Add is fused only when its other operand has exactly the conv output's shape; the conv
// output must have a single user and must not be a graph output (it disappears).
#include "builder/passes/fusion_common.h"

namespace tac::builder {

Status fuse_conv(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (ir::Node& conv : g.nodes) {
    if (conv.op != ir::OpKind::Conv || !conv.domain.empty() || conv.outputs.size() != 1) continue;
    const ir::Value& out = g.values[static_cast<size_t>(conv.outputs[0])];
    if (out.type.dtype != DType::float32) continue;
    int y = conv.outputs[0];
    std::string what;
    int residual = ir::kNoValue;
    if (has_single_user(users, y)) {
      ir::Node& add = g.nodes[static_cast<size_t>(users[static_cast<size_t>(y)][0])];
      if (add.op == ir::OpKind::Add && add.domain.empty() && add.inputs.size() == 2 && !dead[static_cast<size_t>(add.index)]) {
        int other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
        if (other != y && !constant_of(g, other) &&
            same_known_shape(g.values[static_cast<size_t>(other)].type, out.type)) {
          residual = other;
          dead[static_cast<size_t>(add.index)] = true;
          y = add.outputs[0];
          what += " + " + add.label();
        }
      }
    }
    std::optional<ir::Epilogue> ep = absorb_activation(g, users, dead, y, what);
    if (what.empty()) continue;
    std::string label = conv.label();
    conv.op = ir::OpKind::FusedConv;
    conv.op_type = "FusedConv";
    conv.domain = ir::kInternalDomain;
    conv.inputs.resize(4, ir::kNoValue);
    conv.inputs[3] = residual;
    if (residual == ir::kNoValue) conv.inputs.resize(3);
    conv.outputs[0] = y;
    ir::set_epilogue(conv, ep.value_or(ir::Epilogue{}));
    ctx.log.push_back("fuse_conv: " + label + what);
    ++fused;
  }
  if (fused) {
    // The fused node now produces the last value of its chain: drop the absorbed nodes.
    TAC_RETURN_IF_ERROR(remove_nodes(g, dead));
  }
  return Status::ok();
}

}  // namespace tac::builder
