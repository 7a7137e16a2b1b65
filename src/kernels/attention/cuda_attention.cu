// The attention kernels (declared in kernels/elementwise/cuda_kernels.h), two tactics:
// - "cuda_fused" (CUDA cores, fp32/fp16/bf16): one block per (batch, 16 query rows); the batch's
//   K [d][sk] and V [sk][dv] staged in shared memory once per block (16-byte copies); a warp per
//   row: the query row in shared memory, a lane per key for the scores (four keys at a time;
//   scale, mask, then a warp-wide max and sum for the softmax, kept in fp32), a lane per output
//   column for the product with V (two columns, two key halves at a time).
// - "cuda_flash_w2/w4/w4s2/w8s2" (tensor cores, fp16/bf16): see its section below.
// At BERT sizes (sq = sk = 128, d = dv = 64) the whole attention of a head is one launch instead
// of the batched GEMM, softmax, batched GEMM chain (and the scores never leave the SM). Operands
// are strided views (AttentionDesc): the layouts PyTorch's attention exports produce are read in
// place (pass.attention_views).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda_elem.cuh"

namespace tac::cuda::kern {

namespace {

// One warp per query row, kRows rows per block (the batch's K and V staged once per block).
constexpr int kRows = 16;
constexpr int kBlockThreads = kRows * 32;

// Shared memory: per warp its query row and scores (fp32), then K and V of the batch (type T,
// 16-byte aligned after the fp32 part).
template <class T>
int64_t smem_bytes(const AttentionDesc& d) {
  const int64_t rows = (static_cast<int64_t>(sizeof(float)) * kRows * (d.d + d.sk) + 15) / 16 * 16;
  return rows + static_cast<int64_t>(sizeof(T)) * (d.d * d.sk + d.sk * d.dv);
}

// A rows x cols matrix of T from a strided view (element (i, j) at src[i * rs + j * cs]) to shared
// memory, row-major with leading dim ld. Rows that are contiguous and 16-byte aligned go 16 bytes
// at a time; with kAsync those copies are cp.async: every thread issues all its copies before any
// completes (a block of a few threads stages 32 KB without waiting on each load in turn), and the
// caller commits and waits. Other views: one element at a time, consecutive threads on the
// smaller stride (coalesced reads of a transposed view).
template <bool kAsync = false, int kCols = 0, class T>
__device__ void stage(T* dst, int ld, const T* src, int rows, int cols, int64_t rs, int64_t cs) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  if (kCols) cols = kCols;  // a constant row length: the index arithmetic below becomes shifts
  const bool vec = cs == 1 && cols % kVec == 0 && ld % kVec == 0 && rs % kVec == 0 &&
                   (reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16 == 0;
  if (vec) {
    const int per_row = cols / kVec;
    for (int i = threadIdx.x; i < rows * per_row; i += blockDim.x) {
      const int r = i / per_row, c = (i - r * per_row) * kVec;
      const uint4* from = reinterpret_cast<const uint4*>(src + r * rs + c);
      uint4* to = reinterpret_cast<uint4*>(dst + r * ld + c);
      if constexpr (kAsync) __pipeline_memcpy_async(to, from, 16);
      else *to = *from;
    }
  } else if (rs < cs) {
    for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
      const int c = i / rows, r = i - c * rows;
      dst[r * ld + c] = src[r * rs + c * cs];
    }
  } else {
    for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) {
      const int r = i / cols, c = i - r * cols;
      dst[r * ld + c] = src[r * rs + c * cs];
    }
  }
}

// The offset of batch index b under per-batch-dim strides bs (batch dims row-major). b is a
// block index (< 2^31): 32-bit divisions, a few instructions each instead of a 64-bit call.
__device__ int64_t batch_offset(const AttentionDesc& d, const int64_t* bs, uint32_t b) {
  int64_t off = 0;
  for (int i = d.nb - 1; i >= 0; --i) {
    const uint32_t n = static_cast<uint32_t>(d.batch_dims[i]), next = b / n;
    off += static_cast<int64_t>(b - next * n) * bs[i];
    b = next;
  }
  return off;
}

