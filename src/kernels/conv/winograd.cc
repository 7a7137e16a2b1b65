// Winograd convolution F(m x m, 3 x 3), m = 2 or 4 (alpha = m + 2), for 3x3 stride-1 dilation-1
// group-1 convolutions with any padding. Weights are transformed at prepare() into
// U[alpha^2][M][C]; per image, the input is transformed into V[alpha^2][C][T] (T = output tiles),
// alpha^2 sgemms give Mo[xi][M][T] = U[xi] V[xi], and the output transform writes Y in NCHW with
// the epilogue applied per finished row. Transforms run on rows of tiles (tile x is the vector
// dimension), so their 1-D kernels are plain loops the compiler vectorises per ISA.
#include <cblas.h>
#include <omp.h>

#include "kernels/conv/conv_common.h"

namespace tac::kernels::conv {

namespace {

#define TAC_WINO_FN __attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))

// B^T d for F(2,3): d[j] are arrays of n floats (one per tile), o[k] likewise.
TAC_WINO_FN void in1d_f2(const float* const* d, float* const* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float d0 = d[0][i], d1 = d[1][i], d2 = d[2][i], d3 = d[3][i];
    o[0][i] = d0 - d2;
    o[1][i] = d1 + d2;
    o[2][i] = d2 - d1;
    o[3][i] = d1 - d3;
  }
}
TAC_WINO_FN void in1d_f4(const float* const* d, float* const* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float d0 = d[0][i], d1 = d[1][i], d2 = d[2][i], d3 = d[3][i], d4 = d[4][i], d5 = d[5][i];
    o[0][i] = 4.0f * d0 - 5.0f * d2 + d4;
    o[1][i] = -4.0f * (d1 + d2) + d3 + d4;
    o[2][i] = 4.0f * (d1 - d2) - d3 + d4;
    o[3][i] = 2.0f * (d3 - d1) - d2 + d4;
    o[4][i] = 2.0f * (d1 - d3) - d2 + d4;
    o[5][i] = 4.0f * d1 - 5.0f * d3 + d5;
  }
}
// A^T m.
TAC_WINO_FN void out1d_f2(const float* const* m, float* const* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float m0 = m[0][i], m1 = m[1][i], m2 = m[2][i], m3 = m[3][i];
    o[0][i] = m0 + m1 + m2;
    o[1][i] = m1 - m2 - m3;
  }
}
TAC_WINO_FN void out1d_f4(const float* const* m, float* const* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float m0 = m[0][i], m1 = m[1][i], m2 = m[2][i], m3 = m[3][i], m4 = m[4][i], m5 = m[5][i];
    const float a = m1 + m2, b = m1 - m2, c = m3 + m4, e = m3 - m4;
    o[0][i] = m0 + a + c;
    o[1][i] = b + 2.0f * e;
    o[2][i] = a + 4.0f * c;
    o[3][i] = b + 8.0f * e + m5;
  }
}

// G g for a 3-tap filter, in double.
void weight1d(int tm, const double* g, double* o) {
  if (tm == 2) {
    o[0] = g[0];
    o[1] = (g[0] + g[1] + g[2]) / 2;
    o[2] = (g[0] - g[1] + g[2]) / 2;
    o[3] = g[2];
  } else {
    o[0] = g[0] / 4;
    o[1] = -(g[0] + g[1] + g[2]) / 6;
    o[2] = -(g[0] - g[1] + g[2]) / 6;
    o[3] = g[0] / 24 + g[1] / 12 + g[2] / 6;
    o[4] = g[0] / 24 - g[1] / 12 + g[2] / 6;
    o[5] = g[2];
  }
}

