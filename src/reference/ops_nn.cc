// Reference kernels: convolution, pooling, normalisation, softmax.
// This file: the convolution and pooling families. Normalisation and softmax live in
// ops_nn_norm.cc, sampling ops (RoiAlign, GridSample, AffineGrid, DeformConv...) in
// ops_nn_sample.cc; all are registered from add_nn_kernels() below.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "reference/ops_nn_common.h"

namespace tac::ref {

namespace {

using ir::OpKind;
using nn::load_f64;
using nn::store_f64;

using nn::floor_div;
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// Spatial geometry of a convolution / pooling window, padded to 3 spatial dims: the real
// spatial dims are the last `nsp` of the 3 and the leading ones have size 1.
struct Geom {
  int nsp = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1};
  int64_t pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0}, out[3] = {1, 1, 1};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
  int off() const { return 3 - nsp; }
  Shape out_shape(int64_t n, int64_t c) const {
    Shape s{n, c};
    for (int i = off(); i < 3; ++i) s.push_back(out[i]);
    return s;
  }
};

int spatial_rank(const KernelContext& ctx, const Tensor& x) {
  if (x.rank() < 3) ctx.fail_invalid("input must have rank >= 3 (N, C, spatial...), got " + shape_to_string(x.shape()));
  if (x.rank() > 5) ctx.fail_unsupported("more than 3 spatial dimensions are not supported");
  return static_cast<int>(x.rank() - 2);
}

std::vector<int64_t> ints_or(const KernelContext& ctx, const char* name, size_t n, int64_t def) {
  auto v = ctx.attr_ints(name, std::vector<int64_t>(n, def));
  if (v.empty()) v.assign(n, def);
  if (v.size() != n) ctx.fail_invalid(std::string("attribute ") + name + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(n));
  return v;
}

// Reads strides / dilations / pads / auto_pad and computes the output size of a forward
// window op (Conv, pooling). `ceil_mode` only for pooling.
Geom make_geom(const KernelContext& ctx, const Shape& xshape, const std::vector<int64_t>& kernel, bool ceil_mode,
               bool use_dilations = true) {
  Geom g;
  g.nsp = static_cast<int>(xshape.size()) - 2;
  const size_t n = static_cast<size_t>(g.nsp);
  if (kernel.size() != n) ctx.fail_invalid("kernel has " + std::to_string(kernel.size()) + " spatial dims, input has " + std::to_string(n));
  auto strides = ints_or(ctx, "strides", n, 1);
  auto dil = use_dilations ? ints_or(ctx, "dilations", n, 1) : std::vector<int64_t>(n, 1);
  auto pads = ints_or(ctx, "pads", 2 * n, 0);
  std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    ctx.fail_invalid("unknown auto_pad '" + auto_pad + "'");
  for (size_t i = 0; i < n; ++i) {
    size_t j = i + static_cast<size_t>(g.off());
    g.in[j] = xshape[i + 2];
    g.k[j] = kernel[i];
    g.s[j] = strides[i];
    g.d[j] = dil[i];
    if (g.k[j] < 1) ctx.fail_invalid("kernel dims must be positive");
    if (g.s[j] < 1) ctx.fail_invalid("strides must be positive");
    if (g.d[j] < 1) ctx.fail_invalid("dilations must be positive");
    constexpr int64_t kBig = int64_t{1} << 30;  // keeps the size arithmetic below far from overflow
    if (g.k[j] > kBig || g.s[j] > kBig || g.d[j] > kBig || std::abs(pads[i]) > kBig || std::abs(pads[i + n]) > kBig)
      ctx.fail_invalid("kernel, strides, dilations or pads are absurdly large");
    const int64_t ek = (g.k[j] - 1) * g.d[j] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[j] = ceil_div(g.in[j], g.s[j]);
      int64_t total = std::max<int64_t>(0, (g.out[j] - 1) * g.s[j] + ek - g.in[j]);
      g.pb[j] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pe[j] = total - g.pb[j];
    } else {
      if (auto_pad == "NOTSET") {
        g.pb[j] = pads[i];
        g.pe[j] = pads[i + n];
        if (g.pb[j] < 0 || g.pe[j] < 0) ctx.fail_invalid("pads must be non-negative");
      }
      int64_t span = g.in[j] + g.pb[j] + g.pe[j] - ek;
      g.out[j] = (ceil_mode ? ceil_div(span, g.s[j]) : floor_div(span, g.s[j])) + 1;
      // The last window must start inside the input or the left padding.
      if (ceil_mode && g.out[j] > 0 && (g.out[j] - 1) * g.s[j] >= g.in[j] + g.pb[j]) --g.out[j];
    }
    if (g.out[j] < 0 || (g.out[j] == 0 && g.in[j] > 0))
      ctx.fail_invalid("window (effective size " + std::to_string(ek) + ") does not fit the padded input dim " + std::to_string(i));
  }
  return g;
}

