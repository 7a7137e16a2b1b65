#include <cpuid.h>

#include "kernels/tactic.h"

namespace tac::kernels {

const char* backend_name(Backend b) { return b == Backend::cuda ? "cuda" : "cpu"; }

Result<Backend> backend_from_name(const std::string& name) {
  if (name == "cpu") return Backend::cpu;
  if (name == "cuda") return Backend::cuda;
  return invalid_argument("backend '" + name + "': expected cpu or cuda");
}

std::vector<const Tactic*> tactics_for(ir::OpKind op, Backend backend, bool planted_faults) {
  if (backend == Backend::cpu) return tactics_for(op, planted_faults);
  std::vector<const Tactic*> out;
  // Explicit list of the CUDA family tables; the host fallback goes last.
  for (std::span<const Tactic> table :
       {cuda_gemm_tactics(), cuda_graph_matmul_tactics(), cuda_conv_tactics(), cuda_elementwise_tactics(),
        cuda_reduce_tactics(), cuda_resize_tactics(), cuda_select_tactics(), cuda_attention_tactics(),
        cuda_rnn_tactics(), cuda_chain_tactics(), cuda_reference_tactics()})
    for (const Tactic& t : table)
      if (t.op == op) out.push_back(&t);
  if (planted_faults)
    for (const Tactic& t : cuda_planted_fault_tactics())
      if (t.op == op) out.push_back(&t);
  return out;
}

const Tactic* find_tactic(ir::OpKind op, const std::string& name, Backend backend) {
  for (const Tactic* t : tactics_for(op, backend, /*planted_faults=*/true))
    if (name == t->name) return t;
  return nullptr;
}

std::vector<const Tactic*> tactics_for(ir::OpKind op, bool planted_faults) {
  std::vector<const Tactic*> out;
  // Explicit list of the family tables; the reference fallback goes last.
  for (std::span<const Tactic> table : {gemm_tactics(), conv_tactics(), elementwise_tactics(), attention_tactics(),
                                         chain_tactics(), precision_tactics(), resize_tactics(), pad_tactics(),
                                         rnn_tactics(), layout_tactics(), reference_tactics()})
    for (const Tactic& t : table)
      if (t.op == op) out.push_back(&t);
  if (planted_faults)
    for (const Tactic& t : planted_fault_tactics())
      if (t.op == op) out.push_back(&t);
  return out;
}

bool StepDesc::plain() const {
  for (ir::Layout l : in_layouts)
    if (l != ir::Layout::nchw) return false;
  for (ir::Layout l : out_layouts)
    if (l != ir::Layout::nchw) return false;
  return true;
}

const Tactic* find_tactic(ir::OpKind op, const std::string& name) { return find_tactic(op, name, Backend::cpu); }

#if !TAC_HAS_CUDA
// A build without CUDA: the CUDA tables are empty (their sources are not compiled).
std::span<const Tactic> cuda_gemm_tactics() { return {}; }
std::span<const Tactic> cuda_graph_matmul_tactics() { return {}; }
std::span<const Tactic> cuda_conv_tactics() { return {}; }
std::span<const Tactic> cuda_elementwise_tactics() { return {}; }
std::span<const Tactic> cuda_reduce_tactics() { return {}; }
std::span<const Tactic> cuda_resize_tactics() { return {}; }
std::span<const Tactic> cuda_select_tactics() { return {}; }
std::span<const Tactic> cuda_attention_tactics() { return {}; }
std::span<const Tactic> cuda_rnn_tactics() { return {}; }
std::span<const Tactic> cuda_chain_tactics() { return {}; }
std::span<const Tactic> cuda_reference_tactics() { return {}; }
std::span<const Tactic> cuda_planted_fault_tactics() { return {}; }
#endif

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures c;
    __builtin_cpu_init();
    c.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    c.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    c.avx512_vnni = c.avx512 && __builtin_cpu_supports("avx512vnni");
    unsigned a, b, cc, d;  // AVX512_BF16: CPUID.(EAX=7,ECX=1):EAX[5]
    if (__get_cpuid_count(7, 1, &a, &b, &cc, &d)) c.avx512_bf16 = c.avx512 && ((a >> 5) & 1u);
    return c;
  }();
  return f;
}

}  // namespace tac::kernels
