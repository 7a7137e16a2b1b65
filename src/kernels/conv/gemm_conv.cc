// GEMM-based convolutions: im2col + sgemm, and 1x1 convolution as a direct sgemm on the NCHW
// planes. Per image n and group g: Y[Mg][OH*OW] = W[Mg][Cg*KH*KW] x col[Cg*KH*KW][OH*OW].
// Two GEMM engines, each its own table row so the tuner sees the choice:
//  - ours (im2col_gemm, conv1x1_gemm): the gemm family's packed sgemm (kernels/gemm/gemm.h), the
//    constant weights packed once at prepare as the A operand, bias / residual / activation
//    applied by its epilogue to each C tile while it is in L1;
//  - OpenBLAS (im2col_openblas, conv1x1_openblas): cblas_sgemm, then a finish_planes pass.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/conv/conv_common.h"
#include "kernels/gemm/gemm.h"

namespace tac::kernels::conv {

namespace {

size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// The register blocking for an Mg x P x K conv GEMM: AVX-512 (else AVX2), 32 (16) columns per
// tile, and the row tile among those compiled that wastes the fewest padded rows of Mg (ties: the
// taller tile, which reuses each B load more).
// (The B operand, col or the input planes, is packed or read in place: two table rows each.)
gemm::Blocking conv_blocking(int64_t Mg) {
  gemm::Blocking b;
  if (gemm::isa_available(gemm::Isa::avx512)) {
    b = gemm::Blocking{gemm::Isa::avx512, 14, 32, 256, 112, 1024, true};
    int64_t best = -1;
    for (int mr : {14, 12, 8, 6}) {
      const int64_t pad = (Mg + mr - 1) / mr * mr - Mg;
      if (best < 0 || pad < best) best = pad, b.mr = mr;
    }
    b.mc = b.mr * (120 / b.mr);
  } else {
    b = gemm::Blocking{gemm::Isa::avx2, 6, 16, 256, 120, 1024, true};
  }
  return b;
}

class GemmConvKernel final : public Kernel {
 public:
  GemmConvKernel(const ConvGeom& g, const Tensor* w, bool im2col, bool ours, bool pack_b)
      : g_(g), im2col_(im2col), ours_(ours) {
    if (ours_) {
      blk_ = conv_blocking(g.Mg());
      blk_.pack_b = pack_b;
      if (w) {  // pack each group's [Mg][K] weights once as the A operand
        const int64_t K = g.Cg() * g.KH * g.KW;
        per_group_ = gemm::packed_a_floats(blk_, g.Mg(), K);
        packed_ = static_cast<float*>(std::aligned_alloc(64, round64(per_group_ * g.G * sizeof(float))));
        for (int64_t gr = 0; gr < g.G; ++gr)
          gemm::pack_a(blk_, g.Mg(), K, w->data<float>() + gr * g.Mg() * K, K, 1, packed_ + gr * per_group_);
      }
    } else if (w) {
      weights_.assign(w->data<float>(), w->data<float>() + w->numel());
    }
  }
  ~GemmConvKernel() override { std::free(packed_); }
  GemmConvKernel(const GemmConvKernel&) = delete;
  GemmConvKernel& operator=(const GemmConvKernel&) = delete;

  size_t col_bytes() const {
    if (im2col_) return round64(sizeof(float) * static_cast<size_t>(g_.Cg() * g_.KH * g_.KW * g_.ohw()));
    if (g_.SH != 1 || g_.SW != 1) return round64(sizeof(float) * static_cast<size_t>(g_.Cg() * g_.ohw()));
    return 0;
  }
  size_t workspace_bytes() const override {
    if (!ours_) return col_bytes();
    return col_bytes() + gemm::sgemm_workspace_bytes(blk_, g_.Mg(), g_.ohw(), g_.Cg() * g_.KH * g_.KW, false, g_.threads);
  }

