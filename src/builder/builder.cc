#include "builder/builder.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "backends/cuda/device.h"
#include "builder/layout.h"
#include "builder/memory_planner.h"
#include "builder/passes/fusion_common.h"
#include "builder/passes/pass.h"
#include "builder/precision.h"
#include "io/onnx_export.h"
#include "ir/shape_inference.h"
#include "kernels/cost_model.h"
#include "kernels/tactic_check.h"
#include "reference/interpreter.h"
#include "reference/kernel.h"

namespace tac::builder {

std::vector<int> step_inputs(const ir::Graph& g, const ir::Node& n) {
  std::vector<int> inputs = n.inputs;
  std::set<std::string> seen;  // then the outer-scope values its subgraphs read, each once
  for (const ir::Graph* sg : n.subgraphs())
    for (const ir::Value& v : sg->values)
      if (v.is_outer && seen.insert(v.name).second)
        if (int id = g.find_value(v.name); id != ir::kNoValue) inputs.push_back(id);
  return inputs;
}

int hardware_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(std::min(n, 64u));
}

namespace {

constexpr int kMaxPrune = 8;

bool fully_known(const ir::ValueType& t) {
  if (t.kind != ir::ValueKind::tensor || !t.has_shape || t.dtype == DType::undefined) return false;
  for (const ir::Dim& d : t.dims)
    if (!d.known()) return false;
  return true;
}
Shape shape_of(const ir::ValueType& t) {
  Shape s;
  for (const ir::Dim& d : t.dims) s.push_back(d.value);
  return s;
}

// ---- the global knobs ----

void add_global_knobs(KnobSpace& space, kernels::Backend backend, const std::string& default_precision) {
  std::vector<std::string> threads;
  for (int i = 1; i <= hardware_threads(); ++i) threads.push_back(std::to_string(i));
  space.add(searched(Searched::never, {knob::kThreads, threads, std::to_string(hardware_threads()),
                                        "intra-op threads (OpenMP)", KnobScope::global}));
  space.add(searched(Searched::when_named,
                     {knob::kSelection,
                      {"heuristic", "isolated"},
                      "heuristic",
                      "how tactics are chosen where the route does not pin one: the cost ranking's top-1 (heuristic), "
                      "or the fastest when each applicable tactic is timed alone on the layer (isolated: the classic "
                      "profiling builder; once per kind of layer, the reference fallback untimed)",
                      KnobScope::global}));
  std::vector<std::string> prune;
  for (int i = 0; i <= kMaxPrune; ++i) prune.push_back(std::to_string(i));
  space.add(searched(Searched::when_named,
                     {knob::kPrune, prune, "0",
                      "keep only the top-K ranked tactics per node as candidates (0: keep all): the classic pruning "
                      "heuristic",
                      KnobScope::global}));
  space.add({knob::kPlanner, {"greedy_by_size", "greedy_by_order", "no_reuse"}, "greedy_by_size",
             "how intermediate buffers are placed in the arena", KnobScope::global});
  space.add({knob::kInplace, {"on", "off"}, "on",
             "elementwise steps, and oneDNN convolutions over their residual, write their output over an "
             "input that dies there",
             KnobScope::global});
  space.add({knob::kConcatAlias, {"on", "off"}, "on",
             "Concat inputs live in their slices of the output (when the dims before the axis are 1): their producers "
             "write there and the Concat copies nothing", KnobScope::global});
  space.add({knob::kViewAlias, {"on", "off"}, "on",
             "Reshape / Flatten / Squeeze / Unsqueeze / Identity outputs, Transposes that move only size-1 dims and "
             "Gathers of one constant index over a contiguous block share their input's buffer (plain layout) and the "
             "step runs nothing; off: each copies",
             KnobScope::global});
  space.add(searched(
      Searched::with_user_tolerance,
      {knob::kPrecisionDefault, precision_values(backend), default_precision,
       "compute precision of the layers that have lower-precision tactics (Conv, MatMul, Gemm; see "
       "precision.<node>): bf16 casts around them, int8 quantizes with calibrated scales; on CUDA fp16 "
       "and bf16 (casts, fp32 accumulation; elementwise ops between such layers follow), tf32 (a "
       "math mode) and, from Ada/Hopper, fp8 (MatMuls with constant weights: E4M3 with calibrated "
       "per-tensor scales, fp16 elsewhere); by default the type the model stores its weights in where the backend computes in it",
       KnobScope::global}));
  if (const auto pv = precision_values(backend);
      std::find(pv.begin(), pv.end(), "int8") != pv.end() || std::find(pv.begin(), pv.end(), "fp8") != pv.end())
    space.add(searched(Searched::with_user_tolerance,
                       {knob::kCalibration, calibration_methods(), "max",
                        "the activation range int8 and fp8 scales cover: the largest |x| over the calibration inputs (max), or "
                        "a percentile of |x| (clips rare outliers for finer steps); the tolerance decides",
                        KnobScope::global}));
  if (backend == kernels::Backend::cuda)
    space.add({knob::kCudaGraphs, {"on", "off"}, "on",
               "capture the engine's steps into a CUDA graph once and replay it (one launch per run instead of one "
               "per kernel); engines with host_reference steps stay eager",
               KnobScope::global});
  if (backend == kernels::Backend::cuda)
    space.add({knob::kCudaWorkspaceMb, {"0", "4", "16", "64", "256", "1024"}, "1024",
               "device scratch a tactic may use (MiB); tactics needing more are skipped and the build report lists "
               "them (cuBLASLt asks for up to 64, cuDNN's FFT algorithms for hundreds)",
               KnobScope::global});
  space.add({knob::kLayoutDefault, layout_values(backend), default_layout(backend),
             std::string("activation layout of the convolutions (see layout.<node>) and the pooling, Concat and "
                         "elementwise ops between them") +
                 (backend == kernels::Backend::cpu ? std::string("; blocked = ") + ir::layout_name(blocked_layout()) + " here"
                                                   : std::string()) +
                 "; Reformat steps convert where a consumer needs another",
             KnobScope::global});
  // One default per pass on both backends. (fuse_attention was off on CUDA while its only CUDA
  // kernel ran on CUDA cores and lost to the unfused cuBLASLt route, until the tensor-core kernels,
  // now cuda_flash_w*; fuse_elementwise until FusedElementwise had a CUDA tactic,
  // kernels/chain/cuda_chain.cc.)
  for (const Pass& p : pass_pipeline())
    space.add({std::string(knob::kPass) + p.name, {"on", "off"}, p.default_on ? "on" : "off", p.help, KnobScope::global});
}

// ---- shapes ----

// Inputs whose *values* decide an op's output shape: a probe run on random data would lie
// unless they are constants.
bool shape_needs_constant(const ir::Node& n, size_t input) {
  using ir::OpKind;
  switch (n.op) {
    case OpKind::Reshape: case OpKind::Expand: case OpKind::Tile: case OpKind::OneHot: case OpKind::Upsample:
    case OpKind::Squeeze: case OpKind::Unsqueeze: case OpKind::Split: case OpKind::CenterCropPad: case OpKind::TopK:
    case OpKind::ReduceMax: case OpKind::ReduceMin: case OpKind::ReduceMean: case OpKind::ReduceSum:
    case OpKind::ReduceProd: case OpKind::ReduceL1: case OpKind::ReduceL2: case OpKind::ReduceLogSum:
    case OpKind::ReduceLogSumExp: case OpKind::ReduceSumSquare:
      return input >= 1;
    case OpKind::Slice: case OpKind::Pad: case OpKind::Resize: case OpKind::DFT: case OpKind::STFT:
    case OpKind::Col2Im: case OpKind::AffineGrid:
      return input >= 1;
    case OpKind::MaxUnpool:
      return input >= 2;
    case OpKind::ConstantOfShape: case OpKind::Range: case OpKind::BlackmanWindow: case OpKind::HammingWindow:
    case OpKind::HannWindow: case OpKind::MelWeightMatrix:
      return true;
    default:
      return false;
  }
}
bool data_dependent(ir::OpKind op) {
  using ir::OpKind;
  return op == OpKind::NonZero || op == OpKind::Unique || op == OpKind::Compress || op == OpKind::NonMaxSuppression ||
         op == OpKind::Loop || op == OpKind::Scan || op == OpKind::If || op == OpKind::SequenceAt ||
         op == OpKind::SequenceConstruct || op == OpKind::SequenceEmpty || op == OpKind::SequenceInsert ||
         op == OpKind::SequenceErase || op == OpKind::SplitToSequence || op == OpKind::ConcatFromSequence ||
         op == OpKind::SequenceMap || op == OpKind::Optional || op == OpKind::OptionalGetElement ||
         op == OpKind::RandomNormal || op == OpKind::RandomUniform || op == OpKind::RandomNormalLike ||
         op == OpKind::RandomUniformLike || op == OpKind::Bernoulli || op == OpKind::Multinomial;
}

// A probe computes its node on placeholder data of the full shapes: bounded, so that a few bytes of
// model cannot make the builder (or `knobs`) compute gigabytes to learn a shape.
constexpr int64_t kMaxProbeBytes = int64_t{1} << 30;

// Runs `n`'s reference kernel once on random inputs of the known shapes (constants: their real
// data) and records its output types. not_applicable when the output shape could depend on data
// (or the probe would be over kMaxProbeBytes): the output stays unknown, a dynamic value of the plan.

Status probe_shapes(ir::Graph& g, const ir::Node& n) {
  if (data_dependent(n.op) || !ref::reference_supports(n))
    return Status(ErrorKind::not_applicable, n.label() + ": output shape depends on data or cannot be inferred");
  // Every input known first (cheap): a node that cannot be probed generates no data. Early in a
  // build, before the shape chains fold, thousands of such nodes are asked each round.
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const int v = n.inputs[i];
    if (v == ir::kNoValue) continue;
    const ir::Value& val = g.values[static_cast<size_t>(v)];
    if (!val.initializer && (!fully_known(val.type) || shape_needs_constant(n, i)))
      return Status(ErrorKind::not_applicable, n.label() + ": the shape of its output depends on input '" + val.name +
                                                   "', which is computed at run time");
  }
  std::vector<Datum> data(n.inputs.size());
  std::vector<const Datum*> ptrs;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    int v = n.inputs[i];
    if (v == ir::kNoValue) {
      ptrs.push_back(nullptr);
      continue;
    }
    const ir::Value& val = g.values[static_cast<size_t>(v)];
    if (val.initializer) {
      data[i] = Datum(*val.initializer);
    } else {
      // Only shapes matter here. Integer inputs are zeros: a valid index for every Gather-like op
      // (random integers would be out of range and make the probe fail for no reason).
      const int64_t bytes = ir::physical_bytes(shape_of(val.type), ir::Layout::nchw, val.type.dtype);
      if (bytes < 0 || bytes > kMaxProbeBytes)
        return Status(ErrorKind::not_applicable, n.label() + ": input '" + val.name + "' is too large to probe");
      auto zeros = Tensor::create(val.type.dtype, shape_of(val.type));
      if (!zeros) return zeros.status();
      data[i] = dtype_is_float(val.type.dtype) ? Datum(kernels::random_tensor(val.type.dtype, shape_of(val.type), 1 + i))
                                               : Datum(*zeros);
    }
    ptrs.push_back(&data[i]);
  }
  ir::Graph empty;
  ref::Frame frame(empty, nullptr);
  ref::KernelContext kc(n, ptrs, &frame);
  kc.max_output_bytes = kMaxProbeBytes;  // a larger output stays dynamic rather than be computed here
  try {
    ref::reference_kernel(n.op)(kc);
  } catch (const ref::KernelError& e) {
    // Placeholder data can be invalid for the op where real data is fine: cannot probe here.
    return Status(ErrorKind::not_applicable, n.label() + ": output shape could not be inferred (" + e.status.message() + ")");
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i] == ir::kNoValue) continue;
    const Datum& d = kc.outputs()[i];
    if (d.kind != Datum::Kind::tensor) return Status(ErrorKind::not_applicable, n.label() + ": non-tensor output");
    ir::ValueType& t = g.values[static_cast<size_t>(n.outputs[i])].type;
    t.kind = ir::ValueKind::tensor;
    t.dtype = d.tensor.dtype();
    t.has_shape = true;
    t.dims.clear();
    for (int64_t s : d.tensor.shape()) {
      ir::Dim dim;
      dim.value = s;
      t.dims.push_back(dim);
    }
  }
  return Status::ok();
}