// For kernel tap offset `t` (= k*d - pb) along a dim with stride s, input size in and
// output size out: the output range [lo, hi) whose input position o*s + t is in [0, in).
inline void tap_range(int64_t t, int64_t s, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = std::max<int64_t>(0, ceil_div(-t, s));
  hi = std::min<int64_t>(out, floor_div(in - 1 - t, s) + 1);
  if (hi < lo) hi = lo;
}

// y[n, m, out] = sum_{c in group(m), taps} w[m, c, taps] * x[n, c, in(out, tap)]  (no bias).
// x: N*C*in, w: M*(C/group)*k, y: N*M*out (overwritten).
// Each output plane (n, m) is computed by the same sequential loop whichever thread runs it, so
// spreading the planes over threads (large convolutions only) changes no result bit: it makes the
// reference of ResNet-50 at batch 32, which the tuner computes before every tune, take seconds
// instead of two minutes.
void conv_forward(const double* x, const double* w, int64_t N, int64_t C, int64_t M, int64_t group, const Geom& g,
                  double* y) {
  const int64_t Cg = C / group, Mg = M / group;
  const int64_t isz = g.in_size(), osz = g.out_size(), ksz = g.k_size();
  const int64_t work = N * M * osz * Cg * ksz;
#pragma omp parallel for collapse(2) schedule(static) if (N * M > 1 && work > (int64_t{1} << 22))
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      const int64_t grp = m / Mg;
      double* acc = y + (n * M + m) * osz;
      std::fill(acc, acc + osz, 0.0);
      for (int64_t cc = 0; cc < Cg; ++cc) {
        const double* xp = x + (n * C + grp * Cg + cc) * isz;
        const double* wp = w + (m * Cg + cc) * ksz;
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          const int64_t td = kd * g.d[0] - g.pb[0];
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t th = kh * g.d[1] - g.pb[1];
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const int64_t tw = kw * g.d[2] - g.pb[2];
              const double wv = wp[(kd * g.k[1] + kh) * g.k[2] + kw];
              int64_t wlo, whi;
              tap_range(tw, g.s[2], g.in[2], g.out[2], wlo, whi);
              for (int64_t od = 0; od < g.out[0]; ++od) {
                const int64_t id = od * g.s[0] + td;
                if (id < 0 || id >= g.in[0]) continue;
                for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                  const int64_t ih = oh * g.s[1] + th;
                  if (ih < 0 || ih >= g.in[1]) continue;
                  const double* xrow = xp + (id * g.in[1] + ih) * g.in[2] + tw;
                  double* arow = acc + (od * g.out[1] + oh) * g.out[2];
                  const int64_t sw = g.s[2];
                  if (sw == 1) {
                    for (int64_t ow = wlo; ow < whi; ++ow) arow[ow] += wv * xrow[ow];
                  } else {
                    for (int64_t ow = wlo; ow < whi; ++ow) arow[ow] += wv * xrow[ow * sw];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

struct ConvShapes {
  int64_t N, C, M, group;
  Geom g;
};

// Validates X / W shapes and attributes common to Conv, ConvInteger and QLinearConv.
ConvShapes conv_shapes(const KernelContext& ctx, const Tensor& x, const Tensor& w) {
  spatial_rank(ctx, x);
  if (w.rank() != x.rank()) ctx.fail_invalid("weight rank " + std::to_string(w.rank()) + " differs from input rank " + std::to_string(x.rank()));
  ConvShapes cs;
  cs.N = x.dim(0);
  cs.C = x.dim(1);
  cs.M = w.dim(0);
  cs.group = ctx.attr_int("group", 1);
  if (cs.group < 1) ctx.fail_invalid("group must be positive");
  if (cs.C % cs.group != 0 || w.dim(1) * cs.group != cs.C)
    ctx.fail_invalid("input channels " + std::to_string(cs.C) + " do not match weight " + shape_to_string(w.shape()) + " with group " + std::to_string(cs.group));
  if (cs.M % cs.group != 0) ctx.fail_invalid("output channels are not divisible by group");
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.has_attr("kernel_shape") && ctx.attr_ints("kernel_shape") != kernel)
    ctx.fail_invalid("kernel_shape attribute does not match the weight shape " + shape_to_string(w.shape()));
  cs.g = make_geom(ctx, x.shape(), kernel, false);
  return cs;
}

void conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  nn::require_float(ctx, x, "X");
  if (w.dtype() != x.dtype()) ctx.fail_invalid("X and W have different types");
  ConvShapes cs = conv_shapes(ctx, x, w);
  std::vector<double> y(static_cast<size_t>(cs.N * cs.M * cs.g.out_size()));
  auto xv = load_f64(ctx, x);
  auto wv = load_f64(ctx, w);
  conv_forward(xv.data(), wv.data(), cs.N, cs.C, cs.M, cs.group, cs.g, y.data());
  if (ctx.has_input(2)) {
    const Tensor& b = ctx.input(2);
    if (b.numel() != cs.M || b.rank() != 1) ctx.fail_invalid("bias must have shape [" + std::to_string(cs.M) + "]");
    auto bv = load_f64(ctx, b);
    const int64_t osz = cs.g.out_size();
    for (int64_t n = 0; n < cs.N; ++n)
      for (int64_t m = 0; m < cs.M; ++m)
        for (int64_t i = 0; i < osz; ++i) y[static_cast<size_t>((n * cs.M + m) * osz + i)] += bv[static_cast<size_t>(m)];
  }
  Tensor& out = ctx.make_output(0, x.dtype(), cs.g.out_shape(cs.N, cs.M));
  store_f64(ctx, out, y.data());
}

bool is_8bit(DType t) { return t == DType::int8 || t == DType::uint8; }

// Zero point (scalar or per-channel with `n` entries) as doubles of length n.
std::vector<double> zero_points(const KernelContext& ctx, size_t idx, int64_t n, DType expect, const char* what) {
  std::vector<double> z(static_cast<size_t>(n), 0.0);
  if (!ctx.has_input(idx)) return z;
  const Tensor& t = ctx.input(idx);
  if (t.dtype() != expect) ctx.fail_invalid(std::string(what) + " type differs from its data type");
  if (t.numel() == 1) z.assign(static_cast<size_t>(n), t.get_f64(0));
  else if (t.numel() == n && t.rank() == 1) z = load_f64(ctx, t);
  else ctx.fail_invalid(std::string(what) + " must be a scalar or have " + std::to_string(n) + " values");
  return z;
}

void conv_integer_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (!is_8bit(x.dtype()) || !is_8bit(w.dtype())) ctx.fail_invalid("ConvInteger needs int8/uint8 inputs");
  ConvShapes cs = conv_shapes(ctx, x, w);
  auto xz = zero_points(ctx, 2, 1, x.dtype(), "x_zero_point");
  if (ctx.has_input(2) && ctx.input(2).numel() != 1) ctx.fail_unsupported("per-channel x_zero_point");
  auto wz = zero_points(ctx, 3, cs.M, w.dtype(), "w_zero_point");
  auto xv = load_f64(ctx, x);
  auto wv = load_f64(ctx, w);
  for (double& v : xv) v -= xz[0];
  const int64_t per_m = w.numel() / std::max<int64_t>(cs.M, 1);
  for (int64_t m = 0; m < cs.M; ++m)
    for (int64_t i = 0; i < per_m; ++i) wv[static_cast<size_t>(m * per_m + i)] -= wz[static_cast<size_t>(m)];
  std::vector<double> y(static_cast<size_t>(cs.N * cs.M * cs.g.out_size()));
  conv_forward(xv.data(), wv.data(), cs.N, cs.C, cs.M, cs.group, cs.g, y.data());  // exact: integers < 2^53
  Tensor& out = ctx.make_output(0, DType::int32, cs.g.out_shape(cs.N, cs.M));
  store_f64(ctx, out, y.data());
}

double round_half_even(double v) { return std::nearbyint(v); }  // default FE_TONEAREST

void qlinear_conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  if (!is_8bit(x.dtype()) || !is_8bit(w.dtype())) ctx.fail_invalid("QLinearConv needs int8/uint8 x and w");
  ConvShapes cs = conv_shapes(ctx, x, w);
  const double xs = scalar_f64(ctx, ctx.input(1), "x_scale");
  auto xz = zero_points(ctx, 2, 1, x.dtype(), "x_zero_point");
  const Tensor& wst = ctx.input(4);
  std::vector<double> ws;
  if (wst.numel() == 1) ws.assign(static_cast<size_t>(cs.M), wst.get_f64(0));
  else if (wst.numel() == cs.M) ws = load_f64(ctx, wst);
  else ctx.fail_invalid("w_scale must be a scalar or have one value per output channel");
  auto wz = zero_points(ctx, 5, cs.M, w.dtype(), "w_zero_point");
  const double ys = scalar_f64(ctx, ctx.input(6), "y_scale");
  DType ydt = ctx.has_input(7) ? ctx.input(7).dtype() : x.dtype();
  if (!is_8bit(ydt)) ctx.fail_invalid("y_zero_point must be int8/uint8");
  const double yz = ctx.has_input(7) ? scalar_f64(ctx, ctx.input(7), "y_zero_point") : 0.0;
  auto xv = load_f64(ctx, x);
  auto wv = load_f64(ctx, w);
  for (double& v : xv) v -= xz[0];
  const int64_t per_m = w.numel() / std::max<int64_t>(cs.M, 1);
  for (int64_t m = 0; m < cs.M; ++m)
    for (int64_t i = 0; i < per_m; ++i) wv[static_cast<size_t>(m * per_m + i)] -= wz[static_cast<size_t>(m)];
  std::vector<double> y(static_cast<size_t>(cs.N * cs.M * cs.g.out_size()));
  conv_forward(xv.data(), wv.data(), cs.N, cs.C, cs.M, cs.group, cs.g, y.data());
  std::vector<double> bias(static_cast<size_t>(cs.M), 0.0);
  if (ctx.has_input(8)) {
    const Tensor& b = ctx.input(8);
    if (b.dtype() != DType::int32 || b.numel() != cs.M) ctx.fail_invalid("B must be int32 with one value per output channel");
    bias = load_f64(ctx, b);
  }
  const double lo = ydt == DType::uint8 ? 0.0 : -128.0, hi = ydt == DType::uint8 ? 255.0 : 127.0;
  const int64_t osz = cs.g.out_size();
  for (int64_t n = 0; n < cs.N; ++n)
    for (int64_t m = 0; m < cs.M; ++m) {
      const double scale = xs * ws[static_cast<size_t>(m)] / ys;
      for (int64_t i = 0; i < osz; ++i) {
        double& v = y[static_cast<size_t>((n * cs.M + m) * osz + i)];
        v = std::clamp(round_half_even((v + bias[static_cast<size_t>(m)]) * scale) + yz, lo, hi);
      }
    }
  Tensor& out = ctx.make_output(0, ydt, cs.g.out_shape(cs.N, cs.M));
  store_f64(ctx, out, y.data());
}

