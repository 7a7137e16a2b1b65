// The runtime: an engine executes a plan (prepared kernels over one arena). Dynamic steps (see
// PlanStep::dynamic) run with the shapes of the current run; their dynamic outputs live in buffers
// allocated during the run, outside the arena.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/device.h"
#include "builder/plan.h"

namespace tac::runtime {

class Engine {
 public:
  // Prepares every step's kernel (weights prepacked) and allocates the arena and workspace. For
  // a CUDA plan the arena, the workspace, the graph inputs and the constants live in device
  // memory (constants uploaded here); run() copies inputs in and outputs out and synchronizes.
  static Result<std::unique_ptr<Engine>> create(builder::Plan plan);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const builder::Plan& plan() const { return *plan_; }

  // Runs the plan. `inputs` by graph input position, with the plan's dtypes and shapes (or, for a
  // plan with shape ranges, any sizes inside them: see specialized());
  // returns the outputs by graph output position (copied out of the arena). Fails, naming the
  // output, when one is a sequence or optional (see run_values).
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);
  // Same with any run-time values: tensors, sequences and optionals, as the graph declares.
  Result<std::vector<Datum>> run_values(const std::vector<Datum>& inputs);
  // Same, recording each step's wall time in ns into `step_ns` (one entry per step).
  Result<std::vector<Tensor>> run_profiled(const std::vector<Tensor>& inputs, std::vector<double>& step_ns);

  // Plans with shape ranges: builds (and caches) the engine for these sizes of the ranges' dims now,
  // so that the first run at them does not pay the build (a serving process warming up the batch
  // sizes it expects). Sizes outside a range, or a plan without ranges, are errors naming them.
  Status prepare(const std::map<std::string, int64_t>& dims);

  // The input shapes/types the plan was built for, by graph input position. A dynamic input
  // (see has_dynamic_inputs) has unknown (-1) or no dims.
  std::vector<std::pair<DType, Shape>> input_specs() const;
  bool has_dynamic_inputs() const;
  // The plan has dynamic steps or inputs. On CUDA these steps run on the host (host_reference,
  // with copies), the engine runs eagerly (no CUDA graph) and upload_inputs / launch are refused:
  // time it with run() (runtime/measure.h does).
  bool dynamic() const { return dynamic_; }

  // CUDA plans, for device-side timing (runtime/measure.h): upload_inputs enqueues the inputs'
  // copies to their device slots; launch enqueues the steps alone on the stream. With the
  // plan's cuda.graphs=on the first launch captures the steps into a CUDA graph and every launch
  // replays it (steps that cannot be captured, such as host_reference, keep the engine eager).
  Status upload_inputs(const std::vector<Tensor>& inputs);
  Status launch();
  // "on (replaying a CUDA graph)", "off (route)", "off: <why>"; "" for CPU plans.
  std::string graph_state() const;

 private:
  Engine() = default;
  Status create_device_memory();
  Status check_inputs(const std::vector<Datum>& inputs) const;
  Status run_steps(const std::vector<Datum>* inputs, std::vector<double>* step_ns, std::vector<Datum>* dynamic_values);
  Result<std::vector<Datum>> execute(const std::vector<Datum>& inputs, std::vector<double>* step_ns);
  Result<Engine*> specialized(const std::vector<Datum>& inputs);
  Result<Engine*> engine_for_dims(std::map<std::string, int64_t> dims);
  Status load_source();
  Status run_dynamic_step(size_t s, const std::vector<Datum>& inputs, std::vector<Datum>& dynamic_values);

  std::unique_ptr<builder::Plan> plan_;  // stable address: kernels refer to its nodes
  std::unique_ptr<std::byte[]> arena_storage_, workspace_storage_;
  std::byte* arena_ = nullptr;
  std::byte* workspace_ = nullptr;
  std::vector<std::unique_ptr<kernels::Kernel>> kernels_;
  struct Views {
    std::vector<kernels::TensorView> in, out;
    std::vector<std::pair<size_t, size_t>> from_inputs;  // (slot in `in`, graph input position)
  };
  std::vector<Views> views_;
  bool dynamic_ = false;  // the plan has dynamic steps or inputs
  std::vector<bool> skip_;  // per step: a view whose output shares its input's buffer (builder::is_alias_step)
  std::vector<std::vector<int>> release_after_;  // per step: dynamic values last read there (freed after it)
  // CUDA plans: device memory, and where each graph input is copied to before a run.
  cuda::DeviceBuffer dev_arena_, dev_workspace_, dev_constants_, dev_inputs_;
  std::vector<void*> dev_input_ptr_;                 // by graph input position
  std::vector<const void*> dev_value_ptr_;           // by value id: device address of inputs/constants
  bool use_graph_ = false;        // cuda.graphs=on and every step can be captured
  std::string graph_off_reason_;  // why not, when the route asked for graphs
  cuda::Graph graph_;             // captured at the first launch()
  // Plans with shape ranges (Plan::ranges): run() with other sizes inside them runs an engine built
  // for those sizes from the plan's source model and route, on first use (specialized()).
  static constexpr size_t kMaxSpecialized = 8;
  struct Specialized {
    std::unique_ptr<Engine> engine;
    uint64_t last_use = 0;
  };
  std::unique_ptr<ir::Model> source_;  // parsed from Plan::source_model at the first other size
  std::map<std::map<std::string, int64_t>, Specialized> specialized_;  // by bound dims
  uint64_t use_clock_ = 0;
};

}  // namespace tac::runtime
