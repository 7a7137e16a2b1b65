// Reference kernels: reductions, ArgMax/ArgMin, TopK, CumSum, NonZero.
#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

}  // namespace

void add_reduce_kernels(KernelTable& t) {
  (void)t;
}

}  // namespace tac::ref
