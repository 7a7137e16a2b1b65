// The packed GEMM driver: packing, the blocked loop nest, threading and the epilogue
// (see gemm.h). The microkernels live in gemm_avx512.cc / gemm_avx2.cc.
#include "kernels/gemm/gemm.h"

#include <algorithm>
#include <cstring>

#include <omp.h>

#include "kernels/elementwise/common.h"
#include "kernels/tactic.h"

namespace tac::kernels::gemm {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t round_up_floats(size_t n) { return (n + 15) / 16 * 16; }  // keeps 64-byte alignment

detail::MicroKernel micro_kernel(const Blocking& blk, int m, bool packed_a) {
  return blk.isa == Isa::avx512 ? detail::avx512_kernel(m, blk.nr, packed_a) : detail::avx2_kernel(m, blk.nr, packed_a);
}

// Scalar epilogue row for CPUs without AVX2 (library GEMMs still run there).
void scalar_row_epilogue(float* c, int64_t n, float alpha, const float* bias, float row_bias, const float* res,
                         int64_t res_cs, float res_scale, const ir::Epilogue& act) {
  for (int64_t j = 0; j < n; ++j) {
    float v = alpha * c[j];
    if (bias) v += bias[j];
    if (row_bias != 0.0f) v += row_bias;
    if (res) v += res_scale * res[j * res_cs];
    c[j] = act.apply(v);
  }
}

}  // namespace

bool detail::vector_act_row(Isa isa, const ir::Epilogue& act, float* c, int64_t n) {
  using A = ir::Epilogue::Act;
  if (act.act != A::gelu && act.act != A::sigmoid && act.act != A::tanh) return false;
  ew::isa_kernels(isa == Isa::avx512 ? ew::Isa::avx512 : ew::Isa::avx2).unary(*ew::unary_of(act.act), c, c, n, 0.0f, 0.0f);
  return true;
}