  Status run(std::span<const TensorView> in, std::span<const TensorView> out, void* ws) override {
    const ConvGeom& g = g_;
    const float* x = in[0].as<const float>();
    const float* w = weights_.empty() ? in[1].as<const float>() : weights_.data();
    const float* bias = g.has_bias ? in[2].as<const float>() : nullptr;
    const float* res = g.has_res ? in[3].as<const float>() : nullptr;
    float* y = out[0].as<float>();
    if (ours_) return run_ours(x, in[1].as<const float>(), bias, res, y, static_cast<char*>(ws));
    float* col = static_cast<float*>(ws);
    const int64_t K = g.Cg() * g.KH * g.KW, P = g.ohw(), Cg = g.Cg(), Mg = g.Mg();
    const bool direct = !im2col_ && g.SH == 1 && g.SW == 1;
    ScopedOmpThreads scope(g.threads);
    for (int64_t n = 0; n < g.N; ++n) {
      for (int64_t gr = 0; gr < g.G; ++gr) {
        const float* b = gemm_input(x + (n * g.C + gr * Cg) * g.hw(), col, direct);
        float* yg = y + (n * g.M + gr * Mg) * P;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(Mg), static_cast<int>(P),
                    static_cast<int>(K), 1.0f, w + gr * Mg * K, static_cast<int>(K), b, static_cast<int>(P), 0.0f, yg,
                    static_cast<int>(P));
      }
      float* yn = y + n * g.M * P;
      const float* rn = res ? res + n * g.M * P : nullptr;
      if (g.has_bias || g.has_res || g.ep.act != ir::Epilogue::Act::none) {
#pragma omp parallel for num_threads(g.threads) schedule(static)
        for (int64_t m = 0; m < g.M; ++m) finish_planes(g, yn, rn, bias, m, m + 1);
      }
    }
    return Status::ok();
  }

 private:
  Status run_ours(const float* x, const float* w_in, const float* bias, const float* res, float* y, char* ws) const {
    const ConvGeom& g = g_;
    float* col = reinterpret_cast<float*>(ws);
    void* gws = ws + col_bytes();
    const int64_t K = g.Cg() * g.KH * g.KW, P = g.ohw(), Cg = g.Cg(), Mg = g.Mg();
    const bool direct = !im2col_ && g.SH == 1 && g.SW == 1;
    gemm::Blocking blk = blk_;
    if (!packed_) blk.pack_a = true;  // runtime weights: sgemm packs A blocks as it goes
    for (int64_t n = 0; n < g.N; ++n) {
      for (int64_t gr = 0; gr < g.G; ++gr) {
        const float* b = gemm_input(x + (n * g.C + gr * Cg) * g.hw(), col, direct);
        const int64_t off = (n * g.M + gr * Mg) * P;
        gemm::Operand a = packed_ ? gemm::Operand{packed_ + gr * per_group_, 0, 0, true}
                                  : gemm::Operand{w_in + gr * Mg * K, K, 1, false};
        gemm::Epilogue ep;
        ep.bias = bias ? bias + gr * Mg : nullptr;
        ep.bias_per_row = true;
        if (res) ep.res = res + off, ep.res_rs = P, ep.res_cs = 1;
        ep.act = g.ep;
        gemm::sgemm(blk, Mg, P, K, a, gemm::Operand{b, P, 1, false}, y + off, P, ep, g.threads, gws);
      }
    }
    return Status::ok();
  }

  // col[(c*KH + kh)*KW + kw][oh*OW + ow] = x[c][oh*SH - PT + kh*DH][ow*SW - PL + kw*DW], 0 outside.
  // The GEMM's B operand for one image and group: the input itself (1x1, stride 1), or its
  // im2col columns / strided subsample written into `col`.
  const float* gemm_input(const float* xg, float* col, bool direct) const {
    if (im2col_) im2col(xg, col);
    else if (!direct) subsample(xg, col);
    else return xg;
    return col;
  }

