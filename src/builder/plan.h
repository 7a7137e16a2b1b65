// The plan: what the builder produces and the runtime executes (DESIGN.md section 2 "engine / plan").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/tactic.h"

namespace tac::builder {

// A value is static (its dtype and shape known at build time: arena-planned, or a constant or
// graph input) or dynamic (Kind::dynamic: a shape that depends on data, a symbolic dim left
// open, a sequence or optional). Dynamic values are allocated at run time, never in the arena.
struct PlanValue {
  enum class Kind { unused, arena, constant, input, dynamic };
  Kind kind = Kind::unused;
  DType dtype = DType::undefined;
  Shape shape;
  int64_t offset = 0;  // arena byte offset (Kind::arena)
  int64_t bytes = 0;   // of the buffer (blocked layouts hold padded channels); 0 for dynamic values
  ir::Layout layout = ir::Layout::nchw;
  bool is_dynamic() const { return kind == Kind::dynamic; }
};

struct PlanStep {
  int node = -1;                        // index into Plan::model.graph.nodes
  const kernels::Tactic* tactic = nullptr;
  std::vector<int> inputs;              // value ids (kNoValue for omitted), then outer-scope reads
  std::vector<int> outputs;             // value ids
  bool in_place = false;                // output 0 shares input in_place_input's buffer (a view op's step,
  int in_place_input = 0;               // always over input 0, then runs nothing)
  // Some input or output is a dynamic value: the step runs with the shapes of this run
  // (Kernel::run_dynamic), its dynamic outputs get fresh buffers and its static outputs are
  // checked against their planned shapes and copied into the arena.
  bool dynamic = false;
};

// Per node, the candidates the builder considered, in ranked order, and what it chose.
struct TacticRanking {
  std::string node;  // node name (the knob is tactic.<node>)
  std::string op;
  std::vector<std::pair<std::string, double>> candidates;  // tactic, cost (ns estimate or measured; NaN: untimed)
  std::vector<std::string> not_applicable;                 // "tactic: reason"
  std::string chosen;
  std::string why;  // "heuristic", "isolated", "route"
};

struct BuildReport {
  std::vector<std::string> pass_log;
  std::vector<TacticRanking> rankings;
  int reformats = 0;  // Reformat steps the layout rewrite inserted
  std::vector<std::string> layouts;  // "node: layout" for each node the layout rewrite moved off nchw
  int casts = 0;      // Cast steps (fp32 <-> bf16) the precision rewrite left after its cleanup
  int quantizes = 0;  // QuantizeLinear steps (fp32 -> int8) it inserted
  std::string calibration;  // where int8 scales came from ("" when no node is int8)
  std::vector<std::string> inactive;  // route settings that did not apply (see active_route)
  // "node: tactic: needs N MiB of workspace, over ..." for each tactic cuda.workspace_mb ruled out
  std::vector<std::string> workspace_skipped;
  double build_ms = 0;
};

// "batch=4 seq=128".
std::string dims_to_string(const std::map<std::string, int64_t>& dims);

// A shape range (TensorRT's optimization profile) for one symbolic input dim: the plan is built
// and tuned at `opt`, and inputs with any size in [min, max] run.
struct DimRange {
  int64_t min = 1, opt = 1, max = 1;
  bool operator==(const DimRange&) const = default;
};
using ShapeRanges = std::map<std::string, DimRange>;
// "batch=1..8:4,seq=16..512:128" (min..max:opt; without :opt, opt is max; "batch=4" is a single
// size). Commas or spaces separate dims. Errors name the bad term.
Result<ShapeRanges> parse_shape_ranges(const std::string& text);
std::string shape_ranges_to_string(const ShapeRanges& r);  // "batch=1..8:4 seq=16..512:128"

// Ops whose step may be a view of its input's buffer: Reshape, Flatten, Squeeze, Unsqueeze,
// Identity (the same bytes), Transpose when it moves only dims of size 1, Gather of one constant
// index when every dim before the axis is 1 (a contiguous block). Where the builder lets the output
// share the input's buffer (memory.view_alias) it marks the step in_place, and the runtime then runs
// nothing for it.
bool is_view_op(const ir::Node& n);
// A step of such an op that the builder aliased: it runs nothing.
bool is_alias_step(const ir::Graph& g, const PlanStep& st);

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
  // The sizes the model's symbolic input dims were built for (from --dim or the inputs given;
  // unbound symbols are 1). Inputs of other sizes are refused, naming them.
  std::map<std::string, int64_t> dims;
  // Shape ranges (BuildOptions::ranges): `dims` holds their opt sizes; inputs of other sizes inside
  // the ranges run on engines the runtime specializes from `source_model` (the imported model before
  // any pass, serialized) with this plan's route, on first use. Empty: the plan takes `dims` alone.
  ShapeRanges ranges;
  std::string source_model;
  bool cuda_graphs = false;  // CUDA plans: knob cuda.graphs (read back from `route` when loaded)
  BuildReport report;

  int64_t weight_bytes() const;
  int dynamic_steps() const;
};

}  // namespace tac::builder
