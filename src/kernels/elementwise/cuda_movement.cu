// Our own CUDA Cast kernel (see cuda_kernels.h): one thread per element, one template instance per
// (source, target) pair of the nine element types it covers, with the reference's rules.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda_elem.cuh"

namespace tac::cuda::kern {

namespace {

struct Bool {  // ONNX bool: one byte, 0 or 1
  uint8_t v;
};

template <class T> struct Tag {
  using type = T;
};

// Value of one element as double (float types, integers) and back.
__device__ __forceinline__ double to_f64(float x) { return x; }
__device__ __forceinline__ double to_f64(double x) { return x; }
__device__ __forceinline__ double to_f64(__half x) { return __half2float(x); }
__device__ __forceinline__ double to_f64(__nv_bfloat16 x) { return __bfloat162float(x); }

// Integer limits without std::numeric_limits (constexpr host functions need
// --expt-relaxed-constexpr in device code).
template <class T> struct Lim;
template <> struct Lim<int64_t> { static constexpr int64_t lo = INT64_MIN, hi = INT64_MAX; };
template <> struct Lim<int32_t> { static constexpr int32_t lo = INT32_MIN, hi = INT32_MAX; };
template <> struct Lim<int8_t> { static constexpr int8_t lo = INT8_MIN, hi = INT8_MAX; };
template <> struct Lim<uint8_t> { static constexpr uint8_t lo = 0, hi = UINT8_MAX; };

template <class T> constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

template <class To, class From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, Bool>) {
    return convert<To, uint8_t>(v.v);
  } else if constexpr (std::is_same_v<To, Bool>) {
    if constexpr (is_float_v<From>) return Bool{static_cast<uint8_t>(to_f64(v) != 0.0)};
    else return Bool{static_cast<uint8_t>(v != 0)};
  } else if constexpr (std::is_same_v<To, float>) {
    if constexpr (is_float_v<From>) return static_cast<float>(to_f64(v));
    else return static_cast<float>(v);  // one rounding
  } else if constexpr (std::is_same_v<To, double>) {
    if constexpr (is_float_v<From>) return to_f64(v);
    else return static_cast<double>(v);
  } else if constexpr (std::is_same_v<To, __half>) {
    if constexpr (is_float_v<From>) return __float2half_rn(static_cast<float>(to_f64(v)));
    else return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    if constexpr (is_float_v<From>) return __float2bfloat16_rn(static_cast<float>(to_f64(v)));
    else return __float2bfloat16_rn(static_cast<float>(v));
  } else {  // integer target
    if constexpr (is_float_v<From>) {
      const double d = to_f64(v);
      if (isnan(d)) return To(0);
      if (d <= static_cast<double>(Lim<To>::lo)) return Lim<To>::lo;
      if (d >= static_cast<double>(Lim<To>::hi)) return Lim<To>::hi;
      return static_cast<To>(trunc(d));
    } else {
      return static_cast<To>(v);
    }
  }
}

template <class To, class From>
__global__ void cast_kernel(const From* x, To* y, int64_t n) {
  TAC_GRID_STRIDE(i, n) y[i] = convert<To, From>(x[i]);
}

// ONNX dtype code -> element type; false for codes this kernel does not cover.
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
    case 9: f(Tag<Bool>{}); return true;
  }
  return false;
}

}  // namespace

bool cast_supported(int dtype) {
  return with_dtype(dtype, [](auto) {});
}

int cast(const void* x, int from, void* y, int to, int64_t n, void* stream) {
  if (n <= 0) return 0;
  int err = static_cast<int>(cudaErrorInvalidValue);
  with_dtype(from, [&](auto ft) {
    with_dtype(to, [&](auto tt) {
      using From = typename decltype(ft)::type;
      using To = typename decltype(tt)::type;
      cast_kernel<To, From><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(static_cast<const From*>(x), static_cast<To*>(y), n);
      err = launched();
    });
  });
  return err;
}

}  // namespace tac::cuda::kern