class WinogradKernel final : public Kernel {
 public:
  WinogradKernel(const ConvGeom& g, const Tensor& w, int tm) : g_(g), tm_(tm), al_(tm + 2) {
    TH_ = (g.OH + tm - 1) / tm;
    TW_ = (g.OW + tm - 1) / tm;
    T_ = TH_ * TW_;
    const int64_t a2 = al_ * al_;
    U_.assign(static_cast<size_t>(a2 * g.M * g.C), 0.0f);
    const float* src = w.data<float>();
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t c = 0; c < g.C; ++c) {
        const float* k = src + (m * g.C + c) * 9;
        double t[6][3] = {}, col[3] = {}, o[6] = {};
        for (int j = 0; j < 3; ++j) {  // columns: G applied along kh
          for (int r = 0; r < 3; ++r) col[r] = k[r * 3 + j];
          weight1d(tm, col, o);
          for (int r = 0; r < al_; ++r) t[r][j] = o[r];
        }
        for (int r = 0; r < al_; ++r) {  // rows: G applied along kw
          weight1d(tm, t[r], o);
          for (int i = 0; i < al_; ++i) U_[static_cast<size_t>(((r * al_ + i) * g.M + m) * g.C + c)] = static_cast<float>(o[i]);
        }
      }
  }
  size_t workspace_bytes() const override {
    const int64_t a2 = al_ * al_;
    return sizeof(float) * static_cast<size_t>(a2 * (g_.C + g_.M) * T_ + g_.threads * per_thread());
  }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    const ConvGeom& g = g_;
    const float* x = in[0].as<const float>();
    const float* bias = g.has_bias ? in[2].as<const float>() : nullptr;
    const float* res = g.has_res ? in[3].as<const float>() : nullptr;
    float* y = out[0].as<float>();
    const int64_t a2 = al_ * al_, P = g.ohw();
    float* V = static_cast<float*>(ws);
    float* Mo = V + a2 * g.C * T_;
    float* scratch = Mo + a2 * g.M * T_;
    ScopedOmpThreads scope(g.threads);
    for (int64_t n = 0; n < g.N; ++n) {
      const float* xn = x + n * g.C * g.hw();
#pragma omp parallel for num_threads(g.threads) schedule(static)
      for (int64_t job = 0; job < g.C * TH_; ++job)
        input_tiles(xn, job / TH_, job % TH_, V, scratch + omp_get_thread_num() * per_thread());
#pragma omp parallel for num_threads(g.threads) schedule(static)
      for (int64_t xi = 0; xi < a2; ++xi)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(g.M), static_cast<int>(T_),
                    static_cast<int>(g.C), 1.0f, U_.data() + xi * g.M * g.C, static_cast<int>(g.C), V + xi * g.C * T_,
                    static_cast<int>(T_), 0.0f, Mo + xi * g.M * T_, static_cast<int>(T_));
#pragma omp parallel for num_threads(g.threads) schedule(static)
      for (int64_t job = 0; job < g.M * TH_; ++job) {
        const int64_t m = job / TH_, ty = job % TH_;
        float* yp = y + (n * g.M + m) * P;
        output_tiles(Mo, m, ty, yp, scratch + omp_get_thread_num() * per_thread());
        const float* rp = res ? res + (n * g.M + m) * P : nullptr;
        for (int64_t oh = ty * tm_; oh < std::min(g.OH, (ty + 1) * tm_); ++oh)
          finish_row(yp + oh * g.OW, rp ? rp + oh * g.OW : nullptr, g.OW, bias ? bias[m] : 0.0f, g.ep);
      }
    }
    return Status::ok();
  }

 private:
  int64_t per_thread() const { return 2 * al_ * al_ * TW_ + 16; }

  // V[(k*al + i)][c][ty*TW + tx] = (B^T d B)[k][i] for the tiles of row ty of channel c.
  void input_tiles(const float* xn, int64_t c, int64_t ty, float* V, float* s) const {
    const ConvGeom& g = g_;
    const int64_t al = al_, tw = TW_;
    float* D = s;                 // D[r][j][tx]
    float* E = s + al * al * tw;  // E[k][j][tx]
    const float* xc = xn + c * g.hw();
    for (int64_t r = 0; r < al; ++r) {
      const int64_t ih = ty * tm_ + r - g.PT;
      for (int64_t j = 0; j < al; ++j) {
        float* d = D + (r * al + j) * tw;
        if (ih < 0 || ih >= g.H) {
          for (int64_t t = 0; t < tw; ++t) d[t] = 0.0f;
          continue;
        }
        const float* xr = xc + ih * g.W;
        for (int64_t t = 0; t < tw; ++t) {
          const int64_t iw = t * tm_ + j - g.PL;
          d[t] = iw >= 0 && iw < g.W ? xr[iw] : 0.0f;
        }
      }
    }
    const float* ip[6];
    float* op[6];
    for (int64_t j = 0; j < al; ++j) {  // along rows (kh)
      for (int64_t r = 0; r < al; ++r) ip[r] = D + (r * al + j) * tw, op[r] = E + (r * al + j) * tw;
      (tm_ == 2 ? in1d_f2 : in1d_f4)(ip, op, tw);
    }
    for (int64_t k = 0; k < al; ++k) {  // along columns (kw), straight into V
      for (int64_t j = 0; j < al; ++j) ip[j] = E + (k * al + j) * tw, op[j] = V + ((k * al + j) * g.C + c) * T_ + ty * tw;
      (tm_ == 2 ? in1d_f2 : in1d_f4)(ip, op, tw);
    }
  }

  // Rows [ty*m, ty*m + m) of output plane m: (A^T Mo A) per tile.
  void output_tiles(const float* Mo, int64_t m, int64_t ty, float* yp, float* s) const {
    const ConvGeom& g = g_;
    const int64_t al = al_, tw = TW_, tm = tm_;
    float* E = s;                 // E[k][j][tx], k < tm
    float* F = s + al * al * tw;  // F[k][i][tx], k, i < tm
    const float* ip[6];
    float* op[6];
    for (int64_t j = 0; j < al; ++j) {
      for (int64_t r = 0; r < al; ++r) ip[r] = Mo + ((r * al + j) * g.M + m) * T_ + ty * tw;
      for (int64_t k = 0; k < tm; ++k) op[k] = E + (k * al + j) * tw;
      (tm == 2 ? out1d_f2 : out1d_f4)(ip, op, tw);
    }
    for (int64_t k = 0; k < tm; ++k) {
      for (int64_t j = 0; j < al; ++j) ip[j] = E + (k * al + j) * tw;
      for (int64_t i = 0; i < tm; ++i) op[i] = F + (k * tm + i) * tw;
      (tm == 2 ? out1d_f2 : out1d_f4)(ip, op, tw);
    }
    for (int64_t k = 0; k < tm; ++k) {
      const int64_t oh = ty * tm + k;
      if (oh >= g.OH) break;
      float* yr = yp + oh * g.OW;
      for (int64_t t = 0; t < tw; ++t)
        for (int64_t i = 0; i < tm; ++i) {
          const int64_t ow = t * tm + i;
          if (ow < g.OW) yr[ow] = F[(k * tm + i) * tw + t];
        }
    }
  }

  ConvGeom g_;
  int tm_, al_;
  int64_t TH_, TW_, T_;
  std::vector<float> U_;
};