void conv_transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  nn::require_float(ctx, x, "X");
  if (w.dtype() != x.dtype()) ctx.fail_invalid("X and W have different types");
  const int nsp = spatial_rank(ctx, x);
  const size_t n = static_cast<size_t>(nsp);
  if (w.rank() != x.rank()) ctx.fail_invalid("weight rank differs from input rank");
  const int64_t N = x.dim(0), C = x.dim(1);
  const int64_t group = ctx.attr_int("group", 1);
  if (group < 1) ctx.fail_invalid("group must be positive");
  if (w.dim(0) != C || C % group != 0) ctx.fail_invalid("weight " + shape_to_string(w.shape()) + " does not match input channels " + std::to_string(C));
  const int64_t Mg = w.dim(1), M = Mg * group, Cg = C / group;
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.has_attr("kernel_shape") && ctx.attr_ints("kernel_shape") != kernel)
    ctx.fail_invalid("kernel_shape attribute does not match the weight shape");
  auto strides = ints_or(ctx, "strides", n, 1);
  auto dil = ints_or(ctx, "dilations", n, 1);
  auto opad = ints_or(ctx, "output_padding", n, 0);
  std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    ctx.fail_invalid("unknown auto_pad '" + auto_pad + "'");
  const bool explicit_pads = ctx.has_attr("pads") && auto_pad == "NOTSET";
  auto pads = ints_or(ctx, "pads", 2 * n, 0);
  std::vector<int64_t> out_shape_attr = ctx.attr_ints("output_shape");
  if (!out_shape_attr.empty() && out_shape_attr.size() == n + 2)
    out_shape_attr.erase(out_shape_attr.begin(), out_shape_attr.begin() + 2);
  if (!out_shape_attr.empty() && out_shape_attr.size() != n) ctx.fail_invalid("output_shape has the wrong length");
  Geom g;  // here: in = input spatial, out = output spatial
  g.nsp = nsp;
  for (size_t i = 0; i < n; ++i) {
    size_t j = i + static_cast<size_t>(g.off());
    g.in[j] = x.dim(static_cast<int64_t>(i) + 2);
    g.k[j] = kernel[i];
    g.s[j] = strides[i];
    g.d[j] = dil[i];
    if (g.k[j] < 1 || g.s[j] < 1 || g.d[j] < 1) ctx.fail_invalid("kernel, strides and dilations must be positive");
    constexpr int64_t kBig = int64_t{1} << 30;
    if (g.s[j] > kBig || g.d[j] > kBig || std::abs(pads[i]) > kBig || std::abs(pads[i + n]) > kBig || std::abs(opad[i]) > kBig)
      ctx.fail_invalid("strides, dilations or pads are absurdly large");
    if (opad[i] < 0) ctx.fail_invalid("output_padding must be non-negative");
    const int64_t full = g.s[j] * (g.in[j] - 1) + opad[i] + (g.k[j] - 1) * g.d[j] + 1;
    if (!explicit_pads && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER" || !out_shape_attr.empty())) {
      int64_t target = out_shape_attr.empty() ? g.in[j] * g.s[j] : out_shape_attr[i];
      int64_t total = full - target;
      int64_t half = floor_div(total, 2);
      if (auto_pad == "SAME_UPPER") {
        g.pb[j] = half;
        g.pe[j] = total - half;
      } else {
        g.pb[j] = total - half;
        g.pe[j] = half;
      }
      g.out[j] = target;
    } else {
      if (auto_pad == "NOTSET") {
        g.pb[j] = pads[i];
        g.pe[j] = pads[i + n];
      }
      g.out[j] = out_shape_attr.empty() ? full - g.pb[j] - g.pe[j] : out_shape_attr[i];
    }
    if (g.out[j] < 0) ctx.fail_invalid("ConvTranspose output size is negative");
  }
  auto xv = load_f64(ctx, x);
  auto wv = load_f64(ctx, w);
  const int64_t isz = g.in_size(), osz = g.out_size(), ksz = g.k_size();
  std::vector<double> y(static_cast<size_t>(N * M * osz), 0.0);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t grp = c / Cg;
      const double* xp = xv.data() + (b * C + c) * isz;
      for (int64_t mm = 0; mm < Mg; ++mm) {
        const int64_t m = grp * Mg + mm;
        double* yp = y.data() + (b * M + m) * osz;
        const double* wp = wv.data() + (c * Mg + mm) * ksz;
        for (int64_t kd = 0; kd < g.k[0]; ++kd)
          for (int64_t kh = 0; kh < g.k[1]; ++kh)
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const double wval = wp[(kd * g.k[1] + kh) * g.k[2] + kw];
              for (int64_t id = 0; id < g.in[0]; ++id) {
                const int64_t od = id * g.s[0] + kd * g.d[0] - g.pb[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (int64_t ih = 0; ih < g.in[1]; ++ih) {
                  const int64_t oh = ih * g.s[1] + kh * g.d[1] - g.pb[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  const double* xrow = xp + (id * g.in[1] + ih) * g.in[2];
                  double* yrow = yp + (od * g.out[1] + oh) * g.out[2];
                  for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                    const int64_t ow = iw * g.s[2] + kw * g.d[2] - g.pb[2];
                    if (ow >= 0 && ow < g.out[2]) yrow[ow] += wval * xrow[iw];
                  }
                }
              }
            }
      }
    }
  if (ctx.has_input(2)) {
    const Tensor& bt = ctx.input(2);
    if (bt.numel() != M) ctx.fail_invalid("bias must have " + std::to_string(M) + " values");
    auto bv = load_f64(ctx, bt);
    for (int64_t b = 0; b < N; ++b)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t i = 0; i < osz; ++i) y[static_cast<size_t>((b * M + m) * osz + i)] += bv[static_cast<size_t>(m)];
  }
  Tensor& out = ctx.make_output(0, x.dtype(), g.out_shape(N, M));
  store_f64(ctx, out, y.data());
}

