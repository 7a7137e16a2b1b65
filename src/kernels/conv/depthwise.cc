// Depthwise convolution (group == C == M: one filter per channel), vectorised over the flattened
// output plane. Per (image, channel) plane, the input is copied once into SH x SW zero-padded
// phase planes of Rq rows x Wq columns (phase (ph, pw) holds padded rows ph, ph+SH, ... and
// columns pw, pw+SW, ...), so that output (oh, ow) under tap (kh, kw) reads phase
// ((kh*DH) % SH, (kw*DW) % SW) at row oh + (kh*DH) / SH, column ow + (kw*DW) / SW. With the
// phase planes Wq = OW + (KW-1)*DW/SW wide, that is flat index f = oh*Wq + ow plus a constant per
// tap: one contiguous run of vectors covers several output rows at once, and only the Wq - OW
// columns per row beyond the output are wasted lanes (a 7x7 plane, 3x3 stride 1: 2 of 9; the
// row-at-a-time form this replaces computed 64 lanes for 7 outputs). Blocks of output rows are
// computed into a small buffer (bias and relu/clip applied in registers), then copied out row by
// row, with any other epilogue applied while the row is in L1.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv/conv_common.h"

namespace tac::kernels::conv {

// GCC 12's max/min intrinsics pass _mm512_undefined_ps() as the masked-off source, which
// -Wmaybe-uninitialized reports inside the system header (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

struct DwArgs {
  int64_t Wq = 0;             // columns of a phase plane (and flat row stride of the block buffer)
  const int64_t* taps = nullptr;  // per tap (kh*KW + kw): offset of its first read from the phase planes' base
  int64_t ntaps = 0;
  int act = 0;                // 0: bias only, 1: relu, 2: clip [lo, hi] (applied in registers)
  float lo = 0.0f, hi = 0.0f;
};

// out[f] = act(bias + sum_t w[t] * xq[taps[t] + f0 + f]) for f in [0, n), n rounded up to whole
// vectors (the caller's buffers have room for 4 vectors beyond n).
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) void dw_block_avx512(const float* xq, const float* w,
                                                                                        float bias, const DwArgs& a,
                                                                                        int64_t f0, int64_t n,
                                                                                        float* out) {
  constexpr int64_t V = 16;
  const __m512 vb = _mm512_set1_ps(bias), vlo = _mm512_set1_ps(a.act == 1 ? 0.0f : a.lo), vhi = _mm512_set1_ps(a.hi);
  int64_t f = 0;
  for (; f + 2 * V < n; f += 4 * V) {  // 4 vectors while more than 2 remain (may run past n by < 2V)
    __m512 acc0 = vb, acc1 = vb, acc2 = vb, acc3 = vb;
    for (int64_t t = 0; t < a.ntaps; ++t) {
      const float* p = xq + a.taps[t] + f0 + f;
      const __m512 wv = _mm512_set1_ps(w[t]);
      acc0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p), acc0);
      acc1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + V), acc1);
      acc2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 2 * V), acc2);
      acc3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p + 3 * V), acc3);
    }
    if (a.act != 0) {
      acc0 = _mm512_max_ps(acc0, vlo), acc1 = _mm512_max_ps(acc1, vlo), acc2 = _mm512_max_ps(acc2, vlo),
      acc3 = _mm512_max_ps(acc3, vlo);
      if (a.act == 2)
        acc0 = _mm512_min_ps(acc0, vhi), acc1 = _mm512_min_ps(acc1, vhi), acc2 = _mm512_min_ps(acc2, vhi),
        acc3 = _mm512_min_ps(acc3, vhi);
    }
    _mm512_storeu_ps(out + f, acc0);
    _mm512_storeu_ps(out + f + V, acc1);
    _mm512_storeu_ps(out + f + 2 * V, acc2);
    _mm512_storeu_ps(out + f + 3 * V, acc3);
  }
  for (; f < n; f += V) {  // at most 2 vectors left
    __m512 acc = vb;
    for (int64_t t = 0; t < a.ntaps; ++t)
      acc = _mm512_fmadd_ps(_mm512_set1_ps(w[t]), _mm512_loadu_ps(xq + a.taps[t] + f0 + f), acc);
    if (a.act != 0) acc = _mm512_max_ps(acc, vlo);
    if (a.act == 2) acc = _mm512_min_ps(acc, vhi);
    _mm512_storeu_ps(out + f, acc);
  }
}

