// The exact GELU as exporters decompose it, y = x * 0.5 * (1 + erf(x / sqrt 2)), becomes one
// Gelu node (approximate = "none"). Matched from the Erf, whose argument is Div(x, sqrt 2) or
// Mul(x, 1/sqrt 2); then Add 1; then the product of x, 0.5 and (1 + erf) in any of the three
// groupings exporters emit:
//   (x * 0.5) * (1 + erf)   Hugging Face / bert-toy
//   (x * (1 + erf)) * 0.5   torch.onnx (torch 1.13, opset < 20)
//   x * ((1 + erf) * 0.5)
// Every intermediate must have this pattern as its only user; x itself may have others.
// Five elementwise passes over the tensor become one, and fuse_matmul can then take the Gelu
// into FusedMatMul's epilogue.
#include <numbers>

#include "builder/passes/fusion_common.h"

namespace tac::builder {

namespace {

struct GeluMatch {
  int x = ir::kNoValue;
  ir::Node* last = nullptr;       // rewritten into the Gelu
  std::vector<ir::Node*> others;  // die
};

std::optional<GeluMatch> match_gelu(ir::Graph& g, const std::vector<std::vector<int>>& users, ir::Node& erf) {
  if (!is_op(erf, ir::OpKind::Erf, 1)) return std::nullopt;
  GeluMatch m;
  // x / sqrt2 or x * (1/sqrt2)
  const int scaled = erf.inputs[0];
  ir::Node* div = producer_of(g, scaled);
  if (!div || !has_single_user(users, scaled)) return std::nullopt;
  if (is_op(*div, ir::OpKind::Div, 2) && is_scalar_constant(g, div->inputs[1], std::numbers::sqrt2)) {
    m.x = div->inputs[0];
  } else if (is_op(*div, ir::OpKind::Mul, 2)) {
    for (int i = 0; i < 2; ++i)
      if (is_scalar_constant(g, div->inputs[static_cast<size_t>(i)], 1 / std::numbers::sqrt2))
        m.x = div->inputs[static_cast<size_t>(1 - i)];
  }
  if (m.x == ir::kNoValue || constant_of(g, m.x)) return std::nullopt;
  // 1 + erf
  ir::Node* add = sole_user(g, users, erf.outputs[0]);
  if (!add || !is_op(*add, ir::OpKind::Add, 2) || !is_scalar_constant(g, other_input(*add, erf.outputs[0]), 1.0))
    return std::nullopt;
  const int one_plus = add->outputs[0];
  ir::Node* m1 = sole_user(g, users, one_plus);
  if (!m1 || !is_op(*m1, ir::OpKind::Mul, 2)) return std::nullopt;
  const int o1 = other_input(*m1, one_plus);
  if (o1 == ir::kNoValue) return std::nullopt;
  m.others = {div, &erf, add};
  if (o1 == m.x || is_scalar_constant(g, o1, 0.5)) {
    // (x * (1 + erf)) * 0.5  or  ((1 + erf) * 0.5) * x
    ir::Node* m2 = sole_user(g, users, m1->outputs[0]);
    if (!m2 || !is_op(*m2, ir::OpKind::Mul, 2)) return std::nullopt;
    const int o2 = other_input(*m2, m1->outputs[0]);
    if (o1 == m.x ? !is_scalar_constant(g, o2, 0.5) : o2 != m.x) return std::nullopt;
    m.others.push_back(m1);
    m.last = m2;
  } else {
    // (x * 0.5) * (1 + erf)
    ir::Node* half = producer_of(g, o1);
    if (!half || !is_op(*half, ir::OpKind::Mul, 2) || !has_single_user(users, o1) ||
        !is_scalar_constant(g, other_input(*half, m.x), 0.5))
      return std::nullopt;
    m.others.push_back(half);
    m.last = m1;
  }
  // A broadcasting constant of higher rank would change the output's shape: keep x's.
  const ir::ValueType& xt = g.values[static_cast<size_t>(m.x)].type;
  if (xt.dtype != DType::float32 || !same_known_shape(xt, g.values[static_cast<size_t>(m.last->outputs[0])].type))
    return std::nullopt;
  return m;
}

}  // namespace

Status fuse_gelu(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (ir::Node& erf : g.nodes) {
    if (dead[static_cast<size_t>(erf.index)]) continue;
    auto m = match_gelu(g, users, erf);
    if (!m) continue;
    std::string what;
    if (!claim_match(dead, *m->last, m->others, what)) continue;
    ir::Node& gelu = *m->last;
    gelu.op = ir::OpKind::Gelu;
    gelu.op_type = "Gelu";
    gelu.inputs = {m->x};
    gelu.attrs.clear();
    ir::Attribute approx;
    approx.type = ir::Attribute::Type::s;
    approx.s = "none";
    gelu.attrs["approximate"] = approx;
    ctx.log.push_back("fuse_gelu: " + what + " -> Gelu");
    ++fused;
  }
  return fused ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