// ---------------------------------------------------------------- pooling

enum class PoolKind { Max, Avg, Lp };

// LpPool / GlobalLpPool order: a float attribute in opset 1, an int from opset 2.
double lp_order(const KernelContext& ctx) {
  const double p = ctx.opset < 2 ? ctx.attr_float("p", 2.0f) : static_cast<double>(ctx.attr_int("p", 2));
  if (!(p > 0)) ctx.fail_invalid("p must be positive");
  return p;
}

void pool_kernel_impl(KernelContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  spatial_rank(ctx, x);
  if (kind != PoolKind::Max) nn::require_float(ctx, x, "X");
  if (!ctx.has_attr("kernel_shape")) ctx.fail_invalid("kernel_shape attribute is required");
  auto kernel = ctx.attr_ints("kernel_shape");
  const bool ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  Geom g = make_geom(ctx, x.shape(), kernel, ceil_mode);
  const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  const double p = lp_order(ctx);
  const int64_t storage_order = ctx.attr_int("storage_order", 0);
  const bool want_idx = kind == PoolKind::Max && ctx.wants_output(1);
  if (want_idx && g.nsp > 3) ctx.fail_unsupported("Indices output");
  const int64_t N = x.dim(0), C = x.dim(1), isz = g.in_size(), osz = g.out_size();
  auto xv = load_f64(ctx, x);
  std::vector<double> y(static_cast<size_t>(N * C * osz));
  std::vector<int64_t> idx(want_idx ? y.size() : 0);
  for (int64_t plane = 0; plane < N * C; ++plane) {
    const double* xp = xv.data() + plane * isz;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          double acc = kind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t best = -1, count = 0, count_pad = 0;
          for (int64_t kd = 0; kd < g.k[0]; ++kd) {
            const int64_t id = od * g.s[0] + kd * g.d[0] - g.pb[0];
            for (int64_t kh = 0; kh < g.k[1]; ++kh) {
              const int64_t ih = oh * g.s[1] + kh * g.d[1] - g.pb[1];
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t iw = ow * g.s[2] + kw * g.d[2] - g.pb[2];
                const bool inside_pad = id >= -g.pb[0] && id < g.in[0] + g.pe[0] && ih >= -g.pb[1] &&
                                        ih < g.in[1] + g.pe[1] && iw >= -g.pb[2] && iw < g.in[2] + g.pe[2];
                if (inside_pad) ++count_pad;
                if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
                const int64_t off = (id * g.in[1] + ih) * g.in[2] + iw;
                const double v = xp[off];
                ++count;
                if (kind == PoolKind::Max) {
                  if (best < 0 || v > acc) {
                    acc = v;
                    best = off;
                  }
                } else if (kind == PoolKind::Avg) {
                  acc += v;
                } else {
                  acc += std::pow(std::fabs(v), p);
                }
              }
            }
          }
          const int64_t o = plane * osz + (od * g.out[1] + oh) * g.out[2] + ow;
          if (kind == PoolKind::Avg) acc = acc / static_cast<double>(include_pad ? count_pad : count);
          else if (kind == PoolKind::Lp) acc = std::pow(acc, 1.0 / p);
          y[static_cast<size_t>(o)] = acc;
          if (want_idx) {
            int64_t flat = best;
            if (best >= 0 && storage_order == 1) {  // column-major over the spatial dims
              int64_t iw = best % g.in[2], ih = (best / g.in[2]) % g.in[1], id = best / (g.in[2] * g.in[1]);
              if (g.nsp == 2) flat = ih + iw * g.in[1];
              if (g.nsp == 1) flat = iw;
              if (g.nsp == 3) flat = id + ih * g.in[0] + iw * g.in[0] * g.in[1];
            }
            idx[static_cast<size_t>(o)] = best < 0 ? -1 : plane * isz + flat;
          }
        }
  }
  Tensor& out = ctx.make_output(0, x.dtype(), g.out_shape(N, C));
  store_f64(ctx, out, y.data());
  if (want_idx) {
    Tensor& it = ctx.make_output(1, DType::int64, g.out_shape(N, C));
    std::copy(idx.begin(), idx.end(), it.data<int64_t>());
  }
}

