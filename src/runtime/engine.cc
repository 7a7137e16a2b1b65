#include "runtime/engine.h"

#include <chrono>
#include <cstring>
#include <new>
#include <optional>

#include "builder/builder.h"
#include "io/onnx_import.h"
#include "reference/interpreter.h"

namespace tac::runtime {

namespace {
// A 64-byte aligned block of `bytes`; nullptr when it cannot be allocated.
std::byte* aligned_block(std::unique_ptr<std::byte[]>& storage, int64_t bytes) {
  storage.reset(new (std::nothrow) std::byte[static_cast<size_t>(bytes) + 64]);
  if (!storage) return nullptr;
  return reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(storage.get()) + 63) & ~uintptr_t{63});
}
}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(builder::Plan plan) {
  std::unique_ptr<Engine> e(new Engine());
  e->plan_ = std::make_unique<builder::Plan>(std::move(plan));
  builder::Plan& p = *e->plan_;
  const ir::Graph& g = p.model.graph;
  const bool on_device = p.backend == kernels::Backend::cuda;
  e->dynamic_ = p.dynamic_steps() > 0 || e->has_dynamic_inputs();
  if (on_device) TAC_RETURN_IF_ERROR(e->create_device_memory());
  else if (!(e->arena_ = aligned_block(e->arena_storage_, p.arena_bytes)))
    return out_of_memory("cannot allocate the plan's arena of " + bytes_to_string(static_cast<uint64_t>(p.arena_bytes)));
  std::vector<size_t> input_pos(g.values.size(), SIZE_MAX);
  for (size_t i = 0; i < g.inputs.size(); ++i) input_pos[static_cast<size_t>(g.inputs[i])] = i;
  auto view_of = [&](int v) -> kernels::TensorView {
    if (v == ir::kNoValue) return {};
    const builder::PlanValue& pv = p.values[static_cast<size_t>(v)];
    kernels::TensorView tv{nullptr, pv.dtype, pv.shape};
    if (on_device) {
      tv.data = pv.kind == builder::PlanValue::Kind::arena ? e->arena_ + pv.offset
                                                            : const_cast<void*>(e->dev_value_ptr_[static_cast<size_t>(v)]);
      return tv;
    }
    if (pv.kind == builder::PlanValue::Kind::arena) tv.data = e->arena_ + pv.offset;
    else if (pv.kind == builder::PlanValue::Kind::constant)
      tv.data = const_cast<void*>(g.values[static_cast<size_t>(v)].initializer->raw());
    return tv;
  };
  int64_t workspace = 0;
  for (const builder::PlanStep& st : p.steps) {
    const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
    kernels::StepDesc desc;
    desc.node = &n;
    desc.threads = p.threads;
    desc.dynamic = st.dynamic;
    Views views;
    for (size_t i = 0; i < st.inputs.size(); ++i) {
      int v = st.inputs[i];
      views.in.push_back(view_of(v));
      desc.in_dtypes.push_back(v == ir::kNoValue ? DType::undefined : p.values[static_cast<size_t>(v)].dtype);
      desc.in_shapes.push_back(v == ir::kNoValue ? Shape{} : p.values[static_cast<size_t>(v)].shape);
      desc.in_layouts.push_back(v == ir::kNoValue ? ir::Layout::nchw : p.values[static_cast<size_t>(v)].layout);
      desc.constants.push_back(v != ir::kNoValue && g.values[static_cast<size_t>(v)].initializer
                                   ? &*g.values[static_cast<size_t>(v)].initializer
                                   : nullptr);
      // Graph inputs read in place (CPU), or by a dynamic step from the host copy (CUDA).
      if ((!on_device || st.dynamic) && v != ir::kNoValue && input_pos[static_cast<size_t>(v)] != SIZE_MAX)
        views.from_inputs.emplace_back(i, input_pos[static_cast<size_t>(v)]);
    }
    for (int v : st.outputs) {
      views.out.push_back(view_of(v));
      desc.out_dtypes.push_back(v == ir::kNoValue ? DType::undefined : p.values[static_cast<size_t>(v)].dtype);
      desc.out_shapes.push_back(v == ir::kNoValue ? Shape{} : p.values[static_cast<size_t>(v)].shape);
      desc.out_layouts.push_back(v == ir::kNoValue ? ir::Layout::nchw : p.values[static_cast<size_t>(v)].layout);
    }
    auto k = st.tactic->prepare(desc);
    if (!k) return k.status().with_context(n.label() + " (tactic " + st.tactic->name + "): ");
    workspace = std::max<int64_t>(workspace, static_cast<int64_t>((*k)->workspace_bytes()));
    e->kernels_.push_back(std::move(k).value());
    e->views_.push_back(std::move(views));
    e->skip_.push_back(builder::is_alias_step(g, st));  // output aliases input: nothing to run
  }
  p.workspace_bytes = workspace;
  // Dynamic values are freed after their last reader (graph outputs live to the end).
  e->release_after_.resize(p.steps.size());
  if (e->dynamic_) {
    std::vector<int> last(g.values.size(), -1);
    for (size_t s = 0; s < p.steps.size(); ++s)
      for (int v : p.steps[s].inputs)
        if (v != ir::kNoValue) last[static_cast<size_t>(v)] = static_cast<int>(s);
    for (int v : g.outputs) last[static_cast<size_t>(v)] = -1;
    for (size_t v = 0; v < g.values.size(); ++v)
      if (p.values[v].is_dynamic() && last[v] >= 0) e->release_after_[static_cast<size_t>(last[v])].push_back(static_cast<int>(v));
  }
  if (on_device && p.cuda_graphs && e->dynamic_) {
    e->graph_off_reason_ = "the plan has dynamic steps or inputs (run on the host, shapes known only at run time)";
  } else if (on_device && p.cuda_graphs) {
    e->use_graph_ = true;
    for (const builder::PlanStep& st : p.steps)
      if (st.tactic->on_host) {
        e->use_graph_ = false;
        e->graph_off_reason_ = "a step runs on the host (" + g.nodes[static_cast<size_t>(st.node)].label() + ")";
        break;
      }
  }
  if (on_device) {
    TAC_ASSIGN_OR_RETURN(e->dev_workspace_, cuda::DeviceBuffer::allocate(static_cast<size_t>(workspace)));
    e->workspace_ = static_cast<std::byte*>(e->dev_workspace_.get());
    TAC_RETURN_IF_ERROR(cuda::synchronize().with_context("preparing the CUDA plan: "));
  } else {
    if (!(e->workspace_ = aligned_block(e->workspace_storage_, workspace)))
      return out_of_memory("cannot allocate the kernels' workspace of " + bytes_to_string(static_cast<uint64_t>(workspace)));
  }
  return e;
}

