// Tactic table of the elementwise family (see src/kernels/tactic.h): activations, broadcasting
// binaries, normalisations, pooling and data movement; one sub-table per source file.
#include "kernels/elementwise/common.h"

namespace tac::kernels {

std::span<const Tactic> elementwise_tactics() {
  static const std::vector<Tactic> table = [] {
    std::vector<Tactic> t;
    for (auto part : {ew::unary_tactics, ew::binary_tactics, ew::norm_tactics, ew::pool_tactics, ew::movement_tactics})
      for (const Tactic& x : part()) t.push_back(x);
    return t;
  }();
  return table;
}

}  // namespace tac::kernels