// Where operand o (0 Q, 1 K, 2 V, 3 y) of batch b starts.
template <class T>
__device__ T* operand(T* base, const AttentionDesc& d, int o, uint32_t b) {
  return base + d.off[o] + batch_offset(d, d.bs[o], b);
}

template <class T>
__global__ void __launch_bounds__(kBlockThreads) attention_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                                               const T* __restrict__ v, const T* __restrict__ mask,
                                                               T* __restrict__ y, AttentionDesc d) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* rows = reinterpret_cast<float*>(smem_raw);
  T* ks = reinterpret_cast<T*>(smem_raw + (static_cast<int64_t>(sizeof(float)) * kRows * (d.d + d.sk) + 15) / 16 * 16);
  T* vs = ks + d.d * d.sk;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* qrow = rows + warp * (d.d + d.sk);
  float* p = qrow + d.d;
  const uint32_t b = blockIdx.x;
  const int dd = static_cast<int>(d.d), sk = static_cast<int>(d.sk), dv = static_cast<int>(d.dv);
  stage(ks, sk, operand(k, d, 1, b), dd, sk, d.rs[1], d.cs[1]);
  stage(vs, dv, operand(v, d, 2, b), sk, dv, d.rs[2], d.cs[2]);
  const int64_t moff = mask ? batch_offset(d, d.mask_bs, b) : 0;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kRows + warp;
  if (row < d.sq) {
    const T* qr = operand(q, d, 0, b) + row * d.rs[0];
    for (int64_t j = lane; j < d.d; j += 32) qrow[j] = ld(qr, j * d.cs[0]);
  }
  __syncthreads();
  if (row >= d.sq) return;
  // Scores: a lane per key, four keys at a time (four independent sums).
  float mx = -FLT_MAX;
  for (int64_t c0 = lane; c0 < d.sk; c0 += 128) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t j = 0; j < d.d; ++j) {
      const float qj = qrow[j];
      const T* kr = ks + j * d.sk;
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (c0 + 32 * u < d.sk) acc[u] += qj * ld(kr, c0 + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= d.sk) break;
      float s = acc[u] * d.scale;
      if (mask) s += ld(mask, moff + row * d.mask_rs + c * d.mask_cs);
      p[c] = s;
      mx = fmaxf(mx, s);
    }
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  for (int64_t c = lane; c < d.sk; c += 32) {
    const float e = expf(p[c] - mx);
    p[c] = e;
    sum += e;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = 1.f / sum;
  __syncwarp();
  // Output: a lane per column, two columns at a time, keys in two interleaved halves.
  T* yr = operand(y, d, 3, b) + row * d.rs[3];
  const int64_t ycs = d.cs[3];
  for (int64_t c0 = lane; c0 < d.dv; c0 += 64) {
    const bool two = c0 + 32 < d.dv;
    float a0 = 0.f, a1 = 0.f, b0 = 0.f, b1 = 0.f;
    int64_t j = 0;
    for (; j + 1 < d.sk; j += 2) {
      const float p0 = p[j], p1 = p[j + 1];
      const T* v0 = vs + j * d.dv;
      const T* v1 = v0 + d.dv;
      a0 += p0 * ld(v0, c0);
      b0 += p1 * ld(v1, c0);
      if (two) {
        a1 += p0 * ld(v0, c0 + 32);
        b1 += p1 * ld(v1, c0 + 32);
      }
    }
    if (j < d.sk) {
      a0 += p[j] * ld(vs + j * d.dv, c0);
      if (two) a1 += p[j] * ld(vs + j * d.dv, c0 + 32);
    }
    st(yr, c0 * ycs, (a0 + b0) * inv);
    if (two) st(yr, (c0 + 32) * ycs, (a1 + b1) * inv);
  }
}

