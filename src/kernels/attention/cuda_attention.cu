// The fused attention kernel (declared in kernels/elementwise/cuda_kernels.h): one block per
// (batch, 16 query rows); the batch's K [d][sk] and V [sk][dv] staged in shared memory once per
// block (16-byte copies); a warp per row: the query row in shared memory, a lane per key for the
// scores (four keys at a time; scale, mask, then a warp-wide max and sum for the softmax, kept in
// fp32), a lane per output column for the product with V (two columns, two key halves at a time). At BERT sizes (sq = sk = 128, d = dv = 64) the whole
// attention of a head is one launch instead of the batched GEMM, softmax, batched GEMM chain
// (and the scores never leave the SM).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

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

// n elements of T from global to shared memory, 16 bytes at a time where both are aligned.
template <class T>
__device__ void stage(T* dst, const T* src, int64_t n) {
  const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
  if ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16 == 0 && bytes % 16 == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* t = reinterpret_cast<uint4*>(dst);
    for (int64_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) t[i] = s[i];
  } else {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
  }
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
  int64_t moff = 0;
  if (mask) {
    int64_t rest = b;
    for (int i = d.nb - 1; i >= 0; --i) {
      moff += (rest % d.batch_dims[i]) * d.mask_bs[i];
      rest /= d.batch_dims[i];
    }
  }
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

}  // namespace

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
