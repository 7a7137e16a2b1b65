// tactician bench MODEL.onnx|MODEL.plan [--route ...] [--threads N] [--json]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "builder/plan_file.h"
#include "cli/engine_args.h"
#include "core/json.h"
#include "io/onnx_import.h"

namespace tac::cli {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// --export-times: every timed run of measure(), in order (trtexec's --exportTimes).
Status export_times(const std::string& path, const std::string& engine, const Latency& lat, bool device, int threads,
                    size_t input_sets, int warmup) {
  nlohmann::ordered_json iterations = nlohmann::ordered_json::array();
  for (size_t i = 0; i < lat.times_ms.size(); ++i)
    iterations.push_back({{"iteration", i}, {"input_set", i % input_sets}, {"ms", rounded(lat.times_ms[i], 6)}});
  const nlohmann::ordered_json j = {{"engine", engine},      {"timing", device ? "cuda_events" : "host_wall"},
                                    {"threads", threads},    {"input_sets", input_sets},
                                    {"warmup_runs", warmup}, {"iterations", iterations}};
  std::ofstream out(path);
  if (!out) return io_error(path + ": cannot write the --export-times file");
  out << dump_json(j, 2) << "\n";
  if (!out) return io_error(path + ": write failed");
  return Status::ok();
}

}  // namespace

// Loads the model (or plan) named by the positional argument into an engine.
// The rotating input sets of a benchmark (--input-sets, default 4), seeded. Their total size is
// checked first: each tensor is bounded by the machine's memory, but a plan whose inputs are a
// few GiB would need several times that (a fuzzed plan's 9 GB input made `bench` allocate 36 GB).
Result<std::vector<std::vector<Tensor>>> input_sets(const runtime::Engine& e, const Args& args) {
  TAC_ASSIGN_OR_RETURN(const int64_t sets, args.get_int("--input-sets", 4, 1, 1024));
  uint64_t per_set = 0;
  for (const auto& [dtype, shape] : e.input_specs()) {
    const int64_t n = shape_numel(shape);
    if (n < 0 || static_cast<uint64_t>(n) > max_tensor_bytes()) return out_of_memory("an input is too large");
    per_set += static_cast<uint64_t>(n) * dtype_size(dtype);
  }
  if (per_set > max_tensor_bytes() / 2 / static_cast<uint64_t>(sets))
    return out_of_memory(args.positional.at(0) + ": " + std::to_string(sets) + " input sets of " + bytes_to_string(per_set) +
                         " need more than half of this machine's " + bytes_to_string(max_tensor_bytes()) +
                         " of memory (fewer with --input-sets)");
  std::vector<std::vector<Tensor>> out;
  for (int s = 0; s < sets; ++s) {
    TAC_ASSIGN_OR_RETURN(std::vector<Tensor> set, random_inputs(e, 1000 + static_cast<uint64_t>(s)));
    out.push_back(std::move(set));
  }
  return out;
}

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

