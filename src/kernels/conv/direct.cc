// Direct convolution: an implicit GEMM over a zero-padded copy of the input. A register tile
// holds OCB output channels (vector lanes) x R output pixels of one output row; the reduction
// runs over (c, kh, kw) with one broadcast input value per pixel and tap. Weights are packed at
// prepare() as [G][M/OCB][Cg][KH][KW][OCB] (zero-padded channels). Any stride, dilation, pad and
// group count; best when C*KH*KW is small (first layers, super-resolution) where im2col and GEMM
// packing overheads dominate.
#include <immintrin.h>
#include <omp.h>

#include <cstring>

#include "kernels/conv/conv_common.h"

namespace tac::kernels::conv {

namespace {

struct TileArgs {
  int64_t C, KH, KW, plane, Wp, SW, DH, DW;
};

// AVX-512: OCB = 32 (two zmm), R = 12 pixels: 24 accumulators.
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) void tile_avx512(const float* xp, const float* wp,
                                                                                    const TileArgs& a, float* tmp) {
  constexpr int R = 12;
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 12
  for (int j = 0; j < R; ++j) acc0[j] = acc1[j] = _mm512_setzero_ps();
  const int64_t sw = a.SW;
  for (int64_t c = 0; c < a.C; ++c) {
    const float* xc = xp + c * a.plane;
    for (int64_t kh = 0; kh < a.KH; ++kh) {
      const float* xr = xc + kh * a.DH * a.Wp;
      for (int64_t kw = 0; kw < a.KW; ++kw, wp += 32) {
        const float* xk = xr + kw * a.DW;
        const __m512 w0 = _mm512_loadu_ps(wp), w1 = _mm512_loadu_ps(wp + 16);
#pragma GCC unroll 12
        for (int j = 0; j < R; ++j) {
          const __m512 b = _mm512_set1_ps(xk[j * sw]);
          acc0[j] = _mm512_fmadd_ps(w0, b, acc0[j]);
          acc1[j] = _mm512_fmadd_ps(w1, b, acc1[j]);
        }
      }
    }
  }
#pragma GCC unroll 12
  for (int j = 0; j < R; ++j) {
    _mm512_storeu_ps(tmp + j * 32, acc0[j]);
    _mm512_storeu_ps(tmp + j * 32 + 16, acc1[j]);
  }
}

// AVX2: OCB = 16 (two ymm), R = 6 pixels: 12 accumulators of 16 registers.
__attribute__((target("avx2,fma"))) void tile_avx2(const float* xp, const float* wp, const TileArgs& a, float* tmp) {
  constexpr int R = 6;
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int j = 0; j < R; ++j) acc0[j] = acc1[j] = _mm256_setzero_ps();
  const int64_t sw = a.SW;
  for (int64_t c = 0; c < a.C; ++c) {
    const float* xc = xp + c * a.plane;
    for (int64_t kh = 0; kh < a.KH; ++kh) {
      const float* xr = xc + kh * a.DH * a.Wp;
      for (int64_t kw = 0; kw < a.KW; ++kw, wp += 16) {
        const float* xk = xr + kw * a.DW;
        const __m256 w0 = _mm256_loadu_ps(wp), w1 = _mm256_loadu_ps(wp + 8);
#pragma GCC unroll 6
        for (int j = 0; j < R; ++j) {
          const __m256 b = _mm256_broadcast_ss(xk + j * sw);
          acc0[j] = _mm256_fmadd_ps(w0, b, acc0[j]);
          acc1[j] = _mm256_fmadd_ps(w1, b, acc1[j]);
        }
      }
    }
  }
#pragma GCC unroll 6
  for (int j = 0; j < R; ++j) {
    _mm256_storeu_ps(tmp + j * 16, acc0[j]);
    _mm256_storeu_ps(tmp + j * 16 + 8, acc1[j]);
  }
}

