// Tactic table of the gemm family (see src/kernels/tactic.h).
#include "kernels/tactic.h"

namespace tac::kernels {

std::span<const Tactic> gemm_tactics() { return {}; }

}  // namespace tac::kernels
