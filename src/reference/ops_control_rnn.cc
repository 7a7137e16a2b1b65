// Reference kernels: recurrent layers (RNN, GRU, LSTM). Registered through add_control_kernels().
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

enum class Cell { rnn, gru, lstm };

struct Activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    if (name == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
    if (name == "tanh") return std::tanh(x);
    if (name == "relu") return std::max(x, 0.0);
    if (name == "affine") return alpha * x + beta;
    if (name == "leakyrelu") return x >= 0 ? x : alpha * x;
    if (name == "thresholdedrelu") return x > alpha ? x : 0.0;
    if (name == "scaledtanh") return alpha * std::tanh(beta * x);
    if (name == "hardsigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    if (name == "elu") return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
    if (name == "softsign") return x / (1.0 + std::fabs(x));
    if (name == "softplus") return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0);
    return 0;  // unreachable: names are validated in parse_activations
  }
};

// Which of alpha/beta an activation takes, and their defaults (those of the ONNX operators).
bool activation_params(const std::string& n, bool& uses_a, double& def_a, bool& uses_b, double& def_b) {
  uses_a = uses_b = false;
  def_a = def_b = 0;
  if (n == "sigmoid" || n == "tanh" || n == "relu" || n == "softsign" || n == "softplus") return true;
  if (n == "affine") { uses_a = uses_b = true; def_a = 1.0; def_b = 0.0; return true; }
  if (n == "leakyrelu") { uses_a = true; def_a = 0.01; return true; }
  if (n == "thresholdedrelu") { uses_a = true; def_a = 1.0; return true; }
  if (n == "scaledtanh") { uses_a = uses_b = true; def_a = 1.0; def_b = 1.0; return true; }
  if (n == "hardsigmoid") { uses_a = uses_b = true; def_a = 0.2; def_b = 0.5; return true; }
  if (n == "elu") { uses_a = true; def_a = 1.0; return true; }
  return false;
}