void max_pool_kernel(KernelContext& ctx) { pool_kernel_impl(ctx, PoolKind::Max); }
void average_pool_kernel(KernelContext& ctx) { pool_kernel_impl(ctx, PoolKind::Avg); }
void lp_pool_kernel(KernelContext& ctx) { pool_kernel_impl(ctx, PoolKind::Lp); }

void global_pool_impl(KernelContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) ctx.fail_invalid("input must have rank >= 3, got " + shape_to_string(x.shape()));
  if (kind != PoolKind::Max) nn::require_float(ctx, x, "X");
  const int64_t NC = x.dim(0) * x.dim(1), sz = nn::prod(x.shape(), 2, x.shape().size());
  const double p = lp_order(ctx);
  auto xv = load_f64(ctx, x);
  std::vector<double> y(static_cast<size_t>(NC));
  for (int64_t i = 0; i < NC; ++i) {
    const double* xp = xv.data() + i * sz;
    double acc = kind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t j = 0; j < sz; ++j) {
      if (kind == PoolKind::Max) acc = (xp[j] > acc || std::isnan(xp[j])) ? xp[j] : acc;
      else if (kind == PoolKind::Avg) acc += xp[j];
      else acc += std::pow(std::fabs(xp[j]), p);
    }
    if (kind == PoolKind::Avg) acc /= static_cast<double>(sz);
    if (kind == PoolKind::Lp) acc = std::pow(acc, 1.0 / p);
    y[static_cast<size_t>(i)] = acc;
  }
  Shape s = x.shape();
  for (size_t i = 2; i < s.size(); ++i) s[i] = 1;
  Tensor& out = ctx.make_output(0, x.dtype(), s);
  store_f64(ctx, out, y.data());
}

