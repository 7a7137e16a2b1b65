// Tactic table of the elementwise family (see src/kernels/tactic.h).
#include "kernels/tactic.h"

namespace tac::kernels {

std::span<const Tactic> elementwise_tactics() { return {}; }

}  // namespace tac::kernels
