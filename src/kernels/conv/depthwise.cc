// Depthwise convolution (group == C == M: one filter per channel), vectorised over output
// width. Per (image, channel) plane, the input is copied once into SW zero-padded phase planes
// (phase p holds padded columns p, p+SW, ...), so that every tap of any stride reads contiguous
// vectors: tap kw reads phase (kw*DW) % SW at offset (kw*DW) / SW. Four vectors of one output
// row are accumulated at a time (independent FMA chains), then the row gets its epilogue in L1.
#include <immintrin.h>
#include <omp.h>

#include <cstring>

#include "kernels/conv/conv_common.h"

namespace tac::kernels::conv {

namespace {

struct DwArgs {
  int64_t KH, KW, SH, DH, DW, SW, Wq, rows, OH, OW;  // rows: padded rows per phase plane
};

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) void dw_plane_avx512(const float* xq, const float* w,
                                                                                        const DwArgs& a, float* y) {
  constexpr int64_t V = 16;
  for (int64_t oh = 0; oh < a.OH; ++oh) {
    float* yr = y + oh * a.OW;
    for (int64_t ow0 = 0; ow0 < a.OW; ow0 += 4 * V) {
      __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
      for (int64_t kh = 0; kh < a.KH; ++kh) {
        const int64_t ih = oh * a.SH + kh * a.DH;
        for (int64_t kw = 0; kw < a.KW; ++kw) {
          const int64_t off = kw * a.DW;
          const float* p = xq + ((off % a.SW) * a.rows + ih) * a.Wq + off / a.SW + ow0;
          const __m512 wv = _mm512_set1_ps(w[kh * a.KW + kw]);
          acc0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p), acc0);
          acc1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + V), acc1);
          acc2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 2 * V), acc2);
          acc3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 3 * V), acc3);
        }
      }
      const __m512 accs[4] = {acc0, acc1, acc2, acc3};
      for (int u = 0; u < 4; ++u) {
        const int64_t left = a.OW - (ow0 + u * V);
        if (left <= 0) break;
        const __mmask16 m = left >= V ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
        _mm512_mask_storeu_ps(yr + ow0 + u * V, m, accs[u]);
      }
    }
  }
}

__attribute__((target("avx2,fma"))) void dw_plane_avx2(const float* xq, const float* w, const DwArgs& a, float* y) {
  constexpr int64_t V = 8;
  alignas(32) static const int32_t kLanes[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const __m256i lanes = _mm256_load_si256(reinterpret_cast<const __m256i*>(kLanes));
  for (int64_t oh = 0; oh < a.OH; ++oh) {
    float* yr = y + oh * a.OW;
    for (int64_t ow0 = 0; ow0 < a.OW; ow0 += 4 * V) {
      __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
      for (int64_t kh = 0; kh < a.KH; ++kh) {
        const int64_t ih = oh * a.SH + kh * a.DH;
        for (int64_t kw = 0; kw < a.KW; ++kw) {
          const int64_t off = kw * a.DW;
          const float* p = xq + ((off % a.SW) * a.rows + ih) * a.Wq + off / a.SW + ow0;
          const __m256 wv = _mm256_set1_ps(w[kh * a.KW + kw]);
          acc0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p), acc0);
          acc1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + V), acc1);
          acc2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + 2 * V), acc2);
          acc3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + 3 * V), acc3);
        }
      }
      const __m256 accs[4] = {acc0, acc1, acc2, acc3};
      for (int u = 0; u < 4; ++u) {
        const int64_t left = a.OW - (ow0 + u * V);
        if (left <= 0) break;
        if (left >= V) {
          _mm256_storeu_ps(yr + ow0 + u * V, accs[u]);
        } else {
          const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lanes);
          _mm256_maskstore_ps(yr + ow0 + u * V, m, accs[u]);
        }
      }
    }
  }
}

