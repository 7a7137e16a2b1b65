// Reference kernels: sampling ops of the NN family (RoiAlign, GridSample, AffineGrid,
// DeformConv, Col2Im, CausalConvWithState). Registered via add_nn_kernels().
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "reference/ops_nn_common.h"

namespace tac::ref::nn {

namespace {

using ir::OpKind;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

void roi_align_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& bidx = ctx.input(2);
  require_float(ctx, x, "X");
  if (x.rank() != 4) ctx.fail_invalid("X must be 4-D");
  if (rois.rank() != 2 || rois.dim(1) != 4) ctx.fail_invalid("rois must have shape [num_rois, 4]");
  if (bidx.rank() != 1 || bidx.dim(0) != rois.dim(0)) ctx.fail_invalid("batch_indices must have shape [num_rois]");
  const std::string ctm = ctx.attr_string("coordinate_transformation_mode", ctx.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel") ctx.fail_invalid("unknown coordinate_transformation_mode '" + ctm + "'");
  const std::string mode = ctx.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") ctx.fail_invalid("unknown mode '" + mode + "'");
  const int64_t PH = ctx.attr_int("output_height", 1), PW = ctx.attr_int("output_width", 1);
  if (PH < 1 || PW < 1) ctx.fail_invalid("output_height and output_width must be positive");
  const int64_t sampling = ctx.attr_int("sampling_ratio", 0);
  if (sampling < 0) ctx.fail_invalid("sampling_ratio must be non-negative");
  const double scale = ctx.attr_float("spatial_scale", 1.0f);
  const bool half_pixel = ctm == "half_pixel";
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), R = rois.dim(0);
  auto xv = load_f64(ctx, x);
  auto rv = load_f64(ctx, rois);
  auto bv = to_int_vector(bidx);
  std::vector<double> y(sz(R * C * PH * PW), 0.0);
  struct Tap {
    int64_t p[4];
    double w[4];
  };
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = bv[sz(r)];
    if (b < 0 || b >= N) ctx.fail_invalid("batch index " + std::to_string(b) + " is out of range");
    const double off = half_pixel ? 0.5 : 0.0;
    const double* roi = rv.data() + r * 4;
    const double sw = roi[0] * scale - off, sh = roi[1] * scale - off;
    double rw = roi[2] * scale - off - sw, rh = roi[3] * scale - off - sh;
    if (!half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    if (!std::isfinite(rh) || !std::isfinite(rw) || !std::isfinite(sh) || !std::isfinite(sw))
      ctx.fail_invalid("roi " + std::to_string(r) + " has non-finite coordinates");
    const double bh = rh / static_cast<double>(PH), bw = rw / static_cast<double>(PW);
    if (sampling == 0 && (rh / static_cast<double>(PH) > 1e5 || rw / static_cast<double>(PW) > 1e5))
      ctx.fail_unsupported("roi " + std::to_string(r) + " is too large for an adaptive sampling grid");
    const int64_t gh = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rh / static_cast<double>(PH)));
    const int64_t gw = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rw / static_cast<double>(PW)));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    // Bilinear taps for each (ph, pw, iy, ix), shared by all channels.
    std::vector<Tap> taps;
    taps.reserve(sz(std::max<int64_t>(PH * PW * gh * gw, 0)));
    for (int64_t ph = 0; ph < PH; ++ph)
      for (int64_t pw = 0; pw < PW; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy) {
          const double yy = sh + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
          for (int64_t ix = 0; ix < gw; ++ix) {
            double xx = sw + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
            double yc = yy;
            Tap t{{0, 0, 0, 0}, {0, 0, 0, 0}};
            if (yc < -1.0 || yc > static_cast<double>(H) || xx < -1.0 || xx > static_cast<double>(W)) {
              taps.push_back(t);
              continue;
            }
            yc = std::max(yc, 0.0);
            xx = std::max(xx, 0.0);
            int64_t yl = static_cast<int64_t>(yc), xl = static_cast<int64_t>(xx), yh, xh;
            if (yl >= H - 1) {
              yh = yl = H - 1;
              yc = static_cast<double>(yl);
            } else {
              yh = yl + 1;
            }
            if (xl >= W - 1) {
              xh = xl = W - 1;
              xx = static_cast<double>(xl);
            } else {
              xh = xl + 1;
            }
            const double ly = yc - static_cast<double>(yl), lx = xx - static_cast<double>(xl), hy = 1 - ly, hx = 1 - lx;
            t = {{yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh}, {hy * hx, hy * lx, ly * hx, ly * lx}};
            taps.push_back(t);
          }
        }
    for (int64_t c = 0; c < C; ++c) {
      const double* xp = xv.data() + (b * C + c) * H * W;
      size_t ti = 0;
      for (int64_t ph = 0; ph < PH; ++ph)
        for (int64_t pw = 0; pw < PW; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t s = 0; s < gh * gw; ++s, ++ti) {
            const Tap& t = taps[ti];
            if (mode == "avg") {
              for (int k = 0; k < 4; ++k) acc += t.w[k] * xp[t.p[k]];
            } else {
              double v = t.w[0] * xp[t.p[0]];
              for (int k = 1; k < 4; ++k) v = std::max(v, t.w[k] * xp[t.p[k]]);
              acc = first ? v : std::max(acc, v);
              first = false;
            }
          }
          if (mode == "avg") acc /= count;
          y[sz(((r * C + c) * PH + ph) * PW + pw)] = acc;
        }
    }
  }
  Tensor& out = ctx.make_output(0, x.dtype(), {R, C, PH, PW});
  store_f64(ctx, out, y.data());
}