// Device memory of a CUDA plan: the arena, one block with every constant (uploaded now) and one
// with a slot per graph input. Offsets are 256-byte aligned, as cuBLASLt and cuDNN prefer.
Status Engine::create_device_memory() {
  const builder::Plan& p = *plan_;
  const ir::Graph& g = p.model.graph;
  auto align = [](int64_t b) { return (b + 255) & ~int64_t{255}; };
  TAC_ASSIGN_OR_RETURN(dev_arena_, cuda::DeviceBuffer::allocate(static_cast<size_t>(p.arena_bytes)));
  arena_ = static_cast<std::byte*>(dev_arena_.get());
  dev_value_ptr_.assign(g.values.size(), nullptr);
  int64_t const_bytes = 0, input_bytes = 0;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const builder::PlanValue& pv = p.values[v];
    if (pv.kind == builder::PlanValue::Kind::constant) const_bytes += align(pv.bytes);
    else if (pv.kind == builder::PlanValue::Kind::input) input_bytes += align(pv.bytes);
  }
  TAC_ASSIGN_OR_RETURN(dev_constants_, cuda::DeviceBuffer::allocate(static_cast<size_t>(const_bytes)));
  TAC_ASSIGN_OR_RETURN(dev_inputs_, cuda::DeviceBuffer::allocate(static_cast<size_t>(input_bytes)));
  int64_t co = 0, io = 0;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const builder::PlanValue& pv = p.values[v];
    if (pv.kind == builder::PlanValue::Kind::constant) {
      std::byte* d = static_cast<std::byte*>(dev_constants_.get()) + co;
      TAC_RETURN_IF_ERROR(cuda::copy_to_device(d, g.values[v].initializer->raw(), static_cast<size_t>(pv.bytes)));
      dev_value_ptr_[v] = pv.bytes ? d : nullptr;
      co += align(pv.bytes);
    } else if (pv.kind == builder::PlanValue::Kind::input) {
      dev_value_ptr_[v] = pv.bytes ? static_cast<std::byte*>(dev_inputs_.get()) + io : nullptr;
      io += align(pv.bytes);
    }
  }
  dev_input_ptr_.clear();
  for (int v : g.inputs) dev_input_ptr_.push_back(const_cast<void*>(dev_value_ptr_[static_cast<size_t>(v)]));
  return Status::ok();
}

