// Our own CUDA kernels (cuda_kernels.cu), callable from host code that includes no CUDA header.
// Each launch is enqueued on `stream` (a cudaStream_t) and returns the launch's cudaError_t as an
// int (0: launched); the caller turns it into a Status (cuda_tactics_common.h). fp32 unless
// said otherwise; every pointer is device memory.
#pragma once

#include <cstdint>

namespace tac::cuda::kern {

constexpr int kMaxDims = 8;

enum class Unary : int {
  relu, sigmoid, tanh, erf, exp, log, neg, abs, sqrt, reciprocal, floor, ceil, sin, cos,
  clip, leaky_relu, hard_sigmoid, hard_swish, gelu, silu, softplus, elu, selu, identity
};
int unary(Unary op, const float* x, float* y, int64_t n, float alpha, float beta, void* stream);

enum class Binary : int { add, sub, mul, div, pow, max, min };
// y[i] = a[ia] op b[ib] over the output dims; strides 0 where an operand broadcasts.
struct BroadcastDesc {
  int rank = 0;
  int64_t out_dims[kMaxDims] = {};
  int64_t a_strides[kMaxDims] = {};
  int64_t b_strides[kMaxDims] = {};
  bool same_shape = false;  // a, b and y all have n elements laid out alike
};
int binary(Binary op, const float* a, const float* b, float* y, int64_t n, const BroadcastDesc& d, void* stream);

// y = act(y + bias + res_scale * res), element i of `total` seen as [batch][rows][cols]:
// bias[row] (bias_per_row, e.g. conv channels) or bias[col] (GEMM columns); residual at
// b*r_bs + row*r_rs + col*r_cs. act: ir::Epilogue::Act as int, alpha/beta its parameters.
struct EpilogueDesc {
  int64_t total = 0, rows = 1, cols = 1;
  bool bias_per_row = false;
  float res_scale = 1;
  int64_t r_bs = 0, r_rs = 0, r_cs = 0;
  int act = 0;
  float alpha = 0, beta = 0;
};
int epilogue(float* y, const float* bias, const float* res, const EpilogueDesc& d, void* stream);

// Softmax (or LogSoftmax) over `dim` elements strided by `inner`: x is [outer][dim][inner].
int softmax(const float* x, float* y, int64_t outer, int64_t dim, int64_t inner, bool log, void* stream);
// LayerNormalization over the last `cols` elements of each of `rows` rows; bias may be null.
int layer_norm(const float* x, const float* scale, const float* bias, float* y, int64_t rows, int64_t cols, float eps,
               void* stream);

struct Pool2dDesc {
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t KH = 1, KW = 1, SH = 1, SW = 1, PT = 0, PL = 0, DH = 1, DW = 1;
  bool max = true;
  bool count_include_pad = false;
};
int pool2d(const float* x, float* y, const Pool2dDesc& d, void* stream);
// y[nc] = mean over hw of x[nc][hw].
int global_avg_pool(const float* x, float* y, int64_t nc, int64_t hw, void* stream);

// y = x transposed: out dim d has out_dims[d] elements and stride in_strides[d] in x.
struct TransposeDesc {
  int rank = 0;
  int64_t out_dims[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
};
int transpose(const void* x, void* y, int elem_bytes, int64_t n, const TransposeDesc& d, void* stream);

// Gather along an axis: data [outer][axis_len][inner] (elements of elem_bytes), indices (int64
// or int32, negative counted from the end) flattened to n_idx; y [outer][n_idx][inner].
int gather(const void* data, const void* indices, bool indices_int64, void* y, int64_t outer, int64_t axis_len,
           int64_t n_idx, int64_t inner, int elem_bytes, void* stream);

}  // namespace tac::cuda::kern
