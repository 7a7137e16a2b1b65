// Reference kernels: signal ops. HannWindow, HammingWindow, BlackmanWindow, DFT, STFT,
// MelWeightMatrix. Registered through add_reduce_kernels() (ops_reduce.cc).
#include <cmath>
#include <numbers>

#include "reference/helpers.h"

namespace tac::ref {

void add_reduce_signal_kernels(KernelTable& t);

namespace {

using ir::OpKind;

constexpr double kPi = std::numbers::pi;

// The dtype named by an `output_datatype` attribute (default float), checked.
DType output_datatype(const KernelContext& ctx) {
  const int64_t code = ctx.attr_int("output_datatype", 1);
  if (code < 0 || code > 1000 || !dtype_supported(static_cast<int32_t>(code)))
    ctx.fail_unsupported("output_datatype " + dtype_name(static_cast<int32_t>(code)) + " is not supported");
  DType dt = static_cast<DType>(code);
  if (dt == DType::boolean) ctx.fail_invalid("output_datatype must be numeric");
  return dt;
}

// ---------------------------------------------------------------------------------------------
// Windows: w[n] = sum_k a_k cos(2 pi k n / N), N = size (periodic) or size - 1 (symmetric).
// ---------------------------------------------------------------------------------------------

enum class Window { Hann, Hamming, Blackman };

template <Window w>
void window_kernel(KernelContext& ctx) {
  const Tensor& st = ctx.input(0);
  if (st.dtype() != DType::int32 && st.dtype() != DType::int64) ctx.fail_invalid("size must be int32 or int64");
  const int64_t size = scalar_i64(ctx, st, "size");
  if (size < 0) ctx.fail_invalid("size must be non-negative, got " + std::to_string(size));
  const bool periodic = ctx.attr_int("periodic", 1) != 0;
  Tensor& out = ctx.make_output(0, output_datatype(ctx), {size});
  const double N = periodic ? static_cast<double>(size) : static_cast<double>(size - 1);
  for (int64_t n = 0; n < size; ++n) {
    // A symmetric window of length 1 (N = 0) is the single value 1.
    const double t = N > 0 ? 2 * kPi * static_cast<double>(n) / N : 0.0;
    double v;
    if constexpr (w == Window::Hann) v = 0.5 - 0.5 * std::cos(t);
    else if constexpr (w == Window::Hamming) v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(t);
    else v = 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2 * t);
    out.set_f64(n, v);
  }
}

// ---------------------------------------------------------------------------------------------
// DFT core: one complex line at a time, direct O(n^2) sums in double with exact twiddles.
// ---------------------------------------------------------------------------------------------

struct Twiddles {
  std::vector<double> c, s;  // cos / sin of 2 pi t / n, t in [0, n)
  static constexpr int64_t kMaxLength = int64_t{1} << 22;  // direct DFT: larger is impractical
  explicit Twiddles(int64_t n) : c(static_cast<size_t>(n)), s(static_cast<size_t>(n)) {
    for (int64_t t = 0; t < n; ++t) {
      double a = 2 * kPi * static_cast<double>(t) / static_cast<double>(n);
      c[static_cast<size_t>(t)] = std::cos(a);
      s[static_cast<size_t>(t)] = std::sin(a);
    }
  }
};

// out[k] = sum_j in[j] e^{-+2 pi i jk/n} for k < n_out (forward: minus; inverse: plus, and / n).
// in has n complex values (re, im interleaved); out has n_out.
void dft_line(const Twiddles& tw, const std::vector<double>& in, int64_t n, int64_t n_out, bool inverse,
              std::vector<double>& out) {
  out.assign(static_cast<size_t>(2 * n_out), 0.0);
  for (int64_t k = 0; k < n_out; ++k) {
    double re = 0, im = 0;
    for (int64_t j = 0; j < n; ++j) {
      size_t t = static_cast<size_t>((j * k) % n);
      double c = tw.c[t], s = inverse ? tw.s[t] : -tw.s[t];
      double xr = in[static_cast<size_t>(2 * j)], xi = in[static_cast<size_t>(2 * j + 1)];
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    if (inverse) {
      re /= static_cast<double>(n);
      im /= static_cast<double>(n);
    }
    out[static_cast<size_t>(2 * k)] = re;
    out[static_cast<size_t>(2 * k + 1)] = im;
  }
}

void check_signal(const KernelContext& ctx, const Tensor& x, const char* what) {
  if (!dtype_is_float(x.dtype())) ctx.fail_invalid(std::string(what) + " must be a float tensor");
  if (x.rank() < 2 || (x.shape().back() != 1 && x.shape().back() != 2))
    ctx.fail_invalid(std::string(what) + " must end in a dimension of 1 (real) or 2 (complex), got " +
                     shape_to_string(x.shape()));
}

void dft_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_signal(ctx, x, "input");
  const int64_t r = x.rank();
  const int64_t comps = x.shape().back();
  int64_t axis;
  if (ctx.opset < 20) {
    axis = ctx.attr_int("axis", 1);
  } else {
    axis = -2;
    if (ctx.has_input(2)) axis = scalar_i64(ctx, ctx.input(2), "axis");
  }
  if (axis < -r || axis > r - 2 || axis == -1)
    ctx.fail_invalid("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  const bool inverse = ctx.attr_int("inverse", 0) != 0;
  const bool onesided = ctx.attr_int("onesided", 0) != 0;
  const int64_t m = x.dim(axis);  // input length along the axis
  int64_t n;                      // transform length
  if (ctx.has_input(1)) {
    n = scalar_i64(ctx, ctx.input(1), "dft_length");
    if (n < 1) ctx.fail_invalid("dft_length must be positive, got " + std::to_string(n));
  } else {
    n = inverse && onesided ? 2 * (m - 1) : m;
    if (n < 1) ctx.fail_invalid("the DFT length along axis " + std::to_string(axis) + " is not positive");
  }
  // Forward onesided (RFFT): n/2+1 complex outputs. Inverse onesided (IRFFT): the input holds the
  // first n/2+1 bins of a Hermitian spectrum; the output is n real values.
  const bool irfft = inverse && onesided;
  const int64_t n_out = onesided && !inverse ? n / 2 + 1 : n;
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(axis)] = n_out;
  out_shape.back() = irfft ? 1 : 2;
  Tensor& out = ctx.make_output(0, x.dtype(), out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < r - 1; ++d) inner *= x.dim(d);
  const int64_t oc = out_shape.back();
  if (n > Twiddles::kMaxLength) ctx.fail_unsupported("DFT length " + std::to_string(n) + " is too large");
  Twiddles tw(n);
  std::vector<double> line(static_cast<size_t>(2 * n)), res;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::fill(line.begin(), line.end(), 0.0);
      auto in_at = [&](int64_t j, int64_t comp) {
        return comp < comps ? x.get_f64(((o * m + j) * inner + i) * comps + comp) : 0.0;
      };
      if (irfft) {
        const int64_t used = std::min(m, n / 2 + 1);
        for (int64_t k = 0; k <= n / 2; ++k) {
          double re = k < used ? in_at(k, 0) : 0.0, im = k < used ? in_at(k, 1) : 0.0;
          line[static_cast<size_t>(2 * k)] = re;
          line[static_cast<size_t>(2 * k + 1)] = im;
          if (k > 0 && n - k > n / 2) {  // Hermitian extension X[n-k] = conj(X[k])
            line[static_cast<size_t>(2 * (n - k))] = re;
            line[static_cast<size_t>(2 * (n - k) + 1)] = -im;
          }
        }
      } else {
        for (int64_t j = 0; j < std::min(m, n); ++j) {
          line[static_cast<size_t>(2 * j)] = in_at(j, 0);
          line[static_cast<size_t>(2 * j + 1)] = in_at(j, 1);
        }
      }
      dft_line(tw, line, n, n_out, inverse, res);
      for (int64_t k = 0; k < n_out; ++k)
        for (int64_t comp = 0; comp < oc; ++comp)
          out.set_f64(((o * n_out + k) * inner + i) * oc + comp, res[static_cast<size_t>(2 * k + comp)]);
    }
}

