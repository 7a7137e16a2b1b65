// The pieces of the planted faults (planted_faults.cc) that every backend's table shares: which
// steps they act on, their rank (last), and the two host-side faults, a crash and a hang, which
// fail the same way whatever device the engine runs on.
#pragma once

#include <memory>

#include "kernels/tactic.h"

namespace tac::kernels::planted {

Status float_out(const StepDesc& s);                     // float32 outputs only
double last(const StepDesc&);                            // ranked last: the default route never takes a planted fault
Result<std::unique_ptr<Kernel>> crash(const StepDesc&);  // raises SIGSEGV when run
Result<std::unique_ptr<Kernel>> hang(const StepDesc&);   // never returns when run

}  // namespace tac::kernels::planted
