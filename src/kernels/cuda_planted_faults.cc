// Planted faults on the CUDA backend (as planted_faults.cc on the CPU), on FusedConv and Relu: a
// crash and a hang (the CPU's own, kernels/planted_faults.h), plausible wrong numbers written on the
// device, and an illegal device memory access (a sticky CUDA error: every later call of the process
// fails, so the evaluator must be replaced). Offered only when a build asks for them
// (BuildOptions::planted_faults, `--plant-faults`); ranked last.
#include "kernels/cuda_util.h"
#include "kernels/planted_faults.h"

namespace tac::kernels {

namespace {

class Wrong final : public Kernel {
 public:
  Status run(std::span<const TensorView>, std::span<const TensorView> out, void*) override {
    for (const TensorView& o : out)  // every float 0x3e3e3e3e = 0.186: plausible, wrong
      if (o.data) TAC_RETURN_IF_ERROR(cuda::fill_bytes(o.data, 0x3e, static_cast<size_t>(o.numel()) * dtype_size(o.dtype)));
    return Status::ok();
  }
};
class IllegalAccess final : public Kernel {
 public:
  Status run(std::span<const TensorView>, std::span<const TensorView>, void*) override {
    TAC_ASSIGN_OR_RETURN(cuda::Context * c, cuda::context());
    return cuda::launch_status(cuda::kern::planted_illegal_write(c->stream), "planted illegal write");
  }
};

template <class K>
Result<std::unique_ptr<Kernel>> make(const StepDesc&) {
  return std::unique_ptr<Kernel>(new K());
}

}  // namespace

std::span<const Tactic> cuda_planted_fault_tactics() {
  using planted::float_out, planted::last;
  static const Tactic kTable[] = {
#define TAC_PLANTED(OP)                                                                                                            \
  {"planted_crash", ir::OpKind::OP, "planted fault: crashes (tests only)", float_out, last, planted::crash, Backend::cuda},        \
      {"planted_hang", ir::OpKind::OP, "planted fault: never returns (tests only)", float_out, last,                               \
       planted::hang,  Backend::cuda},                                                                                             \
      {"planted_wrong", ir::OpKind::OP, "planted fault: wrong numbers (tests only)", float_out, last, make<Wrong>, Backend::cuda}, \
      {"planted_cuda_error", ir::OpKind::OP, "planted fault: an illegal device memory access (tests only)", float_out, last,       \
       make<IllegalAccess>,  Backend::cuda}
      TAC_PLANTED(FusedConv),
      TAC_PLANTED(Relu),
#undef TAC_PLANTED
  };
  return kTable;
}

}  // namespace tac::kernels
