// tactician info MODEL.onnx [--json]
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "builder/plan_file.h"
#include "cli/args.h"
#include "core/json.h"
#include "io/onnx_import.h"
#include "ir/shape_inference.h"
#include "reference/interpreter.h"

namespace tac::cli {

namespace {

void count_ops(const ir::Graph& g, std::map<std::string, int>& ops) {
  for (const ir::Node& n : g.nodes) {
    ++ops[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type];
    for (const auto& [key, a] : n.attrs) {
      if (a.g) count_ops(*a.g, ops);
      for (const auto& sg : a.graphs) count_ops(*sg, ops);
    }
  }
}

// The type a plan runs a graph input or output with: its planned dtype and shape, or the graph's
// declared type for a dynamic value (sized per run).
std::string plan_value_type(const builder::Plan& plan, int v) {
  const builder::PlanValue& pv = plan.values[static_cast<size_t>(v)];
  if (pv.is_dynamic() || pv.kind == builder::PlanValue::Kind::unused || pv.dtype == DType::undefined)
    return plan.model.graph.values[static_cast<size_t>(v)].type.to_string() + (pv.is_dynamic() ? " (dynamic)" : "");
  return dtype_name(pv.dtype) + shape_to_string(pv.shape);
}

// `info MODEL.plan`: what a saved plan holds (what the plan file records: no build report beyond
// the pass log, since rankings, reformat and cast counts are not saved).
int info_plan(const Args& args) {
  const std::string& path = args.positional[0];
  auto loaded = builder::load_plan(path);
  if (!loaded) {
    std::fprintf(stderr, "tactician info: %s\n", loaded.status().to_string().c_str());
    return loaded.status().kind() == ErrorKind::invalid_argument ? 2 : 1;
  }
  const builder::Plan& plan = *loaded;
  const ir::Graph& g = plan.model.graph;
  std::map<std::string, int> tactics;
  for (const builder::PlanStep& st : plan.steps)
    ++tactics[g.nodes[static_cast<size_t>(st.node)].op_type + "/" + st.tactic->name];
  if (args.has("--json")) {
    using Json = nlohmann::ordered_json;
    Json shapes = Json::object();
    for (const auto& [sym, r] : plan.ranges) shapes[sym] = {{"min", r.min}, {"opt", r.opt}, {"max", r.max}};
    Json j = {{"plan", path},
              {"tool", TAC_VERSION},
              {"model_hash", plan.model_hash},
              {"backend", kernels::backend_name(plan.backend)},
              {"device", plan.device},
              {"route", plan.route},
              {"threads", plan.threads},
              {"dims", Json(plan.dims)},
              {"shapes", shapes}};
    for (const auto& [key, vs] : {std::pair{"inputs", &g.inputs}, std::pair{"outputs", &g.outputs}}) {
      Json list = Json::array();
      for (int v : *vs) list.push_back({{"name", g.values[static_cast<size_t>(v)].name}, {"type", plan_value_type(plan, v)}});
      j[key] = std::move(list);
    }
    j["steps"] = plan.steps.size();
    j["dynamic_steps"] = plan.dynamic_steps();
    j["arena_bytes"] = plan.arena_bytes;
    j["weight_bytes"] = plan.weight_bytes();
    j["tactics"] = tactics;
    if (args.has("--dump")) {
      Json steps = Json::array();
      for (const builder::PlanStep& st : plan.steps) {
        const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
        steps.push_back({{"node", n.name}, {"op", n.op_type}, {"tactic", st.tactic->name}});
      }
      j["step_list"] = std::move(steps);
    }
    std::printf("%s\n", dump_json(j).c_str());
    return 0;
  }
  std::printf("plan       %s (tactician %s)\n", path.c_str(), TAC_VERSION);
  std::printf("model hash %s\n", plan.model_hash.c_str());
  std::printf("backend    %s on %s\n", kernels::backend_name(plan.backend), plan.device.c_str());
  std::printf("route      %s\n", plan.route.empty() ? "(default)" : plan.route.c_str());
  std::printf("threads    %d\n", plan.threads);
  if (!plan.dims.empty()) std::printf("dims       %s\n", builder::dims_to_string(plan.dims).c_str());
  if (!plan.ranges.empty())
    std::printf("shapes     %s (runs every size inside; built at the opt sizes)\n",
                builder::shape_ranges_to_string(plan.ranges).c_str());
  std::printf("inputs\n");
  for (int v : g.inputs) std::printf("  %-30s %s\n", g.values[static_cast<size_t>(v)].name.c_str(), plan_value_type(plan, v).c_str());
  std::printf("outputs\n");
  for (int v : g.outputs) std::printf("  %-30s %s\n", g.values[static_cast<size_t>(v)].name.c_str(), plan_value_type(plan, v).c_str());
  std::printf("steps      %zu (%d dynamic), arena %.2f MB, weights %.2f MB\n", plan.steps.size(), plan.dynamic_steps(),
              static_cast<double>(plan.arena_bytes) / 1e6, static_cast<double>(plan.weight_bytes()) / 1e6);
  std::printf("tactics (op/tactic: steps)\n");
  for (const auto& [k, c] : tactics) std::printf("  %-40s %d\n", k.c_str(), c);
  if (!plan.report.pass_log.empty()) {
    std::printf("passes\n");
    for (const std::string& l : plan.report.pass_log) std::printf("  %s\n", l.c_str());
  }
  if (args.has("--dump")) {
    std::printf("\n%-5s %-34s %-14s %s\n", "step", "node", "op", "tactic");
    for (size_t s = 0; s < plan.steps.size(); ++s) {
      const ir::Node& n = g.nodes[static_cast<size_t>(plan.steps[s].node)];
      std::printf("%-5zu %-34s %-14s %s\n", s, n.name.c_str(), n.op_type.c_str(), plan.steps[s].tactic->name);
    }
  }
  return 0;
}

}  // namespace

int cmd_info(int argc, char** argv) {
  Args args;
  std::string err;
  if (!parse_args(argc, argv, 2, {}, {"--json", "--help", "--dump"}, args, err) || args.positional.size() != 1 ||
      args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician info: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr,
                 "usage: tactician info MODEL.onnx|MODEL.plan [--json] [--dump]\n"
                 "A model: inputs, outputs, opsets, node count per op, parameters, unsupported ops.\n"
                 "A plan (.plan): the model hash, backend and device, route, threads, symbolic dims it was\n"
                 "built for, inputs and outputs as it runs them, steps, arena and weight bytes, tactics per op.\n"
                 "  --json   one JSON object instead of text\n"
                 "  --dump   also print every node of the main graph (a plan: every step and its tactic)\n");
    return args.has("--help") ? 0 : 2;
  }
  const std::string& path = args.positional[0];
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".plan") == 0) return info_plan(args);
  auto loaded = io::load_model(path);
  if (!loaded) {
    std::fprintf(stderr, "tactician info: %s\n", loaded.status().to_string().c_str());
    return 1;
  }
  Status inferred = ir::infer_shapes(*loaded);
  if (!inferred) {
    std::fprintf(stderr, "tactician info: %s\n", inferred.to_string().c_str());
    return 1;
  }
  const ir::Model& m = *loaded;
  const ir::Graph& g = m.graph;
  std::map<std::string, int> ops;
  count_ops(g, ops);
  int64_t params = 0, param_bytes = 0;
  for (const ir::Value& v : g.values)
    if (v.initializer) {
      params += v.initializer->numel();
      param_bytes += static_cast<int64_t>(v.initializer->bytes());
    }
  auto missing = ref::unsupported_nodes(g);

  if (args.has("--json")) {
    using Json = nlohmann::ordered_json;
    Json opsets = Json::object();
    for (const auto& [d, v] : m.opsets) opsets[d.empty() ? "ai.onnx" : d] = v;
    auto typed_values = [&](const std::vector<int>& vs) {
      Json list = Json::array();
      for (int v : vs) {
        const ir::Value& value = g.values[static_cast<size_t>(v)];
        list.push_back({{"name", value.name}, {"type", value.type.to_string()}});
      }
      return list;
    };
    Json unsupported = Json::array();
    for (const ir::Node* n : missing) unsupported.push_back(n->label());
    const Json j = {{"model", m.path},
                    {"ir_version", m.ir_version},
                    {"opsets", opsets},
                    {"inputs", typed_values(g.inputs)},
                    {"outputs", typed_values(g.outputs)},
                    {"nodes", g.node_count_recursive()},
                    {"ops", Json(ops)},
                    {"parameters", params},
                    {"parameter_bytes", param_bytes},
                    {"unsupported", unsupported}};
    std::printf("%s\n", dump_json(j).c_str());
    return 0;
  }

  std::printf("model      %s\n", m.path.c_str());
  std::printf("ir         %lld   producer %s\n", static_cast<long long>(m.ir_version),
              m.producer.empty() ? "-" : m.producer.c_str());
  std::printf("opsets    ");
  for (const auto& [d, v] : m.opsets) std::printf(" %s:%lld", d.empty() ? "ai.onnx" : d.c_str(), static_cast<long long>(v));
  std::printf("\ninputs\n");
  for (int v : g.inputs)
    std::printf("  %-30s %s\n", g.values[static_cast<size_t>(v)].name.c_str(), g.values[static_cast<size_t>(v)].type.to_string().c_str());
  std::printf("outputs\n");
  for (int v : g.outputs)
    std::printf("  %-30s %s\n", g.values[static_cast<size_t>(v)].name.c_str(), g.values[static_cast<size_t>(v)].type.to_string().c_str());
  std::printf("nodes      %zu (%zu in the main graph)\n", g.node_count_recursive(), g.nodes.size());
  for (const auto& [op, c] : ops) std::printf("  %-28s %d\n", op.c_str(), c);
  std::printf("parameters %lld (%.2f MB)\n", static_cast<long long>(params), static_cast<double>(param_bytes) / 1e6);
  if (missing.empty()) {
    std::printf("unsupported: none\n");
  } else {
    std::printf("unsupported: %zu nodes\n", missing.size());
    for (const ir::Node* n : missing) std::printf("  %s\n", n->label().c_str());
  }
  std::printf("shapes     %d of %zu values have a known type and rank\n", ir::count_known_shapes(g), g.values.size());
  if (args.has("--dump")) std::printf("\n%s", ir::print_graph(g).c_str());
  return 0;
}

}  // namespace tac::cli
