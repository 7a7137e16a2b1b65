// tactician knobs MODEL.onnx [--json] [--dim S=N]
#include <algorithm>
#include <cstdio>

#include "cli/engine_args.h"
#include "io/onnx_import.h"

namespace tac::cli {

int cmd_knobs(int argc, char** argv) {
  Args args;
  std::string err;
  const char* help =
      "usage: tactician knobs MODEL.onnx [--json] [--dim SYMBOL=N]... [--backend cuda|cpu]\n"
      "Lists the knob space of the model on the backend: global knobs, one per pass, and a\n"
      "tactic knob per node with its applicable tactics. --json prints\n"
      "[{\"name\", \"values\", \"default\", \"help\", \"scope\"[, \"group\"][, \"conditions\"]}, ...];\n"
      "conditions maps a value to the precisions of its node under which it applies.\n";
  if (!parse_args(argc, argv, 2, {"--dim", "--backend"}, {"--json", "--help"}, args, err) || args.positional.size() != 1 ||
      args.has("--help")) {
    if (!err.empty()) std::fprintf(stderr, "tactician knobs: %s\n", err.c_str());
    std::fprintf(args.has("--help") ? stdout : stderr, "%s", help);
    return args.has("--help") ? 0 : 2;
  }
  auto model = io::load_model(args.positional[0]);
  if (!model) {
    std::fprintf(stderr, "tactician knobs: %s\n", model.status().to_string().c_str());
    return 1;
  }
  auto opts = build_options_from_args(args);
  if (!opts) {
    std::fprintf(stderr, "tactician knobs: %s\n", opts.status().to_string().c_str());
    return 2;
  }
  auto space = builder::knob_space(*model, *opts);
  if (!space) {
    std::fprintf(stderr, "tactician knobs: %s\n", space.status().to_string().c_str());
    return 1;
  }
  if (args.has("--json")) {
    std::printf("%s\n", space->to_json().c_str());
    return 0;
  }
  bool has_conditions = false;
  for (const builder::Knob& k : space->knobs()) {
    has_conditions |= !k.value_precisions.empty();
    std::string values;
    for (const std::string& v : k.values) {
      values += (values.empty() ? "" : "|") + v;
      // Marked in the listing: values that do not apply in fp32 (--json has every condition).
      if (auto c = k.value_precisions.find(v);
          c != k.value_precisions.end() && std::find(c->second.begin(), c->second.end(), "fp32") == c->second.end()) {
        std::string ps;
        for (const std::string& p : c->second) ps += (ps.empty() ? "" : ",") + p;
        values += "[" + ps + "]";
      }
    }
    std::printf("%-40s %-7s default %-16s %s\n", k.name.c_str(), builder::scope_name(k.scope), k.default_value.c_str(),
                values.c_str());
  }
  std::printf("%zu knobs%s\n", space->knobs().size(),
              has_conditions ? " (value[P]: applies only while its node computes in precision P, the node's fp32 "
                               "tactics only in fp32; a route setting one otherwise is inactive and ignored; --json "
                               "lists every value's precisions)" : "");
  return 0;
}

}  // namespace tac::cli
