// Our own CUDA reduction kernels (see cuda_reduce.h): one launch per step, no workspace.
// Rows (the reduced elements of an output are the innermost ones): a group of TPO threads per
// output (1 for short reductions, a warp, or the whole block for long ones), combined with warp
// shuffles and, for a block, shared memory. Columns (the innermost dim is kept): a block covers
// 32 neighbouring outputs, its 8 warps splitting the reduced elements, so that every load of a
// warp is 32 neighbouring elements; the 8 partial results meet in shared memory.
// LogSumExp takes two passes over the input (the maximum, then the sum of exponentials).
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda_elem.cuh"
#include "kernels/reduce/cuda_reduce.h"

namespace tac::cuda::kern {

namespace {

// The accumulation one pass runs.
enum class Acc : int { sum, abs_sum, sq_sum, exp_sum, prod, max, min, arg_max, arg_min };

__host__ __device__ constexpr Acc first_pass(Reduce r) {
  switch (r) {
    case Reduce::l1: return Acc::abs_sum;
    case Reduce::l2:
    case Reduce::sum_square: return Acc::sq_sum;
    case Reduce::prod: return Acc::prod;
    case Reduce::max:
    case Reduce::log_sum_exp: return Acc::max;
    case Reduce::min: return Acc::min;
    case Reduce::arg_max: return Acc::arg_max;
    case Reduce::arg_min: return Acc::arg_min;
    default: return Acc::sum;  // sum, mean, log_sum
  }
}

// A partial result: the value, and for ArgMax / ArgMin the index it was found at.
struct State {
  float v;
  int64_t i;
};

template <Acc A>
__device__ __forceinline__ State init(bool last) {
  if constexpr (A == Acc::prod) return {1.f, 0};
  if constexpr (A == Acc::max || A == Acc::arg_max) return {-INFINITY, last ? int64_t{-1} : INT64_MAX};
  if constexpr (A == Acc::min || A == Acc::arg_min) return {INFINITY, last ? int64_t{-1} : INT64_MAX};
  return {0.f, 0};
}

// Folds `b` into `a`. Max / Min: NaN wins (and stays). ArgMax / ArgMin: a total order (NaN the
// most extreme value, then the value, then the first or last index), so that any order of
// merging picks what the reference's sequential scan picks.
template <Acc A>
__device__ __forceinline__ void merge(State& a, const State& b, bool last) {
  if constexpr (A == Acc::sum || A == Acc::abs_sum || A == Acc::sq_sum || A == Acc::exp_sum) {
    a.v += b.v;
  } else if constexpr (A == Acc::prod) {
    a.v *= b.v;
  } else if constexpr (A == Acc::max) {
    if (!isnan(a.v) && (isnan(b.v) || b.v > a.v)) a.v = b.v;
  } else if constexpr (A == Acc::min) {
    if (!isnan(a.v) && (isnan(b.v) || b.v < a.v)) a.v = b.v;
  } else {
    const bool bn = isnan(b.v), an = isnan(a.v);
    bool better;
    if (bn != an) better = bn;
    else if (!bn && b.v != a.v) better = A == Acc::arg_max ? b.v > a.v : b.v < a.v;
    else better = last ? b.i > a.i : b.i < a.i;
    if (better) a = b;
  }
}

// One input element x at reduced index j; `shift` is the maximum for exp_sum.
template <Acc A>
__device__ __forceinline__ void add(State& a, float x, int64_t j, float shift, bool last) {
  if constexpr (A == Acc::sum) a.v += x;
  else if constexpr (A == Acc::abs_sum) a.v += fabsf(x);
  else if constexpr (A == Acc::sq_sum) a.v += x * x;
  else if constexpr (A == Acc::exp_sum) a.v += expf(x - shift);
  else if constexpr (A == Acc::prod) a.v *= x;
  else merge<A>(a, State{x, j}, last);
}

__device__ __forceinline__ State shfl_xor(const State& s, int o) {
  State r;
  r.v = __shfl_xor_sync(0xffffffffu, s.v, o);
  r.i = static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(s.i), o));
  return r;
}

