// tactician build MODEL.onnx [--route "k=v ..." | --route-file F] [-o MODEL.plan]
#include <cmath>
#include <cstdio>

#include "backends/cuda/device.h"
#include "builder/plan_file.h"
#include "cli/engine_args.h"
#include "io/onnx_import.h"

namespace tac::cli {

void print_plan_summary(const builder::Plan& plan, bool verbose) {
  const ir::Graph& g = plan.model.graph;
  std::map<std::string, int> tactic_count;
  for (const builder::PlanStep& st : plan.steps)
    ++tactic_count[g.nodes[static_cast<size_t>(st.node)].op_type + "/" + st.tactic->name];
  std::printf("plan: %zu steps, arena %.2f MB, workspace %.2f MB, weights %.2f MB, threads %d, built in %.0f ms\n",
              plan.steps.size(), static_cast<double>(plan.arena_bytes) / 1e6, static_cast<double>(plan.workspace_bytes) / 1e6,
              static_cast<double>(plan.weight_bytes()) / 1e6, plan.threads, plan.report.build_ms);
  int host_fallbacks = 0;
  for (const builder::PlanStep& st : plan.steps) host_fallbacks += st.tactic->on_host;
  std::printf("backend: %s on %s", kernels::backend_name(plan.backend), plan.device.c_str());
  if (plan.backend == kernels::Backend::cuda)
    std::printf(", %d of %zu steps fall back to the host (host_reference)\nlibraries: %s", host_fallbacks,
                plan.steps.size(), cuda::library_versions().c_str());
  std::printf("\n");
  std::printf("route: %s\n", plan.route.empty() ? "(default)" : plan.route.c_str());
  if (!plan.ranges.empty())
    std::printf("shape ranges: %s (built at the opt sizes; other sizes inside the ranges are specialized from the "
                "plan's source model with its route when first run)\n",
                builder::shape_ranges_to_string(plan.ranges).c_str());
  else if (!plan.dims.empty())
    std::printf("symbolic dims: %s (from --dim or the inputs given, else 1; other sizes need another plan or --shapes)\n",
                builder::dims_to_string(plan.dims).c_str());
  if (int d = plan.dynamic_steps(); d > 0) {
    int values = 0;
    for (const builder::PlanValue& v : plan.values) values += v.is_dynamic();
    std::printf("dynamic steps: %d of %zu (shapes known at run time; their %d dynamic values are allocated per run, "
                "outside the arena)\n", d, plan.steps.size(), values);
  }
  std::printf("passes:\n");
  for (const std::string& s : plan.report.pass_log) std::printf("  %s\n", s.c_str());
  std::printf("reformats inserted: %d\n", plan.report.reformats);
  if (!plan.report.layouts.empty()) {
    std::printf("layouts (nodes off nchw: %zu):\n", plan.report.layouts.size());
    for (const std::string& l : plan.report.layouts) std::printf("  %s\n", l.c_str());
  }
  std::printf("casts inserted: %d (fp32<->bf16), quantizes: %d (fp32->int8)\n", plan.report.casts, plan.report.quantizes);
  {
    int views = 0, aliased = 0;
    for (const builder::PlanStep& st : plan.steps)
      if (builder::is_view_op(plan.model.graph.nodes[static_cast<size_t>(st.node)])) {
        ++views;
        aliased += builder::is_alias_step(plan.model.graph, st);
      }
    if (views > 0)
      std::printf("steps that can be views (Reshape and kin, Transpose, Gather): %d, %d of them aliased (run nothing; "
                  "memory.view_alias)\n", views, aliased);
  }
  for (const std::string& s : plan.report.inactive) std::printf("inactive route setting: %s\n", s.c_str());
  if (!plan.report.workspace_skipped.empty()) {
    std::printf("tactics skipped by the workspace limit: %zu\n", plan.report.workspace_skipped.size());
    for (const std::string& s : plan.report.workspace_skipped) std::printf("  %s\n", s.c_str());
  }
  if (!plan.report.calibration.empty()) std::printf("int8 calibration: %s\n", plan.report.calibration.c_str());
  std::printf("tactics (op/tactic: steps):\n");
  for (const auto& [k, c] : tactic_count) std::printf("  %-40s %d\n", k.c_str(), c);
  if (!verbose) return;
  std::printf("steps:\n");
  for (const builder::TacticRanking& r : plan.report.rankings) {
    std::printf("  %-36s %-14s %-20s (%s)", r.node.c_str(), r.op.c_str(), r.chosen.c_str(), r.why.c_str());
    for (const auto& [t, c] : r.candidates)
      std::isnan(c) ? std::printf(" %s=untimed", t.c_str()) : std::printf(" %s=%.3g", t.c_str(), c);
    std::printf("\n");
    for (const std::string& why : r.not_applicable) std::printf("      not applicable: %s\n", why.c_str());
  }
}

// One `warning:` line on stderr per step that runs on the host on a CUDA engine: the summary's
// count is easy to miss, and each such step costs every run a synchronisation and two copies and
// keeps the whole engine off CUDA graphs (runtime/engine.cc).
void warn_host_steps(const builder::Plan& plan) {
  if (plan.backend != kernels::Backend::cuda) return;
  const ir::Graph& g = plan.model.graph;
  for (const builder::PlanStep& st : plan.steps)
    if (st.tactic->on_host)
      std::fprintf(stderr,
                   "warning: %s runs on the host (host_reference): every run pays a device synchronisation and two "
                   "copies (inputs to the host, outputs back), and the CUDA graph is off for the whole engine\n",
                   g.nodes[static_cast<size_t>(st.node)].label().c_str());
}

int cmd_build(int argc, char** argv) {
  Args args;
  std::string err;
  const char* help =
      "usage: tactician build MODEL.onnx [--route \"k=v ...\" | --route-file F] [--threads N] [--dim S=N]\n"
      "                       [--shapes S=MIN..MAX:OPT,...]\n"
      "                       [-o MODEL.plan] [--verbose]\n"
      "Builds an engine plan (default route unless told otherwise) and prints its summary: steps,\n"
      "tactics per node, fusions, reformats, arena and weight bytes, build time. -o saves the plan.\n"
      "  --verbose   every step with its candidate tactics and their estimated cost (ns), and why the\n"
      "              others do not apply\n"
      "  --backend cuda|cpu     where the engine runs (default: cuda when this build has CUDA and a GPU is present)\n"
      "  --shapes batch=1..8:4,seq=16..512:128\n"
      "              shape ranges of symbolic input dims (TensorRT's optimization profiles): the plan is\n"
      "              built at the opt sizes (without :OPT, the max) and runs any size inside the ranges;\n"
      "              other sizes are specialized with the same route when first run. Outside: an error\n"
      "              naming the input, the dim and the range\n";
  std::vector<std::string> words(argv, argv + argc);
  for (std::string& w : words)
    if (w == "-o") w = "--output";
  std::vector<char*> argv2;
  for (std::string& w : words) argv2.push_back(w.data());
  std::set<std::string> flags = kEngineFlags;
  flags.insert("--output");
  flags.erase("--plan");
  if (!parse_args(argc, argv2.data(), 2, flags, {"--help", "--verbose"}, args, err) || args.positional.size() != 1 ||
      args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician build: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help);
    return args.has("--help") ? 0 : 2;
  }
  auto model = io::load_model(args.positional[0]);
  if (!model) {
    std::fprintf(stderr, "tactician build: %s\n", model.status().to_string().c_str());
    return 1;
  }
  auto route = route_from_args(args);
  auto opts = build_options_from_args(args);
  if (!route || !opts) {
    std::fprintf(stderr, "tactician build: %s\n", (!route ? route.status() : opts.status()).to_string().c_str());
    return 2;
  }
  auto plan = builder::build_plan(*model, *route, *opts);
  if (!plan) {
    std::fprintf(stderr, "tactician build: %s\n", plan.status().with_context(model->path + ": ").to_string().c_str());
    return plan.status().kind() == ErrorKind::invalid_argument ? 2 : 1;
  }
  // Preparing the kernels validates the plan end to end and sizes the workspace.
  auto engine = runtime::Engine::create(std::move(plan).value());
  if (!engine) {
    std::fprintf(stderr, "tactician build: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  warn_host_steps((*engine)->plan());
  print_plan_summary((*engine)->plan(), args.has("--verbose"));
  if (args.has("--output")) {
    Status st = builder::save_plan((*engine)->plan(), args.get("--output"));
    if (!st) {
      std::fprintf(stderr, "tactician build: %s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("saved %s\n", args.get("--output").c_str());
  }
  return 0;
}

}  // namespace tac::cli