// Fills in output types that shape inference has no rule for, by probing (see probe_shapes).
// Nodes that cannot be probed (yet: a later constant fold may make them probe-able) keep unknown
// outputs, which the plan makes dynamic values.
Status complete_shapes(ir::Model& m) {
  ir::Graph& g = m.graph;
  TAC_RETURN_IF_ERROR(ir::infer_shapes(m));
  for (const ir::Node& n : g.nodes) {
    bool missing = false;
    for (int v : n.outputs) missing |= v != ir::kNoValue && !fully_known(g.values[static_cast<size_t>(v)].type);
    if (!missing) continue;
    Status st = probe_shapes(g, n);
    if (st.kind() == ErrorKind::not_applicable) continue;
    TAC_RETURN_IF_ERROR(st);
    // Shape inference again at once: the rules downstream of the probed value now apply, so the
    // nodes after it are not probed too (each probe runs the reference kernel on random data of
    // the full shapes). Rules never contradict a probe (both are exact): a sweep only fills gaps.
    TAC_RETURN_IF_ERROR(ir::infer_shapes(m));
  }
  return Status::ok();
}

// Copies the model, binds input dims, runs the passes the route enables, and completes shapes.
// `calibrate`: int8 nodes get scales from calibration data (else placeholders: the knob space
// needs only the graph's structure). `report` (optional) receives the precision rewrite's counts.
Result<ir::Model> prepare_graph(const ir::Model& src, const RouteView& route, const BuildOptions& opts,
                                std::vector<std::string>* log, bool calibrate = false, BuildReport* report = nullptr) {
  ir::Model m = src;
  ir::Graph& g = m.graph;
  name_nodes(g);
  std::vector<DType> declared_outputs;
  for (int v : g.outputs) declared_outputs.push_back(g.values[static_cast<size_t>(v)].type.dtype);
  // The plan trusts only the types it derives (shape inference rules and probes, both exact for
  // the bound input shapes), not those the file declares for computed values: a declared output
  // shape of a data-dependent node can be wrong (the reference interpreter ignores it too), and
  // where nothing derives a shape the value is dynamic.
  for (ir::Value& v : g.values)
    if (!v.is_input && !v.initializer && !v.is_outer) v.type = ir::ValueType{};
  // Symbolic dims take the values bound in opts.dims, else 1: the plan is built for those sizes.
  // Inputs with no declared shape, sequences and optionals stay dynamic values.
  for (int v : g.inputs) {
    ir::ValueType& t = g.values[static_cast<size_t>(v)].type;
    if (t.kind != ir::ValueKind::tensor || !t.has_shape) continue;
    for (ir::Dim& d : t.dims) {
      if (d.known()) continue;
      auto it = opts.dims.find(d.symbol);
      d.value = it != opts.dims.end() ? it->second : 1;
    }
  }
  TAC_RETURN_IF_ERROR(complete_shapes(m));
  PassContext ctx{m, {}, 1, declared_outputs};
  for (const Pass& p : pass_pipeline()) {
    if (!route.on(std::string(knob::kPass) + p.name)) continue;
    // Re-run a pass while it changes the graph: folding a Shape makes the next Reshape's shape
    // known, which makes more Shapes foldable after the next shape inference.
    // Each round can unlock one more layer of a deep transformer's shape chains, so the bound is
    // the graph size; rounds stop as soon as nothing changes.
    for (size_t round = 0; round <= src.graph.nodes.size(); ++round) {
      size_t before = g.nodes.size();
      Status st = p.run(g, ctx);
      if (!st) return st.with_context(std::string("pass ") + p.name + ": ");
      TAC_RETURN_IF_ERROR(complete_shapes(m));
      if (g.nodes.size() == before) break;
    }
  }
  TAC_RETURN_IF_ERROR(complete_shapes(m));
  // Precision after the fusions: a fused node (bias, residual, activation) is what computes in
  // lower precision, and the casts go around it, not inside it.
  const std::map<std::string, std::string> choice = chosen_precisions(g, route, report ? &report->inactive : nullptr);
  std::vector<std::string> quantized_nodes;  // int8 and fp8 scale their activations by calibrated ranges
  for (const auto& [name, p] : choice)
    if (p == "int8" || p == "fp8") quantized_nodes.push_back(name);
  std::optional<Calibration> calib;
  if (calibrate && !quantized_nodes.empty()) {
    // Calibrate every candidate at once and keep the ranges for this process: they depend only
    // on the model, its bound dims and the passes (a tuner or a test builds many int8 routes).
    // With opts.calibration_cache the ranges also persist on disk, for the other processes.
    static std::mutex mu;
    static std::map<std::string, Calibration> cache;
    const std::string method = route.get(knob::kCalibration);
    std::string key = src.hash + "|" + src.path + "|" + opts.calibration_dir + "|" + method;
    for (const auto& [d, v] : opts.dims) key += "|" + d + "=" + std::to_string(v);
    key += "|";
    for (const Pass& p : pass_pipeline()) key += route.on(std::string(knob::kPass) + p.name) ? "1" : "0";
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it == cache.end() && !opts.calibration_cache.empty())
      if (auto c = load_calibration(opts.calibration_cache, key)) it = cache.emplace(key, std::move(*c)).first;
    if (it == cache.end()) {
      std::vector<std::string> all;
      for (const auto& [name, p] : choice) all.push_back(name);
      std::string source;
      TAC_ASSIGN_OR_RETURN(auto sets, calibration_inputs(m, 4, source, opts.calibration_dir));
      TAC_ASSIGN_OR_RETURN(Calibration c, calibrate_ranges(m, all, sets, source, method.empty() ? "max" : method));
      if (!opts.calibration_cache.empty()) TAC_RETURN_IF_ERROR(save_calibration(opts.calibration_cache, key, c));
      it = cache.emplace(key, std::move(c)).first;
    }
    calib = it->second;
  }
  PrecisionReport pr;
  TAC_RETURN_IF_ERROR(apply_precision(m, choice, calib ? &*calib : nullptr, &pr, opts.backend));
  for (std::string& line : pr.log) ctx.log.push_back(std::move(line));
  if (report) {
    report->casts = pr.casts;
    report->quantizes = pr.quantizes;
    report->calibration = calib ? calib->source : "";
  }
  TAC_RETURN_IF_ERROR(complete_shapes(m));
  // Layouts last: they follow the nodes and dtypes the fusions and precision leave (a bf16 or
  // int8 node and its casts stay nchw).
  LayoutReport lr;
  TAC_RETURN_IF_ERROR(apply_layouts(m, route, static_cast<int>(route.get_int(knob::kThreads)), &lr, opts.backend));
  for (std::string& line : lr.log) ctx.log.push_back(std::move(line));
  if (report) {
    report->reformats = lr.reformats;
    report->layouts = std::move(lr.nodes);
  }
  TAC_RETURN_IF_ERROR(complete_shapes(m));
  if (log) *log = std::move(ctx.log);
  return m;
}

