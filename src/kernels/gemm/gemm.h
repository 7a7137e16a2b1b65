// Our packed fp32 GEMM: a BLIS-style loop nest (A packed in MR-row panels, B packed in NR-column
// panels, register-blocked microkernels) with the epilogue applied to each C tile right after its
// last K block, while the tile is still in L1. Used by the gemm tactics (tactics.cc) and meant to
// be reused by other families (im2col / 1x1 convolutions): see sgemm() below.
//
//   C[M,N] = epilogue( A[M,K] * B[K,N] )
//
// Determinism: every C element is computed by the same sequence of float operations whatever
// the thread count (the K blocking `kc` fixes the summation order; M/N partitioning does not
// change it), so results are bitwise identical for any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ir/epilogue.h"

namespace tac::kernels::gemm {

enum class Isa { avx2, avx512 };

// One microkernel and its cache blocking: the parameters of a table row.
//   mr x nr: register tile (nr a multiple of the vector width: 16 for AVX-512, 8 for AVX2).
//   kc: K block (the packed B micro-panel kc x nr should sit in L1);
//   mc: M block (the packed A block mc x kc should sit in L2); nc: N block of one task.
//   pack_a: copy each mc x kc block of an unpacked A into mr-row panels first (contiguous
//   broadcasts; pays a copy), or let the microkernel read A's rows in place (no copy; mr
//   streams). An A that is packed already (Operand::packed) is read as is either way.
//   pack_b: copy an unpacked B into nr-column panels first (the default), or let the microkernel
//   read B's rows in place (pack_b = false: needs an unpacked B with cs == 1; only the last,
//   partial column panel is copied). In place saves a K x N copy, which dominates when M is small
//   (e.g. a 1x1 convolution with few output channels reading its NCHW input as B).
struct Blocking {
  Isa isa = Isa::avx512;
  int mr = 6, nr = 32;
  int kc = 256, mc = 120, nc = 1024;
  bool pack_a = true;
  bool pack_b = true;
};
// Whether `b` names a microkernel compiled into the library.
bool blocking_supported(const Blocking& b);
// Whether the running CPU can execute it.
bool isa_available(Isa isa);

// A matrix operand. Unpacked: element (i, j) is data[i * rs + j * cs] (any strides, so
// transposed operands need no copy). Packed: data comes from pack_a / pack_b with the same
// Blocking, and rs / cs are ignored.
struct Operand {
  const float* data = nullptr;
  int64_t rs = 0, cs = 1;
  bool packed = false;
};

// What is applied to each element of C, in this order (one rounding per step, in float):
//   v = alpha * acc
//   v += bias[j]            (bias_per_row: bias[i]; e.g. a convolution's per-channel bias)
//   v += res_scale * res[i * res_rs + j * res_cs]   (residual / Gemm's beta * C; strides may be 0
//                                                    to broadcast)
//   c = act(v)
struct Epilogue {
  float alpha = 1;
  const float* bias = nullptr;
  bool bias_per_row = false;
  const float* res = nullptr;
  int64_t res_rs = 0, res_cs = 0;
  float res_scale = 1;
  ir::Epilogue act;
};

// Packed layouts (floats). A: ceil(M/mr) panels of mr rows x K, k-major (mr values per k), rows
// past M zero. B: ceil(N/nr) panels of K x nr columns, k-major, columns past N zero. Both cover
// the full K, so any kc can index them.
size_t packed_a_floats(const Blocking& blk, int64_t M, int64_t K);
size_t packed_b_floats(const Blocking& blk, int64_t K, int64_t N);
void pack_a(const Blocking& blk, int64_t M, int64_t K, const float* a, int64_t rs, int64_t cs, float* out);
void pack_b(const Blocking& blk, int64_t K, int64_t N, const float* b, int64_t rs, int64_t cs, float* out);

// Scratch for sgemm(), 64-byte aligned by the caller: per-thread A blocks and edge tiles, plus
// the packed copy of B when B is not packed already.
size_t sgemm_workspace_bytes(const Blocking& blk, int64_t M, int64_t N, int64_t K, bool b_packed, int threads);

// C = epilogue(A * B), C row-major with leading dimension ldc (>= N). Requires
// blocking_supported(blk) and isa_available(blk.isa); M, N, K >= 1. Runs an OpenMP parallel
// loop over M x N blocks with `threads` threads (no OpenMP region when threads == 1). Does not
// allocate. C must not alias A, B or the residual.
//
// For convolutions (the intended second caller):
//  - im2col / 1x1, NCHW: out[oc, hw] = W[oc, ic*kh*kw] * col[ic*kh*kw, hw]: pack the weights once
//    with pack_a (Operand{packed=true}), pass the column buffer (or, for a 1x1 stride-1 conv,
//    the input itself: rs = H*W, cs = 1) as an unpacked B, bias_per_row = true.
//  - NHWC: out[hw, oc] = col[hw, K] * W^T: pack the weights with pack_b (rs = 1, cs = K for an
//    [oc, K] weight), A = the rows of the input / column buffer read in place (pack_a = false).
//  The epilogue (bias, residual with strides, activation) is applied per tile while it is hot.
void sgemm(const Blocking& blk, int64_t M, int64_t N, int64_t K, const Operand& a, const Operand& b, float* c,
           int64_t ldc, const Epilogue& ep, int threads, void* workspace);

// The grid of tasks sgemm splits C into for `threads` threads: tm x tn blocks, the mr-row and
// nr-column tiles dealt out evenly (task (ti, tj) holds row tiles [ti*mt/tm, (ti+1)*mt/tm) of
// the mt = ceil(M/mr), likewise columns), each within the blocking's mc x nc; with several
// threads, tm * tn a multiple of `threads` where the tiles allow. Exposed for tests.
void task_grid(const Blocking& blk, int64_t M, int64_t N, int threads, int64_t& tm, int64_t& tn);

// The epilogue alone over rows of an already computed C (for library GEMMs: OpenBLAS), using the
// best ISA available. Row i of C is c + i * ldc; `row0` is the index of the first row (for the
// per-row bias and the residual).
void apply_epilogue(int64_t rows, int64_t N, float* c, int64_t ldc, int64_t row0, const Epilogue& ep, int threads);

// Internals shared by the ISA files (gemm_avx512.cc, gemm_avx2.cc).
namespace detail {
// c[m x nr tile] (=|+=) a_panel * b_panel over kc; row i of A at a[i] (packed) or a[i * a_rs]
// (unpacked kernels), a advances by a_stride floats per k, b by b_stride (nr when packed). Writes all nr columns
// (callers route N edges through a scratch tile).
using MicroKernel = void (*)(int64_t kc, const float* a, int64_t a_rs, int64_t a_stride, const float* b,
                             int64_t b_stride, float* c, int64_t ldc, bool accumulate);
// c[j] = act(alpha * c[j] + bias[j] + row_bias + res_scale * res[j * res_cs]) for j < n;
// bias may be null, res may be null.
using RowEpilogue = void (*)(float* c, int64_t n, float alpha, const float* bias, float row_bias, const float* res,
                             int64_t res_cs, float res_scale, const ir::Epilogue& act);
// The microkernel for m rows (1 <= m <= mr) of a tile of `nr` columns, or nullptr.
MicroKernel avx512_kernel(int m, int nr, bool packed_a);
MicroKernel avx2_kernel(int m, int nr, bool packed_a);
void avx512_row_epilogue(float* c, int64_t n, float alpha, const float* bias, float row_bias, const float* res,
                         int64_t res_cs, float res_scale, const ir::Epilogue& act);
void avx2_row_epilogue(float* c, int64_t n, float alpha, const float* bias, float row_bias, const float* res,
                       int64_t res_cs, float res_scale, const ir::Epilogue& act);
// The transcendental activations (Gelu, Sigmoid, Tanh) over a finished row c[0..n), in place,
// with the elementwise family's vector functions for `isa`: the same code, so the same results,
// as a separate Gelu/Sigmoid/Tanh step. False (nothing done) for any other activation.
bool vector_act_row(Isa isa, const ir::Epilogue& act, float* c, int64_t n);
// The epilogue over rows [i0, i0+rows) x columns [j0, j0+n) of C (one microkernel tile), as
// avx512_row_epilogue row by row but with its set-up once per tile: with short reductions
// (1x1 convs on 16-96 channels) the per-row calls cost as much as the tile's FMAs. Handles
// none / relu / clip and a residual with unit column stride; false: use the per-row path.
bool avx512_tile_epilogue(float* c, int64_t ldc, int64_t i0, int64_t rows, int64_t j0, int64_t n, const Epilogue& ep);
}  // namespace detail

}  // namespace tac::kernels::gemm
