// A MatMul / FusedMatMul / Gemm step seen as a batch of fp32 GEMMs with an epilogue: the common
// description that every gemm tactic (ours, OpenBLAS, oneDNN) runs from.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/epilogue.h"
#include "kernels/tactic.h"

namespace tac::kernels::gemm {

struct Problem {
  int64_t M = 0, N = 0, K = 0;
  int64_t batches = 1;                       // output matrices; C of batch i at i * M * N (ldc = N)
  std::vector<int64_t> a_off, b_off, r_off;  // per batch, in floats
  std::vector<int64_t> b_index;              // per batch: which of the B matrices (b_off = index * K * N)
  int64_t b_count = 1;                       // distinct B matrices
  int64_t a_rs = 0, a_cs = 1, b_rs = 0, b_cs = 1;
  int bias_input = -1;  // index of the bias input (per output column), or -1
  int res_input = -1;   // index of the residual / Gemm C input, or -1
  int64_t res_rs = 0, res_cs = 0, res_rows = 1, res_cols = 1;  // residual matrix of res_rows x res_cols
  float alpha = 1, res_scale = 1;
  ir::Epilogue act;
  bool b_const = false;  // B is a constant (weights): prepack it once
  bool folded = false;   // batch dims of A folded into M (B shared by every batch)

  double flops() const { return 2.0 * static_cast<double>(M) * N * K * batches; }
};

// analyze_problem for a step whose tensors are all of its output's type (fp32, fp16 or bf16),
// but a bias that may be fp32: read through an fp32 view of the step (the offsets and strides
// are in elements either way). not_applicable where another input differs in type.
Status analyze_typed_problem(const StepDesc& step, Problem& p);

// Per-batch offsets that are i * stride for every batch i (a strided batch; stride 0: every batch
// the same matrix): `stride`, and true; false otherwise.
inline bool uniform_stride(const std::vector<int64_t>& off, int64_t& stride) {
  stride = off.size() > 1 ? off[1] - off[0] : 0;
  for (size_t i = 0; i < off.size(); ++i)
    if (off[i] != static_cast<int64_t>(i) * stride) return false;
  return true;
}

// Status::ok and fills `p` when the step is an fp32 GEMM these tactics handle; not_applicable
// with the reason otherwise (1-D operands, other dtypes, empty dims, unsupported broadcasts).
Status analyze_problem(const StepDesc& step, Problem& p);

}  // namespace tac::kernels::gemm