// A value the plan holds at run time only: not a constant, and its dtype or some dim is unknown
// at build time (or it is a sequence or optional).
bool dynamic_value(const ir::Value& v) { return !v.initializer && !fully_known(v.type); }

// Dynamic steps run on the host, between buffers allocated at run time: the CUDA backend's
// device plans have neither, so it refuses them, naming the node.

struct Ranked {
  std::vector<std::pair<const kernels::Tactic*, double>> candidates;  // applicable, by cost
  std::vector<std::string> not_applicable;
};

Ranked rank_tactics(const kernels::StepDesc& s, bool planted_faults, kernels::Backend backend = kernels::Backend::cpu) {
  Ranked r;
  const bool plain = s.plain();
  for (const kernels::Tactic* t : kernels::tactics_for(s.node->op, backend, planted_faults)) {
    if (s.dynamic && !t->dynamic_shapes) {
      r.not_applicable.push_back(std::string(t->name) + ": takes shapes fixed at build time only, and this step's are "
                                                        "known at run time");
      continue;
    }
    Status st = plain || t->layouts ? t->applies(s) : kernels::not_applicable("reads and writes nchw only");
    if (st.is_ok()) r.candidates.emplace_back(t, kernels::estimated_cost(*t, s));
    else r.not_applicable.push_back(std::string(t->name) + ": " + st.message());
  }
  // Approximate tactics rank after every exact one, and fallbacks after everything, whatever
  // their cost.
  std::stable_sort(r.candidates.begin(), r.candidates.end(), [](const auto& a, const auto& b) {
    if (a.first->fallback != b.first->fallback) return b.first->fallback;
    return a.first->approximate != b.first->approximate ? b.first->approximate : a.second < b.second;
  });
  return r;
}

// A CUDA tactic alone on the layer: inputs (random floats, zero integers, or the real constants)
// in device buffers of their own (kernels::device_run), CUDA events around blocks of back-to-back
// runs; median per run, in ns.
double time_isolated_device(const kernels::Tactic& t, const kernels::StepDesc& s) {
  auto k = t.prepare(s);
  if (!k) return INFINITY;
  // Integer inputs (indices) are zeros, valid for every Gather-like op: device kernels do not
  // all check their indices, and an out-of-range read would fault the build's CUDA context.
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < s.in_dtypes.size(); ++i) {
    if (s.in_dtypes[i] == DType::undefined) inputs.emplace_back();
    else if (s.constants[i]) inputs.push_back(*s.constants[i]);
    else if (dtype_is_float(s.in_dtypes[i])) inputs.push_back(kernels::random_tensor(s.in_dtypes[i], s.in_shapes[i], 7 + i));
    else if (auto z = Tensor::create(s.in_dtypes[i], s.in_shapes[i])) inputs.push_back(std::move(z).value());
    else return INFINITY;
  }
  auto d = kernels::device_run(**k, s, inputs, 0);
  auto timer = cuda::EventTimer::create();
  if (!d || !timer || !(*k)->run(d->in, d->out, d->workspace.get()).is_ok() || !cuda::synchronize().is_ok())
    return INFINITY;  // warm-up
  constexpr int kRunsPerBlock = 10;
  std::vector<double> ns;
  for (int r = 0; r < 5; ++r) {
    if (!timer->start().is_ok()) return INFINITY;
    for (int i = 0; i < kRunsPerBlock; ++i)
      if (!(*k)->run(d->in, d->out, d->workspace.get()).is_ok()) return INFINITY;
    auto ms = timer->stop_ms();
    if (!ms) return INFINITY;
    ns.push_back(*ms * 1e6 / kRunsPerBlock);
  }
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

