#include "builder/passes/fusion_common.h"

#include <cmath>
#include <limits>

namespace tac::builder {

std::optional<ir::Epilogue> activation_of(const ir::Graph& g, const ir::Node& n) {
  if (!n.domain.empty() || n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
  ir::Epilogue e;
  auto fattr = [&](const char* k, float def) { return float_attr(n, k, def); };
  switch (n.op) {
    case ir::OpKind::Relu: e.act = ir::Epilogue::Act::relu; break;
    case ir::OpKind::Sigmoid: e.act = ir::Epilogue::Act::sigmoid; break;
    case ir::OpKind::Tanh: e.act = ir::Epilogue::Act::tanh; break;
    case ir::OpKind::HardSwish: e.act = ir::Epilogue::Act::hard_swish; break;
    case ir::OpKind::LeakyRelu:
      e.act = ir::Epilogue::Act::leaky_relu;
      e.alpha = fattr("alpha", 0.01f);
      break;
    case ir::OpKind::HardSigmoid:
      e.act = ir::Epilogue::Act::hard_sigmoid;
      e.alpha = fattr("alpha", 0.2f);
      e.beta = fattr("beta", 0.5f);
      break;
    case ir::OpKind::Clip: {
      e.act = ir::Epilogue::Act::clip;
      e.alpha = -std::numeric_limits<float>::infinity();
      e.beta = std::numeric_limits<float>::infinity();
      if (n.opset < 11) {
        e.alpha = fattr("min", e.alpha);
        e.beta = fattr("max", e.beta);
      } else {
        for (size_t i = 1; i < 3 && i < n.inputs.size(); ++i) {
          if (n.inputs[i] == ir::kNoValue) continue;
          const Tensor* t = constant_of(g, n.inputs[i]);
          if (!t || t->numel() != 1) return std::nullopt;
          (i == 1 ? e.alpha : e.beta) = static_cast<float>(t->get_f64(0));
        }
      }
      break;
    }
    case ir::OpKind::Gelu: {
      // The epilogue's gelu is the erf form; the tanh approximation stays a separate node.
      const ir::Attribute* a = n.attr("approximate");
      if (a && a->type == ir::Attribute::Type::s && a->s != "none") return std::nullopt;
      e.act = ir::Epilogue::Act::gelu;
      break;
    }
    default:
      return std::nullopt;
  }
  return e;
}

bool claim_match(std::vector<bool>& dead, const ir::Node& last, const std::vector<ir::Node*>& others, std::string& what) {
  if (dead[static_cast<size_t>(last.index)]) return false;
  for (const ir::Node* n : others)
    if (dead[static_cast<size_t>(n->index)]) return false;
  what.clear();
  for (const ir::Node* n : others) {
    dead[static_cast<size_t>(n->index)] = true;
    what += n->label() + ", ";
  }
  what += last.label();
  return true;
}

bool is_op(const ir::Node& n, ir::OpKind op, int n_inputs) {
  return n.op == op && n.domain.empty() && n.outputs.size() == 1 && n.outputs[0] != ir::kNoValue &&
         (n_inputs < 0 || static_cast<int>(n.inputs.size()) == n_inputs);
}

ir::Node* producer_of(ir::Graph& g, int v) {
  if (v == ir::kNoValue) return nullptr;
  int p = g.values[static_cast<size_t>(v)].producer;
  return p >= 0 && static_cast<size_t>(p) < g.nodes.size() ? &g.nodes[static_cast<size_t>(p)] : nullptr;
}

ir::Node* sole_user(ir::Graph& g, const std::vector<std::vector<int>>& users, int v) {
  if (v == ir::kNoValue || !has_single_user(users, v)) return nullptr;
  return &g.nodes[static_cast<size_t>(users[static_cast<size_t>(v)][0])];
}

int other_input(const ir::Node& n, int v) {
  if (n.inputs.size() != 2) return ir::kNoValue;
  if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
  if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
  return ir::kNoValue;
}

bool is_scalar_constant(const ir::Graph& g, int v, double want, double rel_tol) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1) return false;
  const double x = t->get_f64(0);
  return std::abs(x - want) <= rel_tol * std::abs(want);
}

int64_t int_attr(const ir::Node& n, const char* key, int64_t def) {
  const ir::Attribute* a = n.attr(key);
  return a && a->type == ir::Attribute::Type::i ? a->i : def;
}

