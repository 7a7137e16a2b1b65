// Reference kernels (linalg family, part 2): Attention, RotaryEmbedding, SwiGLU, LinearAttention,
// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss. Registered through
// add_linalg_kernels().
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "reference/helpers.h"

namespace tac::ref {

void add_linalg_attention_kernels(KernelTable& t);

namespace {

using ir::OpKind;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void require_float(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (!dtype_is_float(t.dtype())) ctx.fail_invalid(std::string(what) + " must be floating point, got " + dtype_name(t.dtype()));
}

// A 4-D view [B, H, S, D] of a 4-D tensor, or of a 3-D [B, S, H*D] tensor split into `heads` heads.
struct HeadView {
  int64_t B = 0, H = 0, S = 0, D = 0;
  bool packed = false;  // 3-D input
  std::vector<double> v;
  double at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    size_t i = packed ? static_cast<size_t>(((b * S + s) * H + h) * D + d) : static_cast<size_t>(((b * H + h) * S + s) * D + d);
    return v[i];
  }
};

HeadView head_view(const KernelContext& ctx, const Tensor& t, int64_t heads, const char* what) {
  HeadView hv;
  if (t.rank() == 4) {
    hv.B = t.dim(0), hv.H = t.dim(1), hv.S = t.dim(2), hv.D = t.dim(3);
  } else if (t.rank() == 3) {
    if (heads <= 0) ctx.fail_invalid(std::string(what) + " is 3-D but the number of heads attribute is missing");
    if (t.dim(2) % heads != 0)
      ctx.fail_invalid(std::string(what) + " hidden size " + std::to_string(t.dim(2)) + " is not divisible by " +
                       std::to_string(heads) + " heads");
    hv.B = t.dim(0), hv.S = t.dim(1), hv.H = heads, hv.D = t.dim(2) / heads;
    hv.packed = true;
  } else {
    ctx.fail_invalid(std::string(what) + " must be 3-D or 4-D, got " + shape_to_string(t.shape()));
  }
  hv.v = to_double_vector(t);
  return hv;
}

// ---------------------------------------------------------------------------------------------
// Attention (opset 23/24)

void attention_kernel(KernelContext& ctx) {
  const Tensor& Qt = ctx.input(0);
  const Tensor& Kt = ctx.input(1);
  const Tensor& Vt = ctx.input(2);
  require_float(ctx, Qt, "Q");
  if (Kt.dtype() != Qt.dtype() || Vt.dtype() != Qt.dtype()) ctx.fail_invalid("Q, K and V must have the same type");
  if (Qt.rank() != Kt.rank() || Qt.rank() != Vt.rank()) ctx.fail_invalid("Q, K and V must have the same rank");
  const int64_t qh_attr = ctx.attr_int("q_num_heads", 0), kvh_attr = ctx.attr_int("kv_num_heads", 0);
  HeadView Q = head_view(ctx, Qt, qh_attr, "Q");
  HeadView K = head_view(ctx, Kt, kvh_attr, "K");
  HeadView V = head_view(ctx, Vt, kvh_attr, "V");
  const int64_t B = Q.B, Hq = Q.H, Sq = Q.S, Dh = Q.D, Hkv = K.H, Skv = K.S, Dv = V.D;
  if (K.B != B || V.B != B) ctx.fail_invalid("Q, K and V batch sizes differ");
  if (K.D != Dh) ctx.fail_invalid("K head size " + std::to_string(K.D) + " differs from Q head size " + std::to_string(Dh));
  if (V.H != Hkv || V.S != Skv) ctx.fail_invalid("K and V must have the same number of heads and sequence length");
  if (Hkv <= 0 || Hq % Hkv != 0)
    ctx.fail_invalid("q heads " + std::to_string(Hq) + " must be a multiple of kv heads " + std::to_string(Hkv));
  const int64_t group = Hq / Hkv;
  // Past key / value (4-D [B, Hkv, P, D]).
  int64_t P = 0;
  std::vector<double> pk, pv;
  const bool has_past = ctx.has_input(4);
  if (has_past != ctx.has_input(5)) ctx.fail_invalid("past_key and past_value must be given together");
  if (has_past) {
    const Tensor& a = ctx.input(4);
    const Tensor& b = ctx.input(5);
    if (a.rank() != 4 || b.rank() != 4 || a.dim(0) != B || a.dim(1) != Hkv || a.dim(3) != Dh || b.dim(0) != B ||
        b.dim(1) != Hkv || b.dim(3) != Dv || b.dim(2) != a.dim(2))
      ctx.fail_invalid("past_key " + shape_to_string(a.shape()) + " / past_value " + shape_to_string(b.shape()) +
                       " do not match K and V");
    P = a.dim(2);
    pk = to_double_vector(a);
    pv = to_double_vector(b);
  }
  const int64_t T = P + Skv;
  // Present key/value [B, Hkv, T, D] (past then new) and Q as [B, Hq, Sq, Dh], all contiguous.
  std::vector<double> kf(static_cast<size_t>(B * Hkv * T * Dh)), vf(static_cast<size_t>(B * Hkv * T * Dv));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hkv; ++h)
      for (int64_t j = 0; j < T; ++j) {
        for (int64_t d = 0; d < Dh; ++d)
          kf[static_cast<size_t>(((b * Hkv + h) * T + j) * Dh + d)] =
              j < P ? pk[static_cast<size_t>(((b * Hkv + h) * P + j) * Dh + d)] : K.at(b, h, j - P, d);
        for (int64_t d = 0; d < Dv; ++d)
          vf[static_cast<size_t>(((b * Hkv + h) * T + j) * Dv + d)] =
              j < P ? pv[static_cast<size_t>(((b * Hkv + h) * P + j) * Dv + d)] : V.at(b, h, j - P, d);
      }
  std::vector<double> qf(static_cast<size_t>(B * Hq * Sq * Dh));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      for (int64_t i = 0; i < Sq; ++i)
        for (int64_t d = 0; d < Dh; ++d) qf[static_cast<size_t>(((b * Hq + h) * Sq + i) * Dh + d)] = Q.at(b, h, i, d);
  // Mask: broadcast (numpy, right-aligned) to [B, Hq, Sq, mask_T]; columns past mask_T are masked.
  const bool has_mask = ctx.has_input(3);
  std::vector<double> mask_bias;  // additive bias per mask element
  std::vector<int64_t> mask_st(4, 0);
  int64_t mask_T = T;
  if (has_mask) {
    const Tensor& m = ctx.input(3);
    if (m.rank() < 2 || m.rank() > 4) ctx.fail_invalid("attn_mask must be 2-D to 4-D, got " + shape_to_string(m.shape()));
    if (m.dtype() != DType::boolean && m.dtype() != Qt.dtype())
      ctx.fail_invalid("attn_mask must be bool or the type of Q, got " + dtype_name(m.dtype()));
    mask_T = m.dim(m.rank() - 1);
    if (mask_T > T) ctx.fail_invalid("attn_mask last dim " + std::to_string(mask_T) + " exceeds the total sequence length " + std::to_string(T));
    const Shape full = {B, Hq, Sq, mask_T};
    auto st = strides_of(m.shape());
    for (int64_t d = 0; d < m.rank(); ++d) {
      const int64_t od = 4 - m.rank() + d;
      const int64_t md = m.dim(d);
      if (md != full[static_cast<size_t>(od)] && md != 1)
        ctx.fail_invalid("attn_mask of shape " + shape_to_string(m.shape()) + " does not broadcast to " + shape_to_string(full));
      mask_st[static_cast<size_t>(od)] = md == 1 ? 0 : st[static_cast<size_t>(d)];
    }
    mask_bias.resize(static_cast<size_t>(m.numel()));
    for (int64_t i = 0; i < m.numel(); ++i)
      mask_bias[static_cast<size_t>(i)] = m.dtype() == DType::boolean ? (m.data<bool>()[i] ? 0.0 : kNegInf) : m.get_f64(i);
  }
  std::vector<int64_t> nonpad;
  if (ctx.has_input(6)) {
    const Tensor& n = ctx.input(6);
    if (n.numel() != B) ctx.fail_invalid("nonpad_kv_seqlen must have batch_size elements");
    nonpad = to_int_vector(n);
  }
  const bool causal = ctx.attr_int("is_causal", 0) != 0;
  const double scale = ctx.has_attr("scale") ? static_cast<double>(ctx.attr_float("scale", 0)) : (Dh > 0 ? 1.0 / std::sqrt(static_cast<double>(Dh)) : 1.0);
  const double softcap = ctx.attr_float("softcap", 0.0f);
  const int64_t mode = ctx.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) ctx.fail_invalid("qk_matmul_output_mode must be 0..3");

  // Outputs.
  Shape ys = Q.packed ? Shape{B, Sq, Hq * Dv} : Shape{B, Hq, Sq, Dv};
  Tensor& Y = ctx.make_output(0, Qt.dtype(), ys);
  if (ctx.wants_output(1)) {
    Tensor& pkt = ctx.make_output(1, Qt.dtype(), {B, Hkv, T, Dh});
    for (int64_t i = 0; i < pkt.numel(); ++i) pkt.set_f64(i, kf[static_cast<size_t>(i)]);
  }
  if (ctx.wants_output(2)) {
    Tensor& pvt = ctx.make_output(2, Qt.dtype(), {B, Hkv, T, Dv});
    for (int64_t i = 0; i < pvt.numel(); ++i) pvt.set_f64(i, vf[static_cast<size_t>(i)]);
  }
  Tensor* QK = ctx.wants_output(3) ? &ctx.make_output(3, Qt.dtype(), {B, Hq, Sq, T}) : nullptr;

  std::vector<double> s(static_cast<size_t>(T)), biased(static_cast<size_t>(T)), p(static_cast<size_t>(T));
  std::vector<double> yrow(static_cast<size_t>(Dv)), raw(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    int64_t offset = 0;  // causal frontier: query i sees keys j <= i + offset
    if (has_past) offset = P;
    else if (!nonpad.empty()) offset = nonpad[static_cast<size_t>(b)] - Sq;
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;
      const double* kh = kf.data() + (b * Hkv + hk) * T * Dh;
      const double* vh = vf.data() + (b * Hkv + hk) * T * Dv;
      for (int64_t i = 0; i < Sq; ++i) {
        const double* qi = qf.data() + ((b * Hq + h) * Sq + i) * Dh;
        double mx = kNegInf;
        for (int64_t j = 0; j < T; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < Dh; ++d) acc += qi[d] * kh[j * Dh + d];
          double v = acc * scale;
          raw[static_cast<size_t>(j)] = v;
          if (softcap > 0) v = softcap * std::tanh(v / softcap);
          s[static_cast<size_t>(j)] = v;
          double bias = 0;
          if (has_mask) {
            if (j >= mask_T) bias = kNegInf;
            else bias = mask_bias[static_cast<size_t>(b * mask_st[0] + h * mask_st[1] + i * mask_st[2] + j * mask_st[3])];
          }
          if (causal && j > i + offset) bias = kNegInf;
          if (!nonpad.empty() && j >= nonpad[static_cast<size_t>(b)]) bias = kNegInf;
          double w = bias == kNegInf ? kNegInf : v + bias;
          biased[static_cast<size_t>(j)] = w;
          if (w > mx) mx = w;
        }
        // Softmax; a fully masked row yields all-zero probabilities.
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          double e = mx == kNegInf ? 0.0 : std::exp(biased[static_cast<size_t>(j)] - mx);
          p[static_cast<size_t>(j)] = e;
          sum += e;
        }
        for (int64_t j = 0; j < T; ++j) p[static_cast<size_t>(j)] = sum > 0 ? p[static_cast<size_t>(j)] / sum : 0.0;
        std::fill(yrow.begin(), yrow.end(), 0.0);
        for (int64_t j = 0; j < T; ++j) {
          const double pj = p[static_cast<size_t>(j)];
          if (pj == 0) continue;
          for (int64_t d = 0; d < Dv; ++d) yrow[static_cast<size_t>(d)] += pj * vh[j * Dv + d];
        }
        for (int64_t d = 0; d < Dv; ++d) {
          const int64_t oi = Q.packed ? ((b * Sq + i) * Hq + h) * Dv + d : ((b * Hq + h) * Sq + i) * Dv + d;
          Y.set_f64(oi, yrow[static_cast<size_t>(d)]);
        }
        if (QK) {
          // Modes follow the pipeline: 0 scaled QK, 1 after softcap, 2 after mask/bias, 3 after softmax.
          const std::vector<double>& src = mode == 3 ? p : mode == 2 ? biased : mode == 1 ? s : raw;
          for (int64_t j = 0; j < T; ++j) QK->set_f64(((b * Hq + h) * Sq + i) * T + j, src[static_cast<size_t>(j)]);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// RotaryEmbedding (opset 23)

void rotary_embedding_kernel(KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor& cosc = ctx.input(1);
  const Tensor& sinc = ctx.input(2);
  require_float(ctx, X, "input");
  if (cosc.shape() != sinc.shape()) ctx.fail_invalid("cos_cache and sin_cache shapes differ");
  int64_t B, S, H, D;
  const bool packed = X.rank() == 3;
  if (X.rank() == 4) {
    B = X.dim(0), H = X.dim(1), S = X.dim(2), D = X.dim(3);
  } else if (packed) {
    const int64_t nh = ctx.attr_int("num_heads", 0);
    if (nh <= 0) ctx.fail_invalid("3-D input requires the num_heads attribute");
    if (X.dim(2) % nh != 0) ctx.fail_invalid("hidden size is not divisible by num_heads");
    B = X.dim(0), S = X.dim(1), H = nh, D = X.dim(2) / nh;
  } else {
    ctx.fail_invalid("input must be 3-D or 4-D, got " + shape_to_string(X.shape()));
  }
  int64_t rot = ctx.attr_int("rotary_embedding_dim", 0);
  if (rot == 0) rot = D;
  if (rot < 0 || rot > D || rot % 2 != 0) ctx.fail_invalid("rotary_embedding_dim " + std::to_string(rot) + " is invalid for head size " + std::to_string(D));
  const int64_t half = rot / 2;
  const bool interleaved = ctx.attr_int("interleaved", 0) != 0;
  std::vector<int64_t> pos;
  if (ctx.has_input(3)) {
    const Tensor& p = ctx.input(3);
    if (p.rank() != 2 || p.dim(0) != B || p.dim(1) != S)
      ctx.fail_invalid("position_ids must be [batch, seq], got " + shape_to_string(p.shape()));
    if (cosc.rank() != 2 || cosc.dim(1) != half)
      ctx.fail_invalid("cos_cache must be [max_pos, rotary_dim/2], got " + shape_to_string(cosc.shape()));
    pos = to_int_vector(p);
    for (int64_t v : pos)
      if (v < 0 || v >= cosc.dim(0)) ctx.fail_invalid("position id " + std::to_string(v) + " is out of range");
  } else if (cosc.rank() != 3 || cosc.dim(0) != B || cosc.dim(1) != S || cosc.dim(2) != half) {
    ctx.fail_invalid("without position_ids, cos_cache must be [batch, seq, rotary_dim/2], got " + shape_to_string(cosc.shape()));
  }
  auto xv = to_double_vector(X);
  auto cv = to_double_vector(cosc);
  auto sv = to_double_vector(sinc);
  Tensor& Y = ctx.make_output(0, X.dtype(), X.shape());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t row = pos.empty() ? b * S + s : pos[static_cast<size_t>(b * S + s)];
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = packed ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D;
        for (int64_t k = 0; k < half; ++k) {
          const double c = cv[static_cast<size_t>(row * half + k)], sn = sv[static_cast<size_t>(row * half + k)];
          const int64_t i1 = interleaved ? 2 * k : k, i2 = interleaved ? 2 * k + 1 : k + half;
          const double x1 = xv[static_cast<size_t>(base + i1)], x2 = xv[static_cast<size_t>(base + i2)];
          Y.set_f64(base + i1, c * x1 - sn * x2);
          Y.set_f64(base + i2, sn * x1 + c * x2);
        }
        for (int64_t d = rot; d < D; ++d) Y.set_f64(base + d, xv[static_cast<size_t>(base + d)]);
      }
    }
}

