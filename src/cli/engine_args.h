// What `run`, `check`, `bench` and `profile` share: turning --plan / --route / --route-file /
// --threads / --dim into a build, and measuring an engine.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <optional>
#include <string>

#include "builder/builder.h"
#include "core/datum.h"
#include "cli/args.h"
#include "runtime/engine.h"
#include "runtime/measure.h"
#include "tuner/accuracy.h"

namespace tac::cli {

// Flags every engine-running command accepts.
inline const std::set<std::string> kEngineFlags = {"--plan",    "--route",       "--route-file",       "--threads",
                                                    "--dim",     "--backend",     "--calibration",      "--calibration-cache",
                                                    "--shapes"};
// --backend cpu|cuda, or the default: cuda when this binary has the CUDA backend and a device is
// present, else cpu. An explicit cuda on a machine or build without it is an error saying so.
Result<kernels::Backend> backend_from_args(const Args& args);

// The route from --route / --route-file (both may be given: merged, conflicts are errors),
// with --threads N added as threads=N.
Result<builder::Route> route_from_args(const Args& args);
// Symbolic dim bindings from every --dim SYMBOL=N (N a whole number >= 0; anything else is an error
// naming the word).
Result<std::map<std::string, int64_t>> dims_from_args(const Args& args);
// Shape ranges from --shapes (builder::parse_shape_ranges; none without the flag).
Result<builder::ShapeRanges> shapes_from_args(const Args& args);
// Symbolic dim bindings from --dim NAME=N, shape ranges from --shapes (builder/plan.h, DimRange), the backend (backend_from_args), and the int8
// calibration data (--calibration DIR) and cache folder (--calibration-cache DIR).
Result<builder::BuildOptions> build_options_from_args(const Args& args);
// The plan of --plan, checked: no --route / --route-file beside it, --backend (if given) the plan's,
// built from `model` (its hash; when `model` is given), and --threads N applied.
Result<builder::Plan> plan_from_args(const Args& args, const ir::Model* model);
// An engine: loads --plan if given, else builds `model` with the route from the args.
Result<std::unique_ptr<runtime::Engine>> engine_from_args(const Args& args, const ir::Model* model,
                                                          const builder::BuildOptions& opts);

// Latency statistics of repeated end-to-end runs: see runtime/measure.h.
using runtime::Latency;
using runtime::measure;

// The tuner's tolerance language (tuner::Tolerance::parse) from --tolerance TEXT or
// --tolerance-file F (one term per line or comma-separated); nullopt when neither is given.
Result<std::optional<tuner::Tolerance>> tolerance_from_args(const Args& args);

// Seeded random data for graph input `v` of its declared type (normal floats, small non-negative
// ints); symbolic dims take their size from `dims` (default 1). `run` and `compare` fill inputs so.
Result<Tensor> random_tensor(const ir::Value& v, const std::map<std::string, int64_t>& dims, std::mt19937_64& rng);

// Seeded random inputs of the engine's input specs (normal floats, small non-negative ints).
Result<std::vector<Tensor>> random_inputs(const runtime::Engine& e, uint64_t seed);

}  // namespace tac::cli