// ---------------------------------------------------------------- GridSample

double gs_reflect(double x, double lo, double hi) {
  const double rng = hi - lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / rng);
    const double r = dx - static_cast<double>(n) * rng;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / rng);
    const double r = dx - static_cast<double>(n) * rng;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double c[4]) {
  const double A = -0.75;
  t = std::fabs(t);
  c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
}

void grid_sample_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  require_float(ctx, x, "X");
  require_float(ctx, grid, "grid");
  const int64_t nd = x.rank() - 2;
  if (nd < 1) ctx.fail_invalid("X must have rank >= 3");
  if (ctx.opset < 20 && nd != 2) ctx.fail_invalid("GridSample before opset 20 takes 4-D input");
  if (nd > 3) ctx.fail_unsupported("more than 3 spatial dimensions");
  if (grid.rank() != x.rank() || grid.dim(0) != x.dim(0) || grid.dim(grid.rank() - 1) != nd)
    ctx.fail_invalid("grid shape " + shape_to_string(grid.shape()) + " does not match X " + shape_to_string(x.shape()));
  std::string mode = ctx.attr_string("mode", ctx.opset >= 20 ? "linear" : "bilinear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  if (mode != "linear" && mode != "cubic" && mode != "nearest") ctx.fail_invalid("unknown mode '" + mode + "'");
  if (mode == "cubic" && nd != 2) ctx.fail_unsupported("cubic mode needs 2 spatial dims");
  const std::string pad = ctx.attr_string("padding_mode", "zeros");
  if (pad != "zeros" && pad != "border" && pad != "reflection") ctx.fail_invalid("unknown padding_mode '" + pad + "'");
  const bool ac = ctx.attr_int("align_corners", 0) != 0;
  const int64_t N = x.dim(0), C = x.dim(1);
  std::vector<int64_t> dims(sz(nd));
  for (int64_t i = 0; i < nd; ++i) dims[sz(i)] = x.dim(i + 2);
  const int64_t isz = prod(x.shape(), 2, x.shape().size());
  Shape oshape{N, C};
  for (int64_t i = 1; i < grid.rank() - 1; ++i) oshape.push_back(grid.dim(i));
  const int64_t osz = prod(oshape, 2, oshape.size());
  auto xv = load_f64(ctx, x);
  auto gv = load_f64(ctx, grid);
  std::vector<double> y(sz(N * C * osz), 0.0);
  std::vector<double> lo(sz(nd)), hi(sz(nd));
  for (int64_t i = 0; i < nd; ++i) {
    lo[sz(i)] = ac ? 0.0 : -0.5;
    hi[sz(i)] = ac ? static_cast<double>(dims[sz(i)]) - 1.0 : static_cast<double>(dims[sz(i)]) - 0.5;
  }
  // Maps an integer index along dim i to a valid one, or -1 (zero padding).
  auto fix_index = [&](int64_t idx, int64_t i) -> int64_t {
    const int64_t d = dims[sz(i)];
    if (idx >= 0 && idx < d) return idx;
    if (pad == "zeros") return -1;
    if (pad == "border") return std::clamp<int64_t>(idx, 0, d - 1);
    return std::clamp<int64_t>(static_cast<int64_t>(gs_reflect(static_cast<double>(idx), lo[sz(i)], hi[sz(i)])), 0, d - 1);
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < osz; ++o) {
      // Per dim (in X's order): up to 4 (index, weight) taps.
      int64_t idx[3][4];
      double wt[3][4];
      int ntap[3];
      bool nan_point = false;  // a NaN grid coordinate gives NaN
      for (int64_t i = 0; i < nd; ++i) {
        const double g = gv[sz((n * osz + o) * nd + (nd - 1 - i))];  // grid holds (x, y, z): reversed
        const int64_t d = dims[sz(i)];
        double c = ac ? (g + 1) / 2.0 * static_cast<double>(d - 1) : ((g + 1) * static_cast<double>(d) - 1) / 2.0;
        if (std::isnan(c)) {
          nan_point = true;
          c = 0;
        }
        c = std::clamp(c, -1e9, 1e9);  // far outside either way; keeps the integer casts defined
        if (mode == "nearest") c = std::nearbyint(c);
        if (c < lo[sz(i)] || c > hi[sz(i)]) {
          if (pad == "border") c = std::clamp(c, 0.0, static_cast<double>(d - 1));
          else if (pad == "reflection") c = gs_reflect(c, lo[sz(i)], hi[sz(i)]);
        }
        if (mode == "nearest") {
          ntap[i] = 1;
          idx[i][0] = fix_index(static_cast<int64_t>(c), i);
          wt[i][0] = 1.0;
        } else if (mode == "linear") {
          const double f = std::floor(c);
          const int64_t x0 = static_cast<int64_t>(f);
          ntap[i] = 2;
          idx[i][0] = fix_index(x0, i);
          idx[i][1] = fix_index(x0 + 1, i);
          wt[i][0] = 1 - (c - f);
          wt[i][1] = c - f;
        } else {
          const double f = std::floor(c);
          const int64_t x0 = static_cast<int64_t>(f);
          ntap[i] = 4;
          cubic_coeffs(c - f, wt[i]);
          for (int k = 0; k < 4; ++k) idx[i][k] = fix_index(x0 - 1 + k, i);
        }
      }
      for (int64_t i = nd; i < 3; ++i) {
        ntap[i] = 1;
        idx[i][0] = 0;
        wt[i][0] = 1.0;
      }
      for (int64_t c = 0; c < C; ++c) {
        const double* xp = xv.data() + (n * C + c) * isz;
        double acc = 0;
        for (int a = 0; a < ntap[0]; ++a)
          for (int b = 0; b < ntap[1]; ++b)
            for (int e = 0; e < ntap[2]; ++e) {
              if (idx[0][a] < 0 || idx[1][b] < 0 || idx[2][e] < 0) continue;
              int64_t off = idx[0][a];
              if (nd >= 2) off = off * dims[1] + idx[1][b];
              if (nd >= 3) off = off * dims[2] + idx[2][e];
              acc += wt[0][a] * wt[1][b] * wt[2][e] * xp[off];
            }
        y[sz((n * C + c) * osz + o)] = nan_point ? std::numeric_limits<double>::quiet_NaN() : acc;
      }
    }
  Tensor& out = ctx.make_output(0, x.dtype(), oshape);
  store_f64(ctx, out, y.data());
}