__attribute__((target("avx2,fma"))) void dw_block_avx2(const float* xq, const float* w, float bias, const DwArgs& a,
                                                       int64_t f0, int64_t n, float* out) {
  constexpr int64_t V = 8;
  const __m256 vb = _mm256_set1_ps(bias), vlo = _mm256_set1_ps(a.act == 1 ? 0.0f : a.lo), vhi = _mm256_set1_ps(a.hi);
  int64_t f = 0;
  for (; f + 2 * V < n; f += 4 * V) {
    __m256 acc0 = vb, acc1 = vb, acc2 = vb, acc3 = vb;
    for (int64_t t = 0; t < a.ntaps; ++t) {
      const float* p = xq + a.taps[t] + f0 + f;
      const __m256 wv = _mm256_set1_ps(w[t]);
      acc0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p), acc0);
      acc1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + V), acc1);
      acc2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + 2 * V), acc2);
      acc3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(p + 3 * V), acc3);
    }
    if (a.act != 0) {
      acc0 = _mm256_max_ps(acc0, vlo), acc1 = _mm256_max_ps(acc1, vlo), acc2 = _mm256_max_ps(acc2, vlo),
      acc3 = _mm256_max_ps(acc3, vlo);
      if (a.act == 2)
        acc0 = _mm256_min_ps(acc0, vhi), acc1 = _mm256_min_ps(acc1, vhi), acc2 = _mm256_min_ps(acc2, vhi),
        acc3 = _mm256_min_ps(acc3, vhi);
    }
    _mm256_storeu_ps(out + f, acc0);
    _mm256_storeu_ps(out + f + V, acc1);
    _mm256_storeu_ps(out + f + 2 * V, acc2);
    _mm256_storeu_ps(out + f + 3 * V, acc3);
  }
  for (; f < n; f += V) {
    __m256 acc = vb;
    for (int64_t t = 0; t < a.ntaps; ++t)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(w[t]), _mm256_loadu_ps(xq + a.taps[t] + f0 + f), acc);
    if (a.act != 0) acc = _mm256_max_ps(acc, vlo);
    if (a.act == 2) acc = _mm256_min_ps(acc, vhi);
    _mm256_storeu_ps(out + f, acc);
  }
}

// AVX-512 forms of the per-plane copies: small planes (7x7 to 28x28 in mobilenet_v2) spent
// more time in memcpy / memset calls for their short rows than in the FMAs. Rows are moved with
// masked vector loads and stores; stride-2 rows are de-interleaved with one two-source permute
// per 16 outputs.
}  // namespace

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) void build_phases_avx512(const float* x,
                                                                                            const DwPlanes& p,
                                                                                            float* xq) {
  auto mask = [](int64_t n) {
    return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
  };
  const __m512 zero = _mm512_setzero_ps();
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t ph = 0; ph < p.SH; ++ph)
    for (int64_t pw = 0; pw < p.SW; ++pw) {
      float* plane = xq + (ph * p.SW + pw) * p.phase_floats;
      const int64_t t = pw - p.PL;  // phase column q reads input column q*SW + t
      const int64_t qlo = std::min(p.Wq, t >= 0 ? int64_t{0} : (-t + p.SW - 1) / p.SW);
      const int64_t qhi = std::max(qlo, std::min(p.Wq, p.W - 1 - t < 0 ? int64_t{0} : (p.W - 1 - t) / p.SW + 1));
      for (int64_t r = 0; r < p.Rq; ++r) {
        float* d = plane + r * p.Wq;
        for (int64_t q = 0; q < p.Wq; q += 16) _mm512_mask_storeu_ps(d + q, mask(p.Wq - q), zero);
        const int64_t ih = r * p.SH + ph - p.PT;
        if (ih < 0 || ih >= p.H) continue;
        const float* xr = x + ih * p.W + t;  // phase column q at xr[q * SW]
        if (p.SW == 1) {
          for (int64_t q = qlo; q < qhi; q += 16) {
            const __mmask16 m = mask(qhi - q);
            _mm512_mask_storeu_ps(d + q, m, _mm512_maskz_loadu_ps(m, xr + q));
          }
        } else if (p.SW == 2) {
          for (int64_t q = qlo; q < qhi; q += 16) {
            const int64_t n = std::min<int64_t>(16, qhi - q), need = 2 * n - 1;  // input floats used
            const __m512 lo = _mm512_maskz_loadu_ps(mask(need), xr + 2 * q);
            const __m512 hi = need > 16 ? _mm512_maskz_loadu_ps(mask(need - 16), xr + 2 * q + 16) : zero;
            _mm512_mask_storeu_ps(d + q, mask(n), _mm512_permutex2var_ps(lo, even, hi));
          }
        } else {
          for (int64_t q = qlo; q < qhi; ++q) d[q] = xr[q * p.SW];
        }
      }
      for (int64_t q = p.Rq * p.Wq; q < p.phase_floats; q += 16)
        _mm512_mask_storeu_ps(plane + q, mask(p.phase_floats - q), zero);
    }
}