namespace {

detail::RowEpilogue row_epilogue(Isa isa) {
  return isa == Isa::avx512 ? detail::avx512_row_epilogue : detail::avx2_row_epilogue;
}

bool epilogue_is_identity(const Epilogue& ep) {
  return ep.alpha == 1.0f && !ep.bias && !ep.res && ep.act.act == ir::Epilogue::Act::none;
}

void apply_epilogue_rows(detail::RowEpilogue row, int64_t i0, int64_t rows, int64_t j0, int64_t n, float* c,
                         int64_t ldc, const Epilogue& ep) {
  for (int64_t i = i0; i < i0 + rows; ++i) {
    const float* bias = ep.bias && !ep.bias_per_row ? ep.bias + j0 : nullptr;
    const float row_bias = ep.bias && ep.bias_per_row ? ep.bias[i] : 0.0f;
    const float* res = ep.res ? ep.res + i * ep.res_rs + j0 * ep.res_cs : nullptr;
    row(c + i * ldc + j0, n, ep.alpha, bias, row_bias, res, ep.res_cs, ep.res_scale, ep.act);
  }
}

// Per-thread scratch: the packed A block (mc x kc), one mr x nr edge tile, and (B read in place)
// the kc x nr copy of a partial last column panel.
size_t thread_scratch_floats(const Blocking& blk) {
  return round_up_floats(static_cast<size_t>(blk.mc) * blk.kc) + round_up_floats(static_cast<size_t>(blk.mr) * blk.nr) +
         (blk.pack_b ? 0 : round_up_floats(static_cast<size_t>(blk.kc) * blk.nr));
}

// Packs rows [i0, i0+m) x k [p0, p0+kc) of an unpacked A into mr-row panels (stride mr per k).
void pack_a_block(const Blocking& blk, const Operand& a, int64_t i0, int64_t m, int64_t p0, int64_t kc, float* out) {
  const int mr = blk.mr;
  for (int64_t ir = 0; ir < m; ir += mr) {
    const int64_t rows = std::min<int64_t>(mr, m - ir);
    float* dst = out + ir * kc;
    const float* src = a.data + (i0 + ir) * a.rs + p0 * a.cs;
    if (a.rs == 1) {  // column-major A (transA): each k is a contiguous run of rows
      for (int64_t k = 0; k < kc; ++k) {
        const float* s = src + k * a.cs;
        float* d = dst + k * mr;
        for (int64_t r = 0; r < rows; ++r) d[r] = s[r];
        for (int64_t r = rows; r < mr; ++r) d[r] = 0.0f;
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        const float* s = src + r * a.rs;
        for (int64_t k = 0; k < kc; ++k) dst[k * mr + r] = s[k * a.cs];
      }
      for (int64_t r = rows; r < mr; ++r)
        for (int64_t k = 0; k < kc; ++k) dst[k * mr + r] = 0.0f;
    }
  }
}

// One task: C rows [i0, i0+m) x columns [j0, j0+n), all of K.
// `bp` is the packed B, or (b_rs > 0) B's rows read in place, row k at bp + k * b_rs.
void run_block(const Blocking& blk, int64_t i0, int64_t m, int64_t j0, int64_t n, int64_t K, const Operand& a,
               const float* bp, int64_t b_rs, float* c, int64_t ldc, const Epilogue& ep, bool identity, float* scratch) {
  const int mr = blk.mr, nr = blk.nr;
  float* abuf = scratch;
  float* tile = scratch + round_up_floats(static_cast<size_t>(blk.mc) * blk.kc);
  float* bedge = tile + round_up_floats(static_cast<size_t>(blk.mr) * blk.nr);
  const detail::RowEpilogue row = row_epilogue(blk.isa);
  using Act = ir::Epilogue::Act;
  const bool deferred_act = ep.act.act == Act::gelu || ep.act.act == Act::sigmoid || ep.act.act == Act::tanh;
  Epilogue tile_ep = ep;
  if (deferred_act) {
    tile_ep.act = ir::Epilogue{};
    identity = epilogue_is_identity(tile_ep);
  }
  // A read in place: row i at a_rs * i, k step a_cs; packed panels: rows adjacent, k step mr.
  const bool in_place = !a.packed && !blk.pack_a;
  const detail::MicroKernel full = micro_kernel(blk, mr, !in_place);
  for (int64_t p0 = 0; p0 < K; p0 += blk.kc) {
    const int64_t kc = std::min<int64_t>(blk.kc, K - p0);
    const bool first = p0 == 0, last = p0 + kc == K;
    if (!a.packed && blk.pack_a) pack_a_block(blk, a, i0, m, p0, kc, abuf);
    for (int64_t jr = 0; jr < n; jr += nr) {
      const int64_t cols = std::min<int64_t>(nr, n - jr);
      const float* b = bp + (j0 + jr) / nr * nr * K + p0 * nr;
      int64_t bs = nr;
      if (b_rs > 0) {  // in place: full panels read B's rows; a partial one is copied, zero-filled
        const float* src = bp + p0 * b_rs + j0 + jr;
        if (cols == nr) {
          b = src, bs = b_rs;
        } else {
          for (int64_t k = 0; k < kc; ++k) {
            std::memcpy(bedge + k * nr, src + k * b_rs, static_cast<size_t>(cols) * sizeof(float));
            std::fill(bedge + k * nr + cols, bedge + (k + 1) * nr, 0.0f);
          }
          b = bedge;
        }
      }
      for (int64_t ir = 0; ir < m; ir += mr) {
        const int64_t rows = std::min<int64_t>(mr, m - ir);
        const float* ap = a.packed ? a.data + (i0 + ir) / mr * mr * K + p0 * mr
                          : in_place ? a.data + (i0 + ir) * a.rs + p0 * a.cs
                                     : abuf + ir * kc;
        const int64_t a_step = in_place ? a.cs : mr;
        const detail::MicroKernel uk = rows == mr ? full : micro_kernel(blk, static_cast<int>(rows), !in_place);
        float* cp = c + (i0 + ir) * ldc + j0 + jr;
        if (cols == nr) {
          uk(kc, ap, a.rs, a_step, b, bs, cp, ldc, !first);
        } else {  // N edge: compute the full-width tile aside, copy the valid columns
          uk(kc, ap, a.rs, a_step, b, bs, tile, nr, false);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t q = 0; q < cols; ++q) cp[r * ldc + q] = first ? tile[r * nr + q] : cp[r * ldc + q] + tile[r * nr + q];
        }
        if (last && !identity &&
            !(blk.isa == Isa::avx512 && detail::avx512_tile_epilogue(c, ldc, i0 + ir, rows, j0 + jr, cols, tile_ep)))
          apply_epilogue_rows(row, i0 + ir, rows, j0 + jr, cols, c, ldc, tile_ep);
      }
    }
  }
  // A transcendental activation runs once over the block's rows rather than per nr-wide tile: its
  // vector function has ~25 constants to set up, which a 32-column call cannot amortise.
  if (deferred_act)
    for (int64_t i = i0; i < i0 + m; ++i) detail::vector_act_row(blk.isa, ep.act, c + i * ldc + j0, n);
}

}  // namespace

