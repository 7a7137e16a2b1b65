// The plan: what the builder produces and the runtime executes (DESIGN.md section 2 "engine / plan").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/tactic.h"

namespace tac::builder {

struct PlanValue {
  enum class Kind { unused, arena, constant, input };
  Kind kind = Kind::unused;
  DType dtype = DType::undefined;
  Shape shape;
  int64_t offset = 0;  // arena byte offset (Kind::arena)
  int64_t bytes = 0;
};

struct PlanStep {
  int node = -1;                        // index into Plan::model.graph.nodes
  const kernels::Tactic* tactic = nullptr;
  std::vector<int> inputs;              // value ids (kNoValue for omitted), then outer-scope reads
  std::vector<int> outputs;             // value ids
  bool in_place = false;                // output 0 shares input 0's buffer
};

// Per node, the candidates the builder considered, in ranked order, and what it chose.
struct TacticRanking {
  std::string node;  // node name (the knob is tactic.<node>)
  std::string op;
  std::vector<std::pair<std::string, double>> candidates;  // tactic, cost (ns estimate or measured)
  std::vector<std::string> not_applicable;                 // "tactic: reason"
  std::string chosen;
  std::string why;  // "heuristic", "isolated", "route"
};

struct BuildReport {
  std::vector<std::string> pass_log;
  std::vector<TacticRanking> rankings;
  int reformats = 0;  // layout conversions inserted (none yet: every tactic reads/writes NCHW/plain)
  int casts = 0;      // Cast steps (fp32 <-> bf16) the precision rewrite left after its cleanup
  int quantizes = 0;  // QuantizeLinear steps (fp32 -> int8) it inserted
  std::string calibration;  // where int8 scales came from ("" when no node is int8)
  double build_ms = 0;
};

struct Plan {
  ir::Model model;  // the graph after passes, with its constants; steps refer to its nodes
  std::vector<PlanValue> values;  // indexed by value id of model.graph
  std::vector<PlanStep> steps;
  int64_t arena_bytes = 0;
  int64_t workspace_bytes = 0;  // filled by the engine from the prepared kernels
  int threads = 1;
  std::string route;       // canonical text of the route it was built from
  std::string model_hash;  // of the original model file
  std::string device;      // fingerprint of the CPU or GPU it was built for (see device_fingerprint)
  kernels::Backend backend = kernels::Backend::cpu;  // stored as the fingerprint's "cuda:" prefix
  bool cuda_graphs = false;  // CUDA plans: knob cuda.graphs (read back from `route` when loaded)
  BuildReport report;

  int64_t weight_bytes() const;
};

}  // namespace tac::builder
