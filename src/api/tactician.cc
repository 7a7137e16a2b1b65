// The public C++ API (include/tactician/tactician.h) over the builder, the runtime and the
// tuner: the command line's operations as library calls, with the same checks and messages.
#include "tactician/tactician.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>

#include "backends/cuda/device.h"
#include "builder/builder.h"
#include "builder/plan_file.h"
#include "io/onnx_import.h"
#include "io/tensor_io.h"
#include "runtime/engine.h"
#include "tuner/tune.h"

#ifndef TAC_VERSION
#define TAC_VERSION "0.0.0"
#endif

namespace tac {

namespace fs = std::filesystem;

namespace {

// Runs `f`, turning an exception that escaped the layers below (a bug: they return errors as
// values) into an internal error, so none crosses the library boundary.
template <class F>
auto guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return out_of_memory(std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return internal_error(std::string(what) + ": uncaught exception: " + e.what());
  }
}

TensorInfo info_of(const ir::Value& v, const Shape* planned) {
  TensorInfo t;
  t.name = v.name;
  t.dtype = v.type.dtype;
  for (const ir::Dim& d : v.type.dims) {
    t.shape.push_back(d.value);
    t.dim_names.push_back(d.symbol);
  }
  if (planned && planned->size() == t.shape.size()) t.shape = *planned;
  return t;
}

Result<kernels::Backend> backend_named(const std::string& name) { return builder::resolve_backend(name, "backend"); }

std::string model_file(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? (fs::path(path) / "model.onnx").string() : path;
}

// The tactician binary the tuner's candidates are exec'd from (TuneOptions::tactician_binary).
std::string find_tactician_binary(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("TACTICIAN_BINARY"); env && *env) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && self.filename() == "tactician") return self.string();
  // Beside this library: PREFIX/lib/libtactician.so -> PREFIX/bin/tactician once installed,
  // build/libtactician.so -> build/tactician in the build tree.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_tactician_binary), &info) && info.dli_fname) {
    const fs::path lib_dir = fs::path(info.dli_fname).parent_path();
    for (const fs::path& p : {lib_dir.parent_path() / "bin" / "tactician", lib_dir / "tactician"})
      if (fs::exists(p, ec)) return p.string();
  }
#ifdef TAC_BUILD_BINARY
  if (fs::exists(TAC_BUILD_BINARY, ec)) return TAC_BUILD_BINARY;
#endif
  return "tactician";
}

}  // namespace

std::string version() { return TAC_VERSION; }

std::vector<std::string> available_backends() {
  std::vector<std::string> b = {"cpu"};
  if (cuda::compiled() && cuda::device_present()) b.push_back("cuda");
  return b;
}

Result<Tensor> load_tensor(const std::string& path) {
  return guarded("load_tensor", [&]() -> Result<Tensor> {
    if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) return io::load_npy(path);
    return io::load_tensor_pb(path);
  });
}

Status save_tensor(const Tensor& t, const std::string& path, const std::string& name) {
  return guarded("save_tensor", [&]() -> Status {
    if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0) return io::save_npy(t, path);
    return io::save_tensor_pb(t, name, path);
  });
}

// ---- Model ----

struct Model::Impl {
  ir::Model model;
  std::vector<TensorInfo> inputs, outputs;
};

Result<Model> Model::load(const std::string& path) {
  return guarded("Model::load", [&]() -> Result<Model> {
    TAC_ASSIGN_OR_RETURN(ir::Model m, io::load_model(model_file(path)));
    Model out;
    auto impl = std::make_shared<Impl>();
    impl->model = std::move(m);
    const ir::Graph& g = impl->model.graph;
    for (int v : g.inputs) impl->inputs.push_back(info_of(g.values[static_cast<size_t>(v)], nullptr));
    for (int v : g.outputs) impl->outputs.push_back(info_of(g.values[static_cast<size_t>(v)], nullptr));
    out.impl_ = std::move(impl);
    return out;
  });
}

const std::string& Model::path() const { return impl_->model.path; }
const std::string& Model::hash() const { return impl_->model.hash; }

const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }

Result<std::vector<KnobInfo>> Model::knobs(const std::string& backend) const {
  return guarded("Model::knobs", [&]() -> Result<std::vector<KnobInfo>> {
    builder::BuildOptions o;
    TAC_ASSIGN_OR_RETURN(o.backend, backend_named(backend));
    TAC_ASSIGN_OR_RETURN(builder::KnobSpace space, builder::knob_space(impl_->model, o));
    std::vector<KnobInfo> out;
    for (const builder::Knob& k : space.knobs())
      out.push_back({k.name, k.values, k.default_value, k.help, k.scope != builder::KnobScope::global});
    return out;
  });
}

