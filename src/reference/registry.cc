#include "reference/kernel.h"

namespace tac::ref {

namespace {
const KernelTable& table() {
  static const KernelTable t = [] {
    KernelTable k;
    add_elementwise_kernels(k);
    add_nn_kernels(k);
    add_linalg_kernels(k);
    add_reduce_kernels(k);
    add_shape_kernels(k);
    add_control_kernels(k);
    add_fused_kernels(k);
    return k;
  }();
  return t;
}
}  // namespace

RefKernel reference_kernel(ir::OpKind op) {
  int i = static_cast<int>(op);
  return i >= 0 && i < ir::kNumOps ? table().kernels[i] : nullptr;
}

bool reference_supports(const ir::Node& n) {
  return (n.domain.empty() || n.domain == ir::kInternalDomain) && reference_kernel(n.op) != nullptr;
}

}  // namespace tac::ref