// ---------------------------------------------------------------------------------------------
// SwiGLU: y = a * sigmoid(alpha * a) * b

void swiglu_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_float(ctx, a, "a");
  if (b.dtype() != a.dtype()) ctx.fail_invalid("a and b must have the same type");
  const double alpha = ctx.attr_float("alpha", 1.0f);
  Shape shape = broadcast_shapes(ctx, a.shape(), b.shape());
  auto ia = broadcast_index(a.shape(), shape);
  auto ib = broadcast_index(b.shape(), shape);
  Tensor& y = ctx.make_output(0, a.dtype(), shape);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double x = a.get_f64(ia[static_cast<size_t>(i)]);
    y.set_f64(i, x / (1.0 + std::exp(-alpha * x)) * b.get_f64(ib[static_cast<size_t>(i)]));
  }
}

// ---------------------------------------------------------------------------------------------
// LinearAttention: recurrent state S[b, h_kv, d_k, d_v].

void linear_attention_kernel(KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  require_float(ctx, q, "query");
  if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3) ctx.fail_invalid("query, key and value must be 3-D");
  const std::string rule = ctx.attr_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    ctx.fail_invalid("unknown update_rule '" + rule + "'");
  const int64_t Hq = ctx.attr_int("q_num_heads", 0), Hkv = ctx.attr_int("kv_num_heads", 0);
  if (Hq <= 0 || Hkv <= 0 || Hq % Hkv != 0) ctx.fail_invalid("q_num_heads must be a positive multiple of kv_num_heads");
  const bool gating = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  const bool has_decay = ctx.has_input(4), has_beta = ctx.has_input(5), has_erase = ctx.has_input(6);
  if (gating != has_decay) ctx.fail_invalid("update_rule '" + rule + (gating ? "' requires" : "' forbids") + " the decay input");
  if (delta != has_beta) ctx.fail_invalid("update_rule '" + rule + (delta ? "' requires" : "' forbids") + " the beta input");
  if (has_erase && !delta) ctx.fail_invalid("update_rule '" + rule + "' forbids the erase_gate input");
  const int64_t B = q.dim(0), T = q.dim(1);
  if (q.dim(2) % Hq != 0 || v.dim(2) % Hkv != 0) ctx.fail_invalid("hidden sizes are not divisible by the head counts");
  const int64_t dk = q.dim(2) / Hq, dv = v.dim(2) / Hkv, group = Hq / Hkv;
  if (k.dim(0) != B || k.dim(1) != T || k.dim(2) != Hkv * dk || v.dim(0) != B || v.dim(1) != T)
    ctx.fail_invalid("key/value shapes " + shape_to_string(k.shape()) + " / " + shape_to_string(v.shape()) + " do not match query");
  auto qv = to_double_vector(q), kv = to_double_vector(k), vv = to_double_vector(v);
  std::vector<double> decay, beta, erase;
  int64_t decay_last = 0, beta_last = 0;
  if (has_decay) {
    const Tensor& g = ctx.input(4);
    if (g.rank() != 3 || g.dim(0) != B || g.dim(1) != T || (g.dim(2) != Hkv && g.dim(2) != Hkv * dk))
      ctx.fail_invalid("decay shape " + shape_to_string(g.shape()) + " is invalid");
    decay_last = g.dim(2);
    decay = to_double_vector(g);
  }
  if (has_beta) {
    const Tensor& bt = ctx.input(5);
    if (bt.rank() != 3 || bt.dim(0) != B || bt.dim(1) != T || (bt.dim(2) != Hkv && bt.dim(2) != 1))
      ctx.fail_invalid("beta shape " + shape_to_string(bt.shape()) + " is invalid");
    beta_last = bt.dim(2);
    beta = to_double_vector(bt);
  }
  if (has_erase) {
    const Tensor& e = ctx.input(6);
    if (e.rank() != 3 || e.dim(0) != B || e.dim(1) != T || e.dim(2) != Hkv * dk)
      ctx.fail_invalid("erase_gate shape " + shape_to_string(e.shape()) + " is invalid");
    erase = to_double_vector(e);
  }
  std::vector<double> state(static_cast<size_t>(B * Hkv * dk * dv), 0.0);
  DType state_t = q.dtype();
  if (ctx.has_input(3)) {
    const Tensor& ps = ctx.input(3);
    if (ps.shape() != Shape{B, Hkv, dk, dv})
      ctx.fail_invalid("past_state shape " + shape_to_string(ps.shape()) + " must be " + shape_to_string({B, Hkv, dk, dv}));
    require_float(ctx, ps, "past_state");
    state = to_double_vector(ps);
    state_t = ps.dtype();
  }
  double scale = ctx.attr_float("scale", 0.0f);
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(dk));
  Tensor& Y = ctx.make_output(0, q.dtype(), {B, T, Hq * dv});
  std::vector<double> vt(static_cast<size_t>(dv));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < Hkv; ++h) {
        double* S = state.data() + (b * Hkv + h) * dk * dv;
        const double* kt = kv.data() + (b * T + t) * Hkv * dk + h * dk;
        if (gating)
          for (int64_t i = 0; i < dk; ++i) {
            const double g = decay_last == Hkv ? decay[static_cast<size_t>((b * T + t) * Hkv + h)]
                                               : decay[static_cast<size_t>((b * T + t) * Hkv * dk + h * dk + i)];
            const double f = std::exp(g);
            for (int64_t m = 0; m < dv; ++m) S[i * dv + m] *= f;
          }
        for (int64_t m = 0; m < dv; ++m) vt[static_cast<size_t>(m)] = vv[static_cast<size_t>((b * T + t) * Hkv * dv + h * dv + m)];
        if (delta) {
          const double bt = beta[static_cast<size_t>((b * T + t) * beta_last + (beta_last == 1 ? 0 : h))];
          for (int64_t m = 0; m < dv; ++m) {
            double r = 0;
            for (int64_t i = 0; i < dk; ++i) {
              double ke = kt[i];
              if (has_erase) ke *= erase[static_cast<size_t>((b * T + t) * Hkv * dk + h * dk + i)];
              r += S[i * dv + m] * ke;
            }
            vt[static_cast<size_t>(m)] = bt * (vt[static_cast<size_t>(m)] - r);
          }
        }
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t m = 0; m < dv; ++m) S[i * dv + m] += kt[i] * vt[static_cast<size_t>(m)];
      }
      for (int64_t h = 0; h < Hq; ++h) {
        const double* S = state.data() + (b * Hkv + h / group) * dk * dv;
        const double* qt = qv.data() + (b * T + t) * Hq * dk + h * dk;
        for (int64_t m = 0; m < dv; ++m) {
          double acc = 0;
          for (int64_t i = 0; i < dk; ++i) acc += qt[i] * S[i * dv + m];
          Y.set_f64((b * T + t) * Hq * dv + h * dv + m, scale * acc);
        }
      }
    }
  if (ctx.wants_output(1)) {
    Tensor& ps = ctx.make_output(1, state_t, {B, Hkv, dk, dv});
    for (int64_t i = 0; i < ps.numel(); ++i) ps.set_f64(i, state[static_cast<size_t>(i)]);
  }
}