// K's rows (its d dim) contiguous and not its columns (K before its transpose): the KROWS
// kernels stage K as [sk][d].
bool k_rows(const AttentionDesc& d) { return d.cs[1] != 1 && d.rs[1] == 1; }

template <class F>
int with_half(Elem t, F&& f) {
  if (t == Elem::f16) return f(static_cast<__half*>(nullptr));
  if (t == Elem::bf16) return f(static_cast<__nv_bfloat16*>(nullptr));
  return static_cast<int>(cudaErrorInvalidValue);
}

// ---- the register-resident tensor-core kernel (fp16 / bf16), "flash" ----
// One block per (batch, 16 * RG query rows): RG row groups of 16 rows, each worked by KS warps
// (NW = RG * KS), each of those taking 1/KS of the keys (split keys: more warps in flight when
// there are few blocks, each with a shorter chain). K, V and the block's Q rows are staged in
// shared memory (rows padded by 8 elements: the fragment loads hit distinct banks). Per warp,
// its keys in chunks of 64: S = Q·Kᵀ with mma.sync m16n8k16 into registers (fp32), the online
// softmax on those registers (each row's max and sum over the four lanes that hold it: running
// max, rescaled sums and output, in fp32, exp2 with log2(e) folded into the scale), P packed to
// T straight from the accumulators into the A fragments of O += P·V (V's B fragments by
// ldmatrix.trans). The scores never leave the registers. K and V arrive in one cp.async group
// per chunk: with KS = 1 the first chunk's work overlaps the staging of the rest. With KS > 1
// the warps of a row group merge their (max, sum, O) through shared memory at the end.
// D = 64: d = dv = 64 exactly (every loop bound a constant); D = 128: d, dv <= 128, multiples
// of 16. sk a multiple of 16.
__host__ __device__ constexpr int flash_ld(int n) { return n + 8; }

__host__ __device__ inline int64_t flash_smem(const AttentionDesc& d, int nw, int ks, bool krows) {
  const int64_t rows = 16 * (nw / ks);
  const int64_t kv = krows ? d.sk * flash_ld(static_cast<int>(d.d)) : d.d * flash_ld(static_cast<int>(d.sk));
  const int64_t staged = 2 * (kv + d.sk * flash_ld(static_cast<int>(d.dv)) + rows * flash_ld(static_cast<int>(d.d)));
  // The split-key merge: per row group and further split, O (fp32, rows padded) and (max, sum).
  const int64_t merge = ks > 1 ? 4 * (nw / ks) * (ks - 1) * 16 * (flash_ld(static_cast<int>(d.dv)) + 2) : 0;
  return staged > merge ? staged : merge;
}

template <class T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The B fragment (16 x 8, k x n) of a row-major [k][n] matrix in shared memory at `p` (row k = 0,
// column n = 0), leading dim ld: two transposed 8x8 loads.
template <class T>
__device__ __forceinline__ void ldsm_b_trans(const T* p, int ld, uint32_t& b0, uint32_t& b1) {
  const int lane = threadIdx.x % 32;
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p + (lane % 16) * ld));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(addr));
}

