// LayerNorm as exporters before opset 17 decompose it becomes one LayerNormalization
// (axis -1, epsilon from the graph's constant):
//   u = ReduceMean(x, last axis)   d = x - u            s = d^2   (Pow(d, 2) or Mul(d, d))
//   v = ReduceMean(s, last axis)   r = Sqrt(v + eps)    y = d / r
//   [y * gamma] [+ beta]           gamma, beta constants over the last axis
// d has exactly the two users of the pattern (the square and the Div), or is computed twice, once
// for each; every other intermediate has one user. gamma / beta are optional (absent: scale 1, no bias). Nine elementwise and reduction
// passes over the tensor become one row kernel.
#include <algorithm>

#include "builder/passes/fusion_common.h"

namespace tac::builder {

namespace {

// A ReduceMean of `x` over its last axis only, keeping dims.
bool is_last_axis_mean(const ir::Graph& g, const ir::Node& n, int x) {
  if (!is_op(n, ir::OpKind::ReduceMean) || n.inputs.empty() || n.inputs[0] != x) return false;
  const ir::ValueType& t = g.values[static_cast<size_t>(x)].type;
  if (!t.has_shape || t.dims.empty()) return false;
  const auto rank = static_cast<int64_t>(t.dims.size());
  if (const ir::Attribute* k = n.attr("keepdims"); k && k->type == ir::Attribute::Type::i && k->i != 1) return false;
  std::vector<int64_t> axes;
  if (n.opset < 18) {
    const ir::Attribute* a = n.attr("axes");
    if (!a || a->type != ir::Attribute::Type::ints) return false;
    axes = a->ints;
  } else {
    const Tensor* t_axes = n.inputs.size() > 1 ? constant_of(g, n.inputs[1]) : nullptr;
    if (!t_axes) return false;
    for (int64_t i = 0; i < t_axes->numel(); ++i) axes.push_back(t_axes->get_i64(i));
  }
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

// A float32 constant with `d` elements whose only non-1 dim is the last and whose rank does not
// exceed `rank` (so it broadcasts over rows without changing the output's shape).
const Tensor* row_param(const ir::Graph& g, int v, int64_t d, size_t rank) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->dtype() != DType::float32 || t->numel() != d || t->rank() < 1 || static_cast<size_t>(t->rank()) > rank)
    return nullptr;
  for (int64_t i = 0; i + 1 < t->rank(); ++i)
    if (t->dim(i) != 1) return nullptr;
  return t->dim(t->rank() - 1) == d ? t : nullptr;
}

struct LayerNormMatch {
  int x = ir::kNoValue;
  float epsilon = 0;
  const Tensor* scale = nullptr;  // nullptr: ones
  const Tensor* bias = nullptr;
  ir::Node* last = nullptr;
  std::vector<ir::Node*> others;
};

std::optional<LayerNormMatch> match_layernorm(ir::Graph& g, const std::vector<std::vector<int>>& users, ir::Node& mean) {
  if (!is_op(mean, ir::OpKind::ReduceMean) || mean.inputs.empty()) return std::nullopt;
  LayerNormMatch m;
  m.x = mean.inputs[0];
  const ir::ValueType& xt = g.values[static_cast<size_t>(m.x)].type;
  if (xt.dtype != DType::float32 || !is_last_axis_mean(g, mean, m.x) || !xt.dims.back().known()) return std::nullopt;
  const int64_t d = xt.dims.back().value;
  // d = x - u: one Sub feeding both the square and the Div, or (as in ORT's bert_toy_optimized)
  // two identical Subs, one for each.
  auto distinct_users = [&](int v) {
    std::vector<int> u = users[static_cast<size_t>(v)];
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    return u;
  };
  const std::vector<int> mean_users = distinct_users(mean.outputs[0]);
  if (mean_users.empty() || mean_users.size() > 2 || mean_users[0] < 0) return std::nullopt;
  std::vector<ir::Node*> subs;
  std::vector<int> tail_users;  // distinct users of the Subs' outputs
  for (int su : mean_users) {
    ir::Node& sub = g.nodes[static_cast<size_t>(su)];
    if (!is_op(sub, ir::OpKind::Sub, 2) || sub.inputs[0] != m.x || sub.inputs[1] != mean.outputs[0]) return std::nullopt;
    std::vector<int> du = distinct_users(sub.outputs[0]);
    if (du.empty() || du[0] < 0 || du.size() != 3 - mean_users.size()) return std::nullopt;
    subs.push_back(&sub);
    tail_users.insert(tail_users.end(), du.begin(), du.end());
  }
  std::sort(tail_users.begin(), tail_users.end());
  if (tail_users.size() != 2 || tail_users[0] == tail_users[1]) return std::nullopt;
  auto is_centred = [&](int v) {
    for (ir::Node* sub : subs)
      if (sub->outputs[0] == v) return true;
    return false;
  };
  ir::Node* square = nullptr;
  ir::Node* div = nullptr;
  for (int u : tail_users) {
    ir::Node& n = g.nodes[static_cast<size_t>(u)];
    const int c = n.inputs.empty() ? ir::kNoValue : n.inputs[0];
    if (!is_centred(c)) return std::nullopt;
    if (is_op(n, ir::OpKind::Div, 2) && n.inputs[1] != c) div = &n;
    else if (is_op(n, ir::OpKind::Pow, 2) && is_scalar_constant(g, n.inputs[1], 2.0, 0)) square = &n;
    else if (is_op(n, ir::OpKind::Mul, 2) && n.inputs[1] == c) square = &n;
  }
  if (!square || !div) return std::nullopt;
  ir::Node* var = sole_user(g, users, square->outputs[0]);
  if (!var || !is_last_axis_mean(g, *var, square->outputs[0])) return std::nullopt;
  ir::Node* add_eps = sole_user(g, users, var->outputs[0]);
  if (!add_eps || !is_op(*add_eps, ir::OpKind::Add, 2)) return std::nullopt;
  const Tensor* eps = constant_of(g, other_input(*add_eps, var->outputs[0]));
  if (!eps || eps->numel() != 1 || !dtype_is_float(eps->dtype())) return std::nullopt;
  m.epsilon = static_cast<float>(eps->get_f64(0));
  ir::Node* sqrt = sole_user(g, users, add_eps->outputs[0]);
  if (!sqrt || !is_op(*sqrt, ir::OpKind::Sqrt, 1) || !has_single_user(users, sqrt->outputs[0]) ||
      div->inputs[1] != sqrt->outputs[0])
    return std::nullopt;
  m.others = {&mean, square, var, add_eps, sqrt};
  m.others.insert(m.others.end(), subs.begin(), subs.end());
  m.last = div;
  // Optional affine tail.
  if (ir::Node* mul = sole_user(g, users, m.last->outputs[0]); mul && is_op(*mul, ir::OpKind::Mul, 2))
    if ((m.scale = row_param(g, other_input(*mul, m.last->outputs[0]), d, xt.dims.size()))) {
      m.others.push_back(m.last);
      m.last = mul;
    }
  if (ir::Node* add = sole_user(g, users, m.last->outputs[0]); add && is_op(*add, ir::OpKind::Add, 2))
    if ((m.bias = row_param(g, other_input(*add, m.last->outputs[0]), d, xt.dims.size()))) {
      m.others.push_back(m.last);
      m.last = add;
    }
  if (!same_known_shape(xt, g.values[static_cast<size_t>(m.last->outputs[0])].type)) return std::nullopt;
  return m;
}

}  // namespace