void affine_grid_kernel(KernelContext& ctx) {
  const Tensor& theta = ctx.input(0);
  require_float(ctx, theta, "theta");
  auto size = to_int_vector(ctx.input(1));
  const bool ac = ctx.attr_int("align_corners", 0) != 0;
  if (size.size() != 4 && size.size() != 5) ctx.fail_invalid("size must have 4 or 5 values");
  const int64_t nd = static_cast<int64_t>(size.size()) - 2;
  const int64_t N = size[0];
  if (theta.rank() != 3 || theta.dim(0) != N || theta.dim(1) != nd || theta.dim(2) != nd + 1)
    ctx.fail_invalid("theta shape " + shape_to_string(theta.shape()) + " does not match size");
  for (int64_t d : size)
    if (d < 1) ctx.fail_invalid("size values must be positive");
  // Spatial dims in X order (D,) H, W; base coordinates are (x, y[, z]) = reversed.
  std::vector<int64_t> dims(size.begin() + 2, size.end());
  auto base = [&](int64_t i, int64_t len) {
    if (ac) return len == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1);
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len) - 1.0;
  };
  auto tv = load_f64(ctx, theta);
  Shape oshape{N};
  for (int64_t d : dims) oshape.push_back(d);
  oshape.push_back(nd);
  const int64_t pts = prod(oshape, 1, oshape.size() - 1);
  std::vector<double> y(sz(N * pts * nd));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < pts; ++p) {
      double hom[4];  // x, y, (z,) 1
      int64_t rem = p;
      for (int64_t i = nd - 1; i >= 0; --i) {  // dims[i]: innermost is W -> coordinate x (hom[0])
        const int64_t len = dims[sz(i)];
        hom[nd - 1 - i] = base(rem % len, len);
        rem /= len;
      }
      hom[nd] = 1.0;
      for (int64_t r = 0; r < nd; ++r) {
        double acc = 0;
        for (int64_t k = 0; k <= nd; ++k) acc += tv[sz((n * nd + r) * (nd + 1) + k)] * hom[k];
        y[sz((n * pts + p) * nd + r)] = acc;
      }
    }
  Tensor& out = ctx.make_output(0, theta.dtype(), oshape);
  store_f64(ctx, out, y.data());
}

