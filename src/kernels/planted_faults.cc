// Planted faults: tactics that fail on purpose, so tests can show that the tuner records a
// crash, a hang and a wrong answer as that candidate's outcome and still returns a correct best.
// Offered only when a build asks for them (BuildOptions::planted_faults, `--plant-faults`).
#include "kernels/planted_faults.h"

#include <signal.h>
#include <unistd.h>

namespace tac::kernels {

namespace planted {

Status float_out(const StepDesc& s) {
  return !s.out_dtypes.empty() && s.out_dtypes[0] == DType::float32 ? Status::ok()
                                                                     : not_applicable("planted faults act on float32 outputs");
}
double last(const StepDesc&) { return 1e30; }

namespace {

class Crash final : public Kernel {
 public:
  Status run(std::span<const TensorView>, std::span<const TensorView>, void*) override {
    raise(SIGSEGV);  // what a kernel with a wild pointer does
    return internal_error("unreachable");
  }
};
class Hang final : public Kernel {
 public:
  Status run(std::span<const TensorView>, std::span<const TensorView>, void*) override {
    for (;;) pause();  // a kernel stuck forever; only the evaluator's timeout ends it
  }
};

}  // namespace

Result<std::unique_ptr<Kernel>> crash(const StepDesc&) { return std::unique_ptr<Kernel>(new Crash()); }
Result<std::unique_ptr<Kernel>> hang(const StepDesc&) { return std::unique_ptr<Kernel>(new Hang()); }

}  // namespace planted

namespace {

class Wrong final : public Kernel {
 public:
  Status run(std::span<const TensorView>, std::span<const TensorView> out, void*) override {
    for (const TensorView& o : out)  // plausible-looking but wrong numbers
      if (o.data && o.dtype == DType::float32)
        for (int64_t i = 0; i < o.numel(); ++i) o.as<float>()[i] = 0.25f;
    return Status::ok();
  }
};

Result<std::unique_ptr<Kernel>> wrong(const StepDesc&) { return std::unique_ptr<Kernel>(new Wrong()); }

}  // namespace

std::span<const Tactic> planted_fault_tactics() {
  using planted::float_out, planted::last;
  static const Tactic kTable[] = {
      {"planted_crash", ir::OpKind::FusedConv, "planted fault: crashes (tests only)", float_out, last, planted::crash},
      {"planted_hang", ir::OpKind::FusedConv, "planted fault: never returns (tests only)", float_out, last, planted::hang},
      {"planted_wrong", ir::OpKind::FusedConv, "planted fault: wrong numbers (tests only)", float_out, last, wrong},
      {"planted_crash", ir::OpKind::Relu, "planted fault: crashes (tests only)", float_out, last, planted::crash},
      {"planted_hang", ir::OpKind::Relu, "planted fault: never returns (tests only)", float_out, last, planted::hang},
      {"planted_wrong", ir::OpKind::Relu, "planted fault: wrong numbers (tests only)", float_out, last, wrong},
  };
  return kTable;
}

}  // namespace tac::kernels