// ---- Engine ----

struct Engine::Impl {
  std::unique_ptr<runtime::Engine> engine;
  std::vector<TensorInfo> inputs, outputs;
  std::map<std::string, size_t> input_index;
  std::mutex run_mutex;  // one arena: runs take turns

  static Result<std::shared_ptr<Impl>> create(builder::Plan plan);
};

Result<std::shared_ptr<Engine::Impl>> Engine::Impl::create(builder::Plan plan) {
  auto impl = std::make_shared<Impl>();
  TAC_ASSIGN_OR_RETURN(impl->engine, runtime::Engine::create(std::move(plan)));
  const builder::Plan& p = impl->engine->plan();
  const ir::Graph& g = p.model.graph;
  for (int v : g.inputs) {
    impl->input_index[g.values[static_cast<size_t>(v)].name] = impl->inputs.size();
    impl->inputs.push_back(info_of(g.values[static_cast<size_t>(v)], &p.values[static_cast<size_t>(v)].shape));
  }
  for (int v : g.outputs)
    impl->outputs.push_back(info_of(g.values[static_cast<size_t>(v)], &p.values[static_cast<size_t>(v)].shape));
  return impl;
}

Result<Engine> Engine::build(const Model& model, const BuildOptions& options) {
  return guarded("Engine::build", [&]() -> Result<Engine> {
    if (!model.impl_) return invalid_argument("Engine::build: the model was not loaded");
    TAC_ASSIGN_OR_RETURN(builder::Route route, builder::Route::parse(options.route));
    if (options.threads != 0) {
      const std::string t = std::to_string(options.threads);
      if (route.values.count("threads") && route.values["threads"] != t)
        return invalid_argument("threads " + t + " conflicts with threads=" + route.values["threads"] + " in the route");
      route.values["threads"] = t;
    }
    builder::BuildOptions o;
    TAC_ASSIGN_OR_RETURN(o.backend, backend_named(options.backend));
    for (const auto& [name, n] : options.dims) {
      if (n < 0) return invalid_argument("dim " + name + "=" + std::to_string(n) + ": sizes are >= 0");
      o.dims[name] = n;
    }
    TAC_ASSIGN_OR_RETURN(o.ranges, builder::parse_shape_ranges(options.shapes));
    auto plan = builder::build_plan(model.impl_->model, route, o);
    if (!plan) return plan.status().with_context(model.path() + ": ");
    Engine e;
    TAC_ASSIGN_OR_RETURN(e.impl_, Impl::create(std::move(plan).value()));
    return e;
  });
}

Result<Engine> Engine::load(const std::string& plan_path) {
  return guarded("Engine::load", [&]() -> Result<Engine> {
    TAC_ASSIGN_OR_RETURN(builder::Plan plan, builder::load_plan(plan_path));
    Engine e;
    TAC_ASSIGN_OR_RETURN(e.impl_, Impl::create(std::move(plan)));
    return e;
  });
}

Result<Engine> Engine::load(const std::string& plan_path, const Model& model) {
  return guarded("Engine::load", [&]() -> Result<Engine> {
    if (!model.impl_) return invalid_argument("Engine::load: the model was not loaded");
    TAC_ASSIGN_OR_RETURN(builder::Plan plan, builder::load_plan(plan_path));
    if (plan.model_hash != model.hash())
      return invalid_argument(plan_path + ": the plan was built from another model (hash " + plan.model_hash +
                              ") than " + model.path() + " (hash " + model.hash() + "); rebuild the plan from it");
    Engine e;
    TAC_ASSIGN_OR_RETURN(e.impl_, Impl::create(std::move(plan)));
    return e;
  });
}

Status Engine::save(const std::string& plan_path) const {
  return guarded("Engine::save", [&]() -> Status { return builder::save_plan(impl_->engine->plan(), plan_path); });
}

const std::vector<TensorInfo>& Engine::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Engine::outputs() const { return impl_->outputs; }
std::string Engine::backend() const { return kernels::backend_name(impl_->engine->plan().backend); }
std::string Engine::device() const { return impl_->engine->plan().device; }
std::string Engine::route() const { return impl_->engine->plan().route; }
int Engine::threads() const { return impl_->engine->plan().threads; }

Result<std::vector<Tensor>> Engine::run(const std::vector<Tensor>& inputs) const {
  return guarded("Engine::run", [&]() -> Result<std::vector<Tensor>> {
    std::lock_guard<std::mutex> lock(impl_->run_mutex);
    return impl_->engine->run(inputs);
  });
}