// ---------------------------------------------------------------- DeformConv

void deform_conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  require_float(ctx, x, "X");
  if (x.rank() != 4) ctx.fail_unsupported("DeformConv is only supported for 2-D images");
  if (w.rank() != 4) ctx.fail_invalid("W must be 4-D");
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), Wd = x.dim(3), M = w.dim(0), KH = w.dim(2), KW = w.dim(3);
  const int64_t group = ctx.attr_int("group", 1), og = ctx.attr_int("offset_group", 1);
  if (group < 1 || og < 1) ctx.fail_invalid("group and offset_group must be positive");
  if (w.dim(1) * group != C || M % group != 0) ctx.fail_invalid("W " + shape_to_string(w.shape()) + " does not match input channels with group");
  if (C % og != 0) ctx.fail_invalid("input channels must be divisible by offset_group");
  if (ctx.has_attr("kernel_shape") && ctx.attr_ints("kernel_shape") != std::vector<int64_t>{KH, KW})
    ctx.fail_invalid("kernel_shape does not match W");
  auto strides = ctx.attr_ints("strides", {1, 1});
  auto dil = ctx.attr_ints("dilations", {1, 1});
  auto pads = ctx.attr_ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4) ctx.fail_invalid("strides/dilations/pads have the wrong length");
  if (strides[0] < 1 || strides[1] < 1 || dil[0] < 1 || dil[1] < 1) ctx.fail_invalid("strides and dilations must be positive");
  const int64_t OH = floor_div(H + pads[0] + pads[2] - ((KH - 1) * dil[0] + 1), strides[0]) + 1;
  const int64_t OW = floor_div(Wd + pads[1] + pads[3] - ((KW - 1) * dil[1] + 1), strides[1]) + 1;
  if (OH < 0 || OW < 0) ctx.fail_invalid("kernel does not fit the padded input");
  if (offset.shape() != Shape{N, og * KH * KW * 2, OH, OW})
    ctx.fail_invalid("offset shape " + shape_to_string(offset.shape()) + " is inconsistent with the output size and offset_group");
  auto xv = load_f64(ctx, x);
  auto wv = load_f64(ctx, w);
  auto ov = load_f64(ctx, offset);
  std::vector<double> mv;
  if (ctx.has_input(4)) {
    const Tensor& mask = ctx.input(4);
    if (mask.shape() != Shape{N, og * KH * KW, OH, OW}) ctx.fail_invalid("mask shape is inconsistent");
    mv = load_f64(ctx, mask);
  }
  std::vector<double> bias(sz(M), 0.0);
  if (ctx.has_input(3)) {
    if (ctx.input(3).numel() != M) ctx.fail_invalid("B must have one value per output channel");
    bias = load_f64(ctx, ctx.input(3));
  }
  const int64_t Cg = C / group, Mg = M / group, Cog = C / og, osz = OH * OW;
  // Bilinear sample with zeros outside the image.
  auto sample = [&](const double* plane, double h, double wc) {
    if (!(h > -1.0 && h < static_cast<double>(H) && wc > -1.0 && wc < static_cast<double>(Wd))) return 0.0;
    const double fh = std::floor(h), fw = std::floor(wc);
    const int64_t h0 = static_cast<int64_t>(fh), w0 = static_cast<int64_t>(fw);
    const double lh = h - fh, lw = wc - fw;
    double v = 0;
    auto at = [&](int64_t hh, int64_t ww, double wt) {
      if (hh >= 0 && hh < H && ww >= 0 && ww < Wd) v += wt * plane[hh * Wd + ww];
    };
    at(h0, w0, (1 - lh) * (1 - lw));
    at(h0, w0 + 1, (1 - lh) * lw);
    at(h0 + 1, w0, lh * (1 - lw));
    at(h0 + 1, w0 + 1, lh * lw);
    return v;
  };
  std::vector<double> y(sz(N * M * osz), 0.0);
  std::vector<double> col(sz(KH * KW * osz));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / Cg, o = c / Cog;
      const double* plane = xv.data() + (n * C + c) * H * Wd;
      // Sampled (and masked) values for every tap and output position of this channel.
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              const int64_t tap = kh * KW + kw;
              const size_t obase = sz(((n * og + o) * KH * KW + tap) * 2 * osz + oh * OW + ow);
              const double dh = ov[obase], dw = ov[obase + sz(osz)];
              const double h = static_cast<double>(oh * strides[0] - pads[0] + kh * dil[0]) + dh;
              const double wc = static_cast<double>(ow * strides[1] - pads[1] + kw * dil[1]) + dw;
              double v = sample(plane, h, wc);
              if (!mv.empty()) v *= mv[sz(((n * og + o) * KH * KW + tap) * osz + oh * OW + ow)];
              col[sz(tap * osz + oh * OW + ow)] = v;
            }
      for (int64_t mm = 0; mm < Mg; ++mm) {
        const int64_t m = g * Mg + mm;
        double* yp = y.data() + (n * M + m) * osz;
        const double* wp = wv.data() + (m * Cg + c % Cg) * KH * KW;
        for (int64_t tap = 0; tap < KH * KW; ++tap)
          for (int64_t i = 0; i < osz; ++i) yp[i] += wp[tap] * col[sz(tap * osz + i)];
      }
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < osz; ++i) y[sz((n * M + m) * osz + i)] += bias[sz(m)];
  Tensor& out = ctx.make_output(0, x.dtype(), {N, M, OH, OW});
  store_f64(ctx, out, y.data());
}

