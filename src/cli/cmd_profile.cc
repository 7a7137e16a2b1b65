// tactician profile MODEL.onnx [--route ...]: per-step times inside the engine next to the same
// tactics timed alone, their sums, and the measured end-to-end time.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/engine_args.h"
#include "core/json.h"

namespace tac::cli {

Result<std::unique_ptr<runtime::Engine>> engine_for_positional(Args& args);

int cmd_profile(int argc, char** argv) {
  Args args;
  std::string err;
  const char* help =
      "usage: tactician profile MODEL.onnx|MODEL.plan [--route ...|--route-file F] [--threads N] [--runs 20]\n"
      "                         [--top N] [--json]\n"
      "Per-step time inside the engine (median over runs), the same tactic timed alone on the same\n"
      "layer (the classic isolated profile), both sums, and the end-to-end median: the gap between\n"
      "the isolated sum and the real time is what per-layer profiling gets wrong.\n"
      "  --backend cuda|cpu     where the engine runs (default: cuda when this build has CUDA and a GPU is present)\n"
      "  --json                 the last line of stdout is every step in run order, as trtexec's --exportProfile:\n"
      "                         {\"steps\": [{\"step\", \"node\", \"op\", \"tactic\", \"engine_us\", \"isolated_us\"}],\n"
      "                         \"sum_engine_ms\", \"sum_isolated_ms\", \"median_ms\", \"p10_ms\", \"p90_ms\", \"runs\",\n"
      "                         \"threads\", \"backend\"} (engine_us: median over the runs; a dynamic step's isolated\n"
      "                         time is its engine time)\n";
  std::set<std::string> flags = kEngineFlags;
  flags.insert("--runs");
  flags.insert("--top");
  if (!parse_args(argc, argv, 2, flags, {"--help", "--json"}, args, err) || args.positional.size() != 1 || args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician profile: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help);
    return args.has("--help") ? 0 : 2;
  }
  const auto runs = args.get_int("--runs", 20, 3, 1000000);
  if (!runs) return usage_error("profile", runs.status());
  const auto top_n = args.get_int("--top", 25, 1);
  if (!top_n) return usage_error("profile", top_n.status());
  auto engine = engine_for_positional(args);
  if (!engine) {
    std::fprintf(stderr, "tactician profile: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  runtime::Engine& e = **engine;
  const builder::Plan& plan = e.plan();
  auto set1 = random_inputs(e, 1), set2 = random_inputs(e, 2);
  if (!set1 || !set2) {
    std::fprintf(stderr, "tactician profile: %s\n", (!set1 ? set1 : set2).status().to_string().c_str());
    return 1;
  }
  std::vector<std::vector<Tensor>> sets = {*set1, *set2};
  std::vector<std::vector<double>> per_step(plan.steps.size());
  for (int r = 0; r < 3; ++r) (void)e.run(sets[static_cast<size_t>(r) % 2]);  // warm-up
  for (int r = 0; r < *runs; ++r) {
    std::vector<double> ns;
    auto out = e.run_profiled(sets[static_cast<size_t>(r) % 2], ns);
    if (!out) {
      std::fprintf(stderr, "tactician profile: %s\n", out.status().to_string().c_str());
      return 1;
    }
    for (size_t s = 0; s < ns.size(); ++s) per_step[s].push_back(ns[s]);
  }
  auto lat = measure(e, sets, static_cast<int>(*runs), 1.0, 2);
  if (!lat) {
    std::fprintf(stderr, "tactician profile: %s\n", lat.status().to_string().c_str());
    return 1;
  }
  struct Row {
    size_t step;
    double engine_us, isolated_us;
  };
  std::vector<Row> rows;
  double sum_engine = 0, sum_isolated = 0;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    std::vector<double>& v = per_step[s];
    std::sort(v.begin(), v.end());
    double med = v[v.size() / 2] / 1e3;
    // A dynamic step's shapes exist only inside a run: its in-engine time stands for it.
    double iso = plan.steps[s].dynamic ? med : builder::time_tactic_isolated(*plan.steps[s].tactic, builder::step_desc_of(plan, s)) / 1e3;
    rows.push_back({s, med, iso});
    sum_engine += med;
    sum_isolated += iso;
  }
  std::vector<Row> shown = rows;
  std::stable_sort(shown.begin(), shown.end(), [](const Row& a, const Row& b) { return a.engine_us > b.engine_us; });
  const size_t top = static_cast<size_t>(*top_n);
  if (shown.size() > top) shown.resize(top);
  const ir::Graph& g = plan.model.graph;
  std::printf("%-5s %-34s %-14s %-20s %12s %12s %8s\n", "step", "node", "op", "tactic", "engine us", "isolated us", "ratio");
  for (const Row& r : shown) {
    const ir::Node& n = g.nodes[static_cast<size_t>(plan.steps[r.step].node)];
    std::printf("%-5zu %-34.34s %-14.14s %-20.20s %12.1f %12.1f %8.2f\n", r.step, n.name.c_str(), n.op_type.c_str(),
                plan.steps[r.step].tactic->name, r.engine_us, r.isolated_us, r.isolated_us / std::max(r.engine_us, 1e-3));
  }
  if (rows.size() > shown.size()) std::printf("... %zu more steps (--top N shows more)\n", rows.size() - shown.size());
  std::printf("\nsum of steps inside the engine   %10.3f ms\n", sum_engine / 1e3);
  std::printf("sum of steps timed in isolation  %10.3f ms\n", sum_isolated / 1e3);
  std::printf("end-to-end median                %10.3f ms  (p10 %.3f, p90 %.3f, %d runs, %d threads)\n", lat->median_ms,
              lat->p10_ms, lat->p90_ms, lat->runs, plan.threads);
  std::printf("isolated sum / end-to-end        %10.2f\n", sum_isolated / 1e3 / lat->median_ms);
  if (args.has("--json")) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const Row& r : rows) {
      const builder::PlanStep& st = plan.steps[r.step];
      const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
      steps.push_back({{"step", r.step},
                       {"node", n.name},
                       {"op", n.op_type},
                       {"tactic", st.tactic->name},
                       {"engine_us", rounded(r.engine_us, 3)},
                       {"isolated_us", rounded(r.isolated_us, 3)}});
    }
    const nlohmann::ordered_json j = {{"steps", steps},
                                      {"sum_engine_ms", rounded(sum_engine / 1e3, 6)},
                                      {"sum_isolated_ms", rounded(sum_isolated / 1e3, 6)},
                                      {"median_ms", rounded(lat->median_ms, 6)},
                                      {"p10_ms", rounded(lat->p10_ms, 6)},
                                      {"p90_ms", rounded(lat->p90_ms, 6)},
                                      {"runs", lat->runs},
                                      {"threads", plan.threads},
                                      {"backend", kernels::backend_name(plan.backend)}};
    std::printf("%s\n", dump_json(j).c_str());
  }
  return 0;
}

}  // namespace tac::cli