// --compare: several engines of one model in one process, timed in short blocks that rotate
// among them round after round, so a slow spell of a shared machine falls on all of them alike.
// Each round gives every engine a block (2 warm-up runs, then runs for --block-seconds); the
// ratios to the first engine are taken per round (paired) and summarised by their median and
// range. Entries: "default" (the route of the other flags), a route file, or a .plan file.
int bench_compare(Args& args);

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
      "  --l2-flush             CUDA: overwrite twice the L2 before each timed run (cold L2; default warm)\n"
      "  --export-times F.json  every timed run (warm-up excluded) to F.json, as trtexec's --exportTimes:\n"
      "                         {\"engine\", \"timing\": \"host_wall\"|\"cuda_events\", \"threads\", \"input_sets\",\n"
      "                         \"warmup_runs\", \"iterations\": [{\"iteration\", \"input_set\", \"ms\"}]}\n"
      "  --compare E1,E2,...    time several engines of MODEL.onnx in one process, interleaved: each entry is\n"
      "                         'default' (the route the other flags give), a route file, or a .plan file;\n"
      "                         --rounds R (default 10) rounds, each a block of --block-seconds (default 0.3)\n"
      "                         per engine in rotating order; prints each engine's median and its per-round\n"
      "                         (paired) ratio to the first; --json: {\"engines\": [{\"name\", \"median_ms\",\n"
      "                         \"speedup_vs_first\", \"speedup_low\", \"speedup_high\"}], \"rounds\", \"threads\"}\n";
  std::set<std::string> flags = kEngineFlags;
  for (const char* f : {"--min-runs", "--min-seconds", "--warmup", "--input-sets", "--compare", "--rounds", "--block-seconds",
                        "--export-times"})
    flags.insert(f);
  if (!parse_args(argc, argv, 2, flags, {"--json", "--help", "--l2-flush"}, args, err) || args.positional.size() != 1 ||
      args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician bench: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help);
    return args.has("--help") ? 0 : 2;
  }
  if (args.has("--compare") && args.has("--export-times")) {
    std::fprintf(stderr, "tactician bench: --export-times writes one engine's runs: it does not apply to --compare\n");
    return 2;
  }
  if (auto n = args.get_int("--input-sets", 4, 1, 1024); !n) return usage_error("bench", n.status());
  if (args.has("--compare")) return bench_compare(args);
  const auto min_runs = args.get_int("--min-runs", 20, 1);
  if (!min_runs) return usage_error("bench", min_runs.status());
  const auto warmup = args.get_int("--warmup", 5, 0);
  if (!warmup) return usage_error("bench", warmup.status());
  const auto min_seconds = args.get_double("--min-seconds", 2, 0);
  if (!min_seconds) return usage_error("bench", min_seconds.status());
  auto engine = engine_for_positional(args);
  if (!engine) {
    std::fprintf(stderr, "tactician bench: %s\n", engine.status().to_string().c_str());
    return engine.status().kind() == ErrorKind::invalid_argument ? 2 : 1;
  }
  auto sets = input_sets(**engine, args);
  if (!sets) {
    std::fprintf(stderr, "tactician bench: %s\n", sets.status().to_string().c_str());
    return 1;
  }
  std::vector<std::vector<Tensor>> inputs = std::move(sets).value();
  auto lat =
      measure(**engine, inputs, static_cast<int>(*min_runs), *min_seconds, static_cast<int>(*warmup), args.has("--l2-flush"));
  if (!lat) {
    std::fprintf(stderr, "tactician bench: %s\n", lat.status().to_string().c_str());
    return 1;
  }
  const int threads = (*engine)->plan().threads;
  const bool device = (*engine)->plan().backend == kernels::Backend::cuda;
  if (args.has("--export-times")) {
    Status st = export_times(args.get("--export-times"), args.positional[0], *lat, device, threads, inputs.size(),
                             static_cast<int>(*warmup));
    if (!st) {
      std::fprintf(stderr, "tactician bench: %s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("wrote the times of %zu runs to %s\n", lat->times_ms.size(), args.get("--export-times").c_str());
  }
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
  if (args.has("--json")) {
    nlohmann::ordered_json j = {{"median_ms", rounded(lat->median_ms, 6)},
                                {"p10_ms", rounded(lat->p10_ms, 6)},
                                {"p90_ms", rounded(lat->p90_ms, 6)},
                                {"mean_ms", rounded(lat->mean_ms, 6)},
                                {"cv", rounded(lat->cv, 6)},
                                {"runs", lat->runs},
                                {"threads", threads}};
    if (device) {
      j["timing"] = "cuda_events";
      j["graphs"] = (*engine)->graph_state().rfind("on", 0) == 0 ? "on" : "off";
      j["l2"] = args.has("--l2-flush") ? "cold" : "warm";
    }
    std::printf("%s\n", dump_json(j).c_str());
  }
  return 0;
}

int bench_compare(Args& args) {
  std::vector<std::string> names;
  {
    std::stringstream ss(args.get("--compare", ""));
    for (std::string e; std::getline(ss, e, ',');)
      if (!e.empty()) names.push_back(e);
  }
  const auto rounds_n = args.get_int("--rounds", 10, 1, 100000);
  if (!rounds_n) return usage_error("bench", rounds_n.status());
  const auto block = args.get_double("--block-seconds", 0.3, 0.01);
  if (!block) return usage_error("bench", block.status());
  const int rounds = static_cast<int>(*rounds_n);
  const double block_s = *block;
  if (names.size() < 2 || ends_with(args.positional[0], ".plan")) {
    std::fprintf(stderr, "tactician bench: --compare needs MODEL.onnx and at least two entries (default, route files, "
                         ".plan files), got '%s'\n", args.get("--compare", "").c_str());
    return 2;
  }
  auto model = io::load_model(args.positional[0]);
  if (!model) {
    std::fprintf(stderr, "tactician bench: %s\n", model.status().to_string().c_str());
    return 1;
  }
  std::vector<std::unique_ptr<runtime::Engine>> engines;
  for (const std::string& name : names) {
    Args a = args;
    a.values.erase("--compare");
    if (ends_with(name, ".plan")) {
      a.values.erase("--route");
      a.values.erase("--route-file");
      a.values["--plan"] = {name};
    } else if (name != "default") {
      a.values.erase("--route");
      a.values["--route-file"] = {name};
    }
    auto opts = build_options_from_args(a);
    auto e = opts ? engine_from_args(a, a.has("--plan") ? nullptr : &*model, *opts)
                  : Result<std::unique_ptr<runtime::Engine>>(opts.status());
    if (!e) {
      std::fprintf(stderr, "tactician bench: --compare entry '%s': %s\n", name.c_str(), e.status().to_string().c_str());
      return e.status().kind() == ErrorKind::invalid_argument ? 2 : 1;
    }
    engines.push_back(std::move(e).value());
  }
  auto sets = input_sets(*engines[0], args);
  if (!sets) {
    std::fprintf(stderr, "tactician bench: %s\n", sets.status().to_string().c_str());
    return 1;
  }
  std::vector<std::vector<Tensor>> inputs = std::move(sets).value();
  const size_t n = engines.size();
  std::vector<runtime::Engine*> ptrs;
  for (auto& e : engines) ptrs.push_back(e.get());
  size_t failed = 0;
  auto blocks = runtime::measure_interleaved(ptrs, inputs, rounds, 3, block_s, args.has("--l2-flush"), &failed);
  if (!blocks) {
    std::fprintf(stderr, "tactician bench: --compare entry '%s': %s\n", names[failed].c_str(), blocks.status().to_string().c_str());
    return 1;
  }
  std::vector<std::vector<double>> block_ms(n);  // per engine, per round
  for (size_t i = 0; i < n; ++i)
    for (const runtime::Latency& l : (*blocks)[i]) block_ms[i].push_back(l.median_ms);
  const int threads = engines[0]->plan().threads;
  nlohmann::ordered_json json_engines = nlohmann::ordered_json::array();
  std::printf("%s: %d interleaved rounds of %.2f s blocks, %d threads\n", args.positional[0].c_str(), rounds, block_s, threads);
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> ratios;
    for (int r = 0; r < rounds; ++r) ratios.push_back(block_ms[0][static_cast<size_t>(r)] / block_ms[i][static_cast<size_t>(r)]);
    const double med = runtime::median(block_ms[i]), sp = runtime::median(ratios);
    const double lo = *std::min_element(ratios.begin(), ratios.end()), hi = *std::max_element(ratios.begin(), ratios.end());
    std::printf("  %-40s median %9.4f ms   %.3fx the first (rounds: %.3f to %.3f)\n", names[i].c_str(), med, sp, lo, hi);
    json_engines.push_back({{"name", names[i]},
                            {"median_ms", rounded(med, 6)},
                            {"speedup_vs_first", rounded(sp, 4)},
                            {"speedup_low", rounded(lo, 4)},
                            {"speedup_high", rounded(hi, 4)}});
  }
  if (args.has("--json")) {
    const nlohmann::ordered_json j = {{"engines", json_engines}, {"rounds", rounds}, {"threads", threads}};
    std::printf("%s\n", dump_json(j).c_str());
  }
  return 0;
}

}  // namespace tac::cli