// Combines the states of a group of TPO threads (1, 32 or the whole block of 256); every thread
// of the group gets the result. The block version synchronizes: all threads must call it.
template <Acc A, int TPO>
__device__ __forceinline__ State group_reduce(State s, State* shared, bool last) {
  if constexpr (TPO > 1) {
    for (int o = 16; o > 0; o >>= 1) merge<A>(s, shfl_xor(s, o), last);
  }
  if constexpr (TPO > 32) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // `shared` may still be read from the previous reduction
    if (lane == 0) shared[warp] = s;
    __syncthreads();
    s = shared[0];
    for (int w = 1; w < TPO / 32; ++w) merge<A>(s, shared[w], last);
  }
  return s;
}

__device__ __forceinline__ int64_t kept_offset(const ReduceDesc& d, int64_t o) {
  int64_t off = 0;
  for (int k = d.n_kept - 1; k >= 0; --k) {
    const int64_t c = o % d.kept_dims[k];
    o /= d.kept_dims[k];
    off += c * d.kept_strides[k];
  }
  return off;
}
__device__ __forceinline__ int64_t red_offset(const ReduceDesc& d, int64_t j) {
  if (d.n_red == 1) return j * d.red_strides[0];
  int64_t off = 0;
  for (int k = d.n_red - 1; k >= 0; --k) {
    const int64_t c = j % d.red_dims[k];
    j /= d.red_dims[k];
    off += c * d.red_strides[k];
  }
  return off;
}

template <Reduce R>
__device__ __forceinline__ float finish(float v, int64_t count) {
  if constexpr (R == Reduce::mean) return v / static_cast<float>(count);  // 0 / 0: NaN, as the reference
  if constexpr (R == Reduce::l2) return sqrtf(v);
  if constexpr (R == Reduce::log_sum) return logf(v);
  return v;
}

template <class T, class Y, Reduce R>
__device__ __forceinline__ void store(Y* y, int64_t o, const State& s, int64_t count) {
  if constexpr (R == Reduce::arg_max || R == Reduce::arg_min) y[o] = s.i;
  else st(y, o, finish<R>(s.v, count));
}

// Rows: TPO threads per output, 256 / TPO outputs per block and step.
template <class T, class Y, Reduce R, int TPO>
__global__ void __launch_bounds__(256) reduce_rows_kernel(const T* __restrict__ x, Y* __restrict__ y, ReduceDesc d) {
  constexpr Acc A = first_pass(R);
  constexpr int kGroups = 256 / TPO;
  __shared__ State shared[8];
  const int lane = static_cast<int>(threadIdx.x) % TPO;
  const bool last = d.select_last;
  // The loop bound is uniform over the block (TPO == 256 synchronizes the block inside).
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * kGroups; o0 < d.outputs; o0 += static_cast<int64_t>(gridDim.x) * kGroups) {
    const int64_t o = o0 + static_cast<int64_t>(threadIdx.x) / TPO;
    if (TPO < 256 && o >= d.outputs) continue;  // no block-wide synchronization below for TPO < 256
    const int64_t base = kept_offset(d, o);
    State s = init<A>(last);
    for (int64_t j = lane; j < d.count; j += TPO) add<A>(s, ld(x, base + red_offset(d, j)), j, 0.f, last);
    s = group_reduce<A, TPO>(s, shared, last);
    if constexpr (R == Reduce::log_sum_exp) {
      const float m = s.v;  // the same in every thread of the group
      if (!isnan(m) && !isinf(m)) {
        State e{0.f, 0};
        for (int64_t j = lane; j < d.count; j += TPO) add<Acc::exp_sum>(e, ld(x, base + red_offset(d, j)), j, m, last);
        e = group_reduce<Acc::exp_sum, TPO>(e, shared, last);
        s.v = m + logf(e.v);
      }
    }
    if (lane == 0) store<T, Y, R>(y, o, s, d.count);
  }
}

// Columns: a block per 32 neighbouring outputs (threadIdx.x % 32) and 8 slices of the reduced
// elements (threadIdx.x / 32).
template <Acc A>
__device__ __forceinline__ State column_reduce(State s, State (*part)[33], int tx, int ty, bool last) {
  __syncthreads();  // `part` may still be read from the previous reduction
  part[ty][tx] = s;
  __syncthreads();
  s = part[0][tx];
  for (int k = 1; k < 8; ++k) merge<A>(s, part[k][tx], last);
  return s;
}