void task_grid(const Blocking& blk, int64_t M, int64_t N, int threads, int64_t& tm, int64_t& tn) {
  // Tasks are a tm x tn grid of C blocks in whole mr x nr tiles, the tiles of each dimension
  // dealt out evenly (block sizes differ by at most one tile), each block at most the
  // blocking's mc x nc (mc bounds the packed-A scratch: tm >= ceil(M / mc) guarantees it). With
  // several threads the grid is refined until there are at least two tasks per thread and their
  // count is a multiple of the thread count (where the tiles allow), so a static schedule gives
  // every thread the same work. Halving mc / nc instead left uneven remainders: M=128 x N=768
  // became blocks of 512 and 256 columns, one thread doing twice the other's work (bert-base's
  // projections at 2 threads). The split never changes any element's arithmetic (K blocking
  // is the same).
  const int64_t mt = ceil_div(M, blk.mr), nt = ceil_div(N, blk.nr);
  tm = ceil_div(M, blk.mc), tn = ceil_div(N, std::max(blk.nc, blk.nr));
  if (threads <= 1) return;
  // Cut the dimension whose blocks are larger (in elements), preferring N on ties (each task
  // then re-reads fewer packed A rows); stop when the tiles run out.
  auto cut = [&] {
    const bool can_m = tm < mt, can_n = tn < nt;
    if (!can_m && !can_n) return false;
    const double m_size = static_cast<double>(M) / static_cast<double>(tm), n_size = static_cast<double>(N) / static_cast<double>(tn);
    if (can_n && (n_size >= m_size || !can_m)) ++tn;
    else ++tm;
    return true;
  };
  while (tm * tn < 2 * threads && cut()) {}
  for (int extra = 0; (tm * tn) % threads != 0 && extra < 4 * threads && cut(); ++extra) {}
}

bool isa_available(Isa isa) {
  return isa == Isa::avx512 ? cpu_features().avx512 : cpu_features().avx2_fma;
}

bool blocking_supported(const Blocking& b) {
  if (b.kc < 1 || b.mc < b.mr || b.nc < b.nr || b.mc % b.mr != 0 || b.nc % b.nr != 0) return false;
  return micro_kernel(b, b.mr, true) != nullptr;
}

size_t packed_a_floats(const Blocking& blk, int64_t M, int64_t K) {
  return round_up_floats(static_cast<size_t>(ceil_div(M, blk.mr) * blk.mr * K));
}
size_t packed_b_floats(const Blocking& blk, int64_t K, int64_t N) {
  return round_up_floats(static_cast<size_t>(ceil_div(N, blk.nr) * blk.nr * K));
}

void pack_a(const Blocking& blk, int64_t M, int64_t K, const float* a, int64_t rs, int64_t cs, float* out) {
  // Full-K panels: the same layout as a block with kc = K.
  pack_a_block(blk, Operand{a, rs, cs, false}, 0, M, 0, K, out);
}