Status wino_applies(const StepDesc& step) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  if (g->KH != 3 || g->KW != 3 || g->SH != 1 || g->SW != 1 || g->DH != 1 || g->DW != 1 || g->G != 1)
    return not_applicable("needs 3x3, stride 1, dilation 1, group 1");
  if (!step.constants[1]) return not_applicable("weights are not constant (transformed at prepare)");
  return Status::ok();
}

// alpha^2 sgemms of M x C x T (T = tiles) at sgemm efficiency, plus the transforms (~4*alpha
// flops per transformed element at ~1/8 of peak: strided gathers and scatters) and the traffic
// of V and Mo (written once, read once).
double wino_cost(const StepDesc& step, int tm) {
  auto g = conv_geom(step);
  if (!g) return 1e30;
  const double al = tm + 2, a2 = al * al;
  const double T = static_cast<double>((g->OH + tm - 1) / tm) * ((g->OW + tm - 1) / tm);
  const double gemm = 2.0 * g->N * a2 * g->M * g->C * T;
  // Calibrated on ResNet-18 against whole-layer timings (builder.selection=isolated, 1 thread):
  // with transforms and gathers the alpha^2 sgemms deliver ~15% of peak at >= 150 tiles and
  // fall off linearly below (a 7x7 map has 4 tiles for F(4,3): skinny sgemms, 6 ms vs 1 ms).
  const double eff = std::max(0.005, (g->M >= 64 && g->C >= 64 ? 0.15 : 0.08) * std::min(1.0, T / 150.0));
  const double transform_flops = g->N * a2 * T * (g->C + g->M) * 4 * al;
  const double bytes = 4.0 * g->N * a2 * T * (g->C + g->M) * 2;
  return cost_ns(gemm, eff, g->io_bytes() + bytes, g->threads) + cost_ns(transform_flops, 0.12, 0, g->threads) +
         epilogue_ns(*g);
}

}  // namespace

Status winograd_f2x3_applies(const StepDesc& s) { return wino_applies(s); }
Status winograd_f4x3_applies(const StepDesc& s) { return wino_applies(s); }
double winograd_f2x3_cost(const StepDesc& s) { return wino_cost(s, 2); }
double winograd_f4x3_cost(const StepDesc& s) { return wino_cost(s, 4); }
Result<std::unique_ptr<Kernel>> winograd_f2x3_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new WinogradKernel(*g, *s.constants[1], 2));
}
Result<std::unique_ptr<Kernel>> winograd_f4x3_prepare(const StepDesc& s) {
  auto g = conv_geom(s);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new WinogradKernel(*g, *s.constants[1], 4));
}

}  // namespace tac::kernels::conv
