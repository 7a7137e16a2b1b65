// Shared pieces of the conv family (internal to src/kernels/conv/): 2-D geometry read from a
// StepDesc, the epilogue applied to output rows, thread-count scoping for OpenMP libraries, and
// the cost-model constants. Layout everywhere: X [N][C][H][W], W [M][C/G][KH][KW], Y [N][M][OH][OW].
#pragma once

#include <cstdint>
#include <vector>

#include "ir/epilogue.h"
#include "kernels/tactic.h"

namespace tac::kernels::conv {

struct ConvGeom {
  int64_t N = 0, C = 0, H = 0, W = 0;  // input
  int64_t M = 0, G = 1;                // output channels, groups
  int64_t KH = 0, KW = 0, SH = 1, SW = 1, DH = 1, DW = 1;
  int64_t PT = 0, PL = 0, PB = 0, PR = 0;  // pads: top, left, bottom, right
  int64_t OH = 0, OW = 0;
  bool has_bias = false, has_res = false;
  ir::Epilogue ep;
  int threads = 1;

  int64_t Cg() const { return C / G; }
  int64_t Mg() const { return M / G; }
  int64_t ohw() const { return OH * OW; }
  int64_t hw() const { return H * W; }
  double flops() const { return 2.0 * N * M * ohw() * Cg() * KH * KW; }
  double io_bytes() const {  // input + output (+ residual) + weights, once each
    return 4.0 * (N * C * hw() + N * M * ohw() * (has_res ? 2 : 1) + M * Cg() * KH * KW);
  }
};

// The 2-D fp32 convolution `step` describes (Conv or FusedConv), or not_applicable naming what
// this family does not cover (other dtypes, 1-D/3-D, a residual that is not full-shape).
Result<ConvGeom> conv_geom(const StepDesc& step);

// y[i] = act(y[i] + bias + res[i]) for i < n (res may be null). The row is in L1 when called:
// every tactic calls it right after writing an output row or plane.
void finish_row(float* y, const float* res, int64_t n, float bias, const ir::Epilogue& ep);

// Applies finish_row to every output plane of image n, channels [m0, m1).
void finish_planes(const ConvGeom& g, float* y_image, const float* res_image, const float* bias, int64_t m0,
                   int64_t m1);

// OpenMP libraries (OpenBLAS, oneDNN) size their parallel regions by omp_get_max_threads():
// scope it to the step's thread count and restore it afterwards.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int n);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_;
};

// Cost model: one core's fp32 peak (flops per ns) and streaming bandwidth (bytes per ns).
// AVX-512: 2 FMA units x 16 lanes x 2 flops x ~3.9 GHz ~ 250; AVX2 half of it.
double peak_flops_per_ns();
constexpr double kBytesPerNsPerThread = 12.0;
// ns for `flops` at fraction `eff` of peak plus `bytes` of memory traffic, on `threads` cores.
double cost_ns(double flops, double eff, double bytes, int threads);

// The epilogue's per-element cost in ns (activations like sigmoid/gelu run scalar).
double epilogue_ns(const ConvGeom& g);

// Phase planes of one input plane (depthwise.cc, direct_rows.cc): SH x SW zero-padded planes
// of Rq rows x Wq columns, phase (ph, pw) at xq + (ph*SW + pw) * phase_floats holding padded
// rows ph, ph+SH, ... and columns pw, pw+SW, ..., so that output (oh, ow) under tap (kh, kw)
// reads phase ((kh*DH) % SH, (kw*DW) % SW) at row oh + (kh*DH)/SH, column ow + (kw*DW)/SW:
// contiguous along ow at any stride. The floats from Rq*Wq to phase_floats are zeroed.
struct DwPlanes {
  int64_t H, W, PT, PL, SH, SW;
  int64_t Rq, Wq, phase_floats;
};
// AVX-512 only (callers check cpu_features().avx512).
void build_phases_avx512(const float* x, const DwPlanes& p, float* xq);

// Tactic entry points, one set per file.
#define TAC_CONV_TACTIC(name)                                  \
  Status name##_applies(const StepDesc& step);                 \
  double name##_cost(const StepDesc& step);                    \
  Result<std::unique_ptr<Kernel>> name##_prepare(const StepDesc& step);
TAC_CONV_TACTIC(im2col_gemm)
TAC_CONV_TACTIC(conv1x1_gemm)
TAC_CONV_TACTIC(im2col_gemm_inb)
TAC_CONV_TACTIC(conv1x1_gemm_inb)
TAC_CONV_TACTIC(im2col_openblas)
TAC_CONV_TACTIC(conv1x1_openblas)
TAC_CONV_TACTIC(direct_avx512)
TAC_CONV_TACTIC(direct_avx2)
TAC_CONV_TACTIC(winograd_f2x3)
TAC_CONV_TACTIC(winograd_f4x3)
TAC_CONV_TACTIC(depthwise_avx512)
TAC_CONV_TACTIC(depthwise_avx2)
TAC_CONV_TACTIC(direct_rows_avx512)
TAC_CONV_TACTIC(onednn)
TAC_CONV_TACTIC(onednn_nchw)
TAC_CONV_TACTIC(onednn_winograd)
#undef TAC_CONV_TACTIC

}  // namespace tac::kernels::conv
