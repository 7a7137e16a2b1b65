// Reference kernels: control flow (If, Loop, Scan), sequences, optionals, recurrent layers.
#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

}  // namespace

void add_control_kernels(KernelTable& t) {
  (void)t;
}

}  // namespace tac::ref
