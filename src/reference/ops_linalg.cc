// Reference kernels: Gemm, MatMul, Einsum, quantisation.
#include "reference/helpers.h"

namespace tac::ref {

namespace {

using ir::OpKind;

}  // namespace

void add_linalg_kernels(KernelTable& t) {
  (void)t;
}

}  // namespace tac::ref
