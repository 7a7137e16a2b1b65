// Direct convolution vectorised along output rows, for few input channels (first layers: RGB
// in, 3x3 or 7x7, stride 2; 1x1 and 3x3 convs on 16-32 channels). Per image, each input channel is copied once into its phase planes
// (conv_common.h DwPlanes, as the depthwise kernel does), so that every tap of any stride reads
// contiguous vectors along ow (the phase copy is the whole input: C <= 32 keeps it small). Register tile: MB = 12 output channels x 2 vectors of 16 output
// columns (24 accumulators); per tap, 2 input vector loads feed 24 FMAs whose weight operand is
// a broadcast from memory. Tasks are (channel block, output row) pairs. Output rows go straight
// to NCHW (masked stores at the row's end), bias and relu/clip in registers, any other epilogue
// applied to the row afterwards while it is in L1.
//
// Why: the other tactics are slow on these layers. squeezenet1.1's conv1 (3->64, 3x3 s2,
// 224->111) is K = 27 long: im2col+GEMM and oneDNN spend their time moving data (590-680 us,
// 1 thread, isolated) while the layer is 42.6 MFLOP; ONNX Runtime's NCHWc kernel takes ~300 us.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv/conv_common.h"

namespace tac::kernels::conv {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 max/min intrinsics (see gemm_avx512.cc)

namespace {

constexpr int kMB = 12;     // output channels per register tile
constexpr int64_t kV = 16;  // floats per vector

struct RowArgs {
  const float* xq;            // phase planes of all input channels
  const int64_t* taps;        // per k = (c, kh, kw): offset of output (0, 0)'s read
  int64_t K;                  // C * KH * KW
  int64_t Wq, OW;
  int act;                    // 0 none, 1 relu, 2 clip (in registers)
  float lo, hi;
};

// Output row oh of channels [m0, m0 + mcount) (mcount <= kMB): y_m[ow] = bias_m + sum_k
// w[m][k] * xq[taps[k] + oh * Wq + ow].
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) void row_tile(const RowArgs& a, const float* w,
                                                                                 const float* bias, int64_t m0,
                                                                                 int64_t mcount, int64_t oh,
                                                                                 float* y, int64_t plane) {
  const float* wm[kMB];
  for (int m = 0; m < kMB; ++m) wm[m] = w + (m0 + std::min<int64_t>(m, mcount - 1)) * a.K;
  const __m512 vlo = _mm512_set1_ps(a.act == 1 ? 0.0f : a.lo), vhi = _mm512_set1_ps(a.hi);
  const float* base = a.xq + oh * a.Wq;
  for (int64_t ow0 = 0; ow0 < a.OW; ow0 += 2 * kV) {
    __m512 acc[kMB][2];
#pragma GCC unroll 12
    for (int m = 0; m < kMB; ++m) {
      const __m512 b = _mm512_set1_ps(bias ? bias[m0 + std::min<int64_t>(m, mcount - 1)] : 0.0f);
      acc[m][0] = b, acc[m][1] = b;
    }
    for (int64_t k = 0; k < a.K; ++k) {
      const float* p = base + a.taps[k] + ow0;
      const __m512 x0 = _mm512_loadu_ps(p), x1 = _mm512_loadu_ps(p + kV);
#pragma GCC unroll 12
      for (int m = 0; m < kMB; ++m) {
        const __m512 wv = _mm512_set1_ps(wm[m][k]);
        acc[m][0] = _mm512_fmadd_ps(wv, x0, acc[m][0]);
        acc[m][1] = _mm512_fmadd_ps(wv, x1, acc[m][1]);
      }
    }
    const int64_t left = a.OW - ow0;
    const __mmask16 k0 = left >= kV ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
    const __mmask16 k1 = left >= 2 * kV   ? static_cast<__mmask16>(0xFFFF)
                         : left <= kV     ? static_cast<__mmask16>(0)
                                          : static_cast<__mmask16>((1u << (left - kV)) - 1);
#pragma GCC unroll 12
    for (int m = 0; m < kMB; ++m) {
      if (m >= mcount) break;
      __m512 v0 = acc[m][0], v1 = acc[m][1];
      if (a.act != 0) v0 = _mm512_max_ps(v0, vlo), v1 = _mm512_max_ps(v1, vlo);
      if (a.act == 2) v0 = _mm512_min_ps(v0, vhi), v1 = _mm512_min_ps(v1, vhi);
      float* yr = y + (m0 + m) * plane + oh * a.OW + ow0;
      _mm512_mask_storeu_ps(yr, k0, v0);
      _mm512_mask_storeu_ps(yr + kV, k1, v1);
    }
  }
}

class DirectRowsKernel final : public Kernel {
 public:
  explicit DirectRowsKernel(const ConvGeom& g) : g_(g) {
    const int64_t Rq = g.OH + (g.KH - 1) * g.DH / g.SH, Wq = g.OW + (g.KW - 1) * g.DW / g.SW;
    // slack: a row's last 2-vector chunk reads up to 2*kV - 1 floats past the output width
    const int64_t phase_floats = (Rq * Wq + 2 * kV + 16 + 15) / 16 * 16;
    planes_ = DwPlanes{g.H, g.W, g.PT, g.PL, g.SH, g.SW, Rq, Wq, phase_floats};
    per_channel_ = g.SH * g.SW * phase_floats;
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          const int64_t ph = (kh * g.DH) % g.SH, pw = (kw * g.DW) % g.SW;
          taps_.push_back(c * per_channel_ + (ph * g.SW + pw) * phase_floats + (kh * g.DH) / g.SH * Wq +
                          (kw * g.DW) / g.SW);
        }
    using A = ir::Epilogue::Act;
    in_register_ = !g.has_res && (g.ep.act == A::none || g.ep.act == A::relu || g.ep.act == A::clip);
    args_ = RowArgs{nullptr, taps_.data(), g.C * g.KH * g.KW, Wq, g.OW, 0, 0.0f, 0.0f};
    if (in_register_) {
      args_.act = g.ep.act == A::relu ? 1 : g.ep.act == A::clip ? 2 : 0;
      args_.lo = g.ep.alpha, args_.hi = g.ep.beta;
    }
  }
  size_t workspace_bytes() const override { return sizeof(float) * static_cast<size_t>(g_.C * per_channel_); }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    const ConvGeom& g = g_;
    const float* x = in[0].as<const float>();
    const float* w = in[1].as<const float>();
    const float* bias = g.has_bias ? in[2].as<const float>() : nullptr;
    const float* res = g.has_res ? in[3].as<const float>() : nullptr;
    float* y = out[0].as<float>();
    float* xq = static_cast<float*>(ws);
    RowArgs a = args_;
    a.xq = xq;
    const int64_t P = g.ohw(), blocks = (g.M + kMB - 1) / kMB;
    for (int64_t n = 0; n < g.N; ++n) {
      const float* xn = x + n * g.C * g.hw();
      float* yn = y + n * g.M * P;
      const float* rn = res ? res + n * g.M * P : nullptr;
#pragma omp parallel num_threads(g.threads)
      {
#pragma omp for schedule(static)
        for (int64_t c = 0; c < g.C; ++c) build_phases_avx512(xn + c * g.hw(), planes_, xq + c * per_channel_);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < blocks * g.OH; ++t) {
          const int64_t mb = t / g.OH, oh = t % g.OH, m0 = mb * kMB, mcount = std::min<int64_t>(kMB, g.M - m0);
          row_tile(a, w, in_register_ ? bias : nullptr, m0, mcount, oh, yn, P);
          if (!in_register_)
            for (int64_t m = m0; m < m0 + mcount; ++m)
              finish_row(yn + m * P + oh * g.OW, rn ? rn + m * P + oh * g.OW : nullptr, g.OW, bias ? bias[m] : 0.0f,
                         g.ep);
        }
      }
    }
    return Status::ok();
  }

 private:
  ConvGeom g_;
  DwPlanes planes_{};
  int64_t per_channel_ = 0;
  std::vector<int64_t> taps_;
  bool in_register_ = false;
  RowArgs args_{};
};

}  // namespace