void global_max_pool_kernel(KernelContext& ctx) { global_pool_impl(ctx, PoolKind::Max); }
void global_average_pool_kernel(KernelContext& ctx) { global_pool_impl(ctx, PoolKind::Avg); }
void global_lp_pool_kernel(KernelContext& ctx) { global_pool_impl(ctx, PoolKind::Lp); }

void max_unpool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const int nsp = spatial_rank(ctx, x);
  const size_t n = static_cast<size_t>(nsp);
  if (ind.shape() != x.shape()) ctx.fail_invalid("I must have the shape of X");
  if (ind.dtype() != DType::int64) ctx.fail_invalid("I must be int64");
  auto kernel = ctx.attr_ints("kernel_shape");
  if (kernel.size() != n) ctx.fail_invalid("kernel_shape must have one value per spatial dim");
  auto strides = ints_or(ctx, "strides", n, 1);
  auto pads = ints_or(ctx, "pads", 2 * n, 0);
  // Indices address the inferred (default) output shape; an explicit output_shape only pads
  // that result at the end of each dim (as the ONNX reference does).
  Shape inferred{x.dim(0), x.dim(1)};
  for (size_t i = 0; i < n; ++i)
    inferred.push_back((x.dim(static_cast<int64_t>(i) + 2) - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n]);
  for (int64_t d : inferred)
    if (d < 0) ctx.fail_invalid("negative output dim");
  Shape oshape = inferred;
  if (ctx.has_input(2)) {
    oshape = to_int_vector(ctx.input(2));
    if (oshape.size() != inferred.size()) ctx.fail_invalid("output_shape must have the rank of X");
    for (size_t i = 0; i < oshape.size(); ++i)
      if (oshape[i] < inferred[i])
        ctx.fail_invalid("output_shape " + shape_to_string(oshape) + " is smaller than the unpooled shape " + shape_to_string(inferred));
  }
  const int64_t total = shape_numel(inferred);
  std::vector<int64_t> target(static_cast<size_t>(total));  // inferred linear index -> output linear index
  {
    auto ost = strides_of(oshape);
    for (int64_t k = 0; k < total; ++k) {
      int64_t rem = k, off = 0;
      for (size_t d = inferred.size(); d-- > 0;) {
        off += (rem % inferred[d]) * ost[d];
        rem /= inferred[d];
      }
      target[static_cast<size_t>(k)] = off;
    }
  }
  Tensor& out = ctx.make_output(0, x.dtype(), oshape);
  const int64_t* ip = ind.data<int64_t>();
  const size_t es = dtype_size(x.dtype());
  const std::byte* src = static_cast<const std::byte*>(x.raw());
  std::byte* dst = static_cast<std::byte*>(out.raw());
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (ip[i] < 0 || ip[i] >= total) ctx.fail_invalid("index " + std::to_string(ip[i]) + " in I is out of range");
    std::memcpy(dst + static_cast<size_t>(target[static_cast<size_t>(ip[i])]) * es, src + static_cast<size_t>(i) * es, es);
  }
}