// Times one tactic alone on the layer (random inputs, real constants): the isolated profiling a
// classic builder does. Median of a few runs, in ns; +inf when it fails.
double time_isolated_impl(const kernels::Tactic& t, const kernels::StepDesc& s) {
  if (t.backend == kernels::Backend::cuda) return time_isolated_device(t, s);
  auto k = t.prepare(s);
  if (!k) return INFINITY;
  std::vector<Tensor> ins, outs;
  std::vector<kernels::TensorView> iv, ov;
  for (size_t i = 0; i < s.in_dtypes.size(); ++i) {
    if (s.in_dtypes[i] == DType::undefined) {
      iv.push_back({});
      continue;
    }
    // Activations in their buffer's layout (blocked: padded channels zero, as tactics expect).
    ins.push_back(s.constants[i] ? *s.constants[i]
                                 : ir::to_layout(kernels::random_tensor(s.in_dtypes[i], s.in_shapes[i], 7 + i), s.in_layout(i)));
    iv.push_back({ins.back().empty() ? nullptr : const_cast<void*>(ins.back().raw()), s.in_dtypes[i], s.in_shapes[i]});
  }
  for (size_t i = 0; i < s.out_dtypes.size(); ++i) {
    if (s.out_dtypes[i] == DType::undefined) {
      ov.push_back({});
      continue;
    }
    auto o = Tensor::create(s.out_dtypes[i], {ir::physical_numel(s.out_shapes[i], s.out_layout(i))});
    if (!o) return INFINITY;
    outs.push_back(*o);
    ov.push_back({outs.back().raw(), s.out_dtypes[i], s.out_shapes[i]});
  }
  std::vector<std::byte> ws((*k)->workspace_bytes() + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) & ~uintptr_t{63});
  if (!(*k)->run(iv, ov, aligned).is_ok()) return INFINITY;  // warm-up
  std::vector<double> ns;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (int r = 0; r < 15 && (r < 3 || std::chrono::steady_clock::now() < deadline); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    (void)(*k)->run(iv, ov, aligned);
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

// Which values live inside a Concat output's buffer. A Concat qualifies when every dim before
// its axis is 1 (each input is then one contiguous slice of the output), its output and inputs
// are arena values of one dtype, no input is given twice or to an earlier qualifying Concat, no
// input is itself a qualifying Concat's output (no nesting), and every slice starts on a
// kAlignment boundary (kernels may rely on aligned views).
struct ConcatAliases {
  explicit ConcatAliases(size_t n) : into(n, -1), byte_offset(n, 0), has_slices(n, false) {}
  std::vector<int> into;             // per value: the Concat output holding it, or -1
  std::vector<int64_t> byte_offset;  // per value: its offset inside that output
  std::vector<bool> has_slices;      // per value: a Concat output whose inputs live inside it
};

ConcatAliases concat_aliases(const Plan& plan, const std::vector<int>& first) {
  const ir::Graph& g = plan.model.graph;
  ConcatAliases ca(g.values.size());
  std::vector<bool> graph_output(g.values.size(), false);
  for (int v : g.outputs) graph_output[static_cast<size_t>(v)] = true;
  auto arena = [&](int v) {
    return v != ir::kNoValue && plan.values[static_cast<size_t>(v)].kind == PlanValue::Kind::arena && !graph_output[static_cast<size_t>(v)];
  };
  for (const PlanStep& st : plan.steps) {
    const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
    if (n.op != ir::OpKind::Concat || !n.domain.empty() || st.outputs.size() != 1 || !arena(st.outputs[0])) continue;
    const int out = st.outputs[0];
    const PlanValue& po = plan.values[static_cast<size_t>(out)];
    const ir::Attribute* a = n.attr("axis");
    int64_t axis = a && a->type == ir::Attribute::Type::i ? a->i : 0;
    if (axis < 0) axis += static_cast<int64_t>(po.shape.size());
    if (axis < 0 || axis >= static_cast<int64_t>(po.shape.size()) || ca.into[static_cast<size_t>(out)] >= 0) continue;
    // nhwc interleaves the inputs' channels per pixel: no input is one slice of the output.
    // (Blocked with every C a multiple of the block is image-major: slices, as in nchw.)
    if (po.layout == ir::Layout::nhwc) continue;
    bool ok = true;
    for (int64_t d = 0; d < axis; ++d) ok = ok && po.shape[static_cast<size_t>(d)] == 1;
    int64_t offset = 0;
    std::set<int> seen;
    for (int v : st.inputs) {
      ok = ok && arena(v) && seen.insert(v).second && ca.into[static_cast<size_t>(v)] < 0 &&
           !ca.has_slices[static_cast<size_t>(v)] && plan.values[static_cast<size_t>(v)].dtype == po.dtype &&
           first[static_cast<size_t>(v)] >= 0 && offset % kAlignment == 0;
      if (!ok) break;
      offset += plan.values[static_cast<size_t>(v)].bytes;
    }
    if (!ok || offset != po.bytes) continue;
    offset = 0;
    for (int v : st.inputs) {
      ca.into[static_cast<size_t>(v)] = out;
      ca.byte_offset[static_cast<size_t>(v)] = offset;
      offset += plan.values[static_cast<size_t>(v)].bytes;
    }
    ca.has_slices[static_cast<size_t>(out)] = true;
  }
  return ca;
}

bool in_place_op(const ir::Node& n) {
  using ir::OpKind;
  // Ours: every FusedElementwise tactic (CPU blocks, the CUDA kernel, the references through a
  // copy) reads element i of every input before it writes element i of the output.
  if (n.op == OpKind::FusedElementwise && n.domain == ir::kInternalDomain) return true;
  if (!n.domain.empty()) return false;
  switch (n.op) {
    case OpKind::Relu: case OpKind::LeakyRelu: case OpKind::Sigmoid: case OpKind::Tanh: case OpKind::Clip:
    case OpKind::Exp: case OpKind::Neg: case OpKind::Abs: case OpKind::Sqrt: case OpKind::Erf: case OpKind::Gelu:
    case OpKind::HardSigmoid: case OpKind::HardSwish: case OpKind::Add: case OpKind::Sub: case OpKind::Mul:
    case OpKind::Div:
      return true;
    default:
      return false;
  }
}

// "FusedConv(float[1,64,56,56],float[64,64,3,3],...){pads=1,1,1,1;...}": op, input types and the
// scalar and list attributes, i.e. everything a tactic's choice can depend on.
std::string node_signature(const ir::Graph& g, const ir::Node& n) {
  std::string s = n.op_type + "(";
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (i) s += ",";
    if (n.inputs[i] == ir::kNoValue) continue;
    const ir::Value& v = g.values[static_cast<size_t>(n.inputs[i])];
    s += v.type.to_string();
    if (v.initializer) s += "c";
  }
  s += "){";
  for (const auto& [k, a] : n.attrs) {
    s += k + "=";
    switch (a.type) {
      case ir::Attribute::Type::i: s += std::to_string(a.i); break;
      case ir::Attribute::Type::f: s += std::to_string(a.f); break;
      case ir::Attribute::Type::s: s += a.s; break;
      case ir::Attribute::Type::ints:
        for (int64_t v : a.ints) s += std::to_string(v) + ",";
        break;
      case ir::Attribute::Type::floats:
        for (float v : a.floats) s += std::to_string(v) + ",";
        break;
      default: s += "?"; break;
    }
    s += ";";
  }
  return s + "}";
}

}  // namespace

bool is_view_op(const ir::Node& n) {
  using ir::OpKind;
  if (!n.domain.empty()) return false;
  switch (n.op) {
    case OpKind::Reshape: case OpKind::Flatten: case OpKind::Squeeze: case OpKind::Unsqueeze: case OpKind::Identity:
    case OpKind::Transpose: case OpKind::Gather:
      return true;
    default:
      return false;
  }
}

bool is_alias_step(const ir::Graph& g, const PlanStep& st) {
  return st.in_place && !st.dynamic && is_view_op(g.nodes[static_cast<size_t>(st.node)]);
}

kernels::StepDesc step_desc(const ir::Graph& g, const ir::Node& n, const std::vector<int>& inputs, int threads) {
  kernels::StepDesc s;
  s.node = &n;
  s.threads = threads;
  for (const std::vector<int>* vs : {&inputs, &n.outputs})
    for (int v : *vs) s.dynamic = s.dynamic || (v != ir::kNoValue && dynamic_value(g.values[static_cast<size_t>(v)]));
  for (int v : inputs) {
    if (v == ir::kNoValue) {
      s.in_dtypes.push_back(DType::undefined);
      s.in_shapes.emplace_back();
      s.constants.push_back(nullptr);
      s.in_layouts.push_back(ir::Layout::nchw);
      continue;
    }
    const ir::Value& val = g.values[static_cast<size_t>(v)];
    s.in_dtypes.push_back(val.type.dtype);
    s.in_shapes.push_back(shape_of(val.type));
    s.constants.push_back(val.initializer ? &*val.initializer : nullptr);
    s.in_layouts.push_back(val.layout);
  }
  for (int v : n.outputs) {
    if (v == ir::kNoValue) {
      s.out_dtypes.push_back(DType::undefined);
      s.out_shapes.emplace_back();
      s.out_layouts.push_back(ir::Layout::nchw);
      continue;
    }
    const ir::Value& val = g.values[static_cast<size_t>(v)];
    s.out_dtypes.push_back(val.type.dtype);
    s.out_shapes.push_back(shape_of(val.type));
    s.out_layouts.push_back(val.layout);
  }
  return s;
}