std::vector<std::pair<DType, Shape>> Engine::input_specs() const {
  std::vector<std::pair<DType, Shape>> s;
  for (int v : plan_->model.graph.inputs) s.emplace_back(plan_->values[static_cast<size_t>(v)].dtype, plan_->values[static_cast<size_t>(v)].shape);
  return s;
}

bool Engine::has_dynamic_inputs() const {
  for (int v : plan_->model.graph.inputs)
    if (plan_->values[static_cast<size_t>(v)].is_dynamic()) return true;
  return false;
}

namespace {
std::vector<Datum> to_values(const std::vector<Tensor>& tensors) { return {tensors.begin(), tensors.end()}; }
Result<std::vector<Tensor>> to_tensors(std::vector<Datum> values, const ir::Graph& g) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].kind != Datum::Kind::tensor)
      return invalid_argument("output '" + g.values[static_cast<size_t>(g.outputs[i])].name + "' is " +
                              (values[i].kind == Datum::Kind::sequence ? "a sequence" : "an empty optional") +
                              ", not a tensor (use Engine::run_values)");
    out.push_back(std::move(values[i].tensor));
  }
  return out;
}
}  // namespace

Result<std::vector<Tensor>> Engine::run(const std::vector<Tensor>& inputs) {
  TAC_ASSIGN_OR_RETURN(std::vector<Datum> outs, execute(to_values(inputs), nullptr));
  return to_tensors(std::move(outs), plan_->model.graph);
}

Result<std::vector<Datum>> Engine::run_values(const std::vector<Datum>& inputs) { return execute(inputs, nullptr); }

Result<std::vector<Tensor>> Engine::run_profiled(const std::vector<Tensor>& inputs, std::vector<double>& step_ns) {
  step_ns.assign(kernels_.size(), 0.0);
  TAC_ASSIGN_OR_RETURN(std::vector<Datum> outs, execute(to_values(inputs), &step_ns));
  return to_tensors(std::move(outs), plan_->model.graph);
}

