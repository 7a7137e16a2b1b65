#include "cli/engine_args.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "backends/cuda/device.h"
#include "builder/plan_file.h"
#include "io/file.h"

namespace tac::cli {

Result<builder::Route> route_from_args(const Args& args) {
  std::string text = args.get("--route");
  if (args.has("--route-file")) {
    TAC_ASSIGN_OR_RETURN(std::string file, io::read_file(args.get("--route-file"), "the route file"));
    text += "\n" + file;
  }
  TAC_ASSIGN_OR_RETURN(builder::Route r, builder::Route::parse(text));
  if (args.has("--threads")) {
    std::string t = args.get("--threads");
    if (r.values.count("threads") && r.values["threads"] != t)
      return invalid_argument("--threads " + t + " conflicts with threads=" + r.values["threads"] + " in the route");
    r.values["threads"] = t;
  }
  return r;
}

Result<kernels::Backend> backend_from_args(const Args& args) {
  // An explicit empty --backend is a bad name (""), not the default.
  if (args.has("--backend") && args.get("--backend").empty()) return kernels::backend_from_name("");
  return builder::resolve_backend(args.get("--backend"), "--backend");
}

Result<std::map<std::string, int64_t>> dims_from_args(const Args& args) {
  std::map<std::string, int64_t> dims;
  for (const std::string& kv : args.all("--dim")) {
    auto eq = kv.find('=');
    char* end = nullptr;
    long long n = eq == std::string::npos ? -1 : std::strtoll(kv.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || n < 0 || (end && *end))
      return invalid_argument("--dim takes SYMBOL=N with N >= 0, got '" + kv + "'");
    dims[kv.substr(0, eq)] = n;
  }
  return dims;
}

Result<builder::ShapeRanges> shapes_from_args(const Args& args) {
  auto ranges = builder::parse_shape_ranges(args.get("--shapes"));
  if (!ranges) return ranges.status().with_context("--shapes: ");
  return ranges;
}

Result<builder::BuildOptions> build_options_from_args(const Args& args) {
  builder::BuildOptions o;
  TAC_ASSIGN_OR_RETURN(o.backend, backend_from_args(args));
  TAC_ASSIGN_OR_RETURN(o.dims, dims_from_args(args));
  TAC_ASSIGN_OR_RETURN(o.ranges, shapes_from_args(args));
  o.calibration_dir = args.get("--calibration");
  o.calibration_cache = args.get("--calibration-cache");
  if (!o.calibration_dir.empty() && !std::filesystem::is_directory(o.calibration_dir))
    return invalid_argument("--calibration " + o.calibration_dir + ": not a folder (give test_data_set_*/ or input_K.pb)");
  return o;
}

Result<builder::Plan> plan_from_args(const Args& args, const ir::Model* model) {
  if (args.has("--route") || args.has("--route-file") || args.has("--shapes"))
    return invalid_argument("--plan runs a built plan: --route / --route-file / --shapes do not apply");
  TAC_ASSIGN_OR_RETURN(builder::Plan plan, builder::load_plan(args.get("--plan")));
  if (args.has("--backend") && args.get("--backend") != kernels::backend_name(plan.backend))
    return invalid_argument("--backend " + args.get("--backend") + ": the plan " + args.get("--plan") +
                            " was built for the " + kernels::backend_name(plan.backend) + " backend (" + plan.device +
                            "); rebuild it with --backend " + args.get("--backend"));
  if (model && plan.model_hash != model->hash)
    return invalid_argument(args.get("--plan") + ": the plan was built from another model (hash " + plan.model_hash +
                            ") than " + model->path + " (hash " + model->hash + "); rebuild the plan from it");
  if (args.has("--threads")) {
    const std::string t = args.get("--threads");
    char* end = nullptr;
    long n = std::strtol(t.c_str(), &end, 10);
    if (t.empty() || *end || n < 1 || n > builder::hardware_threads())
      return invalid_argument("--threads '" + t + "': this machine runs 1 to " +
                              std::to_string(builder::hardware_threads()) + " threads");
    plan.threads = static_cast<int>(n);
  }
  return plan;
}

Result<std::unique_ptr<runtime::Engine>> engine_from_args(const Args& args, const ir::Model* model,
                                                          const builder::BuildOptions& opts) {
  if (args.has("--plan")) {
    TAC_ASSIGN_OR_RETURN(builder::Plan plan, plan_from_args(args, model));
    return runtime::Engine::create(std::move(plan));
  }
  if (!model) return invalid_argument("no model and no --plan");
  TAC_ASSIGN_OR_RETURN(builder::Route route, route_from_args(args));
  auto plan = builder::build_plan(*model, route, opts);
  if (!plan) return plan.status().with_context(model->path + ": ");
  return runtime::Engine::create(std::move(plan).value());
}

Result<std::optional<tuner::Tolerance>> tolerance_from_args(const Args& args) {
  if (!args.has("--tolerance") && !args.has("--tolerance-file")) return std::optional<tuner::Tolerance>();
  if (args.has("--tolerance") && args.has("--tolerance-file"))
    return invalid_argument("--tolerance and --tolerance-file: give one");
  std::string text = args.get("--tolerance");
  if (args.has("--tolerance-file")) {
    TAC_ASSIGN_OR_RETURN(text, io::read_file(args.get("--tolerance-file"), "the tolerance file"));
    std::replace(text.begin(), text.end(), '\n', ',');
    while (!text.empty() && text.back() == ',') text.pop_back();
  }
  auto tol = tuner::Tolerance::parse(text);
  if (!tol) return tol.status().with_context(args.has("--tolerance") ? "--tolerance: " : args.get("--tolerance-file") + ": ");
  return std::optional<tuner::Tolerance>(*tol);
}

Result<Tensor> random_tensor(const ir::Value& v, const std::map<std::string, int64_t>& dims, std::mt19937_64& rng) {
  if (v.type.kind != ir::ValueKind::tensor)
    return unsupported("input '" + v.name + "': random data for sequences and optionals is not supported");
  if (v.type.dtype == DType::undefined) return invalid_argument("input '" + v.name + "' has no declared type");
  if (!v.type.has_shape) return invalid_argument("input '" + v.name + "' has no declared shape; give it with --input");
  Shape shape;
  for (const ir::Dim& d : v.type.dims) {
    if (d.known()) shape.push_back(d.value);
    else if (auto it = dims.find(d.symbol); it != dims.end()) shape.push_back(it->second);
    else shape.push_back(1);
  }
  TAC_ASSIGN_OR_RETURN(Tensor t, Tensor::create(v.type.dtype, shape));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype_is_float(t.dtype())) t.set_f64(i, normal(rng));
    else if (t.dtype() == DType::boolean) t.set_i64(i, small(rng) & 1);
    else t.set_i64(i, small(rng));
  }
  return t;
}

Result<std::vector<Tensor>> random_inputs(const runtime::Engine& e, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  std::vector<Tensor> out;
  const ir::Graph& g = e.plan().model.graph;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (e.plan().values[static_cast<size_t>(g.inputs[i])].is_dynamic())
      return unsupported("input '" + g.values[static_cast<size_t>(g.inputs[i])].name + "' (" +
                         g.values[static_cast<size_t>(g.inputs[i])].type.to_string() +
                         ") has no fixed shape in the plan: random inputs need one");
  for (const auto& [dtype, shape] : e.input_specs()) {
    TAC_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, shape));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dtype_is_float(dtype)) t.set_f64(i, nd(rng));
      else if (dtype == DType::boolean) t.set_i64(i, small(rng) & 1);
      else t.set_i64(i, small(rng));
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tac::cli
