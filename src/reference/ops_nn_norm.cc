// Reference kernels: normalisation (BatchNormalization, InstanceNormalization,
// LayerNormalization, GroupNormalization, RMSNormalization, LRN, LpNormalization,
// MeanVarianceNormalization) and Softmax / LogSoftmax / Hardmax. Registered via add_nn_kernels().
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "reference/ops_nn_common.h"

namespace tac::ref::nn {

namespace {

using ir::OpKind;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// Per-channel parameter of BatchNormalization / InstanceNormalization as doubles; either
// [C] or (old BatchNormalization with spatial=0) [C, D1, ...] per element.
std::vector<double> channel_param(const KernelContext& ctx, size_t idx, int64_t C, int64_t per_elem, bool& elementwise,
                                  const char* what) {
  const Tensor& t = ctx.input(idx);
  if (t.numel() == C && t.rank() <= 1) return load_f64(ctx, t);
  if (per_elem != C && t.numel() == per_elem) {
    elementwise = true;
    return load_f64(ctx, t);
  }
  ctx.fail_invalid(std::string(what) + " has shape " + shape_to_string(t.shape()) + ", expected [" + std::to_string(C) + "]");
}

void batch_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "X");
  if (x.rank() < 2) ctx.fail_invalid("X must have rank >= 2");
  if (ctx.attr_int("training_mode", 0) != 0) ctx.fail_unsupported("training_mode=1 is not supported");
  for (size_t i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.wants_output(i)) ctx.fail_unsupported("training-mode outputs (mean/var) are not supported");
  if (ctx.opset < 7 && ctx.attr_int("is_test", 0) == 0 && ctx.num_outputs() > 1)
    ctx.fail_unsupported("training mode (is_test=0) is not supported");
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const int64_t N = x.dim(0), C = x.dim(1), S = prod(x.shape(), 2, x.shape().size());
  bool elem[4] = {false, false, false, false};
  auto scale = channel_param(ctx, 1, C, C * S, elem[0], "scale");
  auto bias = channel_param(ctx, 2, C, C * S, elem[1], "B");
  auto mean = channel_param(ctx, 3, C, C * S, elem[2], "mean");
  auto var = channel_param(ctx, 4, C, C * S, elem[3], "var");
  auto xv = load_f64(ctx, x);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t e = c * S + s;
        auto at = [&](const std::vector<double>& v, int k) { return v[sz(elem[k] ? e : c)]; };
        double& v = xv[sz((n * C + c) * S + s)];
        v = (v - at(mean, 2)) / std::sqrt(at(var, 3) + eps) * at(scale, 0) + at(bias, 1);
      }
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  store_f64(ctx, out, xv.data());
}

void instance_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "X");
  if (x.rank() < 3) ctx.fail_invalid("X must have rank >= 3");
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const int64_t N = x.dim(0), C = x.dim(1), S = prod(x.shape(), 2, x.shape().size());
  bool e0 = false, e1 = false;
  auto scale = channel_param(ctx, 1, C, C, e0, "scale");
  auto bias = channel_param(ctx, 2, C, C, e1, "B");
  auto xv = load_f64(ctx, x);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double* p = xv.data() + (n * C + c) * S;
      double mean = 0, var = 0;
      for (int64_t s = 0; s < S; ++s) mean += p[s];
      mean /= static_cast<double>(S);
      for (int64_t s = 0; s < S; ++s) var += (p[s] - mean) * (p[s] - mean);
      var /= static_cast<double>(S);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t s = 0; s < S; ++s) p[s] = (p[s] - mean) * inv * scale[sz(c)] + bias[sz(c)];
    }
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  store_f64(ctx, out, xv.data());
}

DType stash_dtype(const KernelContext& ctx) {
  const int64_t code = ctx.attr_int("stash_type", 1);
  DType d = static_cast<DType>(code);
  if (!dtype_is_float(d)) ctx.fail_invalid("stash_type " + std::to_string(code) + " is not a floating-point type");
  return d;
}