// A dynamic step: its inputs as run-time values (static ones wrap their buffers), its outputs
// from Kernel::run_dynamic. Dynamic outputs are kept in `dynamic_values` (copied out when they
// alias the arena, whose bytes later steps reuse); static ones must have their planned type and
// shape and are copied into their arena buffers.
Status Engine::run_dynamic_step(size_t s, const std::vector<Datum>& inputs, std::vector<Datum>& dynamic_values) {
  const builder::Plan& p = *plan_;
  const ir::Graph& g = p.model.graph;
  const builder::PlanStep& st = p.steps[s];
  const Views& v = views_[s];
  const bool on_device = p.backend == kernels::Backend::cuda;
  std::vector<Datum> wrapped(st.inputs.size());
  std::vector<const Datum*> in(st.inputs.size(), nullptr);
  for (size_t i = 0; i < st.inputs.size(); ++i) {
    const int id = st.inputs[i];
    if (id == ir::kNoValue) continue;
    const builder::PlanValue& pv = p.values[static_cast<size_t>(id)];
    if (pv.is_dynamic()) {
      in[i] = &dynamic_values[static_cast<size_t>(id)];
    } else if (pv.kind == builder::PlanValue::Kind::constant) {
      in[i] = &wrapped[i];
      wrapped[i] = *g.values[static_cast<size_t>(id)].initializer;  // shares the plan's storage, which outlives the run
    } else if (pv.kind == builder::PlanValue::Kind::arena) {
      in[i] = &wrapped[i];
      if (on_device) {  // a host copy of the device buffer
        TAC_ASSIGN_OR_RETURN(Tensor t, Tensor::create(pv.dtype, pv.shape));
        TAC_RETURN_IF_ERROR(cuda::copy_to_host(t.raw(), v.in[i].data, t.bytes()));
        wrapped[i] = std::move(t);
      } else {
        wrapped[i] = Tensor::wrap(v.in[i].data, pv.dtype, pv.shape);
      }
    }
  }
  for (const auto& [slot, pos] : v.from_inputs) in[slot] = &inputs[pos];
  if (on_device) TAC_RETURN_IF_ERROR(cuda::synchronize().with_context("copying a dynamic step's inputs to the host: "));
  std::vector<Datum> outs;
  TAC_RETURN_IF_ERROR(kernels_[s]->run_dynamic(in, outs));
  const std::byte* arena_end = arena_ + p.arena_bytes;
  auto own = [&](Tensor& t) {
    const auto* d = static_cast<const std::byte*>(t.raw());
    if (d && d >= arena_ && d < arena_end) t = t.clone();
  };
  for (size_t o = 0; o < st.outputs.size() && o < outs.size(); ++o) {
    const int id = st.outputs[o];
    if (id == ir::kNoValue) continue;
    const builder::PlanValue& pv = p.values[static_cast<size_t>(id)];
    Datum& d = outs[o];
    if (pv.is_dynamic()) {
      own(d.tensor);
      for (Tensor& t : d.sequence) own(t);
      dynamic_values[static_cast<size_t>(id)] = std::move(d);
      continue;
    }
    if (!d.is_tensor() || d.tensor.dtype() != pv.dtype || d.tensor.shape() != pv.shape)
      return invalid_model("output '" + g.values[static_cast<size_t>(id)].name + "' is " +
                           (d.is_tensor() ? dtype_name(d.tensor.dtype()) + shape_to_string(d.tensor.shape())
                                          : std::string("not a tensor")) +
                           " in this run, and the plan was built for " + dtype_name(pv.dtype) + shape_to_string(pv.shape));
    if (on_device && d.tensor.bytes()) TAC_RETURN_IF_ERROR(cuda::copy_to_device(v.out[o].data, d.tensor.raw(), d.tensor.bytes()));
    else if (d.tensor.bytes() && d.tensor.raw() != v.out[o].data) std::memmove(v.out[o].data, d.tensor.raw(), d.tensor.bytes());
  }
  // The host tensors copied from go out of scope: let the copies finish reading them.
  if (on_device) TAC_RETURN_IF_ERROR(cuda::synchronize().with_context("copying a dynamic step's outputs to the device: "));
  return Status::ok();
}

std::string Engine::graph_state() const {
  if (plan_->backend != kernels::Backend::cuda) return "";
  if (!plan_->cuda_graphs) return "off (route: cuda.graphs=off)";
  if (!use_graph_) return "off: " + graph_off_reason_;
  return graph_.empty() ? "on (captured at the first launch)" : "on (replaying a CUDA graph)";
}

Status Engine::upload_inputs(const std::vector<Tensor>& inputs) {
  if (plan_->backend != kernels::Backend::cuda) return invalid_argument("upload_inputs: not a CUDA plan");
  if (dynamic_) return invalid_argument("upload_inputs: the plan has dynamic steps or inputs (run it with run())");
  TAC_RETURN_IF_ERROR(check_inputs(to_values(inputs)));
  for (size_t i = 0; i < inputs.size(); ++i)
    TAC_RETURN_IF_ERROR(cuda::copy_to_device(dev_input_ptr_[i], inputs[i].raw(), inputs[i].bytes()));
  return Status::ok();
}

Status Engine::launch() {
  if (plan_->backend != kernels::Backend::cuda) return invalid_argument("launch: not a CUDA plan");
  if (dynamic_) return invalid_argument("launch: the plan has dynamic steps or inputs (run it with run())");
  if (use_graph_ && graph_.empty()) {
    TAC_RETURN_IF_ERROR(cuda::Graph::begin_capture());
    Status st = run_steps(nullptr, nullptr, nullptr);
    auto captured = cuda::Graph::end_capture();
    if (st.is_ok() && captured.is_ok()) {
      graph_ = std::move(captured).value();
    } else {  // run eagerly from now on, and say why
      use_graph_ = false;
      graph_off_reason_ = "capture failed: " + (st.is_ok() ? captured.status() : st).message();
    }
  }
  if (!graph_.empty()) return graph_.launch();
  return run_steps(nullptr, nullptr, nullptr);
}

