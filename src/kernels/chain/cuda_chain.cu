// FusedElementwise on CUDA: one launch applies the whole chain to each element, the running value
// in fp32 registers, so the inputs are read once and the output written once (the unfused route
// writes and reads back every intermediate, one launch per link). The program (ops, operands,
// constants, input pointers) travels by value in the kernel's parameters; every thread runs the
// same links in the same order, so the switches over the op never diverge within a warp.
// Each thread takes 16 bytes of elements (4 fp32 or 8 fp16 / bf16) when every pointer is 16-byte
// aligned, the last n % that elements one at a time; otherwise every element one at a time.
// Semantics are the reference's (ir::apply_chain_op) in fp32: Relu keeps NaN, Max / Min give NaN
// when either operand is NaN.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/chain/cuda_chain.h"
#include "kernels/cuda_elem.cuh"

namespace tac::cuda::kern {

namespace {

static_assert(sizeof(ChainLink) == 8, "a link is 8 bytes of kernel parameters");

// One launch's share of the chain. Well inside the 4 KiB of kernel parameters.
struct ChainParams {
  const void* in[kMaxChainInputs];
  ChainLink links[kMaxChainLinks];
  int n_links;
};
static_assert(sizeof(ChainParams) < 4096 - 64, "kernel parameters are limited to 4 KiB");

__device__ __forceinline__ float chain_unary(ChainKind op, float a) {
  switch (op) {
    case ChainKind::relu: return isnan(a) ? a : (a > 0.f ? a : 0.f);
    case ChainKind::sigmoid: return 1.f / (1.f + expf(-a));
    case ChainKind::tanh: return tanhf(a);
    case ChainKind::exp: return expf(a);
    case ChainKind::neg: return -a;
    case ChainKind::abs: return fabsf(a);
    case ChainKind::sqrt: return sqrtf(a);
    case ChainKind::reciprocal: return 1.f / a;
    case ChainKind::erf: return erff(a);
    default: return a;  // binary kinds: never a unary link (the host checks)
  }
}

__device__ __forceinline__ float chain_binary(ChainKind op, float a, float b) {
  switch (op) {
    case ChainKind::add: return a + b;
    case ChainKind::sub: return a - b;
    case ChainKind::mul: return a * b;
    case ChainKind::div: return a / b;
    // a + b: a NaN (fmaxf / fminf would return the other operand).
    case ChainKind::max: return isnan(a) || isnan(b) ? a + b : fmaxf(a, b);
    case ChainKind::min: return isnan(a) || isnan(b) ? a + b : fminf(a, b);
    default: return a;  // unary kinds: never a binary link (the host checks)
  }
}

// kV elements of type S from p + base into fp32 (base a multiple of kV, p 16-byte aligned, kV *
// sizeof(S) a multiple of 16): 16-byte loads.
template <class S, int kV>
__device__ __forceinline__ void load_vec(const S* p, int64_t base, float (&v)[kV]) {
  constexpr int kU = kV * static_cast<int>(sizeof(S)) / 16;
  static_assert(kU >= 1 && kV * sizeof(S) % 16 == 0, "whole 16-byte words");
  uint4 u[kU];
  const uint4* q = reinterpret_cast<const uint4*>(p + base);
#pragma unroll
  for (int k = 0; k < kU; ++k) u[k] = q[k];
  const S* e = reinterpret_cast<const S*>(u);
#pragma unroll
  for (int k = 0; k < kV; ++k) v[k] = ld(e, k);
}

template <class D, int kV>
__device__ __forceinline__ void store_vec(D* p, int64_t base, const float (&v)[kV]) {
  constexpr int kU = kV * static_cast<int>(sizeof(D)) / 16;
  static_assert(kU >= 1 && kV * sizeof(D) % 16 == 0, "whole 16-byte words");
  uint4 u[kU];
  D* e = reinterpret_cast<D*>(u);
#pragma unroll
  for (int k = 0; k < kV; ++k) st(e, k, v[k]);
  uint4* q = reinterpret_cast<uint4*>(p + base);
#pragma unroll
  for (int k = 0; k < kU; ++k) q[k] = u[k];
}

// The links of `p` applied to r, the running values of elements base .. base + kV - 1; tensor
// operands (type T) read with 16-byte loads (kVec) or one element at a time (kV == 1).
template <class T, int kV, bool kVec>
__device__ __forceinline__ void run_links(const ChainParams& p, int64_t base, float (&r)[kV]) {
  for (int l = 0; l < p.n_links; ++l) {
    const ChainLink link = p.links[l];
    if (link.operand == ChainLink::unary) {
#pragma unroll
      for (int k = 0; k < kV; ++k) r[k] = chain_unary(link.op, r[k]);
      continue;
    }
    float b[kV];
    if (link.operand == ChainLink::tensor) {
      const T* src = static_cast<const T*>(p.in[link.input]);
      if constexpr (kVec) {
        load_vec<T, kV>(src, base, b);
      } else {
#pragma unroll
        for (int k = 0; k < kV; ++k) b[k] = ld(src, base + k);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kV; ++k) b[k] = link.value;
    }
    if (link.x_left) {
#pragma unroll
      for (int k = 0; k < kV; ++k) r[k] = chain_binary(link.op, r[k], b[k]);
    } else {
#pragma unroll
      for (int k = 0; k < kV; ++k) r[k] = chain_binary(link.op, b[k], r[k]);
    }
  }
}

// Tensors of type T; the running value comes from x (type S: T, or the fp32 workspace after an
// earlier launch) and goes to y (type D: T, or the workspace for a later launch). Each element is
// read (x and its tensor operands) before it is written, by the same thread, so y may be x or an
// input (in place). vec: every pointer 16-byte aligned; threads take kV elements, the n % kV
// after the last whole group go one per thread.
template <class T, class S, class D>
__global__ void __launch_bounds__(kThreads) chain_kernel(ChainParams p, const S* x, D* y, int64_t n, bool vec) {
  constexpr int kV = 16 / static_cast<int>(sizeof(T));
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = vec ? n / kV : 0;
  for (int64_t g = first; g < groups; g += step) {
    float r[kV];
    load_vec<S, kV>(x, g * kV, r);
    run_links<T, kV, true>(p, g * kV, r);
    store_vec<D, kV>(y, g * kV, r);
  }
  for (int64_t i = groups * kV + first; i < n; i += step) {
    float r[1] = {ld(x, i)};
    run_links<T, 1, false>(p, i, r);
    st(y, i, r[0]);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T>
int launch_chain(const ChainLink* links, int n_links, const void* const* inputs, int n_inputs, void* y, int64_t n,
                 void* workspace, cudaStream_t s) {
  const bool split = n_links > kMaxChainLinks;
  ChainParams p{};
  bool vec = aligned16(y) && (!split || aligned16(workspace));
  for (int i = 0; i < n_inputs; ++i) {
    p.in[i] = inputs[i];
    vec = vec && aligned16(inputs[i]);
  }
  constexpr int64_t kV = 16 / static_cast<int64_t>(sizeof(T));
  const int64_t groups = vec ? n / kV : 0;
  const unsigned grid = blocks_for(vec ? std::max(groups, n - groups * kV) : n);
  const T* x = static_cast<const T*>(inputs[0]);
  T* out = static_cast<T*>(y);
  float* ws = static_cast<float*>(workspace);
  for (int first = 0; first < n_links; first += kMaxChainLinks) {
    p.n_links = std::min(kMaxChainLinks, n_links - first);
    for (int l = 0; l < p.n_links; ++l) p.links[l] = links[first + l];
    const bool from_x = first == 0, to_y = first + p.n_links == n_links;
    if (from_x && to_y) chain_kernel<T, T, T><<<grid, kThreads, 0, s>>>(p, x, out, n, vec);
    else if (from_x) chain_kernel<T, T, float><<<grid, kThreads, 0, s>>>(p, x, ws, n, vec);
    else if (to_y) chain_kernel<T, float, T><<<grid, kThreads, 0, s>>>(p, ws, out, n, vec);
    else chain_kernel<T, float, float><<<grid, kThreads, 0, s>>>(p, ws, ws, n, vec);
    if (const int err = launched()) return err;
  }
  return 0;
}

bool is_binary(ChainKind k) { return static_cast<int>(k) >= static_cast<int>(ChainKind::add); }

}  // namespace

int64_t chain_workspace_bytes(int n_links, int64_t n) {
  if (n_links <= kMaxChainLinks || n <= 0) return 0;
  return (n * static_cast<int64_t>(sizeof(float)) + 15) / 16 * 16;
}

int chain(Elem t, const ChainLink* links, int n_links, const void* const* inputs, int n_inputs, void* y, int64_t n,
          void* workspace, void* stream) {
  if (n <= 0) return 0;
  if (n_links < 1 || n_inputs < 1 || n_inputs > kMaxChainInputs || (n_links > kMaxChainLinks && !workspace))
    return static_cast<int>(cudaErrorInvalidValue);
  for (int l = 0; l < n_links; ++l) {
    const ChainLink& k = links[l];
    if (static_cast<int>(k.op) >= kNumChainKinds || is_binary(k.op) != (k.operand != ChainLink::unary) ||
        k.operand > ChainLink::constant || (k.operand == ChainLink::tensor && k.input >= n_inputs))
      return static_cast<int>(cudaErrorInvalidValue);
  }
  return with_elem(t, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    return launch_chain<T>(links, n_links, inputs, n_inputs, y, n, workspace, as_stream(stream));
  });
}

}  // namespace tac::cuda::kern
