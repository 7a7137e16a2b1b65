// Tactic table of the conv family (see src/kernels/tactic.h).
#include "kernels/tactic.h"

namespace tac::kernels {

std::span<const Tactic> conv_tactics() { return {}; }

}  // namespace tac::kernels