void pack_b(const Blocking& blk, int64_t K, int64_t N, const float* b, int64_t rs, int64_t cs, float* out) {
  const int nr = blk.nr;
  for (int64_t j = 0; j < N; j += nr) {
    const int64_t cols = std::min<int64_t>(nr, N - j);
    float* dst = out + j * K;  // panel j/nr starts at (j/nr) * nr * K
    if (cs == 1) {
      for (int64_t k = 0; k < K; ++k) {
        std::memcpy(dst + k * nr, b + k * rs + j, static_cast<size_t>(cols) * sizeof(float));
        std::fill(dst + k * nr + cols, dst + (k + 1) * nr, 0.0f);
      }
    } else {
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t q = 0; q < cols; ++q) dst[k * nr + q] = b[k * rs + (j + q) * cs];
        std::fill(dst + k * nr + cols, dst + (k + 1) * nr, 0.0f);
      }
    }
  }
}

size_t sgemm_workspace_bytes(const Blocking& blk, int64_t /*M*/, int64_t N, int64_t K, bool b_packed, int threads) {
  size_t floats = static_cast<size_t>(std::max(threads, 1)) * thread_scratch_floats(blk);
  if (!b_packed && blk.pack_b) floats += packed_b_floats(blk, K, N);
  return floats * sizeof(float);
}

void sgemm(const Blocking& blk, int64_t M, int64_t N, int64_t K, const Operand& a, const Operand& b, float* c,
           int64_t ldc, const Epilogue& ep, int threads, void* workspace) {
  threads = std::max(threads, 1);
  float* ws = static_cast<float*>(workspace);
  const float* bp = b.data;
  const int64_t b_rs = !b.packed && !blk.pack_b ? std::max<int64_t>(b.rs, 1) : 0;  // B read in place
  if (!b.packed && blk.pack_b) {
    float* dst = ws;
    ws += packed_b_floats(blk, K, N);
    const int64_t panels = ceil_div(N, blk.nr);
    if (threads == 1 || panels == 1) {
      pack_b(blk, K, N, b.data, b.rs, b.cs, dst);
    } else {
#pragma omp parallel for num_threads(threads) schedule(static)
      for (int64_t p = 0; p < panels; ++p) {
        const int64_t j = p * blk.nr;
        pack_b(blk, K, std::min<int64_t>(blk.nr, N - j), b.data + j * b.cs, b.rs, b.cs, dst + j * K);
      }
    }
    bp = dst;
  }
  const bool identity = epilogue_is_identity(ep);
  int64_t tm = 1, tn = 1;
  task_grid(blk, M, N, threads, tm, tn);
  const int64_t mt = ceil_div(M, blk.mr), nt = ceil_div(N, blk.nr), ntasks = tm * tn;
  const size_t per_thread = thread_scratch_floats(blk);
  auto task = [&](int64_t t, float* scratch) {
    const int64_t ti = t % tm, tj = t / tm;
    const int64_t i0 = ti * mt / tm * blk.mr, i1 = std::min(M, (ti + 1) * mt / tm * blk.mr);
    const int64_t j0 = tj * nt / tn * blk.nr, j1 = std::min(N, (tj + 1) * nt / tn * blk.nr);
    run_block(blk, i0, i1 - i0, j0, j1 - j0, K, a, bp, b_rs, c, ldc, ep, identity, scratch);
  };
  if (threads == 1 || ntasks == 1) {
    for (int64_t t = 0; t < ntasks; ++t) task(t, ws);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    float* scratch = ws + static_cast<size_t>(omp_get_thread_num()) * per_thread;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < ntasks; ++t) task(t, scratch);
  }
}

void apply_epilogue(int64_t rows, int64_t N, float* c, int64_t ldc, int64_t row0, const Epilogue& ep, int threads) {
  if (epilogue_is_identity(ep)) return;
  const detail::RowEpilogue row = cpu_features().avx512     ? detail::avx512_row_epilogue
                                  : cpu_features().avx2_fma ? detail::avx2_row_epilogue
                                                            : scalar_row_epilogue;
  Epilogue shifted = ep;  // rows of `c` are rows row0.. of the problem
  if (shifted.res) shifted.res += row0 * ep.res_rs;
  if (shifted.bias && shifted.bias_per_row) shifted.bias += row0;
  if (threads <= 1 || rows < 2) {
    apply_epilogue_rows(row, 0, rows, 0, N, c, ldc, shifted);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < rows; ++i) apply_epilogue_rows(row, i, 1, 0, N, c, ldc, shifted);
}

}  // namespace tac::kernels::gemm
