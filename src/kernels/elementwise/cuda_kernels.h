// Our own CUDA kernels (cuda_kernels.cu, cuda_movement.cu, cuda_depthwise.cu, cuda_attention.cu), callable from host
// code that includes no CUDA header. Each launch is enqueued on `stream` (a cudaStream_t) and
// returns the launch's cudaError_t as an int (0: launched); the caller turns it into a Status
// (kernels/cuda_util.h). Every pointer is device memory. The float kernels take an
// element type `Elem` (fp32, fp16, bf16: loads and stores in that type, arithmetic in fp32);
// conv / GEMM biases stay fp32.
#pragma once

#include <cstdint>

namespace tac::cuda::kern {

constexpr int kMaxDims = 8;

enum class Elem : int { f32 = 0, f16 = 1, bf16 = 2 };

enum class Unary : int {
  relu, sigmoid, tanh, erf, exp, log, neg, abs, sqrt, reciprocal, floor, ceil, sin, cos,
  clip, leaky_relu, hard_sigmoid, hard_swish, gelu, silu, softplus, elu, selu, identity
};
int unary(Elem t, Unary op, const void* x, void* y, int64_t n, float alpha, float beta, void* stream);

enum class Binary : int { add, sub, mul, div, pow, max, min };
// y[i] = a[ia] op b[ib] over the output dims; strides 0 where an operand broadcasts.
struct BroadcastDesc {
  int rank = 0;
  int64_t out_dims[kMaxDims] = {};
  int64_t a_strides[kMaxDims] = {};
  int64_t b_strides[kMaxDims] = {};
  bool same_shape = false;  // a, b and y all have n elements laid out alike
};
int binary(Elem t, Binary op, const void* a, const void* b, void* y, int64_t n, const BroadcastDesc& d, void* stream);

// y = act(y + bias + res_scale * res), element i of `total` seen as [batch][rows][cols]:
// bias[row] (bias_per_row, e.g. conv channels) or bias[col] (GEMM columns); residual at
// b*r_bs + row*r_rs + col*r_cs. act: ir::Epilogue::Act as int, alpha/beta its parameters.
// The activations apply_act knows (cuda_act.cuh): ir::Epilogue::Act's, numbered alike (the host
// side static_asserts the count where it converts).
constexpr int kNumEpilogueActs = 10;
struct EpilogueDesc {
  int64_t total = 0, rows = 1, cols = 1;
  bool bias_per_row = false;
  float res_scale = 1;
  int64_t r_bs = 0, r_rs = 0, r_cs = 0;
  int act = 0;
  float alpha = 0, beta = 0;
};
// y and res in type t, bias fp32.
int epilogue(Elem t, void* y, const float* bias, const void* res, const EpilogueDesc& d, void* stream);

// y[i] = x[i] * inv_scale rounded to fp8 E4M3 (saturating at +-448), for i < n (n even); y one byte
// per element.
int quantize_fp8(Elem t, const void* x, void* y, int64_t n, float inv_scale, void* stream);

// Planted fault (tests only): one thread writes to an unmapped device address, an illegal memory
// access that poisons the process's CUDA context.
int planted_illegal_write(void* stream);

// Softmax (or LogSoftmax) over `dim` elements strided by `inner`: x is [outer][dim][inner].
int softmax(Elem t, const void* x, void* y, int64_t outer, int64_t dim, int64_t inner, bool log, void* stream);
// LayerNormalization over the last `cols` elements of each of `rows` rows; bias may be null.
// x, scale, bias and y all of type t.
int layer_norm(Elem t, const void* x, const void* scale, const void* bias, void* y, int64_t rows, int64_t cols,
               float eps, void* stream);

struct Pool2dDesc {
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t KH = 1, KW = 1, SH = 1, SW = 1, PT = 0, PL = 0, DH = 1, DW = 1;
  bool max = true;
  bool count_include_pad = false;
  bool nhwc = false;  // x and y in nhwc (ir/layout.h) instead of nchw
};
int pool2d(Elem t, const void* x, void* y, const Pool2dDesc& d, void* stream);
// y[nc] = mean over hw of x[nc][hw].
int global_avg_pool(Elem t, const void* x, void* y, int64_t nc, int64_t hw, void* stream);
// The same over an nhwc x [N][hw][C]: y[n][c] (N*C values, alike in nchw and nhwc).
int global_avg_pool_nhwc(Elem t, const void* x, void* y, int64_t N, int64_t hw, int64_t C, void* stream);

// Inference BatchNormalization folded to y[i] = x[i] * scale[c] + shift[c], c = (i / inner) % C:
// inner = the spatial size for nchw, 1 for nhwc. scale and shift fp32.
int channel_affine(Elem t, const void* x, void* y, const float* scale, const float* shift, int64_t n, int64_t C,
                   int64_t inner, void* stream);

// A strided gather: y[i] = x[base + sum_d idx_d * in_strides[d]] where idx_d is output index i's
// coordinate along dim d (out_dims[d] elements). Transpose (strides permuted), Slice (base at the
// starts, strides scaled by the steps, negative for negative steps), DepthToSpace/SpaceToDepth
// (as 6-D transposes).
struct TransposeDesc {
  int rank = 0;
  int64_t out_dims[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
  int64_t base = 0;
};
int transpose(const void* x, void* y, int elem_bytes, int64_t n, const TransposeDesc& d, void* stream);

// Gather along an axis: data [outer][axis_len][inner] (elements of elem_bytes), indices (int64
// or int32, negative counted from the end) flattened to n_idx; y [outer][n_idx][inner].
int gather(const void* data, const void* indices, bool indices_int64, void* y, int64_t outer, int64_t axis_len,
           int64_t n_idx, int64_t inner, int elem_bytes, void* stream);

// Cast of n elements between ONNX dtype codes (float, float16, bfloat16, double, int64, int32,
// int16, int8, uint8, bool), with the reference's rules: float -> int truncates toward zero and
// saturates (NaN -> 0), int -> int wraps, anything -> bool is `!= 0`. cudaErrorInvalidValue for
// another code (cast_supported says which).
bool cast_supported(int dtype);
int cast(const void* x, int from, void* y, int to, int64_t n, void* stream);

// Depthwise 2-D convolution, NCHW: group == C, M = C * mult output channels (output channel m
// reads input channel m / mult), W [M][1][KH][KW] in type t, any stride, dilation and (asymmetric)
// padding, then the epilogue: + bias[m] (fp32, may be null), + res (type t, the output's shape,
// may be null), activation (ir::Epilogue::Act as int).
struct DepthwiseDesc {
  int64_t N = 0, C = 0, H = 0, W = 0, M = 0, OH = 0, OW = 0;
  int64_t KH = 1, KW = 1, SH = 1, SW = 1, DH = 1, DW = 1, PT = 0, PL = 0;
  int act = 0;
  float alpha = 0, beta = 0;
  bool nhwc = false;  // x, y and the residual nhwc (ir/layout.h)
};
int depthwise_conv(Elem t, const void* x, const void* w, const float* bias, const void* res, void* y,
                   const DepthwiseDesc& d, void* stream);

// Fused attention, y = softmax(scale * Q·K + M) · V per batch index b < batches: Q [sq][d],
// K [d][sk] (already transposed), V [sk][dv], y [sq][dv], each a strided view of its buffer
// (operand o: Q, K, V, y): element (i, j) of batch b at off[o] + boff(o, b) + i * rs[o] + j *
// cs[o], where boff sums each batch dim's index times bs[o][dim] (batch dims row-major, nb of
// them); the mask M (may be null) likewise at moff(b) + row * mask_rs + col * mask_cs with
// mask_bs. Strides with cs == 1 (rs == 1 for K: its rows are keys) take the 16-byte copies. Q, K, V, M, y all of type t; scores,
// softmax and sums in fp32. One block per (batch, 16 query rows): K and V of the batch in shared
// memory, a warp per row. attention_smem_bytes: the shared memory a launch needs (the tactic
// refuses what does not fit); attention_init raises the kernel's dynamic shared-memory limit
// (call before launching, outside graph capture).
struct AttentionDesc {
  int64_t batches = 0, sq = 0, d = 0, sk = 0, dv = 0;
  float scale = 1;
  int nb = 0;
  int64_t batch_dims[kMaxDims] = {};
  int64_t mask_bs[kMaxDims] = {};
  int64_t mask_rs = 0, mask_cs = 0;
  int64_t off[4] = {}, rs[4] = {}, cs[4] = {};
  int64_t bs[4][kMaxDims] = {};
};
int64_t attention_smem_bytes(Elem t, const AttentionDesc& d);
int attention_init(Elem t, const AttentionDesc& d);
int attention(Elem t, const void* q, const void* k, const void* v, const void* mask, void* y, const AttentionDesc& d,
              void* stream);
// The same with the scores in registers (mma.sync, online softmax over chunks of 64 keys): fp16 or
// bf16, d and dv multiples of 16 up to 128, sk a multiple of 16; K, V and the block's Q rows in
// shared memory (attention_flash_smem_bytes). Blocks of `warps` warps, `splits` of them per 16
// query rows, each taking 1/splits of the keys: (warps, splits) in (2, 1), (4, 1), (4, 2), (8, 2).
int64_t attention_flash_smem_bytes(const AttentionDesc& d, int warps, int splits);
int attention_flash_init(Elem t, const AttentionDesc& d, int warps, int splits);
int attention_flash(Elem t, const void* q, const void* k, const void* v, const void* mask, void* y,
                    const AttentionDesc& d, int warps, int splits, void* stream);

}  // namespace tac::cuda::kern