Status bind_dims(const ir::Graph& g, const std::vector<Datum>& inputs, BuildOptions& opts) {
  for (size_t i = 0; i < inputs.size() && i < g.inputs.size(); ++i) {
    const ir::ValueType& t = g.values[static_cast<size_t>(g.inputs[i])].type;
    if (!inputs[i].is_tensor() || !t.has_shape || t.dims.size() != inputs[i].tensor.shape().size()) continue;
    for (size_t k = 0; k < t.dims.size(); ++k) {
      if (t.dims[k].known() || t.dims[k].symbol.empty()) continue;
      int64_t v = inputs[i].tensor.shape()[k];
      auto [it, fresh] = opts.dims.emplace(t.dims[k].symbol, v);
      if (!fresh && it->second != v)
        return invalid_argument("dim '" + t.dims[k].symbol + "' is " + std::to_string(it->second) + " in one input and " +
                                std::to_string(v) + " in another");
    }
  }
  return Status::ok();
}

kernels::StepDesc step_desc_of(const Plan& plan, size_t i) {
  const PlanStep& st = plan.steps[i];
  return step_desc(plan.model.graph, plan.model.graph.nodes[static_cast<size_t>(st.node)], st.inputs, plan.threads);
}

double time_tactic_isolated(const kernels::Tactic& t, const kernels::StepDesc& step) { return time_isolated_impl(t, step); }

std::string device_fingerprint() {
  std::string model = "unknown-cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  const kernels::CpuFeatures& f = kernels::cpu_features();
  std::string isa = f.avx512 ? "avx512" : (f.avx2_fma ? "avx2" : "sse");
  if (f.avx512_bf16) isa += "+bf16";
  if (f.avx512_vnni) isa += "+vnni";
  return "cpu:" + model + " [" + isa + "]";
}

Result<std::string> device_fingerprint(kernels::Backend backend) {
  if (backend == kernels::Backend::cpu) return device_fingerprint();
  return cuda::device_fingerprint();
}

kernels::Backend backend_of_device(const std::string& device) {
  return device.rfind("cuda:", 0) == 0 ? kernels::Backend::cuda : kernels::Backend::cpu;
}