// ---------------------------------------------------------------------------------------------
// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss

// loss over log-probabilities lp[N, C, D] (D = product of extra dims) and labels[N, D].
void nll_common(KernelContext& ctx, const std::vector<double>& lp, const Tensor& scores, const Tensor& labels) {
  const int64_t N = scores.dim(0), C = scores.dim(1);
  int64_t D = 1;
  for (int64_t d = 2; d < scores.rank(); ++d) D *= scores.dim(d);
  if (!dtype_is_signed_int(labels.dtype()) && labels.dtype() != DType::uint8 && labels.dtype() != DType::uint16 &&
      labels.dtype() != DType::uint32 && labels.dtype() != DType::uint64)
    ctx.fail_invalid("labels must be integer, got " + dtype_name(labels.dtype()));
  Shape want = {N};
  for (int64_t d = 2; d < scores.rank(); ++d) want.push_back(scores.dim(d));
  if (labels.shape() != want)
    ctx.fail_invalid("labels shape " + shape_to_string(labels.shape()) + " must be " + shape_to_string(want));
  const std::string reduction = ctx.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") ctx.fail_invalid("unknown reduction '" + reduction + "'");
  const bool has_ii = ctx.has_attr("ignore_index");
  const int64_t ii = ctx.attr_int("ignore_index", 0);
  std::vector<double> w;
  if (ctx.has_input(2)) {
    const Tensor& wt = ctx.input(2);
    if (wt.rank() != 1 || wt.dim(0) != C) ctx.fail_invalid("weights must be 1-D of size C");
    w = to_double_vector(wt);
  }
  auto lab = to_int_vector(labels);
  std::vector<double> loss(static_cast<size_t>(N * D)), wt(static_cast<size_t>(N * D));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const size_t li = static_cast<size_t>(n * D + d);
      const int64_t c = lab[li];
      if (has_ii && c == ii) {
        loss[li] = 0;
        wt[li] = 0;
        continue;
      }
      if (c < 0 || c >= C) ctx.fail_invalid("label " + std::to_string(c) + " is out of range [0, " + std::to_string(C) + ")");
      const double wc = w.empty() ? 1.0 : w[static_cast<size_t>(c)];
      loss[li] = -lp[static_cast<size_t>((n * C + c) * D + d)] * wc;
      wt[li] = wc;
    }
  const DType ot = scores.dtype();
  if (reduction == "none") {
    Tensor& out = ctx.make_output(0, ot, want);
    for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, loss[static_cast<size_t>(i)]);
    return;
  }
  double sum = 0, wsum = 0;
  for (size_t i = 0; i < loss.size(); ++i) sum += loss[i], wsum += wt[i];
  Tensor& out = ctx.make_output(0, ot, {});
  out.set_f64(0, reduction == "sum" ? sum : sum / wsum);
}

