// Stopping a tune on SIGINT or SIGTERM (issue 30). The first signal only records itself (the
// handler is async-signal-safe: one store); the evaluator then kills the candidate it is running
// (evaluator.cc), that candidate is not recorded (it was interrupted, not crashed: a resume
// evaluates it again), the search stops as if its budget ran out, and what was measured is still
// written. The handler puts both signals back to their default action, so a second one ends the
// process at once; its candidates die with it (PR_SET_PDEATHSIG, evaluator.cc).
//
// The flag is process-wide because a signal is: the CLI installs the handlers; a program using
// the tuner as a library keeps its own handlers and calls request_interrupt from them.
#pragma once

#include <string>

namespace tac::tuner {

// Installs the SIGINT and SIGTERM handlers (`tactician tune`); a signal ignored at start stays ignored.
void install_interrupt_handlers();
// Asks the running tune to stop as if `signal` had arrived (async-signal-safe).
void request_interrupt(int signal);
// The signal that asked the tune to stop; 0 while none did.
int interrupt_signal();
// Forgets an interrupt (a caller running several tunes, tests).
void clear_interrupt();
// "interrupted (SIGTERM)"; "" while not interrupted.
std::string interrupt_reason();

}  // namespace tac::tuner
