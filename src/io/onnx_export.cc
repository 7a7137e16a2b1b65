#include "io/onnx_export.h"

#include <set>

#include "io/proto_convert.h"

namespace tac::io {

namespace {

void type_to_proto(const ir::ValueType& t, onnx::TypeProto* p) {
  onnx::TypeProto* elem = p;
  if (t.kind == ir::ValueKind::sequence) elem = p->mutable_sequence_type()->mutable_elem_type();
  else if (t.kind == ir::ValueKind::optional) {
    elem = p->mutable_optional_type()->mutable_elem_type();
    if (t.inner == ir::ValueKind::sequence) elem = elem->mutable_sequence_type()->mutable_elem_type();
  }
  auto* tt = elem->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype));
  if (!t.has_shape) return;
  auto* shape = tt->mutable_shape();
  for (const ir::Dim& d : t.dims) {
    auto* dim = shape->add_dim();
    if (d.known()) dim->set_dim_value(d.value);
    else if (!d.symbol.empty()) dim->set_dim_param(d.symbol);
  }
}

void graph_to_proto(const ir::Graph& g, onnx::GraphProto* gp);

void attr_to_proto(const std::string& key, const ir::Attribute& a, onnx::AttributeProto* ap) {
  using T = ir::Attribute::Type;
  ap->set_name(key);
  switch (a.type) {
    case T::f: ap->set_type(onnx::AttributeProto::FLOAT); ap->set_f(a.f); break;
    case T::i: ap->set_type(onnx::AttributeProto::INT); ap->set_i(a.i); break;
    case T::s: ap->set_type(onnx::AttributeProto::STRING); ap->set_s(a.s); break;
    case T::t: ap->set_type(onnx::AttributeProto::TENSOR); tensor_to_proto(a.t, "", ap->mutable_t()); break;
    case T::g: ap->set_type(onnx::AttributeProto::GRAPH); graph_to_proto(*a.g, ap->mutable_g()); break;
    case T::floats:
      ap->set_type(onnx::AttributeProto::FLOATS);
      for (float v : a.floats) ap->add_floats(v);
      break;
    case T::ints:
      ap->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) ap->add_ints(v);
      break;
    case T::strings:
      ap->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& v : a.strings) ap->add_strings(v);
      break;
    case T::tensors:
      ap->set_type(onnx::AttributeProto::TENSORS);
      for (const Tensor& t : a.tensors) tensor_to_proto(t, "", ap->add_tensors());
      break;
    case T::graphs:
      ap->set_type(onnx::AttributeProto::GRAPHS);
      for (const auto& sg : a.graphs) graph_to_proto(*sg, ap->add_graphs());
      break;
    case T::type_proto:  // kept as the serialized TypeProto (Optional's 'type')
      ap->set_type(onnx::AttributeProto::TYPE_PROTO);
      if (!ap->mutable_tp()->ParseFromString(a.s)) ap->clear_tp();
      break;
    case T::undefined:
      ap->set_type(onnx::AttributeProto::UNDEFINED);
      break;
  }
}

void graph_to_proto(const ir::Graph& g, onnx::GraphProto* gp) {
  gp->set_name(g.name);
  std::set<int> used;
  for (const ir::Node& n : g.nodes) {
    for (int v : n.inputs)
      if (v != ir::kNoValue) used.insert(v);
    // Values its subgraphs read from this graph (the importer marks nested reads at every level).
    for (const ir::Graph* sg : n.subgraphs())
      for (const ir::Value& sv : sg->values)
        if (sv.is_outer)
          if (int v = g.find_value(sv.name); v != ir::kNoValue) used.insert(v);
  }
  for (int v : g.outputs) used.insert(v);
  for (int v : g.inputs) {
    auto* vi = gp->add_input();
    vi->set_name(g.values[static_cast<size_t>(v)].name);
    type_to_proto(g.values[static_cast<size_t>(v)].type, vi->mutable_type());
  }
  for (int v : used) {
    const ir::Value& val = g.values[static_cast<size_t>(v)];
    if (val.initializer) tensor_to_proto(*val.initializer, val.name, gp->add_initializer());
  }
  for (const ir::Node& n : g.nodes) {
    auto* np = gp->add_node();
    np->set_name(n.name);
    np->set_op_type(n.op_type);
    np->set_domain(n.domain);
    for (int v : n.inputs) np->add_input(v == ir::kNoValue ? std::string() : g.values[static_cast<size_t>(v)].name);
    for (int v : n.outputs) np->add_output(v == ir::kNoValue ? std::string() : g.values[static_cast<size_t>(v)].name);
    for (const auto& [key, a] : n.attrs) attr_to_proto(key, a, np->add_attribute());
    for (int v : n.outputs) {
      if (v == ir::kNoValue) continue;
      const ir::Value& val = g.values[static_cast<size_t>(v)];
      if (val.type.dtype == DType::undefined) continue;
      auto* vi = gp->add_value_info();
      vi->set_name(val.name);
      type_to_proto(val.type, vi->mutable_type());
    }
  }
  for (int v : g.outputs) {
    auto* vi = gp->add_output();
    vi->set_name(g.values[static_cast<size_t>(v)].name);
    type_to_proto(g.values[static_cast<size_t>(v)].type, vi->mutable_type());
  }
}

}  // namespace

Result<std::string> save_model_to_bytes(const ir::Model& m) {
  onnx::ModelProto mp;
  mp.set_ir_version(m.ir_version > 0 ? m.ir_version : 8);
  mp.set_producer_name("tactician");
  bool internal = false;
  for (const auto& [domain, version] : m.opsets) {
    auto* os = mp.add_opset_import();
    os->set_domain(domain);
    os->set_version(version);
    internal |= domain == ir::kInternalDomain;
  }
  if (!internal) {
    auto* os = mp.add_opset_import();
    os->set_domain(ir::kInternalDomain);
    os->set_version(1);
  }
  graph_to_proto(m.graph, mp.mutable_graph());
  std::string bytes;
  if (!mp.SerializeToString(&bytes)) return internal_error("cannot serialize the model (over 2 GB?)");
  return bytes;
}

}  // namespace tac::io
