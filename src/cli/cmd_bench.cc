// tactician bench MODEL.onnx|MODEL.plan [--route ...] [--threads N] [--json]
#include <cstdio>

#include "builder/plan_file.h"
#include "cli/engine_args.h"
#include "io/onnx_import.h"

namespace tac::cli {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

// Loads the model (or plan) named by the positional argument into an engine.
Result<std::unique_ptr<runtime::Engine>> engine_for_positional(Args& args) {
  const std::string& path = args.positional[0];
  if (ends_with(path, ".plan")) {
    args.values["--plan"] = {path};
    return engine_from_args(args, nullptr, {});
  }
  TAC_ASSIGN_OR_RETURN(ir::Model model, io::load_model(path));
  TAC_ASSIGN_OR_RETURN(builder::BuildOptions opts, build_options_from_args(args));
  return engine_from_args(args, &model, opts);
}

int cmd_bench(int argc, char** argv) {
  Args args;
  std::string err;
  const char* help =
      "usage: tactician bench MODEL.onnx|MODEL.plan [--route ...|--route-file F] [--threads N] [--dim S=N]\n"
      "                       [--min-runs 20] [--min-seconds 2] [--warmup 5] [--input-sets 4] [--l2-flush] [--json]\n"
      "End-to-end latency of the engine: warm-up, then runs until both the minimum count and the\n"
      "minimum time are reached, rotating among seeded random input sets. Prints median, p10, p90\n"
      "and the coefficient of variation, warning when it exceeds 10%. --json: the last line is\n"
      "{\"median_ms\", \"p10_ms\", \"p90_ms\", \"mean_ms\", \"cv\", \"runs\", \"threads\"} (CUDA: also\n"
      "\"timing\", \"graphs\", \"l2\").\n"
      "On CUDA the time is device time between CUDA events around the engine's steps (a CUDA graph's\n"
      "replay with cuda.graphs=on), inputs uploaded before and outputs left on the device.\n"
      "  --backend cuda|cpu     where the engine runs (default: cuda when this build has CUDA and a GPU is present)\n"
      "  --l2-flush             CUDA: overwrite twice the L2 before each timed run (cold L2; default warm)\n";
  std::set<std::string> flags = kEngineFlags;
  for (const char* f : {"--min-runs", "--min-seconds", "--warmup", "--input-sets"}) flags.insert(f);
  if (!parse_args(argc, argv, 2, flags, {"--json", "--help", "--l2-flush"}, args, err) || args.positional.size() != 1 ||
      args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician bench: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help);
    return args.has("--help") ? 0 : 2;
  }
  auto engine = engine_for_positional(args);
  if (!engine) {
    std::fprintf(stderr, "tactician bench: %s\n", engine.status().to_string().c_str());
    return engine.status().kind() == ErrorKind::invalid_argument ? 2 : 1;
  }
  int sets = std::max(1, std::atoi(args.get("--input-sets", "4").c_str()));
  std::vector<std::vector<Tensor>> inputs;
  for (int s = 0; s < sets; ++s) {
    auto set = random_inputs(**engine, 1000 + static_cast<uint64_t>(s));
    if (!set) {
      std::fprintf(stderr, "tactician bench: %s\n", set.status().to_string().c_str());
      return 1;
    }
    inputs.push_back(std::move(set).value());
  }
  auto lat = measure(**engine, inputs, std::max(1, std::atoi(args.get("--min-runs", "20").c_str())),
                     std::strtod(args.get("--min-seconds", "2").c_str(), nullptr),
                     std::max(0, std::atoi(args.get("--warmup", "5").c_str())), args.has("--l2-flush"));
  if (!lat) {
    std::fprintf(stderr, "tactician bench: %s\n", lat.status().to_string().c_str());
    return 1;
  }
  const int threads = (*engine)->plan().threads;
  const bool device = (*engine)->plan().backend == kernels::Backend::cuda;
  if (device)
    std::printf("%s: median %.4f ms  p10 %.4f  p90 %.4f  mean %.4f  cv %.1f%%  (%d runs; CUDA events, %s L2, graphs %s)\n",
                args.positional[0].c_str(), lat->median_ms, lat->p10_ms, lat->p90_ms, lat->mean_ms, 100 * lat->cv, lat->runs,
                args.has("--l2-flush") ? "cold" : "warm", (*engine)->graph_state().c_str());
  else
    std::printf("%s: median %.3f ms  p10 %.3f  p90 %.3f  mean %.3f  cv %.1f%%  (%d runs, %d threads)\n",
                args.positional[0].c_str(), lat->median_ms, lat->p10_ms, lat->p90_ms, lat->mean_ms, 100 * lat->cv,
                lat->runs, threads);
  if (lat->cv > 0.10)
    std::printf("warning: unstable timing (cv %.0f%% > 10%%): the machine is busy or the runs are too short\n",
                100 * lat->cv);
  if (args.has("--json"))
    std::printf("{\"median_ms\": %.6f, \"p10_ms\": %.6f, \"p90_ms\": %.6f, \"mean_ms\": %.6f, \"cv\": %.6f, "
                "\"runs\": %d, \"threads\": %d%s}\n",
                lat->median_ms, lat->p10_ms, lat->p90_ms, lat->mean_ms, lat->cv, lat->runs, threads,
                device ? (std::string(", \"timing\": \"cuda_events\", \"graphs\": \"") +
                          ((*engine)->graph_state().rfind("on", 0) == 0 ? "on" : "off") + "\", \"l2\": \"" + (args.has("--l2-flush") ? "cold" : "warm") + "\"")
                             .c_str()
                       : "");
  return 0;
}

}  // namespace tac::cli