// A parameter (scale / bias) unidirectionally broadcast to `inner` (the normalised dims):
// returns for each inner position its value.
std::vector<double> broadcast_param(const KernelContext& ctx, const Tensor& t, const Shape& inner, const char* what) {
  if (t.rank() > static_cast<int64_t>(inner.size()))
    ctx.fail_invalid(std::string(what) + " " + shape_to_string(t.shape()) + " has higher rank than the normalised shape " + shape_to_string(inner));
  for (int64_t i = 0; i < t.rank(); ++i) {
    int64_t d = t.dim(i), o = inner[inner.size() - static_cast<size_t>(t.rank()) + static_cast<size_t>(i)];
    if (d != o && d != 1)
      ctx.fail_invalid(std::string(what) + " " + shape_to_string(t.shape()) + " does not broadcast to " + shape_to_string(inner));
  }
  auto v = load_f64(ctx, t);
  auto bi = broadcast_index(t.shape(), inner);
  std::vector<double> r(bi.size());
  for (size_t i = 0; i < bi.size(); ++i) r[i] = v[sz(bi[i])];
  return r;
}

// LayerNormalization (rms=false) and RMSNormalization (rms=true).
void layer_norm_impl(KernelContext& ctx, bool rms) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "X");
  const int64_t rank = x.rank();
  if (rank < 1) ctx.fail_invalid("X must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  DType sd = stash_dtype(ctx);
  const Shape inner_shape(x.shape().begin() + axis, x.shape().end());
  const int64_t outer = prod(x.shape(), 0, sz(axis)), inner = prod(x.shape(), sz(axis), x.shape().size());
  auto scale = broadcast_param(ctx, ctx.input(1), inner_shape, "Scale");
  std::vector<double> bias;
  if (!rms && ctx.has_input(2)) bias = broadcast_param(ctx, ctx.input(2), inner_shape, "B");
  auto xv = load_f64(ctx, x);
  std::vector<double> means(sz(outer)), invs(sz(outer));
  for (int64_t o = 0; o < outer; ++o) {
    double* p = xv.data() + o * inner;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t i = 0; i < inner; ++i) mean += p[i];
      mean /= static_cast<double>(inner);
    }
    for (int64_t i = 0; i < inner; ++i) var += (p[i] - mean) * (p[i] - mean);
    var /= static_cast<double>(inner);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < inner; ++i) p[i] = (p[i] - mean) * inv * scale[sz(i)] + (bias.empty() ? 0.0 : bias[sz(i)]);
    means[sz(o)] = mean;
    invs[sz(o)] = inv;
  }
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  store_f64(ctx, out, xv.data());
  if (!rms) {
    Shape stat_shape = x.shape();
    for (int64_t i = axis; i < rank; ++i) stat_shape[sz(i)] = 1;
    if (ctx.wants_output(1)) store_f64(ctx, ctx.make_output(1, sd, stat_shape), means.data());
    if (ctx.wants_output(2)) store_f64(ctx, ctx.make_output(2, sd, stat_shape), invs.data());
  }
}

void layer_norm_kernel(KernelContext& ctx) { layer_norm_impl(ctx, false); }
void rms_norm_kernel(KernelContext& ctx) { layer_norm_impl(ctx, true); }