float float_attr(const ir::Node& n, const char* key, float def) {
  const ir::Attribute* a = n.attr(key);
  return a && a->type == ir::Attribute::Type::f ? a->f : def;
}

int64_t last_dim(const ir::ValueType& t) {
  return t.has_shape && !t.dims.empty() && t.dims.back().known() ? t.dims.back().value : -1;
}

bool is_plain_gemm(const ir::Graph& g, const ir::Node& n) {
  if (!is_op(n, ir::OpKind::Gemm) || n.inputs.size() < 2 || n.inputs[0] == ir::kNoValue) return false;
  const ir::ValueType& a = g.values[static_cast<size_t>(n.inputs[0])].type;
  return int_attr(n, "transA", 0) == 0 && float_attr(n, "alpha", 1.0f) == 1.0f && float_attr(n, "beta", 1.0f) == 1.0f &&
         a.has_shape && a.dims.size() == 2;
}

std::optional<std::vector<int64_t>> known_shape(const ir::Graph& g, int v) {
  if (v == ir::kNoValue) return std::nullopt;
  const ir::ValueType& t = g.values[static_cast<size_t>(v)].type;
  if (!t.has_shape) return std::nullopt;
  std::vector<int64_t> s;
  for (const ir::Dim& d : t.dims) {
    if (!d.known()) return std::nullopt;
    s.push_back(d.value);
  }
  return s;
}

bool same_known_shape(const ir::ValueType& a, const ir::ValueType& b) {
  if (!a.has_shape || !b.has_shape || a.dims.size() != b.dims.size()) return false;
  for (size_t i = 0; i < a.dims.size(); ++i)
    if (!a.dims[i].known() || !b.dims[i].known() || a.dims[i].value != b.dims[i].value) return false;
  return true;
}

std::optional<std::vector<int64_t>> transpose_perm(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.empty() || n.inputs[0] == ir::kNoValue) return std::nullopt;
  const ir::ValueType& t = g.values[static_cast<size_t>(n.inputs[0])].type;
  if (!t.has_shape) return std::nullopt;
  const auto rank = static_cast<int64_t>(t.dims.size());
  std::vector<int64_t> perm;
  if (const ir::Attribute* a = n.attr("perm"); a && a->type == ir::Attribute::Type::ints) {
    perm = a->ints;
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& p : perm) {
    if (p < 0) p += rank;
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) return std::nullopt;
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

std::optional<ir::Epilogue> absorb_activation(const ir::Graph& g, const std::vector<std::vector<int>>& users,
                                              std::vector<bool>& dead, int& y, std::string& what) {
  // SiLU as exporters write it, y * Sigmoid(y): y's only users are the Sigmoid and the Mul that
  // takes y and the Sigmoid's output (its only user).
  const std::vector<int>& u = users[static_cast<size_t>(y)];
  if (u.size() == 2 && u[0] >= 0 && u[1] >= 0 && u[0] != u[1])
    for (size_t k = 0; k < 2; ++k) {
      const ir::Node& sig = g.nodes[static_cast<size_t>(u[k])];
      const ir::Node& mul = g.nodes[static_cast<size_t>(u[1 - k])];
      if (!is_op(sig, ir::OpKind::Sigmoid, 1) || !is_op(mul, ir::OpKind::Mul, 2)) continue;
      if (dead[static_cast<size_t>(sig.index)] || dead[static_cast<size_t>(mul.index)]) continue;
      const int s = sig.outputs[0];
      if (!has_single_user(users, s) || users[static_cast<size_t>(s)][0] != mul.index) continue;
      if (!((mul.inputs[0] == y && mul.inputs[1] == s) || (mul.inputs[1] == y && mul.inputs[0] == s))) continue;
      dead[static_cast<size_t>(sig.index)] = dead[static_cast<size_t>(mul.index)] = true;
      y = mul.outputs[0];
      what += " + " + sig.label() + " + " + mul.label();
      ir::Epilogue e;
      e.act = ir::Epilogue::Act::silu;
      return e;
    }
  if (!has_single_user(users, y)) return std::nullopt;
  const ir::Node& act = g.nodes[static_cast<size_t>(users[static_cast<size_t>(y)][0])];
  if (dead[static_cast<size_t>(act.index)]) return std::nullopt;
  std::optional<ir::Epilogue> ep = activation_of(g, act);
  if (!ep) return std::nullopt;
  dead[static_cast<size_t>(act.index)] = true;
  y = act.outputs[0];
  what += " + " + act.label();
  return ep;
}

}  // namespace tac::builder
