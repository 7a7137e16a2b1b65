// Scaled dot-product attention, as exporters decompose it, becomes one FusedAttention node:
//
//   [Q = Div|Mul(Q0, c)]  [K = Div|Mul(K0, c)]  S = MatMul(Q, K)  [Div|Mul(S, c)]  [Add(S, M)]
//   P = Softmax(S, axis=-1)  Y = MatMul(P, V)         ->  Y = FusedAttention(Q0|Q, K0|K, V, [M]), scale
//
// Matched from the Softmax. K is whatever the first MatMul multiplies by (exporters transpose K
// before it; that Transpose stays a step of its own). Scalar constant scalings of Q, of K or of
// the scores are folded into `scale` (they commute with the product); the mask is any tensor that
// broadcasts to the scores without changing their shape. Every intermediate must have this
// pattern as its only user. Q, K and V must have one rank (>= 3) and equal, known batch dims,
// float32. The scores never reach memory: the kernel computes them, the softmax and the second
// product per batch while they are in cache (src/kernels/attention/).
#include "builder/passes/fusion_common.h"

namespace tac::builder {

namespace {

// The scalar value of constant `v` (one element), if it is one.
std::optional<double> scalar_of(const ir::Graph& g, int v) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1 || !dtype_is_float(t->dtype())) return std::nullopt;
  return t->get_f64(0);
}

// For a Div/Mul node with one scalar-constant operand (the divisor, for Div): the factor it
// multiplies the other operand by and that operand; nullopt otherwise.
std::optional<std::pair<double, int>> scaling(const ir::Graph& g, const ir::Node& n) {
  if (is_op(n, ir::OpKind::Div, 2)) {
    auto c = scalar_of(g, n.inputs[1]);
    if (c && *c != 0 && !constant_of(g, n.inputs[0])) return std::make_pair(1 / *c, n.inputs[0]);
  } else if (is_op(n, ir::OpKind::Mul, 2)) {
    for (int i = 0; i < 2; ++i) {
      auto c = scalar_of(g, n.inputs[static_cast<size_t>(i)]);
      const int other = n.inputs[static_cast<size_t>(1 - i)];
      if (c && !constant_of(g, other)) return std::make_pair(*c, other);
    }
  }
  return std::nullopt;
}

struct AttentionMatch {
  int q = ir::kNoValue, k = ir::kNoValue, v = ir::kNoValue, mask = ir::kNoValue;
  double scale = 1;
  ir::Node* last = nullptr;       // the second MatMul, rewritten into the FusedAttention
  std::vector<ir::Node*> others;  // die
};

bool known_dims(const ir::ValueType& t) {
  if (!t.has_shape) return false;
  for (const ir::Dim& d : t.dims)
    if (!d.known()) return false;
  return true;
}