  void im2col(const float* x, float* col) const {
    const ConvGeom& g = g_;
    const int64_t rows = g.Cg() * g.KH * g.KW;
#pragma omp parallel for num_threads(g.threads) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t kw = r % g.KW, kh = (r / g.KW) % g.KH, c = r / (g.KW * g.KH);
      const float* xc = x + c * g.hw();
      float* dst = col + r * g.ohw();
      // ow range whose input column is inside [0, W)
      const int64_t t = kw * g.DW - g.PL;
      int64_t lo = t >= 0 ? 0 : (-t + g.SW - 1) / g.SW;
      int64_t hi = g.W - 1 - t < 0 ? 0 : (g.W - 1 - t) / g.SW + 1;
      if (hi > g.OW) hi = g.OW;
      if (lo > hi) lo = hi;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        float* d = dst + oh * g.OW;
        const int64_t ih = oh * g.SH - g.PT + kh * g.DH;
        if (ih < 0 || ih >= g.H) {
          std::memset(d, 0, sizeof(float) * static_cast<size_t>(g.OW));
          continue;
        }
        const float* xr = xc + ih * g.W + t;
        for (int64_t ow = 0; ow < lo; ++ow) d[ow] = 0.0f;
        if (g.SW == 1) std::memcpy(d + lo, xr + lo, sizeof(float) * static_cast<size_t>(hi - lo));
        else
          for (int64_t ow = lo; ow < hi; ++ow) d[ow] = xr[ow * g.SW];
        for (int64_t ow = hi; ow < g.OW; ++ow) d[ow] = 0.0f;
      }
    }
  }
  // 1x1 strided: col[c][oh*OW + ow] = x[c][oh*SH][ow*SW].
  void subsample(const float* x, float* col) const {
    const ConvGeom& g = g_;
#pragma omp parallel for num_threads(g.threads) schedule(static)
    for (int64_t c = 0; c < g.Cg(); ++c)
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const float* xr = x + c * g.hw() + oh * g.SH * g.W;
        float* d = col + c * g.ohw() + oh * g.OW;
        for (int64_t ow = 0; ow < g.OW; ++ow) d[ow] = xr[ow * g.SW];
      }
  }

  ConvGeom g_;
  bool im2col_, ours_;
  std::vector<float> weights_;  // OpenBLAS: copy of constant weights (else read from the input at run)
  gemm::Blocking blk_;          // ours: the blocking, and the packed weights (G panels of per_group_)
  float* packed_ = nullptr;
  size_t per_group_ = 0;
};

bool is_1x1(const ConvGeom& g) { return g.KH == 1 && g.KW == 1 && g.PT == 0 && g.PL == 0 && g.PB == 0 && g.PR == 0; }

// Measured: OpenBLAS sgemm on these shapes reaches ~20-25% of the AVX-512 peak on one core
// (ResNet-18 layers: 43-59 GFLOP/s incl. im2col); less for few output channels per group.
double openblas_eff(const ConvGeom& g) {
  const double mg = static_cast<double>(g.Mg());
  return mg >= 64 ? 0.3 : mg >= 16 ? 0.2 : 0.05;
}

// Our packed sgemm: fraction of peak on the conv's GEMM (Mg x P x K), before the B packing copy.
double ours_eff(const ConvGeom& g) {
  const gemm::Blocking b = conv_blocking(g.Mg());
  const double mg = static_cast<double>(g.Mg()), K = static_cast<double>(g.Cg() * g.KH * g.KW);
  const double m_occ = mg / (static_cast<double>((g.Mg() + b.mr - 1) / b.mr) * b.mr);
  const double p = static_cast<double>(g.ohw());
  const double n_occ = p / (std::ceil(p / b.nr) * b.nr);
  const double kc = std::min(K, static_cast<double>(b.kc));
  return 0.9 * (kc / (kc + 8.0)) * m_occ * n_occ * (mg >= b.mr ? 1.0 : 0.6);
}