// The inputs against the plan: count, kind, and the dtype and shape of every static input.
Status Engine::check_inputs(const std::vector<Datum>& inputs) const {
  const builder::Plan& p = *plan_;
  const ir::Graph& g = p.model.graph;
  if (inputs.size() != g.inputs.size())
    return invalid_argument("the engine takes " + std::to_string(g.inputs.size()) + " inputs, " +
                            std::to_string(inputs.size()) + " given");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const builder::PlanValue& pv = p.values[static_cast<size_t>(g.inputs[i])];
    const ir::Value& val = g.values[static_cast<size_t>(g.inputs[i])];
    if (val.type.kind == ir::ValueKind::sequence && inputs[i].kind != Datum::Kind::sequence)
      return invalid_argument("input '" + val.name + "': expected a sequence (" + val.type.to_string() + ")");
    if (pv.is_dynamic()) continue;
    const Tensor& t = inputs[i].tensor;
    if (inputs[i].kind != Datum::Kind::tensor || t.dtype() != pv.dtype || t.shape() != pv.shape)
      return invalid_argument("input '" + val.name + "': the plan was built for " +
                              dtype_name(pv.dtype) + shape_to_string(pv.shape) + ", got " +
                              (inputs[i].kind == Datum::Kind::tensor ? dtype_name(t.dtype()) + shape_to_string(t.shape())
                                                                     : std::string("a sequence or optional")) +
                              (p.dims.empty() ? "" : " (built for " + builder::dims_to_string(p.dims) + "; rebuild with --dim for other sizes)"));
  }
  // Dynamic inputs: the kind, dtype and known dims the graph declares.
  if (dynamic_) TAC_RETURN_IF_ERROR(ref::check_inputs(g, inputs));
  return Status::ok();
}

// The steps, in order. `inputs` (CPU plans) are read in place; CUDA plans read the device copies
// upload_inputs made (nullptr). `dynamic_values`: this run's dynamic values by value id (CPU).
Status Engine::run_steps(const std::vector<Datum>* inputs, std::vector<double>* step_ns,
                         std::vector<Datum>* dynamic_values) {
  const builder::Plan& p = *plan_;
  const ir::Graph& g = p.model.graph;
  const bool on_device = p.backend == kernels::Backend::cuda;
  // On the device, per-step times come from events recorded between the steps (no
  // synchronization in between, so the GPU runs the steps back to back as in a real run).
  std::optional<cuda::EventSeries> events;
  if (on_device && step_ns) {
    TAC_ASSIGN_OR_RETURN(cuda::EventSeries es, cuda::EventSeries::create(kernels_.size()));
    events.emplace(std::move(es));
  }
  for (size_t s = 0; s < kernels_.size(); ++s) {
    Views& v = views_[s];
    if (inputs && !on_device)
      for (const auto& [slot, pos] : v.from_inputs) v.in[slot].data = const_cast<void*>((*inputs)[pos].tensor.raw());
    if (events) TAC_RETURN_IF_ERROR(events->record(s));
    auto t0 = step_ns ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    Status st = skip_[s]          ? Status::ok()
                : p.steps[s].dynamic ? (inputs && dynamic_values ? run_dynamic_step(s, *inputs, *dynamic_values)
                                                                 : internal_error("a dynamic step in a device plan"))
                                     : kernels_[s]->run(v.in, v.out, workspace_);
    if (dynamic_values)
      for (int id : release_after_[s]) (*dynamic_values)[static_cast<size_t>(id)] = Datum();
    if (step_ns && !events) (*step_ns)[s] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    if (!st) {
      const ir::Node& n = g.nodes[static_cast<size_t>(p.steps[s].node)];
      return st.with_context(n.label() + " (tactic " + p.steps[s].tactic->name + "): ");
    }
  }
  if (events) {
    TAC_RETURN_IF_ERROR(events->record(kernels_.size()));
    for (size_t s = 0; s < kernels_.size(); ++s) {
      TAC_ASSIGN_OR_RETURN(double ms, events->elapsed_ms(s));
      (*step_ns)[s] = ms * 1e6;
    }
  }
  return Status::ok();
}

