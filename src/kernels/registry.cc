#include <cpuid.h>

#include "kernels/tactic.h"

namespace tac::kernels {

std::vector<const Tactic*> tactics_for(ir::OpKind op, bool planted_faults) {
  std::vector<const Tactic*> out;
  // Explicit list of the family tables; the reference fallback goes last.
  for (std::span<const Tactic> table : {gemm_tactics(), conv_tactics(), elementwise_tactics(), attention_tactics(),
                                         chain_tactics(), precision_tactics(), reference_tactics()})
    for (const Tactic& t : table)
      if (t.op == op) out.push_back(&t);
  if (planted_faults)
    for (const Tactic& t : planted_fault_tactics())
      if (t.op == op) out.push_back(&t);
  return out;
}

const Tactic* find_tactic(ir::OpKind op, const std::string& name) {
  for (const Tactic* t : tactics_for(op, /*planted_faults=*/true))
    if (name == t->name) return t;
  return nullptr;
}

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
