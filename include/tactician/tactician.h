// Tactician's public C++ API: load an ONNX model, list its knobs, build an engine for a route (or
// load a saved .plan), run it on named tensors, and tune it. Everything a program needs is in
// include/tactician/ (this header, status.h, tensor.h); link Tactician::tactician after
// find_package(Tactician). Every fallible call returns a Status or a Result<T>: no exception
// leaves the library, and the messages are the command line's.
//
//   auto model = tac::Model::load("resnet50.onnx");
//   if (!model) { std::cerr << model.status().to_string() << "\n"; return 1; }
//   auto engine = tac::Engine::build(*model, {.route = "precision.default=bf16"});
//   auto out = engine->run({{"input", tensor}});     // Result<std::map<std::string, Tensor>>
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tactician/status.h"
#include "tactician/tensor.h"

namespace tac {

// "0.1.0": the library's version (plans record it and refuse another).
std::string version();
// The backends this library can run here: "cpu", and "cuda" when it was built with the CUDA
// backend and a CUDA device is present.
std::vector<std::string> available_backends();

// Reads a tensor from an ONNX TensorProto file (.pb, as the test_data_set_* folders hold them)
// or a NumPy .npy file, checked against its declared shape before anything is allocated.
Result<Tensor> load_tensor(const std::string& path);
// Writes `t` as .npy when `path` ends in .npy, else as a TensorProto named `name`.
Status save_tensor(const Tensor& t, const std::string& path, const std::string& name = "");

// A graph input or output. A dim of -1 is only known when the engine runs (or, for a model's
// symbolic dims, when it is built: BuildOptions::dims).
struct TensorInfo {
  std::string name;
  DType dtype = DType::undefined;
  Shape shape;
  std::vector<std::string> dim_names;  // per dim, its symbol ("batch") where the model names one, else ""
};

// One knob of a model's solution space (`tactician knobs`).
struct KnobInfo {
  std::string name;                 // "pass.fold_batchnorm", "tactic.conv_17", "precision.default"
  std::vector<std::string> values;  // its domain, spelled as routes spell it
  std::string default_value;        // what the default route takes
  std::string help;
  bool per_node = false;            // a knob of one node (tactic.*, precision.<node>, ...)
};

class Engine;

// An ONNX model, imported and checked (shapes inferred, attributes checked against ONNX's
// schemas, external data confined to the model's folder). Copies share the model.
class Model {
 public:
  // `path`: a .onnx file, or a folder holding model.onnx (the zoo's layout).
  static Result<Model> load(const std::string& path);

  const std::string& path() const;
  // The hash plans record: a plan built from another model is refused.
  const std::string& hash() const;
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // Every knob that exists for this model on `backend` ("cpu", "cuda"; "" picks as
  // BuildOptions::backend does).
  Result<std::vector<KnobInfo>> knobs(const std::string& backend = "") const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  friend class Engine;
};

struct BuildOptions {
  // The route: "knob=value ..." as `tactician build --route` takes it, or a best.route file's
  // text. Knobs it leaves unset keep their defaults; a knob or value that does not exist is an
  // error naming it and listing the allowed values.
  std::string route;
  // "cpu" or "cuda"; "": cuda when this library has the CUDA backend and a device is present,
  // else cpu (as the command line).
  std::string backend;
  // Intra-op threads (the route's `threads` knob); 0 keeps the route's or the default.
  int threads = 0;
  // Values of the model's symbolic input dims ("batch" -> 8); unbound ones are 1.
  std::map<std::string, int64_t> dims;
  // Shape ranges of symbolic input dims, as `tactician build --shapes`: "batch=1..8:4,seq=16..512:128"
  // (min..max:opt). The engine is built at the opt sizes and runs any size inside the ranges
  // (other sizes get an engine built with the same route on first use, then cached); a size
  // outside is an error naming the input, the dim and the range.
  std::string shapes;
};

// A built engine: a plan with its kernels prepared and its memory allocated. Copies share the
// engine. run() may be called from several threads: calls on one engine take turns (one arena);
// build one engine per thread to run in parallel.
class Engine {
 public:
  static Result<Engine> build(const Model& model, const BuildOptions& options = {});
  // A plan saved by save() or `tactician build -o`; refused when corrupt, from another version
  // of Tactician or built for another device.
  static Result<Engine> load(const std::string& plan_path);
  // Same, and refused when the plan was built from another model than `model`.
  static Result<Engine> load(const std::string& plan_path, const Model& model);
  Status save(const std::string& plan_path) const;

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  std::string backend() const;  // "cpu" or "cuda"
  std::string device() const;   // the fingerprint the plan is stamped with
  std::string route() const;    // canonical text of the route it was built with ("" = default)
  int threads() const;

  // Runs the engine on host tensors named as the model's inputs (every input, with the plan's
  // dtype and shape; an unknown or missing name is an error naming it). Returns the outputs by
  // name, in host memory owned by the returned tensors. On a CUDA engine the inputs are copied to
  // the device and the outputs back, and the call returns when the outputs are ready.
  Result<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs) const;
  // Same by position (inputs() order in, outputs() order out): no name lookups.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) const;
  // An engine built with shape ranges (BuildOptions::shapes) builds the engine for other sizes on
  // their first run; prepare() builds it now ({"batch": 3}), so a serving process can warm up the
  // sizes it expects. Sizes outside the ranges are errors naming them.
  Status prepare(const std::map<std::string, int64_t>& dims) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

struct TuneOptions {
  std::string backend;            // as BuildOptions::backend
  double budget_seconds = 60;     // wall time of the search
  int64_t max_candidates = -1;    // -1: no limit
  // The accuracy gate, in the tuner's language: "cos>=0.999,linf<=1e-2" (`tactician tune
  // --tolerance`); "": the fp32 default.
  std::string tolerance;
  std::string route;              // settings every candidate keeps (their knobs are not searched)
  std::vector<std::string> knobs; // only knobs matching these globs; empty: all
  std::string strategy = "tpe";
  int threads = 0;                // 0: every hardware thread (as the command line)
  uint64_t seed = 0;
  std::map<std::string, int64_t> dims;
  std::string shapes;             // shape ranges (as BuildOptions::shapes): tuned at the opt sizes
  std::string inputs_dir;         // test_data_set_* layout; "": the model's own test data, else random
  std::string db_path;            // the tuning database ("": a temporary one, removed after)
  std::string out_dir;            // best.plan, best.route, summary.json ("": none written)
  // Candidates are built, checked and timed in child processes of the `tactician` binary: "" finds
  // it (the TACTICIAN_BINARY environment variable, this process if it is tactician, else the one
  // installed beside this library: PREFIX/bin for PREFIX/lib, else the build tree's).
  std::string tactician_binary;
  // Called with each progress line ("[tune] ..."); warnings start with "warning: ".
  std::function<void(const std::string& line)> progress;
};

struct TuneResult {
  std::string best_route;         // the best engine's route (build it with BuildOptions::route)
  bool best_is_default = true;    // no candidate beat the default route by more than the noise
  double default_ms = 0, best_ms = 0;
  double speedup = 1, speedup_low = 1, speedup_high = 1;  // default/best, and its range over the final rounds
  int candidates = 0, failed = 0, rejected = 0;
  std::string stop_reason;
  std::string summary_json;       // what summary.json holds
};

// Tunes the model at `model_path` (DESIGN.md section 3): candidates built from the knob space,
// gated by the tolerance, timed end to end; the best is compared with the default in interleaved
// rounds before it is kept.
Result<TuneResult> tune(const std::string& model_path, const TuneOptions& options = {});

}  // namespace tac
