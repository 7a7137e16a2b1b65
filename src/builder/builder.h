// The builder: B(model, route) -> plan (DESIGN.md section 2), and the knob space K(model).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "builder/knobs.h"
#include "builder/plan.h"
#include "core/datum.h"

namespace tac::builder {

struct BuildOptions {
  // Values of symbolic input dims ("batch" -> 1). Unbound symbols are 1. Plans are built for
  // these sizes (Plan::dims); only data-dependent shapes become dynamic values.
  std::map<std::string, int64_t> dims;
  // Shape ranges of symbolic input dims (Plan::ranges): the plan is built at their opt sizes (a
  // dim both here and in `dims` must have its opt there) and runs any size inside them.
  ShapeRanges ranges;
  // Offer the planted-fault tactics (kernels/planted_faults.cc) too: tests of the tuner only.
  bool planted_faults = false;
  // Which backend's tactics the plan uses; CUDA plans are stamped with the GPU they are built for.
  kernels::Backend backend = kernels::Backend::cpu;
  // int8 calibration: the inputs to calibrate on (a folder of test_data_set_* or input_K.pb;
  // "": the model's own test data, else seeded random inputs), and a folder caching the ranges
  // across processes ("": none; the tuner gives its candidates one).
  std::string calibration_dir;
  std::string calibration_cache;
  // The model's knob space under these options (knob_space's answer), when the caller already
  // has it: build_plan then does not compute it again (six graph preparations, most of a build on
  // a large model). Callers building many routes of one model (the tuner's evaluator worker)
  // compute it once; it must be for the same model and options.
  std::shared_ptr<const KnobSpace> knobs;
};

// Binds the model's symbolic input dims to the shapes of the given inputs; a dim already bound
// (by --dim or another input) to a different size is an error naming it.
Status bind_dims(const ir::Graph& g, const std::vector<Datum>& inputs, BuildOptions& opts);

// Checks opts.ranges against the model's symbolic input dims and sets opts.dims to their opt sizes
// (builder/shape_ranges.cc).
Status apply_shape_ranges(const ir::Model& m, BuildOptions& opts);

// Every knob that exists for this model on opts.backend: global knobs, one per pass, and a
// tactic knob per node (values: "auto" and the node's applicable tactics).
Result<KnobSpace> knob_space(const ir::Model& m, const BuildOptions& opts);

// Builds a plan. Deterministic for a given model, route and machine (except with
// builder.selection=isolated, which times tactics). Errors: invalid_argument for a bad route
// (naming the knob), unsupported for what cannot be built, with the node named.
Result<Plan> build_plan(const ir::Model& m, const Route& route, const BuildOptions& opts);

// The calibration ranges a build of `route` computes for its int8 / fp8 nodes, computed now and
// written to opts.calibration_cache (nothing when the route quantizes no node): a tuner pays for
// them once, before its candidates and outside their time limits, and the candidates' builds read
// them from the cache.
Status calibrate(const ir::Model& m, const Route& route, const BuildOptions& opts);

// What a tactic is told about node `n` of `g` reading `inputs` (its inputs, then outer-scope
// reads): dtypes, shapes, constants and the layout tags of the values.
kernels::StepDesc step_desc(const ir::Graph& g, const ir::Node& n, const std::vector<int>& inputs, int threads);
// The build-time description of step `i` of a plan (what its tactic was prepared with).
kernels::StepDesc step_desc_of(const Plan& plan, size_t i);
// Times one tactic alone on a step (random inputs, real constants, warm): median ns, or +inf
// when it fails. What `builder.selection=isolated` and `tactician profile` use.
double time_tactic_isolated(const kernels::Tactic& t, const kernels::StepDesc& step);

// The CPU fingerprint stamped into plans: model name and the instruction sets in use.
std::string device_fingerprint();
// The values a step of node `n` reads: its inputs (kNoValue where omitted), then the outer-scope
// values its subgraphs read (If, Loop, Scan), as value ids of `g`.
std::vector<int> step_inputs(const ir::Graph& g, const ir::Node& n);
// The most intra-op threads a route or plan may ask for here: the knob `threads` ranges over
// 1..hardware_threads() (the machine's hardware threads, at most 64).
int hardware_threads();
// The fingerprint of `backend`'s device: the CPU's above, or the GPU's ("cuda:NVIDIA H200
// [sm_90, 143771 MiB]"; unsupported when this machine or build has no CUDA device).
Result<std::string> device_fingerprint(kernels::Backend backend);
// The backend named `name` ("cpu", "cuda"), or for "" the default: cuda when this build has the
// CUDA backend and a device is present, else cpu. Naming cuda where it cannot run is an error saying
// why, prefixed with `flag` ("--backend cuda: no CUDA device is present on this machine").
Result<kernels::Backend> resolve_backend(const std::string& name, const std::string& flag);
// The backend a plan stamped with `device` runs on (CUDA fingerprints start with "cuda:").
kernels::Backend backend_of_device(const std::string& device);
// Unique, route-safe node names ([A-Za-z0-9_.-]); empty names become "<op>_<index>".
void name_nodes(ir::Graph& g);

}  // namespace tac::builder