template <class T>
__device__ __forceinline__ uint32_t lds32(const T* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

template <class T, int D, int NW, int KS, bool KROWS>
__global__ void __launch_bounds__(NW * 32) attention_flash_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                                                  const T* __restrict__ v, const T* __restrict__ mask,
                                                                  T* __restrict__ y, AttentionDesc d) {
  constexpr int RG = NW / KS;
  constexpr bool kExact = D == 64;
  constexpr int kCols = kExact ? D : 0;  // staged row length when known
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int sk = static_cast<int>(d.sk);
  const int dd = kExact ? D : static_cast<int>(d.d), dv = kExact ? D : static_cast<int>(d.dv);
  const int ldk = KROWS ? flash_ld(dd) : flash_ld(sk), ldv = flash_ld(dv), ldq = flash_ld(dd);
  T* ks = reinterpret_cast<T*>(smem_raw);
  T* vs = ks + (KROWS ? sk * ldk : dd * ldk);
  T* qs = vs + sk * ldv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int rg = warp % RG, split = warp / RG;
  const uint32_t b = blockIdx.x;
  const T* qb = q + d.off[0] + batch_offset(d, d.bs[0], b);
  const T* kb = k + d.off[1] + batch_offset(d, d.bs[1], b);
  const T* vb = v + d.off[2] + batch_offset(d, d.bs[2], b);
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * 16 * RG;
  // The block's Q rows with the first chunk of 64 keys (K and V) in one cp.async group, each
  // further chunk in its own.
  const int rows = static_cast<int>(d.sq - row0 < 16 * RG ? d.sq - row0 : 16 * RG);
  stage<true, kCols>(qs, ldq, qb + row0 * d.rs[0], rows, dd, d.rs[0], d.cs[0]);
  const int chunks = (sk + 63) / 64;
  for (int c0 = 0; c0 < sk; c0 += 64) {
    const int n = sk - c0 < 64 ? sk - c0 : 64;
    const T* kc = kb + c0 * d.cs[1];
    if (KROWS) stage<true, kCols>(ks + c0 * ldk, ldk, kc, n, dd, d.cs[1], d.rs[1]);  // [sk][d]
    else stage<true>(ks + c0, ldk, kc, dd, n, d.rs[1], d.cs[1]);                     // [d][sk]
    stage<true, kCols>(vs + c0 * ldv, ldv, vb + c0 * d.rs[2], n, dv, d.rs[2], d.cs[2]);
    __pipeline_commit();
  }
  for (int i = rows * dd + threadIdx.x; i < 16 * RG * dd; i += blockDim.x) qs[(i / dd) * ldq + i % dd] = T(0.f);
  const int64_t wrow = row0 + rg * 16;
  const bool active = wrow < d.sq;  // idle warps of the last block still join the barriers below
  // This warp's keys: [kbeg, kend), whole chunks of 64 from kbeg.
  const int span = KS == 1 ? sk : ((sk + KS - 1) / KS + 15) / 16 * 16;
  const int kbeg = split * span < sk ? split * span : sk, kend = kbeg + span < sk ? kbeg + span : sk;
  if (KS == 1) __pipeline_wait_prior(chunks - 1);
  else __pipeline_wait_prior(0);
  __syncthreads();
  // Q's A fragments, all of d.
  const T* qw = qs + rg * 16 * ldq;
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    if (active && (kExact || kk < dd / 16)) {
      qa[kk][0] = lds32(qw + g * ldq + kk * 16 + 2 * t);
      qa[kk][1] = lds32(qw + (g + 8) * ldq + kk * 16 + 2 * t);
      qa[kk][2] = lds32(qw + g * ldq + kk * 16 + 8 + 2 * t);
      qa[kk][3] = lds32(qw + (g + 8) * ldq + kk * 16 + 8 + 2 * t);
    }
  constexpr float kLog2e = 1.4426950408889634f;
  const float sl = d.scale * kLog2e;
  const int64_t moff = mask ? batch_offset(d, d.mask_bs, b) : 0;
  const int64_t r_lo = wrow + g, r_hi = wrow + g + 8;  // this thread's two rows
  float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.f, 0.f};
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  for (int c0 = kbeg; c0 < kend; c0 += 64) {
    if (KS == 1 && c0 > 0) {  // this chunk's K and V
      __pipeline_wait_prior(chunks - 1 - c0 / 64);
      __syncthreads();
    }
    if (!active) continue;
    const int tiles = kend - c0 < 64 ? (kend - c0) / 8 : 8;  // n8 tiles of keys in this chunk (even)
    float s[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      if (j < tiles) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          if (kExact || kk < dd / 16) {
            uint32_t b0, b1;
            if (KROWS) {
              const T* kr = ks + (c0 + j * 8 + g) * ldk + kk * 16 + 2 * t;
              b0 = lds32(kr);
              b1 = lds32(kr + 8);
            } else {
              ldsm_b_trans(ks + kk * 16 * ldk + c0 + j * 8, ldk, b0, b1);
            }
            mma16816<T>(s[j], qa[kk], b0, b1);
          }
      }
    }
    // Scale (in log2 units), mask, the chunk's row maxima.
    float mx[2] = {-FLT_MAX, -FLT_MAX};
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < tiles)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[j][e] * sl;
          if (mask) {
            const int64_t row = e < 2 ? r_lo : r_hi, col = c0 + j * 8 + 2 * t + (e & 1);
            if (row < d.sq) x += ld(mask, moff + row * d.mask_rs + col * d.mask_cs) * kLog2e;
          }
          s[j][e] = x;
          mx[e / 2] = fmaxf(mx[e / 2], x);
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float mn = fmaxf(m[h], mx[h]), corr = exp2f(m[h] - mn);
      m[h] = mn;
      l[h] *= corr;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][2 * h] *= corr;
        o[n][2 * h + 1] *= corr;
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < tiles)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = exp2f(s[j][e] - m[e / 2]);
          s[j][e] = p;
          l[e / 2] += p;
        }
    // O += P·V over the chunk's keys, 16 at a time.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      if (2 * kk < tiles) {
        const uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int n = 0; n < D / 8; ++n)
          if (kExact || n < dv / 8) {
            uint32_t b0, b1;
            ldsm_b_trans(vs + (c0 + kk * 16) * ldv + n * 8, ldv, b0, b1);
            mma16816<T>(o[n], pa, b0, b1);
          }
      }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // each row's sum over its four lanes
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  if constexpr (KS > 1) {
    // Split keys: warps 1.. of each row group leave (max, sum, O) in shared memory (over K and V,
    // once every warp is done with them); warp 0 of the group merges them, each thread the
    // elements it holds itself.
    const int ldo = flash_ld(dv) + 2;  // O's row, then the row's max and sum
    float* merge = reinterpret_cast<float*>(smem_raw);
    __syncthreads();
    if (active && split > 0) {
      float* part = merge + ((rg * (KS - 1) + split - 1) * 16) * ldo;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float* pr = part + (g + 8 * h) * ldo;
#pragma unroll
        for (int n = 0; n < D / 8; ++n)
          if (kExact || n < dv / 8) *reinterpret_cast<float2*>(pr + n * 8 + 2 * t) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
        if (t == 0) pr[ldo - 2] = m[h], pr[ldo - 1] = l[h];
      }
    }
    __syncthreads();
    if (split > 0 || !active) return;