class DepthwiseKernel final : public Kernel {
 public:
  DepthwiseKernel(const ConvGeom& g, int vec, void (*plane)(const float*, const float*, const DwArgs&, float*))
      : g_(g), plane_(plane) {
    const int64_t Hp = g.H + g.PT + g.PB, Wp = g.W + g.PL + g.PR;
    a_ = DwArgs{g.KH, g.KW, g.SH, g.DH, g.DW, g.SW, (Wp + g.SW - 1) / g.SW + 4 * vec + 1, Hp, g.OH, g.OW};
  }
  size_t workspace_bytes() const override { return sizeof(float) * static_cast<size_t>(g_.threads * per_thread()); }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    const ConvGeom& g = g_;
    const float* x = in[0].as<const float>();
    const float* w = in[1].as<const float>();
    const float* bias = g.has_bias ? in[2].as<const float>() : nullptr;
    const float* res = g.has_res ? in[3].as<const float>() : nullptr;
    float* y = out[0].as<float>();
    const int64_t P = g.ohw(), planes = g.N * g.C;
#pragma omp parallel for num_threads(g.threads) schedule(static)
    for (int64_t nc = 0; nc < planes; ++nc) {
      float* xq = static_cast<float*>(ws) + omp_get_thread_num() * per_thread();
      build_phases(x + nc * g.hw(), xq);
      float* yp = y + nc * P;
      plane_(xq, w + (nc % g.C) * g.KH * g.KW, a_, yp);
      const float b = bias ? bias[nc % g.C] : 0.0f;
      const float* rp = res ? res + nc * P : nullptr;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        finish_row(yp + oh * g.OW, rp ? rp + oh * g.OW : nullptr, g.OW, b, g.ep);
    }
    return Status::ok();
  }

 private:
  int64_t per_thread() const { return (a_.SW * a_.rows * a_.Wq + 15) / 16 * 16; }
  // xq[p][h][q] = padded x[h - PT][q*SW + p - PL] (0 outside the input).
  void build_phases(const float* x, float* xq) const {
    const ConvGeom& g = g_;
    for (int64_t p = 0; p < a_.SW; ++p)
      for (int64_t h = 0; h < a_.rows; ++h) {
        float* d = xq + (p * a_.rows + h) * a_.Wq;
        const int64_t ih = h - g.PT;
        if (ih < 0 || ih >= g.H) {
          std::memset(d, 0, sizeof(float) * static_cast<size_t>(a_.Wq));
          continue;
        }
        const float* xr = x + ih * g.W;
        if (a_.SW == 1) {
          const int64_t lo = std::min(g.PL, a_.Wq);
          for (int64_t q = 0; q < lo; ++q) d[q] = 0.0f;
          const int64_t n = std::min(g.W, a_.Wq - lo);
          std::memcpy(d + lo, xr, sizeof(float) * static_cast<size_t>(n));
          for (int64_t q = lo + n; q < a_.Wq; ++q) d[q] = 0.0f;
          continue;
        }
        for (int64_t q = 0; q < a_.Wq; ++q) {
          const int64_t iw = q * a_.SW + p - g.PL;
          d[q] = iw >= 0 && iw < g.W ? xr[iw] : 0.0f;
        }
      }
  }

  ConvGeom g_;
  void (*plane_)(const float*, const float*, const DwArgs&, float*);
  DwArgs a_;
};

Status dw_applies(const StepDesc& step, bool isa_ok, const char* isa) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  if (!(g->G == g->C && g->G == g->M)) return not_applicable("needs group == C == M (depthwise, multiplier 1)");
  if (!isa_ok) return not_applicable(std::string("the CPU lacks ") + isa);
  return Status::ok();
}

// Bound by loads, not FMAs: one vector load per FMA (~half of peak at best), plus the phase copy
// (SW x the padded plane) and the output write.
double dw_cost(const StepDesc& step, double eff) {
  auto g = conv_geom(step);
  if (!g) return 1e30;
  const double copy = 4.0 * g->N * g->C * (g->H + g->PT + g->PB) * (g->W + g->PL + g->PR + 64) * 2;
  return cost_ns(g->flops(), eff, g->io_bytes() + copy, g->threads) + epilogue_ns(*g);
}

}  // namespace

Status depthwise_avx512_applies(const StepDesc& s) { return dw_applies(s, cpu_features().avx512, "AVX-512"); }
Status depthwise_avx2_applies(const StepDesc& s) { return dw_applies(s, cpu_features().avx2_fma, "AVX2/FMA"); }
double depthwise_avx512_cost(const StepDesc& s) { return dw_cost(s, 0.35); }
double depthwise_avx2_cost(const StepDesc& s) { return dw_cost(s, cpu_features().avx512 ? 0.2 : 0.35); }
Result<std::unique_ptr<Kernel>> depthwise_avx512_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new DepthwiseKernel(*g, 16, dw_plane_avx512));
}
Result<std::unique_ptr<Kernel>> depthwise_avx2_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new DepthwiseKernel(*g, 8, dw_plane_avx2));
}

}  // namespace tac::kernels::conv