void group_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "X");
  if (x.rank() < 2) ctx.fail_invalid("X must have rank >= 2");
  const int64_t G = ctx.require_int("num_groups");
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const int64_t N = x.dim(0), C = x.dim(1), S = prod(x.shape(), 2, x.shape().size());
  if (G < 1 || C % G != 0) ctx.fail_invalid("num_groups " + std::to_string(G) + " does not divide the channels " + std::to_string(C));
  // Opset 18: scale and bias have one value per group; opset 21: one per channel.
  const int64_t plen = ctx.opset >= 21 ? C : G;
  const Tensor& st = ctx.input(1);
  const Tensor& bt = ctx.input(2);
  if (st.numel() != plen || bt.numel() != plen)
    ctx.fail_invalid("scale and bias must have " + std::to_string(plen) + " values at opset " + std::to_string(ctx.opset));
  auto scale = load_f64(ctx, st);
  auto bias = load_f64(ctx, bt);
  const int64_t Cg = C / G, len = Cg * S;
  auto xv = load_f64(ctx, x);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      double* p = xv.data() + (n * C + g * Cg) * S;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < len; ++i) mean += p[i];
      mean /= static_cast<double>(len);
      for (int64_t i = 0; i < len; ++i) var += (p[i] - mean) * (p[i] - mean);
      var /= static_cast<double>(len);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t pi = plen == C ? g * Cg + i / S : g;
        p[i] = (p[i] - mean) * inv * scale[sz(pi)] + bias[sz(pi)];
      }
    }
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  store_f64(ctx, out, xv.data());
}

void lrn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "X");
  if (x.rank() < 3) ctx.fail_invalid("X must have rank >= 3");
  const int64_t size = ctx.require_int("size");
  if (size < 1) ctx.fail_invalid("size must be positive");
  const double alpha = ctx.attr_float("alpha", 1e-4f), beta = ctx.attr_float("beta", 0.75f), bias = ctx.attr_float("bias", 1.0f);
  const int64_t N = x.dim(0), C = x.dim(1), S = prod(x.shape(), 2, x.shape().size());
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;  // floor / ceil of (size-1)/2
  auto xv = load_f64(ctx, x);
  std::vector<double> y(xv.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        double sq = 0;
        for (int64_t j = std::max<int64_t>(0, c - lo); j <= std::min<int64_t>(C - 1, c + hi); ++j) {
          const double v = xv[sz((n * C + j) * S + s)];
          sq += v * v;
        }
        const size_t i = sz((n * C + c) * S + s);
        y[i] = xv[i] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  store_f64(ctx, out, y.data());
}

// For shape and reduced axes: number of groups, and for each linear index its group.
std::vector<int64_t> group_ids(const Shape& shape, const std::vector<bool>& reduced, int64_t& ngroups) {
  Shape kept = shape;
  for (size_t i = 0; i < shape.size(); ++i)
    if (reduced[i]) kept[i] = 1;
  ngroups = shape_numel(kept);
  return broadcast_index(kept, shape);
}

void lp_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "X");
  const int64_t rank = x.rank();
  if (rank < 1) ctx.fail_invalid("X must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank);
  const int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail_invalid("p must be 1 or 2");
  std::vector<bool> red(sz(rank), false);
  red[sz(axis)] = true;
  int64_t ng = 0;
  auto gid = group_ids(x.shape(), red, ng);
  auto xv = load_f64(ctx, x);
  std::vector<double> norm(sz(ng), 0.0);
  for (size_t i = 0; i < xv.size(); ++i) norm[sz(gid[i])] += p == 1 ? std::fabs(xv[i]) : xv[i] * xv[i];
  if (p == 2)
    for (double& v : norm) v = std::sqrt(v);
  for (size_t i = 0; i < xv.size(); ++i) {
    const double nv = norm[sz(gid[i])];
    xv[i] = nv == 0.0 ? 0.0 : xv[i] / nv;  // a zero vector stays zero (as ONNX Runtime and the test data)
  }
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  store_f64(ctx, out, xv.data());
}

