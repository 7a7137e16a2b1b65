// A model stored in fp16 or bf16 (weights, inputs and outputs in the low type) computes in fp32
// between its inputs and its outputs: initializers and Constant values are converted (exactly),
// Casts between fp32 and the low type inside the graph become Identity (others to the low type
// cast to fp32), each low graph input gets a Cast to fp32 after it and each low graph output a
// Cast back before it. The plan's interface keeps the model's types. Every tactic that takes fp32 then applies (the CPU has few fp16 kernels; cuDNN's
// and our CUDA epilogues take an fp32 bias); precision.default, whose default follows the stored
// type (stored_precision), narrows the layers that have lower-precision tactics again, and the
// boundary Casts cancel against it (precision.cc). Exact ONNX semantics round every fp16 op's
// output; computing in fp32 between the layers is closer to the real numbers, not further.
//
// Left alone (logged): graphs with subgraphs (If/Loop/Scan bodies would need the same rewrite and
// their outer reads), ops whose output type is an attribute other than Cast's (EyeLike, Random*,
// SequenceEmpty, ...), and low graph outputs that are inputs or constants themselves.
#include <algorithm>
#include <set>

#include "builder/passes/pass.h"

namespace tac::builder {

namespace {

bool is_low(DType t) { return t == DType::float16 || t == DType::bfloat16; }

Tensor widened(const Tensor& t) {
  Tensor out = Tensor::create(DType::float32, t.shape()).value();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = static_cast<float>(t.get_f64(i));
  return out;
}

// A tensor-valued attribute of a low type ("value" of Constant / ConstantOfShape), or null.
ir::Attribute* low_tensor_attr(ir::Node& n) {
  if (n.op != ir::OpKind::Constant && n.op != ir::OpKind::ConstantOfShape) return nullptr;
  auto it = n.attrs.find("value");
  if (it == n.attrs.end() || it->second.type != ir::Attribute::Type::t || !is_low(it->second.t.dtype())) return nullptr;
  return &it->second;
}

DType dtype_of(const ir::Graph& g, int v) { return v == ir::kNoValue ? DType::undefined : g.values[static_cast<size_t>(v)].type.dtype; }
DType cast_to(const ir::Node& n) {
  const ir::Attribute* to = n.attr("to");
  return n.op == ir::OpKind::Cast && to ? static_cast<DType>(to->i) : DType::undefined;
}
bool is_graph_output(const ir::Graph& g, int v) { return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end(); }
bool is_graph_input(const ir::Graph& g, int v) { return std::find(g.inputs.begin(), g.inputs.end(), v) != g.inputs.end(); }

// The Casts a widened graph keeps at its boundary: a graph input to fp32, fp32 to a low graph
// output. (The pass re-runs while it changes the graph: these must not count as work.)
bool boundary_cast(const ir::Graph& g, const ir::Node& n) {
  if (n.op != ir::OpKind::Cast || n.inputs.empty() || n.outputs.empty()) return false;
  if (is_graph_input(g, n.inputs[0]) && cast_to(n) == DType::float32) return true;
  return is_graph_output(g, n.outputs[0]) && is_low(cast_to(n)) && dtype_of(g, n.inputs[0]) == DType::float32;
}

// Low graph inputs read by something else than a boundary Cast.
std::vector<int> inputs_to_widen(const ir::Graph& g) {
  std::vector<int> out;
  for (int x : g.inputs) {
    if (!is_low(dtype_of(g, x))) continue;
    bool other = false;
    for (const ir::Node& n : g.nodes)
      if (std::find(n.inputs.begin(), n.inputs.end(), x) != n.inputs.end()) other |= !boundary_cast(g, n);
    if (other) out.push_back(x);
  }
  return out;
}

// Low graph outputs (with their stored types) not written by a boundary Cast. The stored type is
// the one inferred, else the one the file declares (a Range or a chain shape inference cannot
// type); `unknown` names an output with neither, whose type widening could change.
std::vector<std::pair<int, DType>> outputs_to_widen(const ir::Graph& g, const std::vector<DType>& declared,
                                                    std::string& unknown) {
  std::vector<std::pair<int, DType>> out;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const int o = g.outputs[k];
    const ir::Value& val = g.values[static_cast<size_t>(o)];
    DType t = val.type.dtype;
    if (t == DType::undefined && k < declared.size()) t = declared[k];
    if (t == DType::undefined && val.type.kind == ir::ValueKind::tensor && unknown.empty()) unknown = val.name;
    if (!is_low(t) || val.is_input || val.initializer) continue;
    bool boundary = false;
    for (const ir::Node& n : g.nodes)
      if (std::find(n.outputs.begin(), n.outputs.end(), o) != n.outputs.end()) boundary = boundary_cast(g, n);
    if (!boundary) out.emplace_back(o, t);
  }
  return out;
}

// A Cast inside the graph that names a low type (at either end): work for the pass.
bool inner_low_cast(const ir::Graph& g, const ir::Node& n) {
  if (n.op != ir::OpKind::Cast || n.inputs.empty() || boundary_cast(g, n)) return false;
  return is_low(cast_to(n)) || is_low(dtype_of(g, n.inputs[0]));
}

// Why the graph is left as stored, or "" when it can be widened.
std::string blocker(const ir::Graph& g) {
  for (const ir::Node& n : g.nodes) {
    if (!n.subgraphs().empty()) return n.label() + " has a subgraph";
    if (n.op == ir::OpKind::Cast) continue;
    for (const char* k : {"dtype", "to"})
      if (const ir::Attribute* a = n.attr(k); a && a->type == ir::Attribute::Type::i && is_low(static_cast<DType>(a->i)))
        return n.label() + " makes a " + dtype_name(static_cast<DType>(a->i)) + " value from its '" + k + "' attribute";
  }
  for (int v : g.outputs) {
    const ir::Value& val = g.values[static_cast<size_t>(v)];
    if (is_low(val.type.dtype) && (val.is_input || val.initializer))
      return "output '" + val.name + "' is a graph input or a constant";
  }
  return "";
}

std::string unique_node_name(const std::set<std::string>& names, const std::string& base) {
  std::string name = base;
  for (int k = 2; names.count(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

}  // namespace

Status widen_storage(ir::Graph& g, PassContext& ctx) {
  const std::vector<int> inputs = inputs_to_widen(g);
  std::string unknown;
  const std::vector<std::pair<int, DType>> outputs = outputs_to_widen(g, ctx.declared_outputs, unknown);
  bool work = !inputs.empty() || !outputs.empty();
  for (const ir::Value& v : g.values) work |= v.initializer && !v.is_outer && is_low(v.initializer->dtype());
  for (ir::Node& n : g.nodes) work |= inner_low_cast(g, n) || low_tensor_attr(n);
  if (!work) return Status::ok();
  std::string why = blocker(g);
  if (why.empty() && !unknown.empty()) why = "output '" + unknown + "' has no known type";
  if (!why.empty()) {
    ctx.log.push_back("widen_storage: the graph keeps its fp16/bf16 types (" + why + ")");
    return Status::ok();
  }
  std::set<std::string> names;
  for (const ir::Node& n : g.nodes) names.insert(n.name);
  auto add_cast = [&](const std::string& base, int in, int out, DType to) {
    ir::Node c;
    c.name = unique_node_name(names, base);
    names.insert(c.name);
    c.op = ir::OpKind::Cast;
    c.op_type = "Cast";
    c.opset = 19;
    c.inputs = {in};
    c.outputs = {out};
    ir::Attribute a;
    a.type = ir::Attribute::Type::i;
    a.i = static_cast<int64_t>(to);
    c.attrs["to"] = a;
    c.index = static_cast<int>(g.nodes.size());
    g.nodes.push_back(std::move(c));
  };
  int constants = 0, casts = 0, dropped = 0;
  for (ir::Value& v : g.values)
    if (v.initializer && !v.is_outer && is_low(v.initializer->dtype())) {
      v.initializer = widened(*v.initializer);
      v.type.dtype = DType::float32;
      ++constants;
    }
  for (ir::Node& n : g.nodes) {
    if (ir::Attribute* a = low_tensor_attr(n)) {
      a->t = widened(a->t);
      ++constants;
    }
    if (!inner_low_cast(g, n)) continue;
    const DType from = dtype_of(g, n.inputs[0]), to = cast_to(n);
    if ((from == DType::float32 || is_low(from)) && (to == DType::float32 || is_low(to))) {
      // fp32 <-> fp16 / bf16: fp32 to fp32 now (eliminate_identity removes it).
      n.op = ir::OpKind::Identity;
      n.op_type = "Identity";
      n.attrs.clear();
      ++dropped;
    } else if (is_low(to)) {
      n.attrs["to"].i = static_cast<int64_t>(DType::float32);
      ++casts;
    }
  }
  // Computed values are typed again by shape inference: their low types are stale now (the
  // outputs' stored types were taken above).
  for (ir::Value& v : g.values)
    if (!v.is_input && !v.initializer && !v.is_outer && is_low(v.type.dtype)) v.type = ir::ValueType{};
  for (int x : inputs) {
    ir::ValueType t = g.values[static_cast<size_t>(x)].type;
    t.dtype = DType::float32;
    const std::string name = g.values[static_cast<size_t>(x)].name;
    const int wide = add_value(g, name + ".fp32", std::move(t));
    for (ir::Node& n : g.nodes)
      if (!boundary_cast(g, n))
        for (int& v : n.inputs)
          if (v == x) v = wide;
    add_cast(name + ".to_fp32", x, wide, DType::float32);
  }
  // Each low output: its producer writes an fp32 value (which the graph's readers take) and a Cast
  // writes the output in its stored type, the type the plan hands back.
  for (auto [o, stored] : outputs) {
    const int wide = add_value(g, g.values[static_cast<size_t>(o)].name + ".fp32", {});
    for (ir::Node& n : g.nodes) {
      for (int& v : n.outputs)
        if (v == o) v = wide;
      for (int& v : n.inputs)
        if (v == o) v = wide;
    }
    add_cast(g.values[static_cast<size_t>(o)].name + ".to_stored", wide, o, stored);
  }
  ctx.log.push_back("widen_storage: computes in fp32 (" + std::to_string(constants) + " constants widened, " +
                    std::to_string(dropped) + " Casts between float types dropped, " + std::to_string(casts) +
                    " Casts to fp32, " + std::to_string(inputs.size() + outputs.size()) +
                    " Casts at the inputs and outputs)");
  return g.sort_topologically();
}

}  // namespace tac::builder
