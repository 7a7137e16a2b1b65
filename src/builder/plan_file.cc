#include "builder/plan_file.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>

#include "builder/builder.h"
#include "builder/memory_planner.h"
#include "io/file.h"
#include "io/onnx_export.h"
#include "io/onnx_import.h"
#include "ir/shape_inference.h"

#ifndef TAC_VERSION
#define TAC_VERSION "dev"
#endif

namespace tac::builder {

namespace {

constexpr char kMagic[8] = {'T', 'A', 'C', 'P', 'L', 'A', 'N', '\0'};

uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

class Writer {
 public:
  template <class T> void pod(T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    out += s;
  }
  std::string out;
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  template <class T> bool pod(T& v) {
    if (pos_ + sizeof v > s_.size()) return false;
    std::memcpy(&v, s_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool str(std::string& v) {
    std::string_view view;
    if (!this->view(view)) return false;
    v = view;
    return true;
  }
  // A string's bytes where they lie in the payload (the model's: no copy).
  bool view(std::string_view& v) {
    uint64_t n;
    if (!pod(n) || n > s_.size() - pos_) return false;
    v = s_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == s_.size(); }
  size_t remaining() const { return s_.size() - pos_; }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

// A loaded plan is input: before any engine runs it, everything the runtime trusts is checked
// against the plan's own graph. Each static value's type is what its producer computes (a kernel sizes
// its writes from its inputs and attributes, not from the buffer it was given); each value's
// kind matches what the graph makes of it; the steps run every node once, after the producers of
// what they read; each step's tactic applies to its node; a view step lies inside its input.
Status validate_plan(const Plan& plan) {
  const ir::Graph& g = plan.model.graph;
  ir::Model inferred = plan.model;
  TAC_RETURN_IF_ERROR(ir::infer_shapes(inferred).with_context("its graph: "));
  for (size_t v = 0; v < g.values.size(); ++v) {
    // Static values only: the runtime sizes a dynamic value from what its step computes.
    const PlanValue::Kind k = plan.values[v].kind;
    if (k == PlanValue::Kind::dynamic || k == PlanValue::Kind::unused) continue;
    const ir::Value& val = g.values[v];
    const std::string have = val.type.to_string(), want = inferred.graph.values[v].type.to_string();
    if (have != want)
      return invalid_argument("value '" + val.name + "' is " + have + " in the plan, its producer computes " + want);
  }
  using Kind = PlanValue::Kind;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const ir::Value& val = g.values[v];
    const Kind k = plan.values[v].kind;
    if (k == Kind::unused) continue;
    const bool graph_input = val.is_input && !val.initializer;
    const bool ok = (k == Kind::constant) == val.initializer.has_value() && (k != Kind::input || graph_input) &&
                    (!graph_input || k == Kind::input || k == Kind::dynamic) && (k != Kind::arena || val.producer >= 0) &&
                    !val.is_outer;
    static const char* const kKindNames[] = {"unused", "arena", "constant", "input", "dynamic"};
    if (!ok)
      return invalid_argument("value '" + val.name + "' is stored as " + kKindNames[static_cast<int>(k)] +
                              " in the plan, but its graph makes it " +
                              (val.initializer ? "a constant" : graph_input ? "a graph input" : "a node's output"));
  }
  // The arena is exactly what its values need (the memory planner's extent): a larger one would let
  // a plan of a few bytes hold the machine's memory.
  int64_t extent = 0;
  for (const PlanValue& pv : plan.values)
    if (pv.kind == Kind::arena) extent = std::max(extent, (pv.offset + pv.bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (plan.arena_bytes > extent)
    return invalid_argument("the arena of " + std::to_string(plan.arena_bytes) + " bytes is larger than its values need (" +
                            std::to_string(extent) + ")");
  std::vector<bool> ready(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) ready[v] = plan.values[v].kind == Kind::constant || plan.values[v].kind == Kind::input ||
                                                          (plan.values[v].kind == Kind::dynamic && g.values[v].is_input);
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep& st = plan.steps[s];
    const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
    for (int v : st.inputs)
      if (v != ir::kNoValue && !ready[static_cast<size_t>(v)])
        return invalid_argument(n.label() + " reads '" + g.values[static_cast<size_t>(v)].name + "' before any step computes it");
    for (int v : st.outputs)
      if (v != ir::kNoValue) {
        if (plan.values[static_cast<size_t>(v)].kind == Kind::unused)
          return invalid_argument(n.label() + " writes '" + g.values[static_cast<size_t>(v)].name + "', which has no buffer");
        ready[static_cast<size_t>(v)] = true;
      }
    const kernels::StepDesc desc = step_desc_of(plan, s);
    if (Status a = st.tactic->applies(desc); !a)
      return invalid_argument(n.label() + ": tactic '" + st.tactic->name + "' does not apply (" + a.message() + ")");
    if (is_alias_step(g, st)) {
      const PlanValue* in = st.inputs.empty() || st.inputs[0] == ir::kNoValue ? nullptr : &plan.values[static_cast<size_t>(st.inputs[0])];
      const PlanValue* out = st.outputs.empty() || st.outputs[0] == ir::kNoValue ? nullptr : &plan.values[static_cast<size_t>(st.outputs[0])];
      if (!in || !out || in->kind != Kind::arena || out->kind != Kind::arena || out->offset < in->offset ||
          out->bytes > in->bytes || out->offset - in->offset > in->bytes - out->bytes)
        return invalid_argument(n.label() + " is a view step whose output does not lie inside its input");
    }
  }
  for (int v : g.outputs)
    if (!ready[static_cast<size_t>(v)]) return invalid_argument("graph output '" + g.values[static_cast<size_t>(v)].name + "' is never computed");
  return Status::ok();
}

}  // namespace

Status save_plan(const Plan& plan, const std::string& path) {
  TAC_ASSIGN_OR_RETURN(std::string model_bytes, io::save_model_to_bytes(plan.model));
  const ir::Graph& g = plan.model.graph;
  Writer w;
  w.str(TAC_VERSION);
  w.str(plan.device);
  w.str(plan.model_hash);
  w.str(plan.route);
  w.pod<int32_t>(plan.threads);
  w.pod<int64_t>(plan.arena_bytes);
  w.pod<uint32_t>(static_cast<uint32_t>(plan.dims.size()));
  for (const auto& [name, size] : plan.dims) {
    w.str(name);
    w.pod<int64_t>(size);
  }
  // The model's bytes (most of a plan) are written where they stand, between the parts before
  // and after them, not copied into the writer.
  w.pod<uint64_t>(model_bytes.size());
  Writer rest;
  uint32_t n_values = 0;
  for (const PlanValue& v : plan.values) n_values += v.kind != PlanValue::Kind::unused;
  rest.pod<uint32_t>(n_values);
  for (size_t i = 0; i < plan.values.size(); ++i) {
    const PlanValue& v = plan.values[i];
    if (v.kind == PlanValue::Kind::unused) continue;
    rest.str(g.values[i].name);
    rest.pod<uint8_t>(static_cast<uint8_t>(v.kind));
    rest.pod<uint8_t>(static_cast<uint8_t>(v.layout));
    rest.pod<int64_t>(v.offset);
  }
  rest.pod<uint32_t>(static_cast<uint32_t>(plan.steps.size()));
  auto name_of = [&](int v) { return v == ir::kNoValue ? std::string() : g.values[static_cast<size_t>(v)].name; };
  for (const PlanStep& st : plan.steps) {
    rest.pod<int32_t>(st.node);
    rest.str(st.tactic->name);
    rest.pod<uint32_t>(static_cast<uint32_t>(st.inputs.size()));
    for (int v : st.inputs) rest.str(name_of(v));
    rest.pod<uint8_t>(st.in_place ? static_cast<uint8_t>(st.in_place_input + 1) : 0);  // 1: over input 0
    rest.pod<uint8_t>(st.dynamic ? 1 : 0);
  }
  rest.pod<uint32_t>(static_cast<uint32_t>(plan.report.pass_log.size()));
  for (const std::string& s : plan.report.pass_log) rest.str(s);
  rest.pod<uint32_t>(static_cast<uint32_t>(plan.ranges.size()));
  for (const auto& [name, range] : plan.ranges) {
    rest.str(name);
    rest.pod<int64_t>(range.min);
    rest.pod<int64_t>(range.opt);
    rest.pod<int64_t>(range.max);
  }
  if (!plan.ranges.empty()) rest.str(plan.source_model);

  std::ofstream out(path, std::ios::binary);
  if (!out) return io_error(path + ": cannot write the plan");
  out.write(kMagic, sizeof kMagic);
  uint32_t version = kPlanFormatVersion;
  const uint64_t size = w.out.size() + model_bytes.size() + rest.out.size();
  const uint64_t sum = fnv1a(rest.out, fnv1a(model_bytes, fnv1a(w.out)));
  out.write(reinterpret_cast<const char*>(&version), sizeof version);
  out.write(reinterpret_cast<const char*>(&size), sizeof size);
  out.write(reinterpret_cast<const char*>(&sum), sizeof sum);
  for (const std::string* part : {&w.out, &model_bytes, &rest.out})
    out.write(part->data(), static_cast<std::streamsize>(part->size()));
  if (!out) return io_error(path + ": write failed");
  return Status::ok();
}

Result<Plan> load_plan(const std::string& path) {
  TAC_ASSIGN_OR_RETURN(const std::string file, io::read_file(path, "the plan"));
  return load_plan_from_bytes(file, path);
}

namespace {

Status malformed(const std::string& path) { return invalid_argument(path + ": malformed plan"); }

// The values' kinds, layouts and arena offsets (after the graph's types), each checked against
// its type and the arena.
Status read_values(Reader& r, Plan& plan, const std::string& path) {
  ir::Graph& g = plan.model.graph;
  uint32_t n_values;
  if (!r.pod(n_values)) return malformed(path);
  for (uint32_t i = 0; i < n_values; ++i) {
    std::string name;
    uint8_t kind, layout;
    int64_t offset;
    if (!r.str(name) || !r.pod(kind) || !r.pod(layout) || !r.pod(offset) ||
        kind > static_cast<uint8_t>(PlanValue::Kind::dynamic) || layout > ir::kMaxLayout)
      return malformed(path);
    int v = g.find_value(name);
    if (v == ir::kNoValue) return invalid_argument(path + ": plan names a value '" + name + "' its graph lacks");
    PlanValue& pv = plan.values[static_cast<size_t>(v)];
    pv.kind = static_cast<PlanValue::Kind>(kind);
    pv.offset = offset;
    pv.layout = static_cast<ir::Layout>(layout);
    // Static values need the fixed type and shape the steps were prepared for.
    const ir::ValueType& t = g.values[static_cast<size_t>(v)].type;
    bool fixed = t.kind == ir::ValueKind::tensor && t.has_shape && t.dtype != DType::undefined;
    for (const ir::Dim& d : t.dims) fixed = fixed && d.known();
    if (!pv.is_dynamic() && !fixed)
      return invalid_argument(path + ": value '" + name + "' is static in the plan but its graph type is " + t.to_string());
    if (pv.layout != ir::Layout::nchw && (pv.is_dynamic() || pv.shape.size() != 4))
      return invalid_argument(path + ": value '" + name + "' has layout " + ir::layout_name(pv.layout) + " but rank " +
                              std::to_string(pv.shape.size()) + (pv.is_dynamic() ? " (dynamic)" : ""));
    g.values[static_cast<size_t>(v)].layout = pv.layout;  // step_desc_of reads the graph's tags
    pv.bytes = pv.is_dynamic() ? 0 : ir::physical_bytes(pv.shape, pv.layout, pv.dtype);
    if (pv.bytes < 0) return invalid_argument(path + ": value '" + name + "' is too large (" + t.to_string() + ")");
    // Kernels read elements through typed pointers: a value starts on a multiple of its element
    // size (the planner aligns buffers to 64 bytes; a Concat's slices lie at element multiples).
    if (pv.kind == PlanValue::Kind::arena && pv.offset % static_cast<int64_t>(std::max<size_t>(1, dtype_size(pv.dtype))) != 0)
      return invalid_argument(path + ": value '" + name + "' is not aligned to its element size in the arena");
    if (pv.kind == PlanValue::Kind::arena &&
        (offset < 0 || pv.bytes > plan.arena_bytes || offset > plan.arena_bytes - pv.bytes))  // no overflow
      return invalid_argument(path + ": value '" + name + "' lies outside the arena");
  }
  return Status::ok();
}

// The steps: one per node, its tactic known to this build, its inputs its node's, marked dynamic
// exactly when one of its values is.
Status read_steps(Reader& r, Plan& plan, const std::string& path) {
  const ir::Graph& g = plan.model.graph;
  uint32_t n_steps;
  if (!r.pod(n_steps) || n_steps != g.nodes.size()) return malformed(path);
  std::vector<bool> stepped(g.nodes.size(), false);
  for (uint32_t s = 0; s < n_steps; ++s) {
    PlanStep st;
    std::string tactic;
    uint32_t n_in;
    uint8_t in_place;
    if (!r.pod(st.node) || !r.str(tactic) || !r.pod(n_in) || st.node < 0 || static_cast<size_t>(st.node) >= g.nodes.size())
      return malformed(path);
    const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
    if (stepped[static_cast<size_t>(st.node)]) return invalid_argument(path + ": " + n.label() + " has two steps");
    stepped[static_cast<size_t>(st.node)] = true;
    if (n_in > r.remaining()) return malformed(path);
    for (uint32_t k = 0; k < n_in; ++k) {
      std::string name;
      if (!r.str(name)) return malformed(path);
      st.inputs.push_back(name.empty() ? ir::kNoValue : g.find_value(name));
    }
    uint8_t dynamic;
    if (!r.pod(in_place) || !r.pod(dynamic)) return malformed(path);
    st.in_place = in_place != 0;
    st.in_place_input = in_place > 0 ? in_place - 1 : 0;
    st.dynamic = dynamic != 0;
    st.outputs = n.outputs;
    st.tactic = kernels::find_tactic(n.op, tactic, plan.backend);
    if (!st.tactic) return invalid_argument(path + ": " + n.label() + " uses tactic '" + tactic + "', which this build lacks");
    if (st.in_place_input != 0 && st.in_place_input != st.tactic->over_input)
      return invalid_argument(path + ": " + n.label() + " is planned over input " + std::to_string(st.in_place_input) +
                              ", which tactic '" + tactic + "' does not write over");
    // A step is dynamic exactly when one of its values is (the engine relies on it).
    bool has_dynamic = false;
    for (const std::vector<int>* vs : {&st.inputs, &st.outputs})
      for (int v : *vs) has_dynamic = has_dynamic || (v != ir::kNoValue && plan.values[static_cast<size_t>(v)].is_dynamic());
    if (has_dynamic != st.dynamic || (st.dynamic && (!st.tactic->dynamic_shapes || st.in_place)))
      return invalid_argument(path + ": " + n.label() + " is inconsistently marked dynamic in the plan");
    if (st.inputs != step_inputs(g, n))
      return invalid_argument(path + ": the step of " + n.label() + " reads other values than its node");
    plan.steps.push_back(std::move(st));
  }
  return Status::ok();
}

}  // namespace

Result<Plan> load_plan_from_bytes(const std::string& file, const std::string& path) {
  const size_t header = sizeof kMagic + sizeof(uint32_t) + 2 * sizeof(uint64_t);
  if (file.size() < header || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    return invalid_argument(path + ": not a Tactician plan");
  uint32_t version;
  uint64_t size, sum;
  std::memcpy(&version, file.data() + 8, 4);
  std::memcpy(&size, file.data() + 12, 8);
  std::memcpy(&sum, file.data() + 20, 8);
  if (version != kPlanFormatVersion)
    return invalid_argument(path + ": plan format version " + std::to_string(version) + ", this tactician reads " +
                            std::to_string(kPlanFormatVersion) + "; rebuild the plan");
  if (file.size() - header != size) return invalid_argument(path + ": the plan is truncated or has trailing bytes");
  const std::string_view payload = std::string_view(file).substr(header);
  if (fnv1a(payload) != sum) return invalid_argument(path + ": checksum mismatch: the plan is corrupt");

  Reader r(payload);
  Plan plan;
  std::string tool;
  std::string_view model_bytes;
  auto bad = [&] { return invalid_argument(path + ": malformed plan"); };
  if (!r.str(tool) || !r.str(plan.device) || !r.str(plan.model_hash) || !r.str(plan.route)) return bad();
  if (tool != TAC_VERSION)
    return invalid_argument(path + ": built by tactician " + tool + ", this is " + TAC_VERSION + "; rebuild the plan");
  plan.backend = backend_of_device(plan.device);
  auto here = device_fingerprint(plan.backend);
  if (!here)
    return invalid_argument(path + ": built for " + plan.device + ", and this machine has no such device (" +
                            here.status().message() + "); rebuild the plan here");
  if (plan.device != *here)
    return invalid_argument(path + ": built for " + plan.device + ", this machine is " + *here + "; rebuild the plan here");
  int32_t threads;
  uint32_t n_dims;
  if (!r.pod(threads) || !r.pod(plan.arena_bytes) || !r.pod(n_dims)) return bad();
  if (threads < 1 || threads > hardware_threads())
    return invalid_argument(path + ": the plan asks for " + std::to_string(threads) + " threads; this machine runs 1 to " +
                            std::to_string(hardware_threads()));
  if (plan.arena_bytes < 0 || static_cast<uint64_t>(plan.arena_bytes) > max_tensor_bytes())
    return invalid_argument(path + ": the plan's arena of " + std::to_string(plan.arena_bytes) +
                            " bytes is negative or larger than this machine's memory (" + bytes_to_string(max_tensor_bytes()) +
                            ")");
  for (uint32_t i = 0; i < n_dims; ++i) {
    std::string name;
    int64_t size;
    if (!r.str(name) || !r.pod(size) || size < 0) return bad();
    plan.dims[name] = size;
  }
  if (!r.view(model_bytes)) return bad();
  plan.threads = threads;
  if (plan.backend == kernels::Backend::cuda) {  // cuda.graphs defaults to on; the route says otherwise
    auto route = Route::parse(plan.route);
    plan.cuda_graphs = !(route && route->values.count("cuda.graphs") && route->values.at("cuda.graphs") == "off");
  }
  TAC_ASSIGN_OR_RETURN(plan.model, io::load_model_from_bytes(model_bytes, path + " (graph)", ""));
  ir::Graph& g = plan.model.graph;
  plan.values.assign(g.values.size(), PlanValue{});
  for (size_t i = 0; i < g.values.size(); ++i) {  // dtypes and shapes come from the stored graph
    const ir::ValueType& t = g.values[i].type;
    plan.values[i].dtype = t.dtype;
    for (const ir::Dim& d : t.dims) plan.values[i].shape.push_back(d.value);
    plan.values[i].bytes = std::max<int64_t>(0, ir::physical_bytes(plan.values[i].shape, ir::Layout::nchw, t.dtype));
  }
  TAC_RETURN_IF_ERROR(read_values(r, plan, path));
  TAC_RETURN_IF_ERROR(read_steps(r, plan, path));
  uint32_t n_log;
  if (!r.pod(n_log)) return bad();
  for (uint32_t i = 0; i < n_log; ++i) {
    std::string s;
    if (!r.str(s)) return bad();
    plan.report.pass_log.push_back(std::move(s));
  }
  uint32_t n_ranges;
  if (!r.pod(n_ranges)) return bad();
  for (uint32_t i = 0; i < n_ranges; ++i) {
    std::string name;
    DimRange range;
    if (!r.str(name) || !r.pod(range.min) || !r.pod(range.opt) || !r.pod(range.max)) return bad();
    // Each range is one of the plan's bound dims, built at its opt size.
    if (range.min < 1 || range.min > range.opt || range.opt > range.max || !plan.dims.count(name) ||
        plan.dims.at(name) != range.opt || !plan.ranges.emplace(name, range).second)
      return invalid_argument(path + ": the shape range of '" + name + "' is malformed");
  }
  if (n_ranges > 0 && (!r.str(plan.source_model) || plan.source_model.empty())) return bad();
  if (!r.done()) return bad();
  TAC_RETURN_IF_ERROR(validate_plan(plan).with_context(path + ": "));
  return plan;
}

}  // namespace tac::builder