void mvn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "X");
  const int64_t rank = x.rank();
  auto axes = ctx.attr_ints("axes", {0, 2, 3});
  std::vector<bool> red(sz(rank), false);
  for (int64_t a : axes) red[sz(normalize_axis(ctx, a, rank))] = true;
  int64_t ng = 0;
  auto gid = group_ids(x.shape(), red, ng);
  auto xv = load_f64(ctx, x);
  std::vector<double> mean(sz(ng), 0.0), sq(sz(ng), 0.0), cnt(sz(ng), 0.0);
  for (size_t i = 0; i < xv.size(); ++i) {
    mean[sz(gid[i])] += xv[i];
    sq[sz(gid[i])] += xv[i] * xv[i];
    cnt[sz(gid[i])] += 1;
  }
  for (size_t g = 0; g < mean.size(); ++g) {
    mean[g] /= cnt[g];
    sq[g] = std::sqrt(std::max(0.0, sq[g] / cnt[g] - mean[g] * mean[g]));
  }
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = (xv[i] - mean[sz(gid[i])]) / (sq[sz(gid[i])] + 1e-9);
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  store_f64(ctx, out, xv.data());
}

enum class SoftKind { Softmax, LogSoftmax, Hardmax };

void softmax_impl(KernelContext& ctx, SoftKind kind) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "input");
  const int64_t rank = x.rank();
  const bool legacy = ctx.opset < 13;
  int64_t outer, len, inner;
  if (rank == 0) {
    outer = len = inner = 1;
  } else {
    const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", legacy ? 1 : -1), rank);
    if (legacy) {  // coerced to 2-D [prod(:axis), prod(axis:)]
      outer = prod(x.shape(), 0, sz(axis));
      len = prod(x.shape(), sz(axis), sz(rank));
      inner = 1;
    } else {
      outer = prod(x.shape(), 0, sz(axis));
      len = x.dim(axis);
      inner = prod(x.shape(), sz(axis) + 1, sz(rank));
    }
  }
  auto xv = load_f64(ctx, x);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      double* p = xv.data() + o * len * inner + in;
      auto at = [&](int64_t i) -> double& { return p[i * inner]; };
      if (len == 0) continue;
      double mx = at(0);
      int64_t arg = 0;
      for (int64_t i = 1; i < len; ++i)
        if (at(i) > mx) {
          mx = at(i);
          arg = i;
        }
      if (kind == SoftKind::Hardmax) {
        for (int64_t i = 0; i < len; ++i) at(i) = i == arg ? 1.0 : 0.0;
        continue;
      }
      double sum = 0;
      for (int64_t i = 0; i < len; ++i) sum += std::exp(at(i) - mx);
      const double lse = std::log(sum);
      for (int64_t i = 0; i < len; ++i) {
        const double d = at(i) - mx;
        at(i) = kind == SoftKind::Softmax ? std::exp(d) / sum : d - lse;
      }
    }
  Tensor& out = ctx.make_output(0, x.dtype(), x.shape());
  store_f64(ctx, out, xv.data());
}

void softmax_kernel(KernelContext& ctx) { softmax_impl(ctx, SoftKind::Softmax); }
void log_softmax_kernel(KernelContext& ctx) { softmax_impl(ctx, SoftKind::LogSoftmax); }
void hardmax_kernel(KernelContext& ctx) { softmax_impl(ctx, SoftKind::Hardmax); }

}  // namespace

void add_norm_kernels(KernelTable& t) {
  t.add(OpKind::BatchNormalization, batch_norm_kernel);
  t.add(OpKind::InstanceNormalization, instance_norm_kernel);
  t.add(OpKind::LayerNormalization, layer_norm_kernel);
  t.add(OpKind::RMSNormalization, rms_norm_kernel);
  t.add(OpKind::GroupNormalization, group_norm_kernel);
  t.add(OpKind::LRN, lrn_kernel);
  t.add(OpKind::LpNormalization, lp_norm_kernel);
  t.add(OpKind::MeanVarianceNormalization, mvn_kernel);
  t.add(OpKind::Softmax, softmax_kernel);
  t.add(OpKind::LogSoftmax, log_softmax_kernel);
  t.add(OpKind::Hardmax, hardmax_kernel);
}

}  // namespace tac::ref::nn
