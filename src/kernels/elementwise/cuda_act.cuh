// The activations of our CUDA kernels as device functions (.cu files only): apply_unary for the
// elementwise unary ops, apply_act for the fused epilogues of conv and GEMM steps (cuda_kernels.cu's
// epilogue, cuda_depthwise.cu). One definition, so an activation cannot be missing from one
// kernel's switch (the depthwise kernel's own copy lacked HardSwish and returned x unchanged:
// mobilenet_v3_large on CUDA, cos 0.45 against the CPU).
#pragma once

#include "kernels/cuda_elem.cuh"

namespace tac::cuda::kern {

__device__ __forceinline__ float apply_unary(Unary op, float x, float alpha, float beta) {
  switch (op) {
    case Unary::relu: return x > 0.f ? x : 0.f;
    case Unary::sigmoid: return 1.f / (1.f + expf(-x));
    case Unary::tanh: return tanhf(x);
    case Unary::erf: return erff(x);
    case Unary::exp: return expf(x);
    case Unary::log: return logf(x);
    case Unary::neg: return -x;
    case Unary::abs: return fabsf(x);
    case Unary::sqrt: return sqrtf(x);
    case Unary::reciprocal: return 1.f / x;
    case Unary::floor: return floorf(x);
    case Unary::ceil: return ceilf(x);
    case Unary::sin: return sinf(x);
    case Unary::cos: return cosf(x);
    case Unary::clip: return x < alpha ? alpha : (x > beta ? beta : x);
    case Unary::leaky_relu: return x >= 0.f ? x : alpha * x;
    case Unary::hard_sigmoid: { float v = alpha * x + beta; return v < 0.f ? 0.f : (v > 1.f ? 1.f : v); }
    case Unary::hard_swish: { float v = x / 6.f + 0.5f; return x * (v < 0.f ? 0.f : (v > 1.f ? 1.f : v)); }
    // 1 + erf(z) cancels for z << 0: erfc(-z) keeps the relative accuracy there.
    // The graph's own formula, branch-free: erfcf on the negative side (more exact where GELU is
    // tiny) made the bias + GELU pass after BERT's FFN-in GEMM compute-bound (both branches ran
    // in every warp with mixed signs).
    case Unary::gelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case Unary::silu: return x / (1.f + expf(-x));
    case Unary::softplus: return x > 20.f ? x : log1pf(expf(x));
    case Unary::elu: return x >= 0.f ? x : alpha * expm1f(x);
    case Unary::selu: return x > 0.f ? beta * x : beta * alpha * expm1f(x);
    case Unary::identity: return x;
  }
  return x;
}

// ir::Epilogue::Act: none, relu, clip, leaky_relu, sigmoid, tanh, hard_sigmoid, gelu, silu, hard_swish.
__device__ __forceinline__ float apply_act(int act, float x, float alpha, float beta) {
  switch (act) {
    case 1: return apply_unary(Unary::relu, x, alpha, beta);
    case 2: return apply_unary(Unary::clip, x, alpha, beta);
    case 3: return apply_unary(Unary::leaky_relu, x, alpha, beta);
    case 4: return apply_unary(Unary::sigmoid, x, alpha, beta);
    case 5: return apply_unary(Unary::tanh, x, alpha, beta);
    case 6: return apply_unary(Unary::hard_sigmoid, x, alpha, beta);
    case 7: return apply_unary(Unary::gelu, x, alpha, beta);
    case 8: return apply_unary(Unary::silu, x, alpha, beta);
    case 9: return apply_unary(Unary::hard_swish, x, alpha, beta);
    default: return x;
  }
}

}  // namespace tac::cuda::kern
