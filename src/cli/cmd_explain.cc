// tactician explain MODEL.onnx --db tuning.db [--threads N]: which knob changes carry the gain.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "cli/args.h"
#include "cli/engine_args.h"
#include "tuner/tune.h"

namespace tac::cli {

int cmd_explain(int argc, char** argv) {
  Args args;
  std::string err;
  if (!parse_args(argc, argv, 2, {"--db", "--threads", "--inputs", "--calibration", "--backend", "--dim", "--rounds"}, {"--help"}, args, err) ||
      args.positional.size() != 1 || args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician explain: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr,
                 "usage: tactician explain MODEL.onnx [--db tuning.db] [--threads N] [--inputs DIR] [--calibration DIR] [--backend cuda|cpu] [--rounds 3]\n"
                 "Ablation from the best recorded route back toward the default: each knob the winner sets\n"
                 "is reverted alone and timed interleaved with the winner and the default; prints each\n"
                 "change's share of the speed-up.\n");
    return args.has("--help") ? 0 : 2;
  }
  tuner::TuneOptions o;
  o.model_path = args.positional[0];
  o.db_path = args.get("--db", "tuning.db");
  long hw = sysconf(_SC_NPROCESSORS_ONLN);
  const auto threads = args.get_int("--threads", hw > 0 ? hw : 1, 1, 4096);
  if (!threads) return usage_error("explain", threads.status());
  o.threads = static_cast<int>(*threads);
  o.inputs_dir = args.get("--inputs");
  o.calibration_dir = args.get("--calibration");
  auto backend = backend_from_args(args);
  if (!backend) {
    std::fprintf(stderr, "tactician explain: %s\n", backend.status().to_string().c_str());
    return 2;
  }
  o.backend = *backend;
  const auto rounds = args.get_int("--rounds", 3, 1, 1000);
  if (!rounds) return usage_error("explain", rounds.status());
  o.final_rounds = static_cast<int>(*rounds);
  if (auto dims = dims_from_args(args); dims) {
    o.dims = std::move(dims).value();
  } else {
    std::fprintf(stderr, "tactician explain: %s\n", dims.status().message().c_str());
    return 2;
  }
  Result<tuner::Explanation> ex = internal_error("explain did not run");
  try {  // errors are values; this only guarantees the cleanup of its temporary folder runs
    ex = tuner::explain(o);
  } catch (const std::exception& e) {
    ex = internal_error(std::string("uncaught exception: ") + e.what());
  }
  if (ex)
    for (const std::string& why : ex->warnings) std::fprintf(stderr, "tactician explain: warning: %s\n", why.c_str());
  if (!ex) {
    std::fprintf(stderr, "tactician explain: %s\n", ex.status().to_string().c_str());
    return ex.status().kind() == ErrorKind::invalid_argument ? 2 : 1;
  }
  std::printf("best route: %s\ndefault %.3f ms, best %.3f ms (%.3fx), medians of %d interleaved rounds\n",
              ex->best_route.c_str(), ex->default_ms, ex->best_ms, ex->default_ms / ex->best_ms, o.final_rounds);
  if (ex->knobs.empty()) {
    std::printf("the best recorded route is the default route: there is no gain to explain\n");
    return 0;
  }
  std::printf("%-60s %12s %8s\n", "knob change (reverted alone)", "without ms", "share");
  for (const tuner::KnobShare& k : ex->knobs)
    std::printf("%-60.60s %12.3f %7.0f%%\n", k.knob.c_str(), k.without_ms, 100 * k.share);
  std::printf("(shares need not sum to 100%%: knobs interact, and each is within the measured noise of the others)\n");
  return 0;
}

}  // namespace tac::cli