// ---------------------------------------------------------------------------------------------
// STFT
// ---------------------------------------------------------------------------------------------

void stft_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_signal(ctx, x, "signal");
  if (x.rank() != 3) ctx.fail_invalid("signal must have shape [batch, length, 1 or 2]");
  const int64_t batch = x.dim(0), len = x.dim(1), comps = x.dim(2);
  const int64_t step = scalar_i64(ctx, ctx.input(1), "frame_step");
  if (step < 1) ctx.fail_invalid("frame_step must be positive");
  const Tensor* window = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (window && window->rank() != 1) ctx.fail_invalid("window must be 1-D");
  int64_t fl;
  if (ctx.has_input(3)) {
    fl = scalar_i64(ctx, ctx.input(3), "frame_length");
    if (window && window->dim(0) != fl)
      ctx.fail_invalid("window length " + std::to_string(window->dim(0)) + " differs from frame_length " +
                       std::to_string(fl));
  } else if (window) {
    fl = window->dim(0);
  } else {
    ctx.fail_invalid("either window or frame_length must be given");
  }
  if (fl < 1 || fl > len)
    ctx.fail_invalid("frame length " + std::to_string(fl) + " is out of range for signal length " + std::to_string(len));
  const bool onesided = ctx.attr_int("onesided", 1) != 0;
  const int64_t frames = 1 + (len - fl) / step;
  const int64_t bins = onesided ? fl / 2 + 1 : fl;
  Tensor& out = ctx.make_output(0, x.dtype(), {batch, frames, bins, 2});
  std::vector<double> w(static_cast<size_t>(fl), 1.0);
  if (window) w = to_double_vector(*window);
  if (fl > Twiddles::kMaxLength) ctx.fail_unsupported("frame length " + std::to_string(fl) + " is too large");
  Twiddles tw(fl);
  std::vector<double> line(static_cast<size_t>(2 * fl)), res;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < fl; ++j) {
        int64_t off = (b * len + f * step + j) * comps;
        line[static_cast<size_t>(2 * j)] = x.get_f64(off) * w[static_cast<size_t>(j)];
        line[static_cast<size_t>(2 * j + 1)] = comps == 2 ? x.get_f64(off + 1) * w[static_cast<size_t>(j)] : 0.0;
      }
      dft_line(tw, line, fl, bins, false, res);
      for (int64_t k = 0; k < 2 * bins; ++k) out.set_f64((b * frames + f) * bins * 2 + k, res[static_cast<size_t>(k)]);
    }
}

