// The fused attention kernel (declared in kernels/elementwise/cuda_kernels.h): one block per
// (batch, 16 query rows); the batch's K [d][sk] and V [sk][dv] staged in shared memory once per
// block (16-byte copies); a warp per row: the query row in shared memory, a lane per key for the
// scores (four keys at a time; scale, mask, then a warp-wide max and sum for the softmax, kept in
// fp32), a lane per output column for the product with V (two columns, two key halves at a time). At BERT sizes (sq = sk = 128, d = dv = 64) the whole
// attention of a head is one launch instead of the batched GEMM, softmax, batched GEMM chain
// (and the scores never leave the SM).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cfloat>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/elem.cuh"

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

// n elements of T from global to shared memory, 16 bytes at a time where both are aligned. With
// kAsync the 16-byte copies are cp.async: every thread issues all its copies before any completes
// (a block of a few threads stages 32 KB without waiting on each load in turn); the caller
// commits and waits. Unaligned: plain copies either way.
template <bool kAsync = false, class T>
__device__ void stage(T* dst, const T* src, int64_t n) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  if ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16 == 0 && bytes % 16 == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* t = reinterpret_cast<uint4*>(dst);
    for (int64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) {
      if constexpr (kAsync) __pipeline_memcpy_async(t + i, s + i, 16);
      else t[i] = s[i];
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  }
}

// The mask's offset for batch index b (batch dims row-major; 0 without a mask).
__device__ int64_t mask_offset(const AttentionDesc& d, int64_t b) {
  int64_t off = 0;
  for (int i = d.nb - 1; i >= 0; --i) {
    off += (b % d.batch_dims[i]) * d.mask_bs[i];
    b /= d.batch_dims[i];
  }
  return off;
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
  const int64_t b = blockIdx.x;
  stage(ks, k + b * d.d * d.sk, d.d * d.sk);
  stage(vs, v + b * d.sk * d.dv, d.sk * d.dv);
  const int64_t moff = mask ? mask_offset(d, b) : 0;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kRows + warp;
  if (row < d.sq) {
    const T* qr = q + (b * d.sq + row) * d.d;
    for (int64_t j = lane; j < d.d; j += 32) qrow[j] = ld(qr, j);
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
  T* yr = y + (b * d.sq + row) * d.dv;
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
    st(yr, c0, (a0 + b0) * inv);
    if (two) st(yr, c0 + 32, (a1 + b1) * inv);
  }
}

// ---- the tensor-core kernel (fp16 / bf16) ----
// One block per (batch, 16 * NW query rows), a warp per 16 rows. K and V of the batch staged in
// shared memory once per block, the block's Q rows too (zeros past sq). Per warp: S = Q·K as
// 16x16x16 WMMA tiles (fp32 accumulators) stored to shared memory, the softmax row by row (scale,
// mask, max, exp in fp32; P rounded to T, the sum kept in fp32), then O = P·V by WMMA, scaled by
// 1 / sum on the way out. Needs d, dv, sk multiples of 16.
namespace wmma = nvcuda::wmma;

__host__ __device__ constexpr int64_t round128(int64_t bytes) { return (bytes + 127) / 128 * 128; }

struct MmaSmem {
  int64_t ks, vs, qs, s, p, total;  // byte offsets of each region, and the size
};
__host__ __device__ MmaSmem mma_smem(const AttentionDesc& d, int nw) {
  const int64_t sw = d.sk > d.dv ? d.sk : d.dv;
  MmaSmem m;
  m.ks = 0;
  m.vs = m.ks + round128(2 * d.d * d.sk);
  m.qs = m.vs + round128(2 * d.sk * d.dv);
  m.s = m.qs + round128(2 * 16 * nw * d.d);
  m.p = m.s + round128(4 * nw * (16 * sw + 16));
  m.total = m.p + round128(2 * nw * 16 * d.sk);
  return m;
}

// One warp's O[16][16 n] = A[16][16 kt] · B[16 kt][16 n] (both row-major T, in shared memory) as
// WMMA tiles with fp32 accumulators, stored row-major to `o` (leading dim ldo).
template <class T>
__device__ void warp_product(const T* a, int lda, const T* b, int ldb, int n, int kt, float* o, int ldo) {
  for (int j = 0; j < n; ++j) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.f);
    for (int kk = 0; kk < kt; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, lda);
      wmma::load_matrix_sync(fb, b + kk * 16 * ldb + j * 16, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(o + j * 16, acc, ldo, wmma::mem_row_major);
  }
}