struct DirectIsa {
  int ocb, r;
  void (*tile)(const float*, const float*, const TileArgs&, float*);
};
constexpr DirectIsa kAvx512{32, 12, tile_avx512};
constexpr DirectIsa kAvx2{16, 6, tile_avx2};

class DirectKernel final : public Kernel {
 public:
  DirectKernel(const ConvGeom& g, const Tensor& w, DirectIsa isa) : g_(g), isa_(isa) {
    Hp_ = g.H + g.PT + g.PB;
    Wp_ = g.W + g.PL + g.PR;
    nmb_ = (g.Mg() + isa.ocb - 1) / isa.ocb;
    const int64_t kk = g.Cg() * g.KH * g.KW;
    packed_.assign(static_cast<size_t>(g.G * nmb_ * kk * isa.ocb), 0.0f);
    const float* src = w.data<float>();
    for (int64_t gr = 0; gr < g.G; ++gr)
      for (int64_t m = 0; m < g.Mg(); ++m)
        for (int64_t k = 0; k < kk; ++k) {
          const int64_t mb = m / isa.ocb, lane = m % isa.ocb;
          packed_[static_cast<size_t>(((gr * nmb_ + mb) * kk + k) * isa.ocb + lane)] = src[(gr * g.Mg() + m) * kk + k];
        }
  }
  size_t workspace_bytes() const override {
    const size_t pad = static_cast<size_t>(g_.C * Hp_ * Wp_ + slack());
    const size_t tiles = static_cast<size_t>(g_.threads * isa_.ocb * isa_.r);
    return sizeof(float) * (pad + tiles);
  }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    const ConvGeom& g = g_;
    const float* x = in[0].as<const float>();
    const float* bias = g.has_bias ? in[2].as<const float>() : nullptr;
    const float* res = g.has_res ? in[3].as<const float>() : nullptr;
    float* y = out[0].as<float>();
    float* xp = static_cast<float*>(ws);
    float* tmp_all = xp + g.C * Hp_ * Wp_ + slack();
    const int64_t plane = Hp_ * Wp_, P = g.ohw(), R = isa_.r, OCB = isa_.ocb;
    const TileArgs a{g.Cg(), g.KH, g.KW, plane, Wp_, g.SW, g.DH, g.DW};
    std::memset(xp + g.C * plane, 0, sizeof(float) * static_cast<size_t>(slack()));
    for (int64_t n = 0; n < g.N; ++n) {
      const float* xn = x + n * g.C * g.hw();
#pragma omp parallel for num_threads(g.threads) schedule(static)
      for (int64_t c = 0; c < g.C; ++c) pad_plane(xn + c * g.hw(), xp + c * plane);
      const int64_t jobs = g.G * nmb_ * g.OH;
#pragma omp parallel for num_threads(g.threads) schedule(static)
      for (int64_t job = 0; job < jobs; ++job) {
        const int64_t oh = job % g.OH, mb = (job / g.OH) % nmb_, gr = job / (g.OH * nmb_);
        float* tmp = tmp_all + static_cast<int64_t>(omp_get_thread_num()) * OCB * R;
        const float* wp = packed_.data() + (gr * nmb_ + mb) * g.Cg() * g.KH * g.KW * OCB;
        const float* xrow = xp + gr * g.Cg() * plane + oh * g.SH * Wp_;
        const int64_t m0 = gr * g.Mg() + mb * OCB, nm = std::min<int64_t>(OCB, g.Mg() - mb * OCB);
        float* yrow = y + (n * g.M + m0) * P + oh * g.OW;
        for (int64_t ow0 = 0; ow0 < g.OW; ow0 += R) {
          isa_.tile(xrow + ow0 * g.SW, wp, a, tmp);
          const int64_t nr = std::min<int64_t>(R, g.OW - ow0);
          for (int64_t oc = 0; oc < nm; ++oc)
            for (int64_t j = 0; j < nr; ++j) yrow[oc * P + ow0 + j] = tmp[j * OCB + oc];
        }
        for (int64_t oc = 0; oc < nm; ++oc)
          finish_row(yrow + oc * P, res ? res + (n * g.M + m0 + oc) * P + oh * g.OW : nullptr, g.OW,
                     bias ? bias[m0 + oc] : 0.0f, g.ep);
      }
    }
    return Status::ok();
  }

 private:
  int64_t slack() const { return isa_.r * g_.SW + 16; }
  void pad_plane(const float* src, float* dst) const {
    const ConvGeom& g = g_;
    std::memset(dst, 0, sizeof(float) * static_cast<size_t>(g.PT * Wp_));
    for (int64_t h = 0; h < g.H; ++h) {
      float* d = dst + (g.PT + h) * Wp_;
      for (int64_t i = 0; i < g.PL; ++i) d[i] = 0.0f;
      std::memcpy(d + g.PL, src + h * g.W, sizeof(float) * static_cast<size_t>(g.W));
      for (int64_t i = g.PL + g.W; i < Wp_; ++i) d[i] = 0.0f;
    }
    std::memset(dst + (g.PT + g.H) * Wp_, 0, sizeof(float) * static_cast<size_t>(g.PB * Wp_));
  }

  ConvGeom g_;
  DirectIsa isa_;
  int64_t Hp_, Wp_, nmb_;
  std::vector<float> packed_;
};


