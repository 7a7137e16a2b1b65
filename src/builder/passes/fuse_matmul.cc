// MatMul / Gemm -> [Add bias] -> [Add residual] -> [activation] becomes one FusedMatMul:
//   y = act(A·B + bias + R), bias a constant over the last dim, R of the output's shape.
// Gemm qualifies when transA = 0, alpha = beta = 1 and A is 2-D (transB becomes an attribute);
// its C becomes the bias (1-D over N) or the residual (full [M, N]).
#include "builder/passes/fusion_common.h"

namespace tac::builder {

namespace {

// A constant of N elements whose only non-1 dim is the last: a bias over the last dim.
bool is_bias(const Tensor* t, int64_t n) {
  if (!t || n <= 0 || t->numel() != n || t->rank() < 1 || t->dtype() != DType::float32) return false;
  for (int64_t i = 0; i + 1 < t->rank(); ++i)
    if (t->dim(i) != 1) return false;
  return true;
}

}  // namespace

Status fuse_matmul(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (ir::Node& mm : g.nodes) {
    const bool gemm = mm.op == ir::OpKind::Gemm;
    if ((mm.op != ir::OpKind::MatMul && !gemm) || !mm.domain.empty() || mm.outputs.size() != 1) continue;
    const ir::Value& out = g.values[static_cast<size_t>(mm.outputs[0])];
    if (out.type.dtype != DType::float32) continue;
    const int64_t n = last_dim(out.type);
    int bias = ir::kNoValue, residual = ir::kNoValue;
    int64_t trans_b = 0;
    std::string what;
    if (gemm) {
      if (!is_plain_gemm(g, mm)) continue;
      trans_b = int_attr(mm, "transB", 0);
      if (mm.inputs.size() > 2 && mm.inputs[2] != ir::kNoValue) {
        int c = mm.inputs[2];
        if (is_bias(constant_of(g, c), n)) bias = c;
        else if (same_known_shape(g.values[static_cast<size_t>(c)].type, out.type)) residual = c;
        else continue;  // a C that broadcasts some other way stays a Gemm
      }
      what += " (Gemm)";
    }
    int y = mm.outputs[0];
    // Bias, then residual: Add nodes on the single-user chain.
    for (int round = 0; round < 2 && has_single_user(users, y); ++round) {
      ir::Node& add = g.nodes[static_cast<size_t>(users[static_cast<size_t>(y)][0])];
      if (add.op != ir::OpKind::Add || !add.domain.empty() || add.inputs.size() != 2 || dead[static_cast<size_t>(add.index)])
        break;
      int other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
      if (other == y) break;
      if (bias == ir::kNoValue && residual == ir::kNoValue && is_bias(constant_of(g, other), n)) {
        bias = other;
      } else if (residual == ir::kNoValue && !constant_of(g, other) &&
                 same_known_shape(g.values[static_cast<size_t>(other)].type, out.type)) {
        residual = other;
      } else {
        break;
      }
      dead[static_cast<size_t>(add.index)] = true;
      y = add.outputs[0];
      what += " + " + add.label();
    }
    std::optional<ir::Epilogue> ep = absorb_activation(g, users, dead, y, what);
    if (what.empty()) continue;
    if (bias != ir::kNoValue) {  // store the bias 1-D
      const Tensor* t = constant_of(g, bias);
      bias = add_constant(g, g.values[static_cast<size_t>(bias)].name + ".bias1d", t->reshaped({n}));
    }
    std::string label = mm.label();
    mm.op = ir::OpKind::FusedMatMul;
    mm.op_type = "FusedMatMul";
    mm.domain = ir::kInternalDomain;
    mm.inputs = {mm.inputs[0], mm.inputs[1], bias, residual};
    while (!mm.inputs.empty() && mm.inputs.back() == ir::kNoValue) mm.inputs.pop_back();
    mm.outputs[0] = y;
    mm.attrs.clear();
    ir::Attribute tb;
    tb.type = ir::Attribute::Type::i;
    tb.i = trans_b;
    mm.attrs["transB"] = tb;
    ir::set_epilogue(mm, ep.value_or(ir::Epilogue{}));
    ctx.log.push_back("fuse_matmul: " + label + what);
    ++fused;
  }
  return fused ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
