#include "builder/passes/pass.h"

namespace tac::builder {

// Order matters:
// 1. fold_constants first: with input shapes bound, Shape/Gather/Concat chains become constants,
//    which the shape-dependent passes and shape inference need.
// 2. eliminate_identity before fusion, so Identity/Dropout do not hide Conv -> Relu pairs.
// 3. fold_batchnorm before fuse_conv: the fused epilogue applies after the folded bias.
// 4. fuse_conv / fuse_matmul last: they consume the residual Add and the activation.
std::span<const Pass> pass_pipeline() {
  static const Pass kPasses[] = {
      {"fold_constants", "evaluate nodes whose inputs are all constant (and Shape of known shapes) at build time",
       true, fold_constants},
      {"eliminate_identity", "remove Identity and inference-mode Dropout nodes", true, eliminate_identity},
      {"fold_batchnorm", "fold an inference BatchNormalization into the preceding Conv's weights and bias", true,
       fold_batchnorm},
      {"fuse_conv", "fuse Conv with a following residual Add and activation into FusedConv", true, fuse_conv},
      {"fuse_matmul", "fuse MatMul/Gemm with a following bias Add, residual Add and activation into FusedMatMul",
       true, fuse_matmul},
  };
  return kPasses;
}

}  // namespace tac::builder