// ---------------------------------------------------------------- Col2Im

void col2im_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto image = to_int_vector(ctx.input(1));
  auto block = to_int_vector(ctx.input(2));
  const size_t n = image.size();
  if (n < 1 || block.size() != n) ctx.fail_invalid("image_shape and block_shape must have the same, positive length");
  if (x.rank() != 3) ctx.fail_invalid("input must be 3-D [N, C*prod(block), L]");
  auto strides = ctx.attr_ints("strides", std::vector<int64_t>(n, 1));
  auto dil = ctx.attr_ints("dilations", std::vector<int64_t>(n, 1));
  auto pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (strides.size() != n || dil.size() != n || pads.size() != 2 * n) ctx.fail_invalid("strides/dilations/pads have the wrong length");
  int64_t ksz = 1, L = 1, isz = 1;
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (block[i] < 1 || strides[i] < 1 || dil[i] < 1 || image[i] < 0) ctx.fail_invalid("block, strides and dilations must be positive");
    out[i] = floor_div(image[i] + pads[i] + pads[i + n] - ((block[i] - 1) * dil[i] + 1), strides[i]) + 1;
    if (out[i] < 0) ctx.fail_invalid("block does not fit the padded image");
    ksz *= block[i];
    L *= out[i];
    isz *= image[i];
  }
  const int64_t N = x.dim(0);
  if (x.dim(1) % ksz != 0) ctx.fail_invalid("input dim 1 is not divisible by prod(block_shape)");
  const int64_t C = x.dim(1) / ksz;
  if (x.dim(2) != L) ctx.fail_invalid("input dim 2 is " + std::to_string(x.dim(2)) + ", expected " + std::to_string(L) + " block positions");
  auto xv = load_f64(ctx, x);
  std::vector<double> y(sz(N * C * isz), 0.0);
  std::vector<int64_t> kpos(n), lpos(n);
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < ksz; ++k) {
        int64_t rem = k;
        for (size_t i = n; i-- > 0;) {
          kpos[i] = rem % block[i];
          rem /= block[i];
        }
        for (int64_t l = 0; l < L; ++l) {
          int64_t r2 = l, off = 0;
          bool inside = true;
          for (size_t i = n; i-- > 0;) {
            lpos[i] = r2 % out[i];
            r2 /= out[i];
          }
          for (size_t i = 0; i < n; ++i) {
            const int64_t p = lpos[i] * strides[i] - pads[i] + kpos[i] * dil[i];
            if (p < 0 || p >= image[i]) {
              inside = false;
              break;
            }
            off = off * image[i] + p;
          }
          if (inside) y[sz((b * C + c) * isz + off)] += xv[sz(((b * C + c) * ksz + k) * L + l)];
        }
      }
  Shape oshape{N, C};
  for (int64_t d : image) oshape.push_back(d);
  Tensor& o = ctx.make_output(0, x.dtype(), oshape);
  store_f64(ctx, o, y.data());
}

