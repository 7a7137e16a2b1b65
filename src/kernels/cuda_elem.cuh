// Device-side element access for the kernels templated over the element type (float, __half,
// __nv_bfloat16; .cu files only): ld converts to fp32, st rounds once from fp32, and with_elem
// calls a generic host lambda with a null pointer of the element type that kern::Elem names.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/elementwise/cuda_kernels.h"

namespace tac::cuda::kern {

__device__ __forceinline__ float ld(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

template <class F>
int with_elem(Elem t, F&& f) {
  switch (t) {
    case Elem::f32: return f(static_cast<float*>(nullptr));
    case Elem::f16: return f(static_cast<__half*>(nullptr));
    case Elem::bf16: return f(static_cast<__nv_bfloat16*>(nullptr));
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}
inline int launched() { return static_cast<int>(cudaGetLastError()); }
inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

#define TAC_GRID_STRIDE(i, n)                                                            \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace tac::cuda::kern
