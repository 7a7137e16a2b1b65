// Lower-precision GEMM tactics (the builder's precision rewrite makes these steps, see
// src/builder/precision.h): the oneDNN matmul kernel of onednn_matmul.h with
//   onednn_bf16: bf16 A and B, bf16 C, fp32 bias, bf16 residual (binary add post-op), AVX512-BF16;
//   onednn_int8: u8 or s8 A, s8 constant B, fp32 C with per-column output scales
//                x_scale * w_scales[n] (node attributes), fp32 bias and residual, AVX512-VNNI.
// The problem geometry is the fp32 one (problem.cc) read from the same step with its dtypes
// set aside; every fp32 tactic rejects these steps (analyze_problem accepts fp32 only).
#include <omp.h>

#include <algorithm>
#include <dnnl.hpp>
#include <memory>
#include <unordered_map>

#include "kernels/gemm/onednn_matmul.h"
#include "kernels/gemm/problem.h"
#include "kernels/onednn_common.h"
#include "kernels/tactic.h"

namespace tac::kernels::gemm {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

enum class Lowp { bf16, int8 };

// The step's dtypes for `kind`, then its fp32 geometry (analyze_problem on a copy whose dtypes
// read fp32).
Status analyze_lowp(const StepDesc& s, Lowp kind, Problem& p) {
  const ir::OpKind op = s.node->op;
  if (op != ir::OpKind::MatMul && op != ir::OpKind::FusedMatMul && op != ir::OpKind::Gemm)
    return not_applicable("not a GEMM op");
  if (!s.has_input(0) || !s.has_input(1) || s.out_dtypes.size() != 1) return not_applicable("A and B are required");
  const int res = op == ir::OpKind::Gemm ? 2 : (op == ir::OpKind::FusedMatMul ? 3 : -1);
  if (kind == Lowp::bf16) {
    if (!cpu_features().avx512_bf16) return not_applicable("needs AVX512-BF16");
    if (s.in_dtypes[0] != DType::bfloat16 || s.in_dtypes[1] != DType::bfloat16 || s.out_dtypes[0] != DType::bfloat16)
      return not_applicable("bf16 only (A, B and the output)");
    if (res >= 0 && s.has_input(static_cast<size_t>(res)) && s.in_dtypes[static_cast<size_t>(res)] != DType::bfloat16)
      return not_applicable("the residual must be bf16");
    if (s.node->attr("x_scale")) return not_applicable("an int8 step");
  } else {
    if (!cpu_features().avx512_vnni) return not_applicable("needs AVX512-VNNI");
    if (op != ir::OpKind::FusedMatMul || !s.node->attr("x_scale") || !s.node->attr("w_scales"))
      return not_applicable("not an int8 step (FusedMatMul with x_scale / w_scales)");
    // With y_scale the output is quantized (u8 / s8 for the next int8 node), else fp32.
    const bool y_q = s.node->attr("y_scale") != nullptr;
    const DType y = s.out_dtypes[0];
    if ((s.in_dtypes[0] != DType::uint8 && s.in_dtypes[0] != DType::int8) || s.in_dtypes[1] != DType::int8 ||
        (y_q ? y != DType::uint8 && y != DType::int8 : y != DType::float32))
      return not_applicable("int8 needs u8/s8 A, s8 B, fp32 output (u8/s8 with y_scale)");
    if (!s.constants[1]) return not_applicable("int8 needs constant B");
    if (res >= 0 && s.has_input(static_cast<size_t>(res)) && (y_q || s.in_dtypes[static_cast<size_t>(res)] != DType::float32))
      return not_applicable("the residual must be fp32, without y_scale");
    if (y_q && !(s.node->attr("y_scale")->f > 0)) return not_applicable("y_scale must be positive");
  }
  if (s.has_input(2) && op != ir::OpKind::Gemm && s.in_dtypes[2] != DType::float32) return not_applicable("bias must be fp32");
  StepDesc f = s;
  for (DType& d : f.in_dtypes)
    if (d != DType::undefined) d = DType::float32;
  f.out_dtypes[0] = DType::float32;
  f.constants[1] = nullptr;  // prepack decisions below do not read it as fp32
  TAC_RETURN_IF_ERROR(analyze_problem(f, p));
  p.b_const = s.constants[1] != nullptr;
  if (p.batches > 1) {
    if (batch_kind(p.a_off, p.M * p.K) < 0 || batch_kind(p.b_off, p.K * p.N) < 0)
      return not_applicable("oneDNN: batch broadcast other than all-or-nothing");
    if (p.res_input >= 0 && batch_kind(p.r_off, p.res_rows * p.res_cols) < 0)
      return not_applicable("oneDNN: residual batch broadcast other than all-or-nothing");
    if (p.b_count > 1 && p.b_const && p.batches != p.b_count) return not_applicable("oneDNN: broadcast constant B batch");
  }
  if (p.res_input >= 0 && p.res_scale != 1.0f) return not_applicable("oneDNN: Gemm beta != 1 with C");
  if (kind == Lowp::int8) {
    if (s.in_shapes[1].size() != 2) return not_applicable("int8 needs a 2-D B (per-column scales)");
    if (static_cast<int64_t>(s.node->attr("w_scales")->floats.size()) != p.N)
      return not_applicable("w_scales must have N entries");
  }
  return Status::ok();
}

template <Lowp K>
Status lowp_applies(const StepDesc& s) {
  Problem p;
  return analyze_lowp(s, K, p);
}

// oneDNN bf16 matmul (AVX512-BF16 vdpbf16ps: twice the fp32 FMA rate) and int8 (VNNI vpdpbusd:
// four times); the fp32 rate is ~242 GFLOP/s single-thread here (gemm_libs.cc).
template <Lowp K>
double lowp_cost(const StepDesc& s) {
  Problem p;
  if (!analyze_lowp(s, K, p)) return 1e30;
  const double Kd = static_cast<double>(p.K), N = static_cast<double>(p.N), batches = static_cast<double>(p.batches);
  const double kc = std::min(Kd, 256.0);
  const double rate = K == Lowp::bf16 ? 420.0 : 700.0, bytes = K == Lowp::bf16 ? 2.0 : 1.0;
  double work = std::max(p.flops() / (rate * kc / (kc + 16.0)), bytes * Kd * N * batches / 100.0);
  if (!p.b_const) work += 0.3 * Kd * N * batches;
  return 3000.0 + work / std::max(1, s.threads);
}

template <Lowp K>
Result<std::unique_ptr<Kernel>> lowp_prepare(const StepDesc& s) {
  OnednnMatmul m;
  TAC_RETURN_IF_ERROR(analyze_lowp(s, K, m.p));
  m.threads = s.threads;
  m.a = dnnl_type(s.in_dtypes[0]);
  m.b = dnnl_type(s.in_dtypes[1]);
  m.c = dnnl_type(s.out_dtypes[0]);
  if (m.p.res_input >= 0) m.res = dnnl_type(s.in_dtypes[static_cast<size_t>(m.p.res_input)]);
  m.b_const = m.p.b_const ? s.constants[1] : nullptr;
  if (K == Lowp::int8) {
    const float xs = s.node->attr("x_scale")->f;
    for (float ws : s.node->attr("w_scales")->floats) m.scales.push_back(xs * ws);
    if (m.p.bias_input >= 0) m.bias = s.constants[static_cast<size_t>(m.p.bias_input)];
    if (const ir::Attribute* ys = s.node->attr("y_scale")) m.y_scale = ys->f;
  }
  return make_onednn_matmul(m);
}

}  // namespace

std::span<const Tactic> lowp_gemm_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (ir::OpKind op : {ir::OpKind::MatMul, ir::OpKind::FusedMatMul, ir::OpKind::Gemm}) {
      t.push_back(Tactic{"onednn_bf16", op,
                         "oneDNN matmul in bf16 (AVX512-BF16): bf16 A/B/C, fp32 bias, bias/residual/activation post-ops",
                         lowp_applies<Lowp::bf16>, lowp_cost<Lowp::bf16>, lowp_prepare<Lowp::bf16>});
      if (op == ir::OpKind::FusedMatMul)
        t.push_back(Tactic{"onednn_int8", op,
                           "oneDNN matmul in int8 (VNNI): u8/s8 A, s8 B, fp32 C with per-column scales, fp32 post-ops",
                           lowp_applies<Lowp::int8>, lowp_cost<Lowp::int8>, lowp_prepare<Lowp::int8>});
    }
    return t;
  }();
  return table;
}

}  // namespace tac::kernels::gemm