// ---------------------------------------------------------------------------------------------
// MelWeightMatrix (triangular filters on the mel scale, bins as the ONNX reference places them)
// ---------------------------------------------------------------------------------------------

void mel_weight_matrix_kernel(KernelContext& ctx) {
  const int64_t num_mel = scalar_i64(ctx, ctx.input(0), "num_mel_bins");
  const int64_t dft_length = scalar_i64(ctx, ctx.input(1), "dft_length");
  const int64_t sample_rate = scalar_i64(ctx, ctx.input(2), "sample_rate");
  const double lower = scalar_f64(ctx, ctx.input(3), "lower_edge_hertz");
  const double upper = scalar_f64(ctx, ctx.input(4), "upper_edge_hertz");
  if (num_mel < 1) ctx.fail_invalid("num_mel_bins must be positive");
  if (dft_length < 1) ctx.fail_invalid("dft_length must be positive");
  if (sample_rate < 1) ctx.fail_invalid("sample_rate must be positive");
  if (!(lower >= 0 && upper >= lower)) ctx.fail_invalid("need 0 <= lower_edge_hertz <= upper_edge_hertz");
  const int64_t nspec = dft_length / 2 + 1;
  // Edge mels in float (the inputs' precision), the rest in double.
  const float low_mel = 2595.0f * std::log10(1.0f + static_cast<float>(lower) / 700.0f);
  const float high_mel = 2595.0f * std::log10(1.0f + static_cast<float>(upper) / 700.0f);
  const float mel_step = (high_mel - low_mel) / static_cast<float>(num_mel + 2);
  std::vector<int64_t> bin(static_cast<size_t>(num_mel + 2));
  for (int64_t i = 0; i < num_mel + 2; ++i) {
    double mel = static_cast<double>(i) * static_cast<double>(mel_step) + static_cast<double>(low_mel);
    double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    double b = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    if (b < 0 || b >= static_cast<double>(nspec)) ctx.fail_invalid("a mel filter edge falls outside the spectrum");
    bin[static_cast<size_t>(i)] = static_cast<int64_t>(b);
  }
  std::vector<double> w(static_cast<size_t>(nspec * num_mel), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& { return w[static_cast<size_t>(j * num_mel + i)]; };
  for (int64_t i = 0; i < num_mel; ++i) {
    const int64_t lo = bin[static_cast<size_t>(i)], ce = bin[static_cast<size_t>(i + 1)],
                  hi = bin[static_cast<size_t>(i + 2)];
    if (ce == lo) at(ce, i) = 1;
    else
      for (int64_t j = lo; j <= ce; ++j) at(j, i) = static_cast<double>(j - lo) / static_cast<double>(ce - lo);
    if (hi > ce)
      for (int64_t j = ce; j < hi; ++j) at(j, i) = static_cast<double>(hi - j) / static_cast<double>(hi - ce);
  }
  Tensor& out = ctx.make_output(0, output_datatype(ctx), {nspec, num_mel});
  for (int64_t k = 0; k < nspec * num_mel; ++k) out.set_f64(k, w[static_cast<size_t>(k)]);
}

}  // namespace

void add_reduce_signal_kernels(KernelTable& t) {
  t.add(OpKind::HannWindow, window_kernel<Window::Hann>);
  t.add(OpKind::HammingWindow, window_kernel<Window::Hamming>);
  t.add(OpKind::BlackmanWindow, window_kernel<Window::Blackman>);
  t.add(OpKind::DFT, dft_kernel);
  t.add(OpKind::STFT, stft_kernel);
  t.add(OpKind::MelWeightMatrix, mel_weight_matrix_kernel);
}

}  // namespace tac::ref
