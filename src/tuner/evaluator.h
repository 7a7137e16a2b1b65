// The evaluator (DESIGN.md section 3): each candidate is built, checked and timed in a child
// process (a fresh `tactician evaluate` exec'd from this binary) with a time and memory limit,
// so a crash, hang or out-of-memory in one route is recorded as that candidate's outcome and
// the search goes on.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tactician/status.h"

namespace tac::tuner {

// What the child is asked to do. The data directory holds input_K.pb (the inputs) and
// expected_K.pb (the reference outputs), written once by the tuner.
struct EvalRequest {
  std::string model_path;
  std::string data_dir;
  std::string route;      // canonical text
  std::string tolerance;  // Tolerance::to_string()
  std::vector<std::string> dims;  // "SYMBOL=N"
  double min_seconds = 0.3;       // measurement: minimum time ...
  int min_runs = 10;              // ... and count
  std::string save_plan;          // if set, the child also saves the plan there
  std::string shapes;             // shape ranges the plan is built with (builder::parse_shape_ranges)
  bool check = true;              // run the accuracy gate
  bool measure = true;            // time the engine
  bool planted_faults = false;    // offer the planted-fault tactics (tests of the tuner)
  bool profile = false;           // also report each node's median in-engine time
  std::string calibration_dir;    // int8 calibration inputs ("": the builder's default)
  std::string calibration_cache;  // folder the candidates share their int8 ranges through
  std::string backend = "cpu";    // "cpu" | "cuda": the child builds and times there (own CUDA context)
  // Paired timing (with `measure`): the child also builds this route (not checked) and times both
  // engines in one process, in `compare_rounds` rounds of one block each (min_seconds split among
  // them, the order alternating), so a slow spell of a shared machine falls on both alike.
  std::string compare_route;
  int compare_rounds = 4;
};

struct EvalResult {
  // ok | rejected | build_failed | run_failed | crashed | timeout, or interrupted: the tune was
  // asked to stop (tuner/interrupt.h) and the child was killed, or never started. An interrupted
  // evaluation says nothing about its route and is never recorded.
  std::string status = "crashed";
  std::string reason;
  double build_ms = 0;
  double check_ms = 0, measure_ms = 0;  // the first run and accuracy check; timing and profiling
  std::string metrics_json = "[]";
  double median_ms = 0, p10_ms = 0, p90_ms = 0, cv = 0;
  int runs = 0;
  // With compare_route: that engine's median over its blocks, and the per-round ratios
  // route ms / compare ms (above 1: the compare route is faster): median, lowest, highest, and
  // their noise (halving.h paired_noise).
  double compare_median_ms = 0, paired_ratio = 0, paired_low = 0, paired_high = 0, paired_noise = 1;
  double wall_s = 0;  // the child's whole life
  std::map<std::string, double> node_ms;  // with `profile`: median ms per node (steps of one node summed)
  std::map<std::string, std::string> tactics;  // the tactic the build chose for each node (once built)
  // Per node, the tactics the build ranked, in order, with their costs (ns: estimates, or times
  // alone on the layer under builder.selection=isolated).
  std::map<std::string, std::vector<std::pair<std::string, double>>> costs;
};

struct EvalLimits {
  double timeout_s = 300;
  int64_t memory_bytes = int64_t{8} << 30;  // RLIMIT_AS of the child
  std::string binary = "/proc/self/exe";    // the tactician binary (tests point it at build/tactician)
  // EvalWorker: one process evaluates request after request (true), or a fresh child per request.
  bool persistent = true;
};

// What an evaluation does when the tune is interrupted (tuner/interrupt.h): `stop` kills the
// child (or does not start it) and returns "interrupted"; `finish` lets it run (saving the best
// plan of what was measured, after the search has stopped).
enum class OnInterrupt { stop, finish };

// Runs `tactician evaluate` as a child of this process and waits for it. The child dies with this
// process (PR_SET_PDEATHSIG SIGKILL, however this process ends: a kill -9 included) and runs in
// its own process group (a Ctrl-C at the terminal reaches the tuner only, which then stops the
// child itself). PDEATHSIG follows the thread that forked, not the process: that is safe here
// because this function waits for its child, so the forking thread outlives it unless the whole
// process dies.
EvalResult evaluate_in_child(const EvalRequest& req, const EvalLimits& limits,
                             OnInterrupt on_interrupt = OnInterrupt::stop);

// A persistent evaluator (issue 28): one `tactician evaluate --serve` child that builds, checks and
// times request after request, keeping what does not change between them (the model, the
// reference data, the process's CUDA context and library handles), so a candidate costs its
// build and measurement and not a process start. Isolation is kept: the same limits hold per
// request; a worker that crashes, hangs past the time limit or is interrupted is killed and the
// request recorded as such, and after any failure other than an accuracy rejection the next
// request starts a fresh worker (a failed candidate may leave it in a bad state: a sticky CUDA
// error). With limits.persistent false, each request runs in a fresh child (evaluate_in_child).
// Not thread-safe; the worker dies with the object (or with this process).
class EvalWorker {
 public:
  EvalWorker() = default;
  EvalWorker(const EvalWorker&) = delete;
  EvalWorker& operator=(const EvalWorker&) = delete;
  ~EvalWorker();
  EvalResult evaluate(const EvalRequest& req, const EvalLimits& limits, OnInterrupt on_interrupt = OnInterrupt::stop);
  bool running() const { return pid_ >= 0; }

 private:
  void stop();
  int pid_ = -1, fd_ = -1;
  std::string key_;  // binary, backend and memory limit of the running worker
};

// The child side: `tactician evaluate ...` (internal subcommand); `tactician evaluate --serve` is
// an EvalWorker's process.
int run_evaluate_command(int argc, char** argv);

}  // namespace tac::tuner