Status direct_applies(const StepDesc& step, bool isa_ok, const char* isa) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  if (!isa_ok) return not_applicable(std::string("the CPU lacks ") + isa);
  if (!step.constants[1]) return not_applicable("weights are not constant (packed at prepare)");
  return Status::ok();
}

// The tile kernel does best when the reduction is long enough to hide the tile's transposed
// store (C*KH*KW >= ~100); weights of a channel block stream from L2, and for large C*KH*KW
// they spill it (lower efficiency), as do partial tiles (OW % R, Mg % OCB).
double direct_cost(const StepDesc& step, DirectIsa isa) {
  auto g = conv_geom(step);
  if (!g) return 1e30;
  const double kk = static_cast<double>(g->Cg() * g->KH * g->KW);
  // Measured 89 GFLOP/s (C*KH*KW = 576), 80 (147, first layer), 63 (2304); ~2 for depthwise.
  double eff = kk < 32 ? 0.3 : kk <= 1200 ? 0.4 : 0.28;  // depthwise: m_fill below is 1/OCB
  const double ow_fill = static_cast<double>(g->OW) / (((g->OW + isa.r - 1) / isa.r) * isa.r);
  const double m_fill = static_cast<double>(g->Mg()) / (((g->Mg() + isa.ocb - 1) / isa.ocb) * isa.ocb);
  eff *= ow_fill * m_fill;
  if (isa.ocb == 16 && cpu_features().avx512) eff *= 0.5;  // 8-lane vectors on a machine whose peak assumes 16
  const double pad_bytes = 4.0 * 2 * g->N * g->C * (g->H + g->PT + g->PB) * (g->W + g->PL + g->PR);
  return cost_ns(g->flops(), eff, g->io_bytes() + pad_bytes, g->threads) + epilogue_ns(*g);
}

}  // namespace

Status direct_avx512_applies(const StepDesc& s) { return direct_applies(s, cpu_features().avx512, "AVX-512"); }
Status direct_avx2_applies(const StepDesc& s) { return direct_applies(s, cpu_features().avx2_fma, "AVX2/FMA"); }
double direct_avx512_cost(const StepDesc& s) { return direct_cost(s, kAvx512); }
double direct_avx2_cost(const StepDesc& s) { return direct_cost(s, kAvx2); }
Result<std::unique_ptr<Kernel>> direct_avx512_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new DirectKernel(*g, *s.constants[1], kAvx512));
}
Result<std::unique_ptr<Kernel>> direct_avx2_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new DirectKernel(*g, *s.constants[1], kAvx2));
}

}  // namespace tac::kernels::conv
