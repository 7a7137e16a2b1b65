#include "tuner/interrupt.h"

#include <signal.h>

#include <cstring>

namespace tac::tuner {

namespace {

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_handles_int = 0, g_handles_term = 0;  // which handlers are ours

void on_signal(int sig) {
  if (g_signal == 0) g_signal = sig;
  // The next SIGINT or SIGTERM, whichever it is, takes the default action: a user who signals
  // twice wants the process gone now. signal() with SIG_DFL is async-signal-safe.
  if (g_handles_int) signal(SIGINT, SIG_DFL);
  if (g_handles_term) signal(SIGTERM, SIG_DFL);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // Restarted system calls: SQLite's and the streams' I/O go on as if nothing happened; the
  // evaluator's poll() is never restarted (it returns EINTR) and sees the flag at once.
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM}) {
    // A signal ignored when we started stays ignored (a shell starts background jobs of a script
    // with SIGINT ignored, so that a Ctrl-C stops the script but not them).
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    (sig == SIGINT ? g_handles_int : g_handles_term) = 1;
    sigaction(sig, &sa, nullptr);
  }
}

void request_interrupt(int signal) {
  if (g_signal == 0) g_signal = signal;
}

int interrupt_signal() { return g_signal; }

void clear_interrupt() { g_signal = 0; }

std::string interrupt_reason() {
  const int s = g_signal;
  if (s == 0) return "";
  const char* name = s == SIGINT ? "SIGINT" : s == SIGTERM ? "SIGTERM" : nullptr;
  return std::string("interrupted (") + (name ? name : "signal " + std::to_string(s)) + ")";
}

}  // namespace tac::tuner