// ---------------------------------------------------------------- CausalConvWithState

// Depthwise causal 1-D conv over concat(past_state or zeros, input) along time; present_state
// is the last K-1 steps of that concatenation. Optional SiLU ("silu" / "swish").
void causal_conv_with_state_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  require_float(ctx, x, "input");
  if (w.dtype() != x.dtype()) ctx.fail_invalid("input and weight have different types");
  if (x.rank() != 3) ctx.fail_unsupported("only 3-D input [N, C, L] is supported");
  const int64_t N = x.dim(0), C = x.dim(1), L = x.dim(2);
  if (w.rank() != 3 || w.dim(0) != C || w.dim(1) != 1) ctx.fail_invalid("weight must have shape [C, 1, K]");
  const int64_t K = w.dim(2);
  if (K < 1) ctx.fail_invalid("kernel size must be positive");
  const std::string act = ctx.attr_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") ctx.fail_unsupported("activation '" + act + "'");
  auto xv = load_f64(ctx, x);
  auto wv = load_f64(ctx, w);
  std::vector<double> bias(sz(C), 0.0);
  if (ctx.has_input(2)) {
    if (ctx.input(2).numel() != C) ctx.fail_invalid("bias must have C values");
    bias = load_f64(ctx, ctx.input(2));
  }
  const int64_t S = K - 1, P = S + L;
  std::vector<double> padded(sz(N * C * P), 0.0);
  if (ctx.has_input(3)) {
    const Tensor& ps = ctx.input(3);
    if (ps.shape() != Shape{N, C, S}) ctx.fail_invalid("past_state must have shape " + shape_to_string({N, C, S}));
    auto pv = load_f64(ctx, ps);
    for (int64_t i = 0; i < N * C; ++i)
      for (int64_t t = 0; t < S; ++t) padded[sz(i * P + t)] = pv[sz(i * S + t)];
  }
  for (int64_t i = 0; i < N * C; ++i)
    for (int64_t t = 0; t < L; ++t) padded[sz(i * P + S + t)] = xv[sz(i * L + t)];
  std::vector<double> y(sz(N * C * L));
  for (int64_t i = 0; i < N * C; ++i) {
    const int64_t c = i % C;
    for (int64_t t = 0; t < L; ++t) {
      double acc = bias[sz(c)];
      for (int64_t k = 0; k < K; ++k) acc += wv[sz(c * K + k)] * padded[sz(i * P + t + k)];
      y[sz(i * L + t)] = acc;
    }
  }
  Tensor& out = ctx.make_output(0, x.dtype(), {N, C, L});
  store_f64(ctx, out, y.data());
  if (act != "none") {  // SiLU of the conv result rounded to the output type
    auto r = load_f64(ctx, out);
    for (double& v : r) v = v / (1.0 + std::exp(-v));
    store_f64(ctx, out, r.data());
  }
  if (ctx.wants_output(1)) {
    std::vector<double> st(sz(N * C * S));
    for (int64_t i = 0; i < N * C; ++i)
      for (int64_t t = 0; t < S; ++t) st[sz(i * S + t)] = padded[sz(i * P + L + t)];
    store_f64(ctx, ctx.make_output(1, x.dtype(), {N, C, S}), st.data());
  }
}

}  // namespace

void add_sample_kernels(KernelTable& t) {
  t.add(OpKind::RoiAlign, roi_align_kernel);
  t.add(OpKind::GridSample, grid_sample_kernel);
  t.add(OpKind::AffineGrid, affine_grid_kernel);
  t.add(OpKind::DeformConv, deform_conv_kernel);
  t.add(OpKind::Col2Im, col2im_kernel);
  t.add(OpKind::CausalConvWithState, causal_conv_with_state_kernel);
}

}  // namespace tac::ref::nn