Result<std::vector<Datum>> Engine::execute(const std::vector<Datum>& inputs, std::vector<double>* step_ns) {
  const builder::Plan& p = *plan_;
  const ir::Graph& g = p.model.graph;
  Status fits = check_inputs(inputs);
  if (!fits.is_ok() && !p.ranges.empty()) {  // other sizes inside the plan's ranges
    TAC_ASSIGN_OR_RETURN(Engine * other, specialized(inputs));
    if (other != this) return other->execute(inputs, step_ns);
  }
  TAC_RETURN_IF_ERROR(fits);
  const bool dynamic = dynamic_;
  // Dynamic values of this run, by value id (empty for a fixed-shape plan).
  std::vector<Datum> dynamic_values(dynamic ? g.values.size() : 0);
  for (size_t i = 0; i < inputs.size() && dynamic; ++i)
    if (p.values[static_cast<size_t>(g.inputs[i])].is_dynamic()) dynamic_values[static_cast<size_t>(g.inputs[i])] = inputs[i];
  const bool on_device = p.backend == kernels::Backend::cuda;
  if (on_device) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!p.values[static_cast<size_t>(g.inputs[i])].is_dynamic())  // dynamic inputs stay on the host
        TAC_RETURN_IF_ERROR(cuda::copy_to_device(dev_input_ptr_[i], inputs[i].tensor.raw(), inputs[i].tensor.bytes()));
    // Profiling records events between the steps: never inside a graph. Dynamic plans run eagerly,
    // their dynamic steps on the host.
    if (dynamic) TAC_RETURN_IF_ERROR(run_steps(&inputs, step_ns, &dynamic_values));
    else TAC_RETURN_IF_ERROR(step_ns ? run_steps(nullptr, step_ns, nullptr) : launch());
  } else {
    TAC_RETURN_IF_ERROR(run_steps(&inputs, step_ns, &dynamic_values));
  }
  std::vector<Datum> outs;
  for (int v : g.outputs) {
    const builder::PlanValue& pv = p.values[static_cast<size_t>(v)];
    if (pv.is_dynamic()) {
      if (dynamic_values[static_cast<size_t>(v)].kind == Datum::Kind::tensor && dynamic_values[static_cast<size_t>(v)].tensor.empty())
        return internal_error("output '" + g.values[static_cast<size_t>(v)].name + "' was not computed");
      outs.push_back(dynamic_values[static_cast<size_t>(v)]);
      continue;
    }
    TAC_ASSIGN_OR_RETURN(Tensor t, Tensor::create(pv.dtype, pv.shape));
    const void* src = nullptr;
    if (pv.kind == builder::PlanValue::Kind::arena) src = arena_ + pv.offset;
    else if (pv.kind == builder::PlanValue::Kind::constant) src = g.values[static_cast<size_t>(v)].initializer->raw();
    else
      for (size_t i = 0; i < g.inputs.size(); ++i)
        if (g.inputs[i] == v) src = inputs[i].tensor.raw();
    if (on_device && pv.kind != builder::PlanValue::Kind::arena) src = dev_value_ptr_[static_cast<size_t>(v)];
    if (!src && t.bytes()) return internal_error("output '" + g.values[static_cast<size_t>(v)].name + "' has no storage");
    if (on_device) TAC_RETURN_IF_ERROR(cuda::copy_to_host(t.raw(), src, t.bytes()));
    else if (t.bytes()) std::memcpy(t.raw(), src, t.bytes());
    outs.push_back(std::move(t));
  }
  if (on_device) TAC_RETURN_IF_ERROR(cuda::synchronize().with_context("running the CUDA plan: "));
  return outs;
}