void name_nodes(ir::Graph& g) {
  std::set<std::string> used;
  for (ir::Node& n : g.nodes) {
    std::string s;
    for (char c : n.name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-') ? c : '_';
    if (s.empty()) s = n.op_type + "_" + std::to_string(n.index);
    std::string u = s;
    for (int k = 2; used.count(u); ++k) u = s + "_" + std::to_string(k);
    used.insert(u);
    n.name = u;
  }
}

Result<KnobSpace> knob_space(const ir::Model& m, const BuildOptions& opts) {
  if (opts.backend == kernels::Backend::cuda && !cuda::compiled())
    return unsupported("the CUDA backend: this tactician was built without it (TAC_CUDA=OFF)");
  KnobSpace space;
  add_global_knobs(space, opts.backend, stored_precision(m, opts.backend));
  // Per-node tactic knobs over the graph with the default passes and with every fusion off, so
  // that a route turning a fusion off can still pin tactics of the nodes it keeps.
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, std::string> ops, groups;
  std::map<std::string, std::vector<std::string>> default_values;
  // Per node and tactic, the precisions under which it applied (variants 0, 1: fp32).
  std::map<std::string, std::map<std::string, std::vector<std::string>>> precisions_of;
  std::map<std::string, std::set<std::string>> approximate_of;  // per node: its approximate tactics
  std::vector<std::string> order;
  // Precision and layout knobs: the candidates of the default graph (see precision.h, layout.h).
  std::vector<Knob> precision_knobs, layout_knobs;
  // Variants 2, 3, 4: every candidate in bf16 / int8 / fp16, so that routes can pin the
  // lower-precision tactics of the nodes variants 0 and 1 name (the casts they add get no knobs
  // of their own).
  // Variant 5: the default route in the other layout (CPU: nchw, whose convolutions take the
  // tactics that read nchw only, a pin on one keeps its node nchw, see layout.cc; CUDA: nhwc, whose
  // pooling and elementwise nodes take the layout tactics): searched like variant 0's.
  const std::vector<std::string> lowp = precision_values(opts.backend);
  for (int variant = 0; variant < 6; ++variant) {
    Route r;
    if (variant == 5) {
      if (layout_knobs.empty()) continue;  // no convolution changes layout: the same graph as variant 0's
      r.values["layout.default"] = default_layout(opts.backend) == "nchw" ? "nhwc" : "nchw";
    }
    if (variant == 1)
      for (const Pass& p : pass_pipeline())
        if (std::string(p.name).rfind("fuse_", 0) == 0) r.values[std::string("pass.") + p.name] = "off";
    if (variant >= 2 && variant <= 4) {
      const char* want = variant == 2 ? "bf16" : variant == 3 ? "int8" : "fp16";
      if (std::find(lowp.begin(), lowp.end(), want) == lowp.end()) continue;
      r.values["precision.default"] = want;
      // CPU: in nchw, where every lower-precision convolution tactic applies (onednn_bf16 also
      // reads the other layouts; the reference and onednn_int8 read nchw only).
      if (opts.backend == kernels::Backend::cpu) r.values["layout.default"] = "nchw";
    }
    RouteView view(r, space);
    auto g = prepare_graph(m, view, opts, nullptr);
    if (!g) return g.status();
    const int threads = static_cast<int>(view.get_int(knob::kThreads));
    TAC_RETURN_IF_ERROR(view.check_declared());
    if (variant == 0 && lowp.size() > 1)
      for (const ir::Node& n : g->graph.nodes) {
        if (!precision_candidate(g->graph, n)) continue;
        std::vector<std::string> vals = {"default"};
        for (const std::string& p : lowp)
          if ((p != "int8" || int8_candidate(g->graph, n)) && (p != "fp8" || fp8_candidate(g->graph, n))) vals.push_back(p);
        precision_knobs.push_back(searched(Searched::with_user_tolerance,
                                           {knob::kPrecision + n.name, vals, "default",
                                            n.op_type + ": the precision this node computes in (default: precision.default)",
                                            KnobScope::node, "precision:" + node_signature(g->graph, n)}));
      }
    if (variant == 0)
      for (const ir::Node& n : g->graph.nodes) {
        if (!layout_candidate(g->graph, n, opts.backend)) continue;
        std::vector<std::string> vals = {"default"};
        for (const std::string& l : layout_values(opts.backend)) vals.push_back(l);
        layout_knobs.push_back({"layout." + n.name, vals, "default",
                                n.op_type + ": the activation layout this node runs in (default: layout.default)",
                                KnobScope::node, "layout:" + node_signature(g->graph, n)});
      }
    for (const ir::Node& n : g->graph.nodes) {
      if (variant >= 2 && !values.count(n.name)) continue;
      std::vector<int> inputs = step_inputs(g->graph, n);
      const kernels::StepDesc desc = step_desc(g->graph, n, inputs, threads);
        Ranked r2 = rank_tactics(desc, opts.planted_faults, opts.backend);
      if (r2.candidates.empty()) return unsupported(n.label() + ": no tactic applies (" +
                                                    (r2.not_applicable.empty() ? "no kernel for this op" : r2.not_applicable[0]) + ")");
      auto [it, fresh] = values.emplace(n.name, std::vector<std::string>{"auto"});
      if (fresh) order.push_back(n.name);
      ops[n.name] = n.op_type;
      if (variant == 0) groups[n.name] = node_signature(g->graph, n);
      for (const auto& [t, cost] : r2.candidates) {
        if (std::find(it->second.begin(), it->second.end(), t->name) == it->second.end()) it->second.push_back(t->name);
        if (t->approximate) approximate_of[n.name].insert(t->name);
        // The precision the node computes in here: a lowered node reads bf16, fp16 or 8-bit data.
        const DType in = n.inputs.empty() || n.inputs[0] == ir::kNoValue
                             ? DType::float32 : g->graph.values[static_cast<size_t>(n.inputs[0])].type.dtype;
        const std::string precision = in == DType::bfloat16                      ? "bf16"
                                      : in == DType::float16                     ? "fp16"
                                      : in == DType::uint8 || in == DType::int8 ? "int8"
                                                                                 : "fp32";
        auto& ps = precisions_of[n.name][t->name];
        if (std::find(ps.begin(), ps.end(), precision) == ps.end()) ps.push_back(precision);
        // The search values leave out the reference fallback where a real kernel applies: it stays
        // pinnable, but a search point pinning the scalar float64 kernel on BERT-base's GEMMs ran
        // for minutes (past the whole tune budget) to learn what is known, that it is slowest.
        if ((variant == 0 || variant == 5) && !(t->catch_all && r2.candidates.size() > 1)) {
          auto& dv = default_values[n.name];
          if (dv.empty()) dv.push_back("auto");
          if (std::find(dv.begin(), dv.end(), t->name) == dv.end()) dv.push_back(t->name);
        }
      }
    }
  }
  // A node with a precision knob gets conditional tactic values: those that apply under some of
  // its precisions only (an fp32 GEMM is inactive while the node computes in bf16).
  std::map<std::string, size_t> precision_count;  // per node: "default" and each precision it can take
  for (const Knob& k : precision_knobs) precision_count[k.name.substr(std::strlen("precision."))] = k.values.size();
  for (Knob& k : precision_knobs) space.add(std::move(k));
  for (Knob& k : layout_knobs) space.add(std::move(k));
  for (const std::string& name : order) {
    Knob k{"tactic." + name, values[name], "auto",
           ops[name] + ": the tactic computing this node (auto: chosen by builder.selection)", KnobScope::node,
           groups.count(name) ? groups[name] : ops[name] + "#" + name,
           default_values.count(name) ? default_values[name] : std::vector<std::string>{"auto"}};
    if (auto a = approximate_of.find(name); a != approximate_of.end()) k.approximate.assign(a->second.begin(), a->second.end());
    if (auto pc = precision_count.find(name); pc != precision_count.end())
      for (const auto& [t, ps] : precisions_of[name])
        if (ps.size() + 1 < pc->second) k.value_precisions[t] = ps;
    space.add(std::move(k));
  }
  return space;
}

namespace {

// A route's pin of node n's tactic, or "" (none, "auto", or inactive under this route: the
// reason is added to the report's inactive settings).
std::string active_pin(const ir::Node& n, const kernels::StepDesc& desc, const RouteView& view, const BuildOptions& opts,
                       Plan& plan) {
  std::string pinned = view.get_node(knob::kTactic, n.name);
  if (pinned.empty() || pinned == "auto") return "";
  // A pin naming a tactic of another op is inactive: this route's passes made the node
  // another op (fused_avx512 computes FusedAttention; with pass.fuse_attention=off the node
  // is the plain MatMul it started as).
  bool same_op = false;
  for (const kernels::Tactic* t : kernels::tactics_for(n.op, opts.backend, opts.planted_faults)) same_op |= pinned == t->name;
  if (!same_op) {
    plan.report.inactive.push_back("tactic." + n.name + "=" + pinned + " (" + n.name + " is a " + n.op_type +
                                   " under this route; " + pinned + " is a tactic of another op)");
    return "";
  }
  // A pin on a layout tactic of a pool, Concat or elementwise node (onednn_pool, raw_buffer,
  // cuda_nhwc: they run nhwc or blocked activations only; the convolutions' layout tactics
  // run nchw too) is inactive on a node this route keeps nchw (a neighbour's pin or
  // layout.<node>=nchw ended the region).
  const bool conv = n.op == ir::OpKind::Conv || n.op == ir::OpKind::FusedConv;
  if (desc.plain() && !conv)
    if (const kernels::Tactic* t = kernels::find_tactic(n.op, pinned, opts.backend); t && t->layouts) {
      plan.report.inactive.push_back("tactic." + n.name + "=" + pinned + " (" + n.name +
                                     " runs in nchw under this route; " + pinned + " runs nhwc or blocked activations)");
      return "";
    }
  return pinned;
}

// builder.selection=isolated's times within one build, per tactic and step: a step's time depends
// on what its signature says (op, input types, attributes) and on its values' layouts and output
// types, not on which node it is, so a network's repeated layers (BERT-base's twelve, ResNet's
// blocks) are timed once. Only times are shared: applicability is still decided per node.
class IsolatedTimes {
 public:
  double time(const kernels::Tactic& t, const ir::Graph& g, const ir::Node& n, const kernels::StepDesc& desc) {
    std::string key = std::string(t.name) + "|" + node_signature(g, n) + "|";
    for (ir::Layout l : desc.in_layouts) key += std::to_string(static_cast<int>(l)) + ",";
    key += "|";
    for (size_t i = 0; i < desc.out_dtypes.size(); ++i)
      key += std::string(dtype_name(desc.out_dtypes[i])) + shape_to_string(desc.out_shapes[i]) +
             std::to_string(static_cast<int>(desc.out_layout(i))) + ",";
    auto [it, fresh] = ns_.try_emplace(std::move(key), 0.0);
    if (fresh) it->second = time_isolated_impl(t, desc);
    return it->second;
  }

 private:
  std::map<std::string, double> ns_;
};

// Node n's step: its tactic by the route's pin, else by builder.selection (the cost ranking, or
// each candidate timed alone); the ranking goes to the report.
Result<PlanStep> select_step(const ir::Node& n, const RouteView& view, const BuildOptions& opts, Plan& plan,
                             IsolatedTimes& isolated) {
  const ir::Graph& g = plan.model.graph;
  PlanStep step;
  step.node = n.index;
  step.inputs = step_inputs(g, n);
  step.outputs = n.outputs;
  kernels::StepDesc desc = step_desc(g, n, step.inputs, plan.threads);
  if (opts.backend == kernels::Backend::cuda) desc.workspace_limit = static_cast<size_t>(view.get_int(knob::kCudaWorkspaceMb)) << 20;
  step.dynamic = desc.dynamic;
  Ranked ranked = rank_tactics(desc, opts.planted_faults, opts.backend);
  for (const std::string& why : ranked.not_applicable)
    if (why.find("cuda.workspace_mb=") != std::string::npos) plan.report.workspace_skipped.push_back(n.name + ": " + why);
  const int64_t prune = view.get_int(knob::kPrune);
  if (prune > 0 && static_cast<int64_t>(ranked.candidates.size()) > prune) ranked.candidates.resize(static_cast<size_t>(prune));
  if (ranked.candidates.empty())
    return unsupported(n.label() + ": no tactic applies" +
                       (ranked.not_applicable.empty() ? std::string() : " (" + ranked.not_applicable[0] + ")"));
  TacticRanking rk;
  rk.node = n.name;
  rk.op = n.op_type;
  rk.not_applicable = ranked.not_applicable;
  if (const std::string pinned = active_pin(n, desc, view, opts, plan); !pinned.empty()) {
    for (const auto& [t, cost] : ranked.candidates)
      if (pinned == t->name) step.tactic = t;
    if (!step.tactic)
      return invalid_argument("route: tactic." + n.name + "=" + pinned + " is not a candidate for " + n.label() +
                              (prune > 0 ? " (pruned by builder.prune or not applicable)" : " (not applicable here)"));
    rk.why = "route";
  } else if (view.get(knob::kSelection) == "isolated" && ranked.candidates.size() > 1) {
    double best = INFINITY;
    for (auto& [t, cost] : ranked.candidates) {
      // Untimed (NaN: a model estimate is no time to rank beside measured ones): an approximate
      // tactic, not the op's function (only the tuner, gated by accuracy, may pick it), and the
      // catch-all reference kernels, which rank after every real kernel whatever they cost and
      // took seconds per BERT-base GEMM to time (the tuner leaves them out of its search too).
      if (t->approximate || t->catch_all) {
        cost = NAN;
        continue;
      }
      cost = isolated.time(*t, g, n, desc);
      if (cost < best) {
        best = cost;
        step.tactic = t;
      }
    }
    if (!step.tactic) step.tactic = ranked.candidates[0].first;
    rk.why = "isolated";
  } else {
    step.tactic = ranked.candidates[0].first;
    rk.why = "heuristic";
  }
  for (const auto& [t, cost] : ranked.candidates) rk.candidates.emplace_back(t->name, cost);
  rk.chosen = step.tactic->name;
  plan.report.rankings.push_back(std::move(rk));
  return step;
}

// Per value, the first step writing it and the last step reading it (graph outputs live to the
// end: step count), -1 where none.
struct Lifetimes {
  std::vector<int> first, last;
};
Lifetimes lifetimes(const Plan& plan) {
  const ir::Graph& g = plan.model.graph;
  const int n_steps = static_cast<int>(plan.steps.size());
  Lifetimes lt{std::vector<int>(g.values.size(), -1), std::vector<int>(g.values.size(), -1)};
  for (int s = 0; s < n_steps; ++s) {
    for (int v : plan.steps[static_cast<size_t>(s)].inputs)
      if (v != ir::kNoValue) lt.last[static_cast<size_t>(v)] = s;
    for (int v : plan.steps[static_cast<size_t>(s)].outputs)
      if (v != ir::kNoValue) {
        if (lt.first[static_cast<size_t>(v)] < 0) lt.first[static_cast<size_t>(v)] = s;
        lt.last[static_cast<size_t>(v)] = std::max(lt.last[static_cast<size_t>(v)], s);
      }
  }
  for (int v : g.outputs) lt.last[static_cast<size_t>(v)] = n_steps;
  return lt;
}

// Values: constants, inputs, arena buffers (sizes checked against the machine's memory).
Status plan_values(Plan& plan, const Lifetimes& lt) {
  const ir::Graph& g = plan.model.graph;
  plan.values.resize(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    const ir::Value& val = g.values[v];
    PlanValue& pv = plan.values[v];
    pv.dtype = val.type.dtype;
    pv.shape = shape_of(val.type);
    pv.layout = val.layout;
    const bool dynamic = dynamic_value(val);
    pv.bytes = dynamic ? 0 : ir::physical_bytes(pv.shape, pv.layout, pv.dtype);
    if (pv.bytes < 0 || static_cast<uint64_t>(pv.bytes) > max_tensor_bytes())
      return out_of_memory("value '" + val.name + "' (" + val.type.to_string() + ") needs more than this machine's " +
                           bytes_to_string(max_tensor_bytes()) + " of memory");
    // A constant no step reads (a Gemm bias or BatchNorm parameters a pass replaced) is not
    // part of the plan: the plan file's graph export drops it, and it is not a weight.
    if (val.initializer) pv.kind = lt.last[v] >= 0 ? PlanValue::Kind::constant : PlanValue::Kind::unused;
    else if (val.is_input) pv.kind = dynamic ? PlanValue::Kind::dynamic : PlanValue::Kind::input;
    else if (lt.first[v] >= 0) pv.kind = dynamic ? PlanValue::Kind::dynamic : PlanValue::Kind::arena;
  }
  return Status::ok();
}

// A view step's output as a block of its input's bytes: its byte offset, or -1 when it is not
// one. A Transpose is a view when it moves only dims of size 1 (the others keep their order); a
// Gather of one constant index is a view of a contiguous block when every dim before the axis
// is 1 (a QKV pick out of a stacked projection); Reshape and kin are the same bytes.
int64_t view_at(const ir::Graph& g, const ir::Node& n, const PlanStep& st, const PlanValue& in) {
  if (n.op == ir::OpKind::Transpose) {
    const auto perm = transpose_perm(g, n);
    if (!perm) return -1;
    int64_t prev = -1;
    for (int64_t d : *perm) {
      if (in.shape[static_cast<size_t>(d)] == 1) continue;
      if (d < prev) return -1;
      prev = d;
    }
    return 0;
  }
  if (n.op != ir::OpKind::Gather) return 0;
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  if (st.inputs.size() != 2 || st.inputs[1] == ir::kNoValue || rank == 0) return -1;
  const ir::Value& iv = g.values[static_cast<size_t>(st.inputs[1])];
  if (!iv.initializer || iv.initializer->numel() != 1) return -1;
  const ir::Attribute* a = n.attr("axis");
  int64_t axis = a && a->type == ir::Attribute::Type::i ? a->i : 0;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return -1;
  for (int64_t d = 0; d < axis; ++d)
    if (in.shape[static_cast<size_t>(d)] != 1) return -1;
  const int64_t len = in.shape[static_cast<size_t>(axis)];
  int64_t idx = iv.initializer->get_i64(0);
  if (idx < 0) idx += len;
  if (idx < 0 || idx >= len || in.bytes % len) return -1;
  const int64_t at = idx * (in.bytes / len);
  return at % kAlignment == 0 ? at : -1;
}

// Arena values grouped into buffers that share memory: Concat inputs inside their output (ca),
// views inside their input, in-place steps' outputs over their input. group[v] is v's buffer,
// view_offset[v] its byte offset inside the value it views or overwrites.
struct Buffers {
  std::vector<int> group;
  std::vector<BufferLifetime> lifetimes;
  std::vector<int64_t> view_offset;
};
Buffers group_buffers(Plan& plan, const Lifetimes& lt, const ConcatAliases& ca, bool inplace, bool view_alias) {
  const ir::Graph& g = plan.model.graph;
  const std::vector<int>&first = lt.first, &last = lt.last;
  Buffers bufs{std::vector<int>(g.values.size(), -1), {}, std::vector<int64_t>(g.values.size(), 0)};
  std::vector<int>& group = bufs.group;
  std::vector<BufferLifetime>& buffers = bufs.lifetimes;
  auto sliced = [&](int v) { return ca.into[static_cast<size_t>(v)] >= 0 || ca.has_slices[static_cast<size_t>(v)]; };
  const int n_steps = static_cast<int>(plan.steps.size());
  for (int s = 0; s < n_steps; ++s) {
    PlanStep& st = plan.steps[static_cast<size_t>(s)];
    const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
    for (size_t o = 0; o < st.outputs.size(); ++o) {
      int v = st.outputs[o];
      if (v == ir::kNoValue || plan.values[static_cast<size_t>(v)].kind != PlanValue::Kind::arena) continue;
      const int into = ca.into[static_cast<size_t>(v)];
      const int owner = into >= 0 ? into : v;  // the value whose buffer holds v
      if (group[static_cast<size_t>(owner)] >= 0 && (into >= 0 || ca.has_slices[static_cast<size_t>(v)])) {
        BufferLifetime& b = buffers[static_cast<size_t>(group[static_cast<size_t>(owner)])];
        b.first_step = std::min(b.first_step, first[static_cast<size_t>(v)]);
        b.last_step = std::max(b.last_step, last[static_cast<size_t>(v)]);
        group[static_cast<size_t>(v)] = group[static_cast<size_t>(owner)];
        continue;
      }
      if (into >= 0) {  // the first slice produced: the Concat output's buffer starts here
        group[static_cast<size_t>(into)] = group[static_cast<size_t>(v)] = static_cast<int>(buffers.size());
        buffers.push_back({plan.values[static_cast<size_t>(into)].bytes, first[static_cast<size_t>(v)],
                           std::max(last[static_cast<size_t>(v)], last[static_cast<size_t>(into)])});
        continue;
      }
      const int in0 = st.inputs.empty() ? ir::kNoValue : st.inputs[0];
      const PlanValue* pin = in0 == ir::kNoValue ? nullptr : &plan.values[static_cast<size_t>(in0)];
      const PlanValue& pout = plan.values[static_cast<size_t>(v)];
      const bool shareable = o == 0 && !st.dynamic && pin && group[static_cast<size_t>(in0)] >= 0 && !sliced(v) &&
                             !sliced(in0) && pin->dtype == pout.dtype;
      // A view (Reshape and kin, see view_at) over a plain-layout value: the output is the input's
      // bytes (or a block of them), read through other dims, so it shares the buffer whether or
      // not the input lives on; the step runs nothing (the runtime skips in-place view steps).
      const int64_t at = shareable && view_alias && is_view_op(n) && pin->layout == ir::Layout::nchw &&
                                 pout.layout == ir::Layout::nchw
                             ? view_at(g, n, st, *pin)
                             : -1;
      const bool as_view = at >= 0 && (n.op == ir::OpKind::Gather ? pout.bytes <= pin->bytes - at : pout.bytes == pin->bytes);
      // An elementwise step writes over its input 0, a tactic with Tactic::over_input over that
      // input, only when no value of that buffer (the input or a view of it) is read after this step.
      const int ip = !inplace || as_view ? -1
                     : in_place_op(n)    ? 0
                     : st.tactic && st.tactic->over_input >= 0 &&
                             st.tactic->over_input < static_cast<int>(st.inputs.size())
                         ? st.tactic->over_input
                         : -1;
      const int vin = ip >= 0 ? st.inputs[static_cast<size_t>(ip)] : ir::kNoValue;
      const PlanValue* pv = vin == ir::kNoValue ? nullptr : &plan.values[static_cast<size_t>(vin)];
      const bool over_input = o == 0 && !st.dynamic && pv && group[static_cast<size_t>(vin)] >= 0 && !sliced(v) &&
                              !sliced(vin) && pv->dtype == pout.dtype && pv->bytes == pout.bytes &&
                              last[static_cast<size_t>(vin)] == s &&
                              buffers[static_cast<size_t>(group[static_cast<size_t>(vin)])].last_step == s &&
                              std::count(st.inputs.begin(), st.inputs.end(), vin) == 1;
      if (as_view || over_input) {
        const int src = as_view ? in0 : vin;
        bufs.view_offset[static_cast<size_t>(v)] = bufs.view_offset[static_cast<size_t>(src)] + (as_view ? at : 0);
        int b = group[static_cast<size_t>(src)];
        group[static_cast<size_t>(v)] = b;
        buffers[static_cast<size_t>(b)].last_step = std::max(buffers[static_cast<size_t>(b)].last_step, last[static_cast<size_t>(v)]);
        st.in_place = true;
        st.in_place_input = as_view ? 0 : ip;
        continue;
      }
      group[static_cast<size_t>(v)] = static_cast<int>(buffers.size());
      buffers.push_back({plan.values[static_cast<size_t>(v)].bytes, first[static_cast<size_t>(v)], last[static_cast<size_t>(v)]});
    }
  }
  return bufs;
}

// What a build starts from: opts with the shape ranges' opt sizes bound, and the knob space (the
// one opts carries, else computed) with `route` checked against it.
Result<std::shared_ptr<const KnobSpace>> build_knobs(const ir::Model& m, const Route& route, BuildOptions& opts) {
  TAC_RETURN_IF_ERROR(apply_shape_ranges(m, opts));
  std::shared_ptr<const KnobSpace> knobs = opts.knobs;
  if (!knobs) {
    TAC_ASSIGN_OR_RETURN(KnobSpace computed, knob_space(m, opts));
    knobs = std::make_shared<const KnobSpace>(std::move(computed));
  }
  TAC_RETURN_IF_ERROR(validate_route(route, *knobs));
  return knobs;
}

}  // namespace

Status calibrate(const ir::Model& m, const Route& route, const BuildOptions& options) {
  BuildOptions opts = options;
  TAC_ASSIGN_OR_RETURN(std::shared_ptr<const KnobSpace> knobs, build_knobs(m, route, opts));
  const Route active = active_route(route, *knobs, nullptr);
  return prepare_graph(m, RouteView(active, *knobs), opts, nullptr, /*calibrate=*/true).status();
}

// The build in phases: the graph the route's passes, precisions and layouts give
// (prepare_graph), a tactic per step (select_step), value lifetimes and kinds, buffers shared by
// Concat slices, views and in-place steps (group_buffers), and the arena (plan_memory).
Result<Plan> build_plan(const ir::Model& m, const Route& route, const BuildOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  BuildOptions opts = options;
  TAC_ASSIGN_OR_RETURN(std::shared_ptr<const KnobSpace> knobs, build_knobs(m, route, opts));
  const KnobSpace& space = *knobs;
  Plan plan;
  const Route active = active_route(route, space, &plan.report.inactive);
  RouteView view(active, space);
  plan.model_hash = m.hash;
  TAC_ASSIGN_OR_RETURN(plan.device, device_fingerprint(opts.backend));
  plan.backend = opts.backend;
  plan.cuda_graphs = opts.backend == kernels::Backend::cuda && view.get(knob::kCudaGraphs) == "on";
  plan.threads = static_cast<int>(view.get_int(knob::kThreads));
  TAC_ASSIGN_OR_RETURN(plan.model, prepare_graph(m, view, opts, &plan.report.pass_log, /*calibrate=*/true, &plan.report));
  for (int v : m.graph.inputs)
    for (const ir::Dim& d : m.graph.values[static_cast<size_t>(v)].type.dims)
      if (!d.known() && !d.symbol.empty()) plan.dims[d.symbol] = opts.dims.count(d.symbol) ? opts.dims.at(d.symbol) : 1;
  const ir::Graph& g = plan.model.graph;

  IsolatedTimes isolated;
  for (const ir::Node& n : g.nodes) {
    TAC_ASSIGN_OR_RETURN(PlanStep step, select_step(n, view, opts, plan, isolated));
    plan.steps.push_back(std::move(step));
  }
  // The plan records what it was built from: the route without its inactive settings (those the
  // route's own precisions or passes made inapplicable; each report line starts "knob=value").
  Route recorded = route;
  for (const std::string& s : plan.report.inactive) recorded.values.erase(s.substr(0, s.find('=')));
  plan.route = recorded.to_string();

  const Lifetimes lt = lifetimes(plan);
  TAC_RETURN_IF_ERROR(plan_values(plan, lt));
  // Concat elimination: each input a Concat can take in place lives inside the output's buffer
  // at its slice, so its producer writes there and the Concat copies nothing.
  const ConcatAliases ca = view.on(knob::kConcatAlias) ? concat_aliases(plan, lt.first) : ConcatAliases(g.values.size());
  const Buffers bufs = group_buffers(plan, lt, ca, view.on(knob::kInplace), view.on(knob::kViewAlias));
  TAC_ASSIGN_OR_RETURN(PlannerStrategy strategy, planner_from_name(view.get(knob::kPlanner)));
  MemoryPlan mp = plan_memory(bufs.lifetimes, strategy);
  if (!memory_plan_is_valid(bufs.lifetimes, mp)) return internal_error("memory plan is invalid");
  plan.arena_bytes = mp.arena_bytes;
  if (static_cast<uint64_t>(plan.arena_bytes) > max_tensor_bytes())
    return out_of_memory("the plan's activations need " + bytes_to_string(static_cast<uint64_t>(plan.arena_bytes)) +
                         " at once, more than this machine's " + bytes_to_string(max_tensor_bytes()) + " of memory");
  for (size_t v = 0; v < g.values.size(); ++v)
    if (bufs.group[v] >= 0)
      plan.values[v].offset = mp.offsets[static_cast<size_t>(bufs.group[v])] + ca.byte_offset[v] + bufs.view_offset[v];
  if (!opts.ranges.empty()) {  // what the runtime specializes other sizes from
    plan.ranges = opts.ranges;
    TAC_ASSIGN_OR_RETURN(plan.source_model, io::save_model_to_bytes(m));
  }
  TAC_RETURN_IF_ERROR(view.check_declared());
  plan.report.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

Result<kernels::Backend> resolve_backend(const std::string& name, const std::string& flag) {
  if (name.empty()) return cuda::compiled() && cuda::device_present() ? kernels::Backend::cuda : kernels::Backend::cpu;
  TAC_ASSIGN_OR_RETURN(kernels::Backend b, kernels::backend_from_name(name));
  if (b == kernels::Backend::cuda && !cuda::compiled())
    return invalid_argument(flag + " cuda: this tactician was built without the CUDA backend (TAC_CUDA=OFF)");
  if (b == kernels::Backend::cuda && !cuda::device_present())
    return invalid_argument(flag + " cuda: no CUDA device is present on this machine");
  return b;
}

std::string dims_to_string(const std::map<std::string, int64_t>& dims) {
  std::string s;
  for (const auto& [name, v] : dims) s += (s.empty() ? "" : " ") + name + "=" + std::to_string(v);
  return s;
}

int Plan::dynamic_steps() const {
  int n = 0;
  for (const PlanStep& st : steps) n += st.dynamic;
  return n;
}

int64_t Plan::weight_bytes() const {
  int64_t b = 0;
  for (const PlanValue& v : values)
    if (v.kind == PlanValue::Kind::constant) b += v.bytes;
  return b;
}

}  // namespace tac::builder