// `per_dir` activations for each of `num_dir` directions; alphas/betas are consumed in order by
// the activations that take them.
std::vector<Activation> parse_activations(const KernelContext& ctx, std::vector<std::string> defaults,
                                          size_t per_dir, int num_dir) {
  std::vector<std::string> names = ctx.attr_strings("activations", {});
  if (names.empty()) {
    for (int d = 0; d < num_dir; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() == per_dir && num_dir == 2) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (names.size() != per_dir * static_cast<size_t>(num_dir))
    ctx.fail_invalid("'activations' must have " + std::to_string(per_dir * static_cast<size_t>(num_dir)) +
                     " entries, got " + std::to_string(names.size()));
  std::vector<float> alphas = ctx.attr_floats("activation_alpha", {});
  std::vector<float> betas = ctx.attr_floats("activation_beta", {});
  size_t ia = 0, ib = 0;
  std::vector<Activation> out;
  for (const std::string& raw : names) {
    Activation a;
    for (char c : raw) a.name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    bool ua, ub;
    double da, db;
    if (!activation_params(a.name, ua, da, ub, db)) ctx.fail_unsupported("activation '" + raw + "' is not supported");
    a.alpha = ua ? (ia < alphas.size() ? alphas[ia++] : da) : 0.0;
    a.beta = ub ? (ib < betas.size() ? betas[ib++] : db) : 0.0;
    out.push_back(a);
  }
  return out;
}

void recurrent(KernelContext& ctx, Cell cell) {
  const size_t gates = cell == Cell::lstm ? 4 : cell == Cell::gru ? 3 : 1;
  const char* op = cell == Cell::lstm ? "LSTM" : cell == Cell::gru ? "GRU" : "RNN";
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  const DType dt = x.dtype();
  if (!dtype_is_float(dt)) ctx.fail_invalid(std::string(op) + " input X must be a float tensor");
  if (w.dtype() != dt || r.dtype() != dt) ctx.fail_invalid("W and R must have the type of X");
  if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3) ctx.fail_invalid("X, W and R must have rank 3");

  const std::string direction = ctx.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    ctx.fail_invalid("unknown direction '" + direction + "'");
  const int num_dir = direction == "bidirectional" ? 2 : 1;
  const int64_t layout = ctx.attr_int("layout", 0);
  if (layout != 0 && layout != 1) ctx.fail_invalid("layout must be 0 or 1");
  const int64_t seq = layout == 0 ? x.dim(0) : x.dim(1);
  const int64_t batch = layout == 0 ? x.dim(1) : x.dim(0);
  const int64_t in_size = x.dim(2);
  const auto g64 = static_cast<int64_t>(gates);
  if (w.dim(0) != num_dir || w.dim(1) % g64 != 0 || w.dim(2) != in_size)
    ctx.fail_invalid("W has shape " + shape_to_string(w.shape()) + ", which does not fit X " +
                     shape_to_string(x.shape()) + " and direction " + direction);
  const int64_t hid = w.dim(1) / g64;
  if (ctx.has_attr("hidden_size") && ctx.attr_int("hidden_size", 0) != hid)
    ctx.fail_invalid("hidden_size does not match the shape of W");
  if (const Shape want{num_dir, g64 * hid, hid}; r.shape() != want)
    ctx.fail_invalid("R has shape " + shape_to_string(r.shape()) + ", expected " + shape_to_string(want));

  std::vector<double> xv = to_double_vector(x), wv = to_double_vector(w), rv = to_double_vector(r);
  std::vector<double> bv(static_cast<size_t>(num_dir * 2 * g64 * hid), 0.0);
  if (ctx.has_input(3)) {
    const Tensor& b = ctx.input(3);
    if (b.dtype() != dt || b.shape() != Shape{num_dir, 2 * g64 * hid})
      ctx.fail_invalid("B has shape " + shape_to_string(b.shape()) + " or the wrong type");
    bv = to_double_vector(b);
  }
  std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
  if (ctx.has_input(4)) {
    const Tensor& sl = ctx.input(4);
    if (sl.numel() != batch) ctx.fail_invalid("sequence_lens must have one entry per batch");
    lens = to_int_vector(sl);
    for (int64_t l : lens)
      if (l < 0 || l > seq) ctx.fail_invalid("sequence_lens entry " + std::to_string(l) + " is out of range");
  }
  // State tensors [num_dir, batch, hid] (layout 0) or [batch, num_dir, hid] (layout 1).
  const Shape state_shape = layout == 0 ? Shape{num_dir, batch, hid} : Shape{batch, num_dir, hid};
  auto state_index = [&](int64_t d, int64_t b, int64_t h) {
    return layout == 0 ? (d * batch + b) * hid + h : (b * num_dir + d) * hid + h;
  };
  auto load_state = [&](size_t i, const char* name) {
    std::vector<double> v(static_cast<size_t>(num_dir * batch * hid), 0.0);
    if (ctx.has_input(i)) {
      const Tensor& t = ctx.input(i);
      if (t.dtype() != dt || t.shape() != state_shape)
        ctx.fail_invalid(std::string(name) + " has shape " + shape_to_string(t.shape()) + ", expected " +
                         shape_to_string(state_shape));
      v = to_double_vector(t);
    }
    return v;
  };
  std::vector<double> h0 = load_state(5, "initial_h");
  std::vector<double> c0, pv(static_cast<size_t>(num_dir * 3 * hid), 0.0);
  bool input_forget = false;
  if (cell == Cell::lstm) {
    c0 = load_state(6, "initial_c");
    if (ctx.has_input(7)) {
      const Tensor& p = ctx.input(7);
      if (p.dtype() != dt || p.shape() != Shape{num_dir, 3 * hid})
        ctx.fail_invalid("P has shape " + shape_to_string(p.shape()) + " or the wrong type");
      pv = to_double_vector(p);
    }
    input_forget = ctx.attr_int("input_forget", 0) != 0;
  }
  const bool linear_before_reset = cell == Cell::gru && ctx.attr_int("linear_before_reset", 0) != 0;
  const bool has_clip = ctx.has_attr("clip");
  const double clip = ctx.attr_float("clip", 0.0f);
  if (has_clip && !(clip > 0)) ctx.fail_invalid("clip must be positive");
  auto clipped = [&](double v) { return has_clip ? std::clamp(v, -clip, clip) : v; };

  std::vector<std::string> defaults = cell == Cell::lstm  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                      : cell == Cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                          : std::vector<std::string>{"Tanh"};
  const size_t per_dir = defaults.size();
  std::vector<Activation> acts = parse_activations(ctx, defaults, per_dir, num_dir);

  const Shape y_shape = layout == 0 ? Shape{seq, num_dir, batch, hid} : Shape{batch, seq, num_dir, hid};
  Tensor* y = ctx.wants_output(0) ? &ctx.make_output(0, dt, y_shape) : nullptr;
  std::vector<double> yh(static_cast<size_t>(num_dir * batch * hid)), yc(yh.size());
  auto x_at = [&](int64_t t, int64_t b, int64_t i) {
    return xv[static_cast<size_t>(layout == 0 ? (t * batch + b) * in_size + i : (b * seq + t) * in_size + i)];
  };
  auto y_index = [&](int64_t t, int64_t d, int64_t b, int64_t h) {
    return layout == 0 ? ((t * num_dir + d) * batch + b) * hid + h : ((b * seq + t) * num_dir + d) * hid + h;
  };

  std::vector<double> xw(gates * static_cast<size_t>(hid)), hr(xw.size());
  std::vector<double> hprev(static_cast<size_t>(hid)), cprev(static_cast<size_t>(hid)), hnew(hprev.size()),
      cnew(hprev.size()), rgate(hprev.size());
  for (int64_t d = 0; d < num_dir; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const Activation* f = &acts[static_cast<size_t>(d) * per_dir];
    const double* wd = wv.data() + d * g64 * hid * in_size;
    const double* rd = rv.data() + d * g64 * hid * hid;
    const double* wb = bv.data() + d * 2 * g64 * hid;
    const double* rb = wb + g64 * hid;
    const double* pd = pv.data() + d * 3 * hid;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < hid; ++h) {
        hprev[static_cast<size_t>(h)] = h0[static_cast<size_t>(state_index(d, b, h))];
        if (cell == Cell::lstm) cprev[static_cast<size_t>(h)] = c0[static_cast<size_t>(state_index(d, b, h))];
      }
      const int64_t len = lens[static_cast<size_t>(b)];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        // xw[g*hid+h] = X_t . W_gh + Wb_gh ; hr[g*hid+h] = H_{t-1} . R_gh + Rb_gh
        for (int64_t gh = 0; gh < g64 * hid; ++gh) {
          double acc = wb[gh];
          for (int64_t i = 0; i < in_size; ++i) acc += x_at(t, b, i) * wd[gh * in_size + i];
          xw[static_cast<size_t>(gh)] = acc;
          double acc2 = rb[gh];
          for (int64_t j = 0; j < hid; ++j) acc2 += hprev[static_cast<size_t>(j)] * rd[gh * hid + j];
          hr[static_cast<size_t>(gh)] = acc2;
        }
        if (cell == Cell::gru)
          for (int64_t h = 0; h < hid; ++h)
            rgate[static_cast<size_t>(h)] =
                f[0](clipped(xw[static_cast<size_t>(hid + h)] + hr[static_cast<size_t>(hid + h)]));
        for (int64_t h = 0; h < hid; ++h) {
          const auto hs = static_cast<size_t>(h);
          auto pre = [&](int64_t g) { return xw[static_cast<size_t>(g * hid + h)] + hr[static_cast<size_t>(g * hid + h)]; };
          if (cell == Cell::rnn) {
            hnew[hs] = f[0](clipped(pre(0)));
          } else if (cell == Cell::gru) {
            // Gate order z, r, h.
            const double z = f[0](clipped(pre(0)));
            const double rg = rgate[hs];
            double hpre;
            if (linear_before_reset) {
              hpre = xw[static_cast<size_t>(2 * hid + h)] + rg * hr[static_cast<size_t>(2 * hid + h)];
            } else {
              double acc = rb[2 * hid + h];
              for (int64_t j = 0; j < hid; ++j)
                acc += rgate[static_cast<size_t>(j)] * hprev[static_cast<size_t>(j)] * rd[(2 * hid + h) * hid + j];
              hpre = xw[static_cast<size_t>(2 * hid + h)] + acc;
            }
            const double hh = f[1](clipped(hpre));
            hnew[hs] = (1.0 - z) * hh + z * hprev[hs];
          } else {
            // Gate order i, o, f, c; peepholes P = [Pi, Po, Pf].
            const double c_prev = cprev[hs];
            const double ig = f[0](clipped(pre(0) + pd[h] * c_prev));
            const double fg = input_forget ? 1.0 - ig : f[0](clipped(pre(2) + pd[2 * hid + h] * c_prev));
            const double cg = f[1](clipped(pre(3)));
            const double c = fg * c_prev + ig * cg;
            const double og = f[0](clipped(pre(1) + pd[hid + h] * c));
            cnew[hs] = c;
            hnew[hs] = og * f[2](c);
          }
        }
        hprev = hnew;
        if (cell == Cell::lstm) cprev = cnew;
        if (y)
          for (int64_t h = 0; h < hid; ++h) y->set_f64(y_index(t, d, b, h), hprev[static_cast<size_t>(h)]);
      }
      for (int64_t h = 0; h < hid; ++h) {
        yh[static_cast<size_t>(state_index(d, b, h))] = hprev[static_cast<size_t>(h)];
        if (cell == Cell::lstm) yc[static_cast<size_t>(state_index(d, b, h))] = cprev[static_cast<size_t>(h)];
      }
    }
  }
  auto emit = [&](size_t i, const std::vector<double>& v) {
    if (!ctx.wants_output(i)) return;
    Tensor& t = ctx.make_output(i, dt, state_shape);
    for (size_t k = 0; k < v.size(); ++k) t.set_f64(static_cast<int64_t>(k), v[k]);
  };
  emit(1, yh);
  if (cell == Cell::lstm) emit(2, yc);
}

void rnn_kernel(KernelContext& ctx) { recurrent(ctx, Cell::rnn); }
void gru_kernel(KernelContext& ctx) { recurrent(ctx, Cell::gru); }
void lstm_kernel(KernelContext& ctx) { recurrent(ctx, Cell::lstm); }

}  // namespace

void add_control_rnn_kernels(KernelTable& t);
void add_control_rnn_kernels(KernelTable& t) {
  t.add(OpKind::RNN, rnn_kernel);
  t.add(OpKind::GRU, gru_kernel);
  t.add(OpKind::LSTM, lstm_kernel);
}

}  // namespace tac::ref
