// Our own CUDA kernels of selection ops (see cuda_select.h): one thread per output element
// (grid-stride loops), broadcasting through per-operand strides (0 where an operand repeats).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda_elem.cuh"
#include "kernels/elementwise/cuda_select.h"

namespace tac::cuda::kern {

namespace {

template <class T> struct Tag {
  using type = T;
};

// A value compared in its own type; fp16 / bf16 through fp32 (exact).
__device__ __forceinline__ float cmp_value(__half v) { return __half2float(v); }
__device__ __forceinline__ float cmp_value(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T cmp_value(T v) {
  return v;
}

template <class T>
__device__ __forceinline__ bool apply(Compare op, T a, T b) {
  const auto x = cmp_value(a), y = cmp_value(b);
  switch (op) {
    case Compare::eq: return x == y;
    case Compare::lt: return x < y;
    case Compare::gt: return x > y;
    case Compare::le: return x <= y;
    case Compare::ge: return x >= y;
    case Compare::logical_and: return x != 0 && y != 0;
    case Compare::logical_or: return x != 0 || y != 0;
    case Compare::logical_xor: return (x != 0) != (y != 0);
  }
  return false;
}

template <class T>
__global__ void compare_kernel(Compare op, const T* __restrict__ a, const T* __restrict__ b, uint8_t* __restrict__ y,
                               int64_t n, BroadcastDesc d) {
  TAC_GRID_STRIDE(i, n) {
    int64_t ia = i, ib = i;
    if (!d.same_shape) {
      int64_t rem = i;
      ia = 0, ib = 0;
      for (int k = d.rank - 1; k >= 0; --k) {
        const int64_t c = rem % d.out_dims[k];
        rem /= d.out_dims[k];
        ia += c * d.a_strides[k];
        ib += c * d.b_strides[k];
      }
    }
    y[i] = apply(op, a[ia], b[ib]) ? 1 : 0;
  }
}

__global__ void not_kernel(const uint8_t* __restrict__ x, uint8_t* __restrict__ y, int64_t n) {
  TAC_GRID_STRIDE(i, n) y[i] = x[i] ? 0 : 1;
}

template <class T>
__global__ void where_kernel(const uint8_t* __restrict__ c, const T* __restrict__ x, const T* __restrict__ y,
                             T* __restrict__ out, int64_t n, WhereDesc d) {
  TAC_GRID_STRIDE(i, n) {
    int64_t rem = i, ic = 0, ix = 0, iy = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t q = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      ic += q * d.c_strides[k];
      ix += q * d.x_strides[k];
      iy += q * d.y_strides[k];
    }
    out[i] = c[ic] ? x[ix] : y[iy];
  }
}

// The reference's pad_source: the source coordinate of output coordinate o, or -1 (constant).
__device__ __forceinline__ int64_t pad_source(int64_t o, int64_t before, int64_t n, int mode) {
  const int64_t s = o - before;
  if (s >= 0 && s < n) return s;
  switch (mode) {
    case 0: return -1;
    case 1: return s < 0 ? 0 : n - 1;
    case 2: {
      if (n == 1) return 0;
      const int64_t p = 2 * (n - 1);
      const int64_t k = ((s % p) + p) % p;
      return k < n ? k : p - k;
    }
    default: return ((s % n) + n) % n;
  }
}

template <class T>
__global__ void pad_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, PadDesc d) {
  T fill;
  memcpy(&fill, &d.fill, sizeof(T));
  TAC_GRID_STRIDE(i, n) {
    int64_t rem = i, src = d.base;
    bool inside = true;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t o = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      const int64_t s = pad_source(o, d.before[k], d.in_dims[k], d.mode);
      if (s < 0) inside = false;
      src += s * d.in_strides[k];
    }
    y[i] = inside ? x[src] : fill;
  }
}

// ONNX dtype code -> element type; false for codes this file does not cover.
template <class F>
bool with_dtype(int code, F&& f) {
  switch (code) {
    case 1: f(Tag<float>{}); return true;
    case 10: f(Tag<__half>{}); return true;
    case 16: f(Tag<__nv_bfloat16>{}); return true;
    case 11: f(Tag<double>{}); return true;
    case 7: f(Tag<int64_t>{}); return true;
    case 6: f(Tag<int32_t>{}); return true;
    case 3: f(Tag<int8_t>{}); return true;
    case 2: f(Tag<uint8_t>{}); return true;
    case 9: f(Tag<uint8_t>{}); return true;  // bool: one byte, 0 or 1
  }
  return false;
}

// Element types by size only (data movement).
template <class F>
bool with_size(int bytes, F&& f) {
  switch (bytes) {
    case 1: f(Tag<uint8_t>{}); return true;
    case 2: f(Tag<uint16_t>{}); return true;
    case 4: f(Tag<uint32_t>{}); return true;
    case 8: f(Tag<uint64_t>{}); return true;
  }
  return false;
}

}  // namespace

bool compare_supported(int dtype) {
  return with_dtype(dtype, [](auto) {});
}

int compare(int dtype, Compare op, const void* a, const void* b, void* y, int64_t n, const BroadcastDesc& d, void* stream) {
  if (n <= 0) return 0;
  int err = static_cast<int>(cudaErrorInvalidValue);
  with_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    compare_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(op, static_cast<const T*>(a), static_cast<const T*>(b),
                                                                       static_cast<uint8_t*>(y), n, d);
    err = launched();
  });
  return err;
}

int logical_not(const void* x, void* y, int64_t n, void* stream) {
  if (n <= 0) return 0;
  not_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), n);
  return launched();
}

int where(const void* c, const void* x, const void* y, void* out, int elem_bytes, int64_t n, const WhereDesc& d,
          void* stream) {
  if (n <= 0) return 0;
  int err = static_cast<int>(cudaErrorInvalidValue);
  with_size(elem_bytes, [&](auto tag) {
    using T = typename decltype(tag)::type;
    where_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(static_cast<const uint8_t*>(c), static_cast<const T*>(x),
                                                                     static_cast<const T*>(y), static_cast<T*>(out), n, d);
    err = launched();
  });
  return err;
}

int pad(const void* x, void* y, int elem_bytes, int64_t n, const PadDesc& d, void* stream) {
  if (n <= 0) return 0;
  int err = static_cast<int>(cudaErrorInvalidValue);
  with_size(elem_bytes, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pad_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(static_cast<const T*>(x), static_cast<T*>(y), n, d);
    err = launched();
  });
  return err;
}

}  // namespace tac::cuda::kern