#pragma unroll
    for (int s2 = 1; s2 < KS; ++s2) {
      const float* part = merge + ((rg * (KS - 1) + s2 - 1) * 16) * ldo;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float* pr = part + (g + 8 * h) * ldo;
        const float ms = pr[ldo - 2], mn = fmaxf(m[h], ms), c_own = exp2f(m[h] - mn), c_other = exp2f(ms - mn);
        m[h] = mn;
        l[h] = l[h] * c_own + pr[ldo - 1] * c_other;
#pragma unroll
        for (int n = 0; n < D / 8; ++n)
          if (kExact || n < dv / 8) {
            const float2 po = *reinterpret_cast<const float2*>(pr + n * 8 + 2 * t);
            o[n][2 * h] = o[n][2 * h] * c_own + po.x * c_other;
            o[n][2 * h + 1] = o[n][2 * h + 1] * c_own + po.y * c_other;
          }
      }
    }
  }
  if (!active) return;
  T* yb = y + d.off[3] + batch_offset(d, d.bs[3], b);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = h ? r_hi : r_lo;
    if (row >= d.sq) continue;
    const float inv = 1.f / l[h];
    T* yr = yb + row * d.rs[3];
    const bool pairs = d.cs[3] == 1 && reinterpret_cast<uintptr_t>(yr) % 4 == 0;  // two columns per 4-byte store
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      if (kExact || n < dv / 8) {
        const int64_t c = n * 8 + 2 * t;
        if (pairs) {
          *reinterpret_cast<uint32_t*>(yr + c) = pack2<T>(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
        } else {
          st(yr, c * d.cs[3], o[n][2 * h] * inv);
          st(yr, (c + 1) * d.cs[3], o[n][2 * h + 1] * inv);
        }
      }
  }
}