Result<std::map<std::string, Tensor>> Engine::run(const std::map<std::string, Tensor>& inputs) const {
  std::vector<Tensor> by_position(impl_->inputs.size());
  for (const auto& [name, t] : inputs) {
    auto it = impl_->input_index.find(name);
    if (it == impl_->input_index.end()) {
      std::string names;
      for (const TensorInfo& i : impl_->inputs) names += (names.empty() ? "" : ", ") + i.name;
      return invalid_argument("Engine::run: the engine has no input '" + name + "' (its inputs: " + names + ")");
    }
    by_position[it->second] = t;
  }
  for (size_t i = 0; i < by_position.size(); ++i)
    if (by_position[i].empty())
      return invalid_argument("Engine::run: input '" + impl_->inputs[i].name + "' is missing (" +
                              dtype_name(impl_->inputs[i].dtype) + shape_to_string(impl_->inputs[i].shape) + ")");
  TAC_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run(by_position));
  std::map<std::string, Tensor> named;
  for (size_t i = 0; i < outs.size() && i < impl_->outputs.size(); ++i) named[impl_->outputs[i].name] = std::move(outs[i]);
  return named;
}

Status Engine::prepare(const std::map<std::string, int64_t>& dims) const {
  return guarded("Engine::prepare", [&]() -> Status {
    std::lock_guard<std::mutex> lock(impl_->run_mutex);
    return impl_->engine->prepare(dims);
  });
}

// ---- tune ----

Result<TuneResult> tune(const std::string& model_path, const TuneOptions& options) {
  return guarded("tune", [&]() -> Result<TuneResult> {
    tuner::TuneOptions o;
    o.model_path = model_file(model_path);
    o.strategy = options.strategy;
    if (!(options.budget_seconds > 0)) return invalid_argument("tune: budget_seconds must be > 0");
    o.budget_s = options.budget_seconds;
    o.max_candidates = options.max_candidates;
    if (!options.tolerance.empty()) {
      TAC_ASSIGN_OR_RETURN(o.tolerance, tuner::Tolerance::parse(options.tolerance));
    }
    TAC_ASSIGN_OR_RETURN(o.fixed, builder::Route::parse(options.route));
    o.knob_globs = options.knobs;
    if (options.threads < 0) return invalid_argument("tune: threads must be >= 0");
    o.threads = options.threads > 0 ? options.threads : builder::hardware_threads();
    o.seed = options.seed;
    o.dims = options.dims;
    TAC_ASSIGN_OR_RETURN(o.ranges, builder::parse_shape_ranges(options.shapes));
    o.inputs_dir = options.inputs_dir;
    o.out_dir = options.out_dir;
    TAC_ASSIGN_OR_RETURN(o.backend, backend_named(options.backend));
    o.limits.binary = find_tactician_binary(options.tactician_binary);
    if (::access(o.limits.binary.c_str(), X_OK) != 0)
      return invalid_argument("tune: the tactician binary '" + o.limits.binary +
                              "' that evaluates candidates is not found; set TuneOptions::tactician_binary or "
                              "TACTICIAN_BINARY");
    std::string temp_db;
    if (options.db_path.empty()) {
      temp_db = (fs::temp_directory_path() / ("tactician-api-" + std::to_string(::getpid()) + "-" +
                                              std::to_string(reinterpret_cast<uintptr_t>(&o)) + ".db")).string();
      o.db_path = temp_db;
    } else {
      o.db_path = options.db_path;
    }
    if (!o.out_dir.empty()) {
      std::error_code ec;
      fs::create_directories(o.out_dir, ec);
      if (ec) return io_error(o.out_dir + ": cannot create the output folder: " + ec.message());
    }
    auto summary = tuner::tune(o, [&](const std::string& line) {
      if (options.progress) options.progress(line);
    });
    if (!temp_db.empty()) {
      std::error_code ec;
      fs::remove(temp_db, ec);
    }
    if (!summary) return summary.status();
    TuneResult r;
    const tuner::TuneSummary& s = *summary;
    r.best_route = s.best_route;
    r.best_is_default = s.best_is_default;
    r.default_ms = s.default_ms;
    r.best_ms = s.best_ms;
    r.speedup = s.speedup;
    r.speedup_low = s.speedup_low;
    r.speedup_high = s.speedup_high;
    r.candidates = s.candidates;
    r.failed = s.failed;
    r.rejected = s.rejected;
    r.stop_reason = s.stop_reason;
    r.summary_json = s.to_json();
    return r;
  });
}

}  // namespace tac