double gemm_cost(const ConvGeom& g, bool ours, double extra_bytes, bool pack_b = true) {
  const double b_pack = ours && pack_b ? 4.0 * 2 * g.N * g.C * g.KH * g.KW * g.ohw() : 0.0;  // packing B: read + write
  const double epi = ours ? 0.0 : epilogue_ns(g);  // ours applies it per tile, while hot
  return cost_ns(g.flops(), ours ? ours_eff(g) : openblas_eff(g), g.io_bytes() + extra_bytes + b_pack, g.threads) + epi +
         (ours ? epilogue_ns(g) * 0.5 : 0.0);
}

double im2col_cost(const StepDesc& step, bool ours, bool pack_b = true) {
  auto g = conv_geom(step);
  if (!g) return 1e30;
  // im2col writes K*P floats per image and group, and the GEMM reads them back.
  const double col_bytes = 4.0 * 2 * g->N * g->C * g->KH * g->KW * g->ohw();
  return gemm_cost(*g, ours, col_bytes, pack_b);
}

Status conv1x1_applies(const StepDesc& step) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  return is_1x1(*g) ? Status::ok() : not_applicable("needs a 1x1 kernel with no padding");
}

double conv1x1_cost(const StepDesc& step, bool ours, bool pack_b = true) {
  auto g = conv_geom(step);
  if (!g) return 1e30;
  const double gather = (g->SH != 1 || g->SW != 1) ? 4.0 * 2 * g->N * g->C * g->ohw() : 0.0;
  return gemm_cost(*g, ours, gather, pack_b);
}

Result<std::unique_ptr<Kernel>> prepare(const StepDesc& step, bool im2col, bool ours, bool pack_b = true) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  return std::unique_ptr<Kernel>(new GemmConvKernel(*g, step.constants[1], im2col, ours, pack_b));
}

}  // namespace

Status im2col_gemm_applies(const StepDesc& step) {
  auto g = conv_geom(step);
  if (!g) return g.status();
  const gemm::Blocking b = conv_blocking(g->Mg());
  return gemm::isa_available(b.isa) ? Status::ok() : not_applicable("needs AVX2 and FMA");
}
double im2col_gemm_cost(const StepDesc& step) { return im2col_cost(step, true); }
Result<std::unique_ptr<Kernel>> im2col_gemm_prepare(const StepDesc& step) { return prepare(step, true, true); }

Status im2col_gemm_inb_applies(const StepDesc& step) { return im2col_gemm_applies(step); }
double im2col_gemm_inb_cost(const StepDesc& step) { return im2col_cost(step, true, false); }
Result<std::unique_ptr<Kernel>> im2col_gemm_inb_prepare(const StepDesc& step) { return prepare(step, true, true, false); }

Status conv1x1_gemm_inb_applies(const StepDesc& step) { return conv1x1_gemm_applies(step); }
double conv1x1_gemm_inb_cost(const StepDesc& step) { return conv1x1_cost(step, true, false); }
Result<std::unique_ptr<Kernel>> conv1x1_gemm_inb_prepare(const StepDesc& step) { return prepare(step, false, true, false); }

Status im2col_openblas_applies(const StepDesc& step) {
  auto g = conv_geom(step);
  return g ? Status::ok() : g.status();
}
double im2col_openblas_cost(const StepDesc& step) { return im2col_cost(step, false); }
Result<std::unique_ptr<Kernel>> im2col_openblas_prepare(const StepDesc& step) { return prepare(step, true, false); }

Status conv1x1_gemm_applies(const StepDesc& step) {
  TAC_RETURN_IF_ERROR(conv1x1_applies(step));
  return im2col_gemm_applies(step);
}
double conv1x1_gemm_cost(const StepDesc& step) { return conv1x1_cost(step, true); }
Result<std::unique_ptr<Kernel>> conv1x1_gemm_prepare(const StepDesc& step) { return prepare(step, false, true); }

Status conv1x1_openblas_applies(const StepDesc& step) { return conv1x1_applies(step); }
double conv1x1_openblas_cost(const StepDesc& step) { return conv1x1_cost(step, false); }
Result<std::unique_ptr<Kernel>> conv1x1_openblas_prepare(const StepDesc& step) { return prepare(step, false, false); }

}  // namespace tac::kernels::conv