namespace {

// y row r (OW floats) = buf[r * Wq ...], rows [0, rows).
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma"))) void copy_rows_avx512(const float* buf, int64_t Wq,
                                                                                         int64_t rows, int64_t OW,
                                                                                         float* y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < OW; q += 16) {
      const __mmask16 m = OW - q >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (OW - q)) - 1);
      _mm512_mask_storeu_ps(y + r * OW + q, m, _mm512_maskz_loadu_ps(m, buf + r * Wq + q));
    }
}

using BlockFn = void (*)(const float*, const float*, float, const DwArgs&, int64_t, int64_t, float*);

class DepthwiseKernel final : public Kernel {
 public:
  DepthwiseKernel(const ConvGeom& g, int vec, BlockFn block) : g_(g), block_(block), avx512_(vec == 16) {
    Rq_ = g.OH + (g.KH - 1) * g.DH / g.SH;
    Wq_ = g.OW + (g.KW - 1) * g.DW / g.SW;
    slack_ = 4 * vec + 16;  // reads of the last 4-vector step past the flat plane, and rounding
    phase_floats_ = (Rq_ * Wq_ + slack_ + 15) / 16 * 16;
    // Rows per block: about 2048 flat outputs (8 KiB, stays in L1 with the phase planes' rows).
    rows_per_block_ = std::max<int64_t>(1, std::min<int64_t>(g.OH, 2048 / Wq_));
    block_floats_ = (rows_per_block_ * Wq_ + slack_ + 15) / 16 * 16;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t ph = (kh * g.DH) % g.SH, pw = (kw * g.DW) % g.SW;
        taps_.push_back((ph * g.SW + pw) * phase_floats_ + (kh * g.DH) / g.SH * Wq_ + (kw * g.DW) / g.SW);
      }
    using A = ir::Epilogue::Act;
    in_register_ = !g.has_res && (g.ep.act == A::none || g.ep.act == A::relu || g.ep.act == A::clip);
    planes_ = DwPlanes{g.H, g.W, g.PT, g.PL, g.SH, g.SW, Rq_, Wq_, phase_floats_};
    a_.Wq = Wq_;
    a_.taps = taps_.data();
    a_.ntaps = static_cast<int64_t>(taps_.size());
    if (in_register_) {
      a_.act = g.ep.act == A::relu ? 1 : g.ep.act == A::clip ? 2 : 0;
      a_.lo = g.ep.alpha, a_.hi = g.ep.beta;
    }
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
      float* buf = xq + g.SH * g.SW * phase_floats_;
      if (avx512_) build_phases_avx512(x + nc * g.hw(), planes_, xq);
      else build_phases(x + nc * g.hw(), xq);
      const float b = bias ? bias[nc % g.C] : 0.0f;
      const float* wc = w + (nc % g.C) * g.KH * g.KW;
      float* yp = y + nc * P;
      const float* rp = res ? res + nc * P : nullptr;
      for (int64_t oh0 = 0; oh0 < g.OH; oh0 += rows_per_block_) {
        const int64_t rows = std::min(rows_per_block_, g.OH - oh0);
        block_(xq, wc, in_register_ ? b : 0.0f, a_, oh0 * Wq_, (rows - 1) * Wq_ + g.OW, buf);
        if (avx512_) copy_rows_avx512(buf, Wq_, rows, g.OW, yp + oh0 * g.OW);
        for (int64_t r = 0; r < rows; ++r) {
          float* yr = yp + (oh0 + r) * g.OW;
          if (!avx512_) std::memcpy(yr, buf + r * Wq_, sizeof(float) * static_cast<size_t>(g.OW));
          if (!in_register_) finish_row(yr, rp ? rp + (oh0 + r) * g.OW : nullptr, g.OW, b, g.ep);
        }
      }
    }
    return Status::ok();
  }

 private:
  int64_t per_thread() const { return (g_.SH * g_.SW * phase_floats_ + block_floats_ + 15) / 16 * 16; }
  // xq[ph*SW + pw][r][q] = padded x[r*SH + ph - PT][q*SW + pw - PL] (0 outside the input), and
  // zeros in each phase plane's slack (read only by lanes past the output, but kept finite).
  void build_phases(const float* x, float* xq) const {
    const ConvGeom& g = g_;
    for (int64_t ph = 0; ph < g.SH; ++ph)
      for (int64_t pw = 0; pw < g.SW; ++pw) {
        float* plane = xq + (ph * g.SW + pw) * phase_floats_;
        // columns q whose input column q*SW + pw - PL lies in [0, W)
        const int64_t t = pw - g.PL;
        const int64_t qlo = std::min(Wq_, t >= 0 ? int64_t{0} : (-t + g.SW - 1) / g.SW);
        const int64_t qhi = std::max(qlo, std::min(Wq_, g.W - 1 - t < 0 ? int64_t{0} : (g.W - 1 - t) / g.SW + 1));
        for (int64_t r = 0; r < Rq_; ++r) {
          float* d = plane + r * Wq_;
          const int64_t ih = r * g.SH + ph - g.PT;
          if (ih < 0 || ih >= g.H || qlo == qhi) {
            std::memset(d, 0, sizeof(float) * static_cast<size_t>(Wq_));
            continue;
          }
          const float* xr = x + ih * g.W + t;
          for (int64_t q = 0; q < qlo; ++q) d[q] = 0.0f;
          if (g.SW == 1) std::memcpy(d + qlo, xr + qlo, sizeof(float) * static_cast<size_t>(qhi - qlo));
          else
            for (int64_t q = qlo; q < qhi; ++q) d[q] = xr[q * g.SW];
          for (int64_t q = qhi; q < Wq_; ++q) d[q] = 0.0f;
        }
        std::memset(plane + Rq_ * Wq_, 0, sizeof(float) * static_cast<size_t>(phase_floats_ - Rq_ * Wq_));
      }
  }

  ConvGeom g_;
  BlockFn block_;
  int64_t Rq_ = 0, Wq_ = 0, slack_ = 0, phase_floats_ = 0, rows_per_block_ = 1, block_floats_ = 0;
  std::vector<int64_t> taps_;
  bool avx512_ = false;
  bool in_register_ = false;
  DwArgs a_;
  DwPlanes planes_{};
};

