#include "builder/passes/pass.h"

namespace tac::builder {

// Order matters:
// 0. widen_storage before everything: the other passes and the tactics see the fp32 graph a model
//    stored in fp16 / bf16 computes in (and fold the constants it widened).
// 1. fold_constants first: with input shapes bound, Shape/Gather/Concat chains become constants,
//    which the shape-dependent passes and shape inference need (and a Transpose of a weight
//    becomes a plain constant, so eliminate_transpose never needs to look at one).
// 2. eliminate_identity before fusion, so Identity/Dropout do not hide Conv -> Relu pairs.
// 3. eliminate_transpose and merge_reshapes after folding (perms need known ranks; the reshape
//    chains need the shapes that folding makes known) and before the fusions, which they never
//    block and whose matches they do not create.
//    channel_gather right after merge_reshapes (the shuffle's Reshapes are single constant-shape
//    Reshapes by then) and before the layout rewrite, which keeps its Gathers channels-last.
// 4. fold_batchnorm before fuse_conv: the fused epilogue applies after the folded bias.
// 5. fuse_layernorm and fuse_gelu before fuse_conv / fuse_matmul: the Gelu they make is the
//    activation fuse_matmul takes into FusedMatMul's epilogue (MatMul -> Add bias -> Gelu), and the
//    decomposed LayerNorm's trailing Mul/Add must be gone before anything else claims those Adds.
// 6. move_transposes before fuse_attention / fuse_matmul: it moves the Transposes of
//    batch_first attention next to the head split and merge (where attention_views absorbs them)
//    and turns the Gemms it crosses into MatMul + Add, which fuse_matmul fuses again (with the
//    residual Add the moved Transpose used to separate from the GEMM).
//    fuse_attention before fuse_matmul, which would otherwise take the scores' mask Add as a
//    residual of the first MatMul.
//    attention_views right after it (it only rewrites FusedAttention nodes and the view chains
//    around them).
// 7. fuse_conv / fuse_matmul: they consume the residual Add and the activation.
// 8. conv1d_as_2d after the conv fusions (they match the 1-D Conv and its BatchNormalization,
//    residual and activation as they are) and before fuse_elementwise (which may then chain
//    elementwise ops behind the output view).
// 9. fuse_elementwise last: it chains what the epilogues did not take.
std::span<const Pass> pass_pipeline() {
  static const Pass kPasses[] = {
      {"widen_storage",
       "compute a model stored in fp16 / bf16 in fp32 between its inputs and outputs (constants widened exactly, Casts "
       "at the boundary); precision.default, which follows the stored type, narrows the layers again",
       true, widen_storage},
      {"fold_constants", "evaluate nodes whose inputs are all constant (and Shape of known shapes) at build time", true,
       fold_constants},
      {"eliminate_identity", "remove Identity, inference-mode Dropout and Pad-by-zero nodes", true, eliminate_identity},
      {"eliminate_transpose", "collapse Transpose -> Transpose chains into one Transpose (none when they cancel)", true,
       eliminate_transpose},
      {"merge_reshapes", "collapse chains of Reshape/Flatten/Squeeze/Unsqueeze into one Reshape to the known shape", true,
       merge_reshapes},
      {"channel_gather",
       "turn a channel shuffle (Reshape to 5-D, Transpose(0,2,1,3,4), Reshape back) into a Gather of channels, and a "
       "channel Slice of such a Gather into a Gather of its own (one step a channels-last region can keep)",
       true, channel_gather},
      {"fold_batchnorm", "fold an inference BatchNormalization into the preceding Conv's weights and bias", true, fold_batchnorm},
      {"fuse_layernorm",
       "replace a decomposed LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add eps, Sqrt, Div [, Mul gamma, Add beta]) by "
       "LayerNormalization",
       true, fuse_layernorm},
      {"fuse_gelu", "replace the exact GELU subgraph x * 0.5 * (1 + Erf(x / sqrt 2)) by one Gelu node", true, fuse_gelu},
      {"move_transposes",
       "move Transposes/Reshapes that keep rows whole across row-wise ops (MatMul by a constant, bias Add) toward the "
       "view chains around attention, where attention_views absorbs them",
       true, move_transposes},
      {"fuse_attention",
       "replace MatMul(Q, K) [scale] [+ mask] -> Softmax -> MatMul(., V) by one FusedAttention (scores stay in cache)", true,
       fuse_attention},
      {"attention_views",
       "let FusedAttention read Q, K, V and write Y through the Transpose/Reshape/Gather/Slice chains around it (strides; "
       "the chains' copies disappear)",
       true, attention_views},
      {"fuse_conv", "fuse Conv with a following residual Add and activation into FusedConv", true, fuse_conv},
      {"fuse_matmul", "fuse MatMul/Gemm with a following bias Add, residual Add and activation into FusedMatMul", true,
       fuse_matmul},
      {"conv1d_as_2d",
       "run a 1-D convolution (rank-3 X, constant W) as the 2-D convolution of height 1 it equals, between Reshape "
       "views, so that the 2-D tactics take it",
       true, conv1d_as_2d},
      {"fuse_elementwise",
       "fuse chains of elementwise ops over one shape (Add/Sub/Mul/Div/Max/Min with a tensor of that shape or a "
       "scalar constant, Relu/Sigmoid/Tanh/Exp/Neg/Abs/Sqrt/Reciprocal/Erf) into one FusedElementwise pass",
       true, fuse_elementwise},
  };
  return kPasses;
}

}  // namespace tac::builder
