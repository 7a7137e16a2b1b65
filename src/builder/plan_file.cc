#include "builder/plan_file.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "builder/builder.h"
#include "io/onnx_export.h"
#include "io/onnx_import.h"

#ifndef TAC_VERSION
#define TAC_VERSION "dev"
#endif

namespace tac::builder {

namespace {

constexpr char kMagic[8] = {'T', 'A', 'C', 'P', 'L', 'A', 'N', '\0'};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
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
  explicit Reader(const std::string& s) : s_(s) {}
  template <class T> bool pod(T& v) {
    if (pos_ + sizeof v > s_.size()) return false;
    std::memcpy(&v, s_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return true;
  }
  bool str(std::string& v) {
    uint64_t n;
    if (!pod(n) || n > s_.size() - pos_) return false;
    v = s_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

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
  w.str(model_bytes);
  uint32_t n_values = 0;
  for (const PlanValue& v : plan.values) n_values += v.kind != PlanValue::Kind::unused;
  w.pod<uint32_t>(n_values);
  for (size_t i = 0; i < plan.values.size(); ++i) {
    const PlanValue& v = plan.values[i];
    if (v.kind == PlanValue::Kind::unused) continue;
    w.str(g.values[i].name);
    w.pod<uint8_t>(static_cast<uint8_t>(v.kind));
    w.pod<uint8_t>(static_cast<uint8_t>(v.layout));
    w.pod<int64_t>(v.offset);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(plan.steps.size()));
  auto name_of = [&](int v) { return v == ir::kNoValue ? std::string() : g.values[static_cast<size_t>(v)].name; };
  for (const PlanStep& st : plan.steps) {
    w.pod<int32_t>(st.node);
    w.str(st.tactic->name);
    w.pod<uint32_t>(static_cast<uint32_t>(st.inputs.size()));
    for (int v : st.inputs) w.str(name_of(v));
    w.pod<uint8_t>(st.in_place ? 1 : 0);
    w.pod<uint8_t>(st.dynamic ? 1 : 0);
  }
  w.pod<uint32_t>(static_cast<uint32_t>(plan.report.pass_log.size()));
  for (const std::string& s : plan.report.pass_log) w.str(s);

  std::ofstream out(path, std::ios::binary);
  if (!out) return io_error(path + ": cannot write the plan");
  out.write(kMagic, sizeof kMagic);
  uint32_t version = kPlanFormatVersion;
  uint64_t size = w.out.size(), sum = fnv1a(w.out);
  out.write(reinterpret_cast<const char*>(&version), sizeof version);
  out.write(reinterpret_cast<const char*>(&size), sizeof size);
  out.write(reinterpret_cast<const char*>(&sum), sizeof sum);
  out.write(w.out.data(), static_cast<std::streamsize>(w.out.size()));
  if (!out) return io_error(path + ": write failed");
  return Status::ok();
}

Result<Plan> load_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(path + ": cannot open the plan");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
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
  const std::string payload = file.substr(header);
  if (fnv1a(payload) != sum) return invalid_argument(path + ": checksum mismatch: the plan is corrupt");

  Reader r(payload);
  Plan plan;
  std::string tool, model_bytes;
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
    return invalid_argument(path + ": built for " + plan.device + ", this machine is " + *here +
                            "; rebuild the plan here");
  int32_t threads;
  uint32_t n_dims;
  if (!r.pod(threads) || !r.pod(plan.arena_bytes) || !r.pod(n_dims)) return bad();
  for (uint32_t i = 0; i < n_dims; ++i) {
    std::string name;
    int64_t size;
    if (!r.str(name) || !r.pod(size) || size < 0) return bad();
    plan.dims[name] = size;
  }
  if (!r.str(model_bytes)) return bad();
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
    plan.values[i].bytes = static_cast<int64_t>(dtype_size(t.dtype)) * std::max<int64_t>(0, shape_numel(plan.values[i].shape));
  }
  uint32_t n_values;
  if (!r.pod(n_values)) return bad();
  for (uint32_t i = 0; i < n_values; ++i) {
    std::string name;
    uint8_t kind, layout;
    int64_t offset;
    if (!r.str(name) || !r.pod(kind) || !r.pod(layout) || !r.pod(offset) ||
        kind > static_cast<uint8_t>(PlanValue::Kind::dynamic) || layout > ir::kMaxLayout)
      return bad();
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
    pv.bytes = pv.is_dynamic() ? 0
                               : static_cast<int64_t>(dtype_size(pv.dtype)) *
                                     std::max<int64_t>(0, ir::physical_numel(pv.shape, pv.layout));
    if (kind == static_cast<uint8_t>(PlanValue::Kind::arena) &&
        (offset < 0 || offset + plan.values[static_cast<size_t>(v)].bytes > plan.arena_bytes))
      return invalid_argument(path + ": value '" + name + "' lies outside the arena");
  }
  uint32_t n_steps;
  if (!r.pod(n_steps) || n_steps != g.nodes.size()) return bad();
  for (uint32_t s = 0; s < n_steps; ++s) {
    PlanStep st;
    std::string tactic;
    uint32_t n_in;
    uint8_t in_place;
    if (!r.pod(st.node) || !r.str(tactic) || !r.pod(n_in) || st.node < 0 || static_cast<size_t>(st.node) >= g.nodes.size())
      return bad();
    const ir::Node& n = g.nodes[static_cast<size_t>(st.node)];
    for (uint32_t k = 0; k < n_in; ++k) {
      std::string name;
      if (!r.str(name)) return bad();
      st.inputs.push_back(name.empty() ? ir::kNoValue : g.find_value(name));
    }
    uint8_t dynamic;
    if (!r.pod(in_place) || !r.pod(dynamic)) return bad();
    st.in_place = in_place != 0;
    st.dynamic = dynamic != 0;
    st.outputs = n.outputs;
    st.tactic = kernels::find_tactic(n.op, tactic, plan.backend);
    if (!st.tactic) return invalid_argument(path + ": " + n.label() + " uses tactic '" + tactic + "', which this build lacks");
    // A step is dynamic exactly when one of its values is (the engine relies on it).
    bool has_dynamic = false;
    for (const std::vector<int>* vs : {&st.inputs, &st.outputs})
      for (int v : *vs) has_dynamic = has_dynamic || (v != ir::kNoValue && plan.values[static_cast<size_t>(v)].is_dynamic());
    if (has_dynamic != st.dynamic || (st.dynamic && (!st.tactic->dynamic_shapes || st.in_place)))
      return invalid_argument(path + ": " + n.label() + " is inconsistently marked dynamic in the plan");
    plan.steps.push_back(std::move(st));
  }
  uint32_t n_log;
  if (!r.pod(n_log)) return bad();
  for (uint32_t i = 0; i < n_log; ++i) {
    std::string s;
    if (!r.str(s)) return bad();
    plan.report.pass_log.push_back(std::move(s));
  }
  if (!r.done()) return bad();
  return plan;
}

}  // namespace tac::builder