void max_roi_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  nn::require_float(ctx, x, "X");
  if (x.rank() != 4) ctx.fail_invalid("X must be 4-D");
  if (rois.rank() != 2 || rois.dim(1) != 5) ctx.fail_invalid("rois must have shape [num_rois, 5]");
  auto pooled = ctx.attr_ints("pooled_shape");
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1) ctx.fail_invalid("pooled_shape must have 2 positive values");
  const double scale = ctx.attr_float("spatial_scale", 1.0f);
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0), PH = pooled[0], PW = pooled[1];
  auto xv = load_f64(ctx, x);
  auto rv = load_f64(ctx, rois);
  std::vector<double> y(static_cast<size_t>(R * C * PH * PW), 0.0);
  for (int64_t r = 0; r < R; ++r) {
    const double* roi = rv.data() + r * 5;
    if (!(roi[0] >= 0 && roi[0] < static_cast<double>(N))) ctx.fail_invalid("roi batch index out of range");
    const int64_t b = static_cast<int64_t>(roi[0]);
    if (b < 0 || b >= N) ctx.fail_invalid("roi batch index out of range");
    for (int k = 1; k < 5; ++k)
      if (!(std::fabs(roi[k] * scale) < 1e15)) ctx.fail_invalid("roi " + std::to_string(r) + " has non-finite or huge coordinates");
    const int64_t x1 = std::llround(roi[1] * scale), y1 = std::llround(roi[2] * scale);
    const int64_t x2 = std::llround(roi[3] * scale), y2 = std::llround(roi[4] * scale);
    const int64_t rh = std::max<int64_t>(y2 - y1 + 1, 1), rw = std::max<int64_t>(x2 - x1 + 1, 1);
    const double bh = static_cast<double>(rh) / static_cast<double>(PH), bw = static_cast<double>(rw) / static_cast<double>(PW);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t pw = 0; pw < PW; ++pw) {
          int64_t hs = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(ph) * bh)) + y1, 0, H);
          int64_t he = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<double>(ph + 1) * bh)) + y1, 0, H);
          int64_t ws = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(pw) * bw)) + x1, 0, W);
          int64_t we = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<double>(pw + 1) * bw)) + x1, 0, W);
          double m = (he <= hs || we <= ws) ? 0.0 : -std::numeric_limits<double>::infinity();
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) m = std::max(m, xv[static_cast<size_t>(((b * C + c) * H + h) * W + w)]);
          y[static_cast<size_t>(((r * C + c) * PH + ph) * PW + pw)] = m;
        }
  }
  Tensor& out = ctx.make_output(0, x.dtype(), {R, C, PH, PW});
  store_f64(ctx, out, y.data());
}

}  // namespace

void add_nn_kernels(KernelTable& t) {
  t.add(OpKind::Conv, conv_kernel);
  t.add(OpKind::ConvInteger, conv_integer_kernel);
  t.add(OpKind::QLinearConv, qlinear_conv_kernel);
  t.add(OpKind::ConvTranspose, conv_transpose_kernel);
  t.add(OpKind::MaxPool, max_pool_kernel);
  t.add(OpKind::AveragePool, average_pool_kernel);
  t.add(OpKind::LpPool, lp_pool_kernel);
  t.add(OpKind::GlobalMaxPool, global_max_pool_kernel);
  t.add(OpKind::GlobalAveragePool, global_average_pool_kernel);
  t.add(OpKind::GlobalLpPool, global_lp_pool_kernel);
  t.add(OpKind::MaxUnpool, max_unpool_kernel);
  t.add(OpKind::MaxRoiPool, max_roi_pool_kernel);
  nn::add_norm_kernels(t);
  nn::add_sample_kernels(t);
}

}  // namespace tac::ref