// The block shapes (warps, key splits) the tactics offer: cuda_flash_w2, _w4, _w4s2, _w8s2.
template <class T, int D, bool KROWS, class F>
int with_flash_shape(int nw, int ks, F&& f) {
  if (nw == 2 && ks == 1) return f(attention_flash_kernel<T, D, 2, 1, KROWS>);
  if (nw == 4 && ks == 1) return f(attention_flash_kernel<T, D, 4, 1, KROWS>);
  if (nw == 4 && ks == 2) return f(attention_flash_kernel<T, D, 4, 2, KROWS>);
  if (nw == 8 && ks == 2) return f(attention_flash_kernel<T, D, 8, 2, KROWS>);
  return static_cast<int>(cudaErrorInvalidValue);
}

template <class T, class F>
int with_flash(const AttentionDesc& d, int nw, int ks, F&& f) {
  const bool d64 = d.d == 64 && d.dv == 64;
  if (k_rows(d)) return d64 ? with_flash_shape<T, 64, true>(nw, ks, f) : with_flash_shape<T, 128, true>(nw, ks, f);
  return d64 ? with_flash_shape<T, 64, false>(nw, ks, f) : with_flash_shape<T, 128, false>(nw, ks, f);
}

}  // namespace

int64_t attention_flash_smem_bytes(const AttentionDesc& d, int warps, int splits) {
  return flash_smem(d, warps, splits, k_rows(d));
}

int attention_flash_init(Elem t, const AttentionDesc& d, int warps, int splits) {
  return with_half(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return with_flash<T>(d, warps, splits, [&](auto kernel) {
      return static_cast<int>(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(flash_smem(d, warps, splits, k_rows(d)))));
    });
  });
}

int attention_flash(Elem t, const void* q, const void* k, const void* v, const void* mask, void* y,
                    const AttentionDesc& d, int warps, int splits, void* stream) {
  if (d.batches <= 0 || d.sq <= 0) return 0;
  const int64_t rows = 16 * (warps / splits);
  const dim3 grid(static_cast<unsigned>(d.batches), static_cast<unsigned>((d.sq + rows - 1) / rows));
  return with_half(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return with_flash<T>(d, warps, splits, [&](auto kernel) {
      kernel<<<grid, 32 * warps, static_cast<size_t>(flash_smem(d, warps, splits, k_rows(d))), as_stream(stream)>>>(
          static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(mask),
          static_cast<T*>(y), d);
      return launched();
    });
  });
}

int64_t attention_smem_bytes(Elem t, const AttentionDesc& d) {
  return t == Elem::f32 ? smem_bytes<float>(d) : smem_bytes<__half>(d);
}

int attention_init(Elem t, const AttentionDesc& d) {
  return with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return static_cast<int>(cudaFuncSetAttribute(attention_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(smem_bytes<T>(d))));
  });
}

int attention(Elem t, const void* q, const void* k, const void* v, const void* mask, void* y, const AttentionDesc& d,
              void* stream) {
  if (d.batches <= 0 || d.sq <= 0) return 0;
  const dim3 grid(static_cast<unsigned>(d.batches), static_cast<unsigned>((d.sq + kRows - 1) / kRows));
  return with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    attention_kernel<T><<<grid, kBlockThreads, static_cast<size_t>(smem_bytes<T>(d)), as_stream(stream)>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(mask),
        static_cast<T*>(y), d);
    return launched();
  });
}

}  // namespace tac::cuda::kern