std::optional<AttentionMatch> match_attention(ir::Graph& g, const std::vector<std::vector<int>>& users,
                                              ir::Node& softmax) {
  if (!is_op(softmax, ir::OpKind::Softmax, 1)) return std::nullopt;
  const ir::ValueType& st = g.values[static_cast<size_t>(softmax.outputs[0])].type;
  if (!known_dims(st) || st.dims.size() < 3 || st.dtype != DType::float32) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(st.dims.size());
  const ir::Attribute* ax = softmax.attr("axis");
  const int64_t axis = ax ? ax->i : (softmax.opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != rank - 1) return std::nullopt;
  AttentionMatch m;
  m.others.push_back(&softmax);
  // Back from the Softmax: [Add mask] <- [scaling] <- MatMul.
  int s = softmax.inputs[0];
  ir::Node* n = producer_of(g, s);
  if (n && is_op(*n, ir::OpKind::Add, 2) && has_single_user(users, s)) {
    // The scores side: a MatMul, or a scaling of one (a mask may be a scaling of its own).
    auto scores_side = [&](int v) {
      ir::Node* p = producer_of(g, v);
      if (p && !is_op(*p, ir::OpKind::MatMul, 2)) {
        auto sc = scaling(g, *p);
        p = sc ? producer_of(g, sc->second) : nullptr;
      }
      return p && is_op(*p, ir::OpKind::MatMul, 2);
    };
    for (int i = 0; i < 2; ++i) {
      const int other = n->inputs[static_cast<size_t>(1 - i)];
      if (scores_side(n->inputs[static_cast<size_t>(i)]) && other != n->inputs[static_cast<size_t>(i)]) {
        m.mask = other;
        s = n->inputs[static_cast<size_t>(i)];
        break;
      }
    }
    if (m.mask == ir::kNoValue) return std::nullopt;
    // The mask may broadcast, but must not change the scores' shape.
    if (!same_known_shape(g.values[static_cast<size_t>(s)].type, g.values[static_cast<size_t>(n->outputs[0])].type))
      return std::nullopt;
    m.others.push_back(n);
    n = producer_of(g, s);
  }
  if (n && !is_op(*n, ir::OpKind::MatMul, 2)) {
    auto sc = scaling(g, *n);
    if (!sc || !has_single_user(users, s)) return std::nullopt;
    m.scale *= sc->first;
    m.others.push_back(n);
    s = sc->second;
    n = producer_of(g, s);
  }
  if (!n || !is_op(*n, ir::OpKind::MatMul, 2) || !has_single_user(users, s)) return std::nullopt;
  m.others.push_back(n);
  m.q = n->inputs[0];
  m.k = n->inputs[1];
  // Scalings of Q and of K (PyTorch's SDPA export multiplies each by sqrt(scale)).
  for (int* operand : {&m.q, &m.k}) {
    ir::Node* p = producer_of(g, *operand);
    if (!p || !has_single_user(users, *operand)) continue;
    if (auto sc = scaling(g, *p)) {
      m.scale *= sc->first;
      m.others.push_back(p);
      *operand = sc->second;
    }
  }
  // Forward from the Softmax: MatMul(P, V).
  ir::Node* pv = sole_user(g, users, softmax.outputs[0]);
  if (!pv || !is_op(*pv, ir::OpKind::MatMul, 2) || pv->inputs[0] != softmax.outputs[0] ||
      pv->inputs[1] == softmax.outputs[0])
    return std::nullopt;
  m.v = pv->inputs[1];
  m.last = pv;
  // One rank, equal known batch dims, float32 everywhere.
  const ir::ValueType &qt = g.values[static_cast<size_t>(m.q)].type, &kt = g.values[static_cast<size_t>(m.k)].type,
                      &vt = g.values[static_cast<size_t>(m.v)].type;
  for (const ir::ValueType* t : {&qt, &kt, &vt})
    if (!known_dims(*t) || t->dims.size() != st.dims.size() || t->dtype != DType::float32) return std::nullopt;
  for (size_t i = 0; i + 2 < st.dims.size(); ++i)
    if (qt.dims[i].value != kt.dims[i].value || qt.dims[i].value != vt.dims[i].value) return std::nullopt;
  if (m.mask != ir::kNoValue && g.values[static_cast<size_t>(m.mask)].type.dtype != DType::float32) return std::nullopt;
  return m;
}

}  // namespace

Status fuse_attention(ir::Graph& g, PassContext& ctx) {
  auto users = value_users(g);
  std::vector<bool> dead(g.nodes.size(), false);
  int fused = 0;
  for (ir::Node& sm : g.nodes) {
    if (dead[static_cast<size_t>(sm.index)]) continue;
    auto m = match_attention(g, users, sm);
    if (!m) continue;
    std::string what;
    if (!claim_match(dead, *m->last, m->others, what)) continue;
    ir::Node& at = *m->last;
    at.op = ir::OpKind::FusedAttention;
    at.op_type = "FusedAttention";
    at.domain = ir::kInternalDomain;
    at.inputs = {m->q, m->k, m->v};
    if (m->mask != ir::kNoValue) at.inputs.push_back(m->mask);
    at.attrs.clear();
    ir::Attribute scale;
    scale.type = ir::Attribute::Type::f;
    scale.f = static_cast<float>(m->scale);
    at.attrs["scale"] = scale;
    ctx.log.push_back("fuse_attention: " + what + " -> FusedAttention");
    ++fused;
  }
  return fused ? remove_nodes(g, dead) : Status::ok();
}

}  // namespace tac::builder
