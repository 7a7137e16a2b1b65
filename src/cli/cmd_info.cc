// tactician info MODEL.onnx [--json]
#include <cstdio>
#include <map>

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

}  // namespace

int cmd_info(int argc, char** argv) {
  Args args;
  std::string err;
  if (!parse_args(argc, argv, 2, {}, {"--json", "--help", "--dump"}, args, err) || args.positional.size() != 1 ||
      args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician info: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr,
                 "usage: tactician info MODEL.onnx [--json] [--dump]\n"
                 "  --json   one JSON object instead of text\n"
                 "  --dump   also print every node of the main graph\n");
    return args.has("--help") ? 0 : 2;
  }
  auto loaded = io::load_model(args.positional[0]);
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
    std::string j = "{\"model\": " + json_quote(m.path) + ", \"ir_version\": " + std::to_string(m.ir_version) +
                    ", \"opsets\": {";
    bool first = true;
    for (const auto& [d, v] : m.opsets) {
      j += std::string(first ? "" : ", ") + json_quote(d.empty() ? "ai.onnx" : d) + ": " + std::to_string(v);
      first = false;
    }
    j += "}, \"inputs\": [";
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const ir::Value& v = g.values[static_cast<size_t>(g.inputs[i])];
      j += std::string(i ? ", " : "") + "{\"name\": " + json_quote(v.name) + ", \"type\": " + json_quote(v.type.to_string()) + "}";
    }
    j += "], \"outputs\": [";
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const ir::Value& v = g.values[static_cast<size_t>(g.outputs[i])];
      j += std::string(i ? ", " : "") + "{\"name\": " + json_quote(v.name) + ", \"type\": " + json_quote(v.type.to_string()) + "}";
    }
    j += "], \"nodes\": " + std::to_string(g.node_count_recursive()) + ", \"ops\": {";
    first = true;
    for (const auto& [op, c] : ops) {
      j += std::string(first ? "" : ", ") + json_quote(op) + ": " + std::to_string(c);
      first = false;
    }
    j += "}, \"parameters\": " + std::to_string(params) + ", \"parameter_bytes\": " + std::to_string(param_bytes) +
         ", \"unsupported\": [";
    for (size_t i = 0; i < missing.size(); ++i)
      j += std::string(i ? ", " : "") + json_quote(missing[i]->label());
    j += "]}";
    std::printf("%s\n", j.c_str());
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