// The engine for the sizes of `inputs` under the plan's shape ranges: this one at the opt sizes,
// else one built from the plan's source model with its route (cached; the least recently used of
// kMaxSpecialized is dropped). Sizes outside a range are refused naming the input, dim and range.
Result<Engine*> Engine::specialized(const std::vector<Datum>& inputs) {
  const builder::Plan& p = *plan_;
  TAC_RETURN_IF_ERROR(load_source());
  const ir::Graph& g = source_->graph;
  if (inputs.size() != g.inputs.size())
    return invalid_argument("the engine takes " + std::to_string(g.inputs.size()) + " inputs, " +
                            std::to_string(inputs.size()) + " given");
  builder::BuildOptions opts;
  opts.backend = p.backend;
  TAC_RETURN_IF_ERROR(builder::bind_dims(g, inputs, opts));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& val = g.values[static_cast<size_t>(g.inputs[i])];
    if (!inputs[i].is_tensor() || !val.type.has_shape || inputs[i].tensor.shape().size() != val.type.dims.size()) continue;
    for (size_t k = 0; k < val.type.dims.size(); ++k) {
      const ir::Dim& d = val.type.dims[k];
      if (d.known() || d.symbol.empty()) continue;
      const int64_t size = inputs[i].tensor.shape()[k];
      auto range = p.ranges.find(d.symbol);
      if (range == p.ranges.end()) {
        if (p.dims.count(d.symbol) && p.dims.at(d.symbol) != size)
          return invalid_argument("input '" + val.name + "' dim " + std::to_string(k) + " (" + d.symbol + "): " +
                                  std::to_string(size) + ", the plan has no range for it and was built for " +
                                  d.symbol + "=" + std::to_string(p.dims.at(d.symbol)));
        continue;
      }
      const builder::DimRange& r = range->second;
      if (size < r.min || size > r.max)
        return invalid_argument("input '" + val.name + "' dim " + std::to_string(k) + " (" + d.symbol + "): " +
                                std::to_string(size) + " is outside the plan's range " + std::to_string(r.min) + ".." +
                                std::to_string(r.max) + " (built with --shapes " +
                                builder::shape_ranges_to_string(p.ranges) + ")");
    }
  }
  return engine_for_dims(opts.dims);
}

// Parses the plan's source model, once (plans with shape ranges).
Status Engine::load_source() {
  if (source_) return Status::ok();
  TAC_ASSIGN_OR_RETURN(ir::Model m, io::load_model_from_bytes(plan_->source_model, "the plan's source model", ""));
  source_ = std::make_unique<ir::Model>(std::move(m));
  return Status::ok();
}

Status Engine::prepare(const std::map<std::string, int64_t>& dims) {
  const builder::Plan& p = *plan_;
  if (p.ranges.empty()) return invalid_argument("prepare: the plan has no shape ranges (build it with --shapes)");
  for (const auto& [name, size] : dims) {
    auto r = p.ranges.find(name);
    if (r == p.ranges.end())
      return invalid_argument("prepare: '" + name + "' is not one of the plan's ranges (" +
                              builder::shape_ranges_to_string(p.ranges) + ")");
    if (size < r->second.min || size > r->second.max)
      return invalid_argument("prepare: " + name + "=" + std::to_string(size) + " is outside the plan's range " +
                              std::to_string(r->second.min) + ".." + std::to_string(r->second.max));
  }
  TAC_RETURN_IF_ERROR(load_source());
  return engine_for_dims(dims).status();
}

Result<Engine*> Engine::engine_for_dims(std::map<std::string, int64_t> dims) {
  const builder::Plan& p = *plan_;
  for (const auto& [name, size] : p.dims)  // symbols not given keep the plan's sizes
    dims.emplace(name, size);
  if (dims == p.dims) return this;
  const uint64_t now = ++use_clock_;
  if (auto it = specialized_.find(dims); it != specialized_.end()) {
    it->second.last_use = now;
    return it->second.engine.get();
  }
  builder::BuildOptions opts;
  opts.backend = p.backend;
  opts.dims = dims;
  TAC_ASSIGN_OR_RETURN(builder::Route route, builder::Route::parse(p.route));
  auto plan = builder::build_plan(*source_, route, opts);
  if (!plan) return plan.status().with_context("specializing the plan for " + builder::dims_to_string(opts.dims) + ": ");
  TAC_ASSIGN_OR_RETURN(std::unique_ptr<Engine> e, Engine::create(std::move(plan).value()));
  if (specialized_.size() >= kMaxSpecialized) {
    auto oldest = specialized_.begin();
    for (auto it = specialized_.begin(); it != specialized_.end(); ++it)
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    specialized_.erase(oldest);
  }
  Engine* raw = e.get();
  specialized_[dims] = {std::move(e), now};
  return raw;
}

}  // namespace tac::runtime