#pragma GCC diagnostic pop

Status direct_rows_avx512_applies(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  if (g->G != 1) return not_applicable("needs group 1");
  if (g->C > 32) return not_applicable("for few input channels (C <= 32)");
  if (g->OW < 16) return not_applicable("needs output rows of at least 16 columns");
  if (!cpu_features().avx512) return not_applicable("the CPU lacks AVX-512");
  return Status::ok();
}

// FMA-bound: 2 loads per 24 FMAs; lanes past the row's end (OW rounded up to 32) and channels
// past M (rounded up to 12) are wasted. Plus the phase copy (the padded input once) and the output.
double direct_rows_avx512_cost(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return 1e30;
  const double ow = static_cast<double>(g->OW), m = static_cast<double>(g->M);
  const double lanes = (std::ceil(ow / 32.0) * 32.0) / ow, chans = (std::ceil(m / kMB) * kMB) / m;
  const double copy = 4.0 * g->N * g->C * (g->H + g->PT + g->PB) * (g->W + g->PL + g->PR) * 2;
  return cost_ns(g->flops() * lanes * chans, 0.8, g->io_bytes() + copy, g->threads) + epilogue_ns(*g);
}

Result<std::unique_ptr<Kernel>> direct_rows_avx512_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new DirectRowsKernel(*g));
}

}  // namespace tac::kernels::conv