Status dw_applies(const StepDesc& step, bool isa_ok, const char* isa) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  if (!(g->G == g->C && g->G == g->M)) return not_applicable("needs group == C == M (depthwise, multiplier 1)");
  if (!isa_ok) return not_applicable(std::string("the CPU lacks ") + isa);
  return Status::ok();
}

// Bound by loads, not FMAs: one vector load per FMA (~half of peak at best), over the flat
// phase-plane span (OH x Wq lanes for OH x OW outputs), plus the phase copy (the padded plane
// once) and the output write.
double dw_cost(const StepDesc& step, double eff) {
  auto g = conv_geom(step);
  if (!g) return 1e30;
  const double wq = static_cast<double>(g->OW + (g->KW - 1) * g->DW / g->SW);
  const double lanes = wq / static_cast<double>(g->OW);
  const double copy = 4.0 * g->N * g->C * (g->H + g->PT + g->PB) * (g->W + g->PL + g->PR) * 2;
  return cost_ns(g->flops() * lanes, eff, g->io_bytes() + copy, g->threads) + epilogue_ns(*g);
}

}  // namespace

#pragma GCC diagnostic pop

Status depthwise_avx512_applies(const StepDesc& s) { return dw_applies(s, cpu_features().avx512, "AVX-512"); }
Status depthwise_avx2_applies(const StepDesc& s) { return dw_applies(s, cpu_features().avx2_fma, "AVX2/FMA"); }
double depthwise_avx512_cost(const StepDesc& s) { return dw_cost(s, 0.35); }
double depthwise_avx2_cost(const StepDesc& s) { return dw_cost(s, 0.35); }  // AVX-512 cores: calibration
Result<std::unique_ptr<Kernel>> depthwise_avx512_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new DepthwiseKernel(*g, 16, dw_block_avx512));
}
Result<std::unique_ptr<Kernel>> depthwise_avx2_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new DepthwiseKernel(*g, 8, dw_block_avx2));
}

}  // namespace tac::kernels::conv