template <class T, class Y, Reduce R>
__global__ void __launch_bounds__(256) reduce_cols_kernel(const T* __restrict__ x, Y* __restrict__ y, ReduceDesc d) {
  constexpr Acc A = first_pass(R);
  __shared__ State part[8][33];
  const int tx = static_cast<int>(threadIdx.x) & 31, ty = static_cast<int>(threadIdx.x) >> 5;
  const bool last = d.select_last;
  const int64_t tiles = (d.inner + 31) / 32, blocks = d.outputs / d.inner * tiles;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {  // uniform over the block
    const int64_t ko = b / tiles, ki = (b % tiles) * 32 + tx;
    const bool active = ki < d.inner;
    const int64_t base = kept_offset(d, ko) + ki;
    State s = init<A>(last);
    if (active)
      for (int64_t j = ty; j < d.count; j += 8) add<A>(s, ld(x, base + red_offset(d, j)), j, 0.f, last);
    s = column_reduce<A>(s, part, tx, ty, last);
    if constexpr (R == Reduce::log_sum_exp) {
      const float m = s.v;
      State e{0.f, 0};
      const bool finite = !isnan(m) && !isinf(m);
      if (active && finite)
        for (int64_t j = ty; j < d.count; j += 8) add<Acc::exp_sum>(e, ld(x, base + red_offset(d, j)), j, m, last);
      e = column_reduce<Acc::exp_sum>(e, part, tx, ty, last);
      if (finite) s.v = m + logf(e.v);
    }
    if (ty == 0 && active) store<T, Y, R>(y, ko * d.inner + ki, s, d.count);
  }
}

inline unsigned grid_for(int64_t units) {
  return static_cast<unsigned>(units < 1 ? 1 : (units > 65535 * 8 ? 65535 * 8 : units));
}

template <class T, class Y, Reduce R>
int launch(const void* xv, void* yv, const ReduceDesc& d, cudaStream_t s) {
  const T* x = static_cast<const T*>(xv);
  Y* y = static_cast<Y*>(yv);
  if (d.columns) {
    if (d.inner <= 0) return 0;
    reduce_cols_kernel<T, Y, R><<<grid_for(d.outputs / d.inner * ((d.inner + 31) / 32)), 256, 0, s>>>(x, y, d);
  } else if (d.count <= 16) {
    reduce_rows_kernel<T, Y, R, 1><<<grid_for((d.outputs + 255) / 256), 256, 0, s>>>(x, y, d);
  } else if (d.count < 1024) {
    reduce_rows_kernel<T, Y, R, 32><<<grid_for((d.outputs + 7) / 8), 256, 0, s>>>(x, y, d);
  } else {
    reduce_rows_kernel<T, Y, R, 256><<<grid_for(d.outputs), 256, 0, s>>>(x, y, d);
  }
  return launched();
}

template <class T>
int launch_op(const void* x, void* y, const ReduceDesc& d, cudaStream_t s) {
  switch (d.op) {
    case Reduce::sum: return launch<T, T, Reduce::sum>(x, y, d, s);
    case Reduce::mean: return launch<T, T, Reduce::mean>(x, y, d, s);
    case Reduce::max: return launch<T, T, Reduce::max>(x, y, d, s);
    case Reduce::min: return launch<T, T, Reduce::min>(x, y, d, s);
    case Reduce::prod: return launch<T, T, Reduce::prod>(x, y, d, s);
    case Reduce::l1: return launch<T, T, Reduce::l1>(x, y, d, s);
    case Reduce::l2: return launch<T, T, Reduce::l2>(x, y, d, s);
    case Reduce::log_sum: return launch<T, T, Reduce::log_sum>(x, y, d, s);
    case Reduce::log_sum_exp: return launch<T, T, Reduce::log_sum_exp>(x, y, d, s);
    case Reduce::sum_square: return launch<T, T, Reduce::sum_square>(x, y, d, s);
    case Reduce::arg_max: return launch<T, int64_t, Reduce::arg_max>(x, y, d, s);
    case Reduce::arg_min: return launch<T, int64_t, Reduce::arg_min>(x, y, d, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace

int reduce(Elem t, const void* x, void* y, const ReduceDesc& d, void* stream) {
  if (d.outputs <= 0) return 0;
  return with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return launch_op<T>(x, y, d, as_stream(stream));
  });
}

}  // namespace tac::cuda::kern