void check_scores(const KernelContext& ctx, const Tensor& x) {
  if (!dtype_is_float(x.dtype())) ctx.fail_invalid("scores must be floating point, got " + dtype_name(x.dtype()));
  if (x.rank() < 2) ctx.fail_invalid("scores must be at least 2-D [N, C, ...], got " + shape_to_string(x.shape()));
}

void softmax_cross_entropy_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_scores(ctx, x);
  const int64_t N = x.dim(0), C = x.dim(1);
  int64_t D = 1;
  for (int64_t d = 2; d < x.rank(); ++d) D *= x.dim(d);
  auto xv = to_double_vector(x);
  std::vector<double> lp(xv.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double mx = kNegInf;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, xv[static_cast<size_t>((n * C + c) * D + d)]);
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += std::exp(xv[static_cast<size_t>((n * C + c) * D + d)] - mx);
      const double ls = std::log(sum);
      for (int64_t c = 0; c < C; ++c) {
        const size_t i = static_cast<size_t>((n * C + c) * D + d);
        lp[i] = xv[i] - mx - ls;
      }
    }
  nll_common(ctx, lp, x, ctx.input(1));
  if (ctx.wants_output(1)) {
    Tensor& out = ctx.make_output(1, x.dtype(), x.shape());
    for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, lp[static_cast<size_t>(i)]);
  }
}

void nll_loss_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_scores(ctx, x);
  nll_common(ctx, to_double_vector(x), x, ctx.input(1));
}

}  // namespace

void add_linalg_attention_kernels(KernelTable& t) {
  t.add(OpKind::Attention, attention_kernel);
  t.add(OpKind::RotaryEmbedding, rotary_embedding_kernel);
  t.add(OpKind::SwiGLU, swiglu_kernel);
  t.add(OpKind::LinearAttention, linear_attention_kernel);
  t.add(OpKind::SoftmaxCrossEntropyLoss, softmax_cross_entropy_kernel);
  t.add(OpKind::NegativeLogLikelihoodLoss, nll_loss_kernel);
}

}  // namespace tac::ref
