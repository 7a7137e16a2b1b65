// One oneDNN 2.6 matmul kernel for every data type (issue 32): gemm_libs.cc's fp32 tactic
// (onednn) and onednn_lowp.cc's bf16 and int8 ones describe their step as an OnednnMatmul and
// share the kernel (in gemm_libs.cc). Internal to the gemm family.
#pragma once

#include <dnnl.hpp>
#include <memory>
#include <vector>

#include "kernels/gemm/problem.h"

namespace tac::kernels::gemm {

struct OnednnMatmul {
  Problem p;  // the fp32 geometry (analyze_problem)
  int threads = 1;
  dnnl::memory::data_type a = dnnl::memory::data_type::f32, b = dnnl::memory::data_type::f32, c = dnnl::memory::data_type::f32,
                          res = dnnl::memory::data_type::f32;  // bias: fp32
  const Tensor* b_const = nullptr;                             // a constant B, reordered once into the primitive's format
  // int8: the output scales per column (x_scale * w_scales[n]); oneDNN 2.x adds the bias before
  // them, so the kernel divides the bias by them (once for a constant bias, `bias`).
  std::vector<float> scales;
  const Tensor* bias = nullptr;
  float y_scale = 0;  // > 0: a quantized output, y / y_scale as the last post-op
};

// Whether per-batch offsets are `i * step` (contiguous batches: 1) or all 0 (broadcast: 0);
// -1: neither (oneDNN cannot take it).
int batch_kind(const std::vector<int64_t>& off, int64_t step);

// The kernel of `m`; not_applicable when oneDNN has no matmul for it.
Result<std::unique_ptr<Kernel>> make_onednn_matmul(const OnednnMatmul& m);

}  // namespace tac::kernels::gemm