Status fuse_layernorm(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (ir::Node& mean : g.nodes) {
    if (dead[static_cast<size_t>(mean.index)]) continue;
    auto m = match_layernorm(g, users, mean);
    if (!m) continue;
    bool taken = dead[static_cast<size_t>(m->last->index)];
    for (ir::Node* n : m->others) taken |= dead[static_cast<size_t>(n->index)];
    if (taken) continue;
    const int64_t d = g.values[static_cast<size_t>(m->x)].type.dims.back().value;
    const std::string base = m->last->name.empty() ? "layernorm" : m->last->name;
    // Copies first: add_constant grows g.values, which holds the matched constants.
    Tensor scale = m->scale ? m->scale->reshaped({d}) : Tensor::create(DType::float32, {d}).value();
    if (!m->scale)
      for (int64_t i = 0; i < d; ++i) scale.data<float>()[i] = 1.0f;
    std::optional<Tensor> bias;
    if (m->bias) bias = m->bias->reshaped({d});
    std::vector<int> inputs = {m->x, add_constant(g, base + ".scale", std::move(scale))};
    if (bias) inputs.push_back(add_constant(g, base + ".bias", std::move(*bias)));
    std::string what;
    for (ir::Node* n : m->others) {
      dead[static_cast<size_t>(n->index)] = true;
      what += n->label() + ", ";
    }
    ir::Node& ln = *m->last;
    what += ln.label();
    ln.op = ir::OpKind::LayerNormalization;
    ln.op_type = "LayerNormalization";
    ln.inputs = std::move(inputs);
    ln.attrs.clear();
    ir::Attribute axis;
    axis.type = ir::Attribute::Type::i;
    axis.i = -1;
    ln.attrs["axis"] = axis;
    ir::Attribute eps;
    eps.type = ir::Attribute::Type::f;
    eps.f = m->epsilon;
    ln.attrs["epsilon"] = eps;
    ctx.log.push_back("fuse_layernorm: " + what + " -> LayerNormalization (epsilon " + std::to_string(m->epsilon) + ")");
    ++fused;
  }
  return fused ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