template <class T, int NW>
__global__ void __launch_bounds__(NW * 32) attention_mma_kernel(const T* __restrict__ q, const T* __restrict__ k,
                                                                const T* __restrict__ v, const T* __restrict__ mask,
                                                                T* __restrict__ y, AttentionDesc d) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const MmaSmem L = mma_smem(d, NW);
  const int sk = static_cast<int>(d.sk), dd = static_cast<int>(d.d), dv = static_cast<int>(d.dv);
  const int sw = sk > dv ? sk : dv;
  T* ks = reinterpret_cast<T*>(smem_raw + L.ks);
  T* vs = reinterpret_cast<T*>(smem_raw + L.vs);
  T* qs = reinterpret_cast<T*>(smem_raw + L.qs);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* S = reinterpret_cast<float*>(smem_raw + L.s) + warp * (16 * sw + 16);
  float* inv = S + 16 * sw;
  T* P = reinterpret_cast<T*>(smem_raw + L.p) + warp * 16 * sk;
  const int64_t b = blockIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * 16 * NW;
  stage<true>(ks, k + b * d.d * d.sk, d.d * d.sk);
  stage<true>(vs, v + b * d.sk * d.dv, d.sk * d.dv);
  const int64_t rows = d.sq - row0 < 16 * NW ? d.sq - row0 : 16 * NW;
  stage<true>(qs, q + (b * d.sq + row0) * d.d, rows * d.d);
  __pipeline_commit();
  for (int64_t i = rows * d.d + threadIdx.x; i < 16 * NW * d.d; i += blockDim.x) qs[i] = T(0.f);
  __pipeline_wait_prior(0);
  __syncthreads();
  const int64_t wrow = row0 + warp * 16;
  if (wrow >= d.sq) return;  // no block-wide synchronization below
  warp_product(qs + warp * 16 * dd, dd, ks, sk, sk / 16, dd / 16, S, sw);  // S = Q·K
  __syncwarp();
  const int64_t moff = mask ? mask_offset(d, b) : 0;
  for (int r = 0; r < 16; ++r) {
    const int64_t row = wrow + r;
    float* sr = S + r * sw;
    float mx = -FLT_MAX;
    for (int c = lane; c < sk; c += 32) {
      float x = sr[c] * d.scale;
      if (mask && row < d.sq) x += ld(mask, moff + row * d.mask_rs + c * d.mask_cs);
      sr[c] = x;
      mx = fmaxf(mx, x);
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.f;
    for (int c = lane; c < sk; c += 32) {
      const float e = expf(sr[c] - mx);
      P[r * sk + c] = T(e);
      sum += e;
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) inv[r] = 1.f / sum;
  }
  __syncwarp();
  warp_product(P, sk, vs, dv, dv / 16, sk / 16, S, sw);  // O = P·V, over S (read above)
  __syncwarp();
  for (int r = 0; r < 16 && wrow + r < d.sq; ++r) {
    T* yr = y + (b * d.sq + wrow + r) * d.dv;
    for (int c = lane; c < dv; c += 32) st(yr, c, S[r * sw + c] * inv[r]);
  }
}

template <class T, class F>
int with_warps(int nw, F&& f) {
  switch (nw) {
    case 1: return f(attention_mma_kernel<T, 1>);
    case 2: return f(attention_mma_kernel<T, 2>);
    case 4: return f(attention_mma_kernel<T, 4>);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

template <class F>
int with_half(Elem t, F&& f) {
  if (t == Elem::f16) return f(static_cast<__half*>(nullptr));
  if (t == Elem::bf16) return f(static_cast<__nv_bfloat16*>(nullptr));
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace

int64_t attention_mma_smem_bytes(const AttentionDesc& d, int warps) { return mma_smem(d, warps).total; }

int attention_mma_init(Elem t, const AttentionDesc& d, int warps) {
  return with_half(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return with_warps<T>(warps, [&](auto kernel) {
      return static_cast<int>(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(mma_smem(d, warps).total)));
    });
  });
}

int attention_mma(Elem t, const void* q, const void* k, const void* v, const void* mask, void* y, const AttentionDesc& d,
                  int warps, void* stream) {
  if (d.batches <= 0 || d.sq <= 0) return 0;
  const int64_t rows = 16 * warps;
  const dim3 grid(static_cast<unsigned>(d.batches), static_cast<unsigned>((d.sq + rows - 1) / rows));
  return with_half(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return with_warps<T>(warps, [&](auto kernel) {
      kernel<<<grid, 32 * warps, static_cast<size_t>(mma_smem(d, warps).total), as_stream(stream)>>>(
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
