#include "io/onnx_import.h"

#include <onnx/defs/schema.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <set>
#include <vector>

#include "io/file.h"
#include "io/proto_convert.h"

namespace tac::io {

namespace {

std::string normalize_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

std::string attribute_type_word(int type) {
  static const char* const kNames[] = {"undefined", "a float", "an int", "a string", "a tensor", "a graph",
                                       "floats", "ints", "strings", "tensors", "graphs", "a sparse tensor",
                                       "sparse tensors", "a type", "types"};
  return type >= 0 && type < static_cast<int>(std::size(kNames)) ? kNames[type] : "type " + std::to_string(type);
}

class Importer {
 public:
  Importer(std::string label, std::string base_dir, const std::map<std::string, int64_t>& opsets)
      : label_(std::move(label)), base_dir_(std::move(base_dir)), opsets_(opsets) {}

  // `outer` lists the names visible from enclosing graphs (empty for the main graph).
  Status convert_graph(const onnx::GraphProto& gp, const std::set<std::string>& outer, ir::Graph& g,
                       int depth);
  // The main graph when the importer may take its initializers' bytes (its own parse of a file).
  onnx::GraphProto* consumable = nullptr;

 private:
  // `schema`: ONNX's schema of the node's op at its opset, when the op is an ONNX one.
  Status convert_attribute(const onnx::AttributeProto& ap, const onnx::OpSchema* schema,
                           const std::set<std::string>& scope, const std::string& where, ir::Attribute& a, int depth);

  std::string label_;
  std::string base_dir_;
  const std::map<std::string, int64_t>& opsets_;
};

Status Importer::convert_attribute(const onnx::AttributeProto& ap, const onnx::OpSchema* schema,
                                   const std::set<std::string>& scope, const std::string& where, ir::Attribute& a,
                                   int depth) {
  using T = ir::Attribute::Type;
  const std::string what = where + ": attribute '" + ap.name() + "'";
  int type = ap.type();
  if (type == onnx::AttributeProto::UNDEFINED) {  // IR < 2 leaves the type out: infer it
    if (ap.has_f()) type = onnx::AttributeProto::FLOAT;
    else if (ap.has_i()) type = onnx::AttributeProto::INT;
    else if (ap.has_s()) type = onnx::AttributeProto::STRING;
    else if (ap.has_t()) type = onnx::AttributeProto::TENSOR;
    else if (ap.has_g()) type = onnx::AttributeProto::GRAPH;
    else if (ap.floats_size()) type = onnx::AttributeProto::FLOATS;
    else if (ap.ints_size()) type = onnx::AttributeProto::INTS;
    else if (ap.strings_size()) type = onnx::AttributeProto::STRINGS;
    else if (ap.tensors_size()) type = onnx::AttributeProto::TENSORS;
    else if (ap.graphs_size()) type = onnx::AttributeProto::GRAPHS;
  }
  if (!ap.ref_attr_name().empty())
    return unsupported(what + " refers to a function attribute ('" + ap.ref_attr_name() + "')");
  // An attribute of the wrong type would otherwise be read as absent (its default) by a kernel:
  // ONNX's own schema of the op says which type each attribute has.
  if (schema) {
    auto it = schema->attributes().find(ap.name());
    if (it != schema->attributes().end() && it->second.type != type)
      return invalid_model(what + " must be " + attribute_type_word(it->second.type) + " (ONNX's " + schema->Name() +
                           "-" + std::to_string(schema->SinceVersion()) + "), got " + attribute_type_word(type));
  }
  switch (type) {
    case onnx::AttributeProto::FLOAT: a.type = T::f; a.f = ap.f(); break;
    case onnx::AttributeProto::INT: a.type = T::i; a.i = ap.i(); break;
    case onnx::AttributeProto::STRING: a.type = T::s; a.s = ap.s(); break;
    case onnx::AttributeProto::TENSOR: {
      a.type = T::t;
      TAC_ASSIGN_OR_RETURN(a.t, tensor_from_proto(ap.t(), base_dir_, what));
      break;
    }
    case onnx::AttributeProto::GRAPH: {
      a.type = T::g;
      a.g = std::make_shared<ir::Graph>();
      TAC_RETURN_IF_ERROR(convert_graph(ap.g(), scope, *a.g, depth + 1));
      break;
    }
    case onnx::AttributeProto::FLOATS: a.type = T::floats; a.floats.assign(ap.floats().begin(), ap.floats().end()); break;
    case onnx::AttributeProto::INTS: a.type = T::ints; a.ints.assign(ap.ints().begin(), ap.ints().end()); break;
    case onnx::AttributeProto::STRINGS: a.type = T::strings; a.strings.assign(ap.strings().begin(), ap.strings().end()); break;
    case onnx::AttributeProto::TENSORS:
      a.type = T::tensors;
      for (const auto& tp : ap.tensors()) {
        TAC_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(tp, base_dir_, what));
        a.tensors.push_back(std::move(t));
      }
      break;
    case onnx::AttributeProto::GRAPHS:
      a.type = T::graphs;
      for (const auto& gp : ap.graphs()) {
        auto sg = std::make_shared<ir::Graph>();
        TAC_RETURN_IF_ERROR(convert_graph(gp, scope, *sg, depth + 1));
        a.graphs.push_back(std::move(sg));
      }
      break;
    case onnx::AttributeProto::TYPE_PROTO:  // kept serialized, for the plan file's graph export
      a.type = T::type_proto;
      a.s = ap.tp().SerializeAsString();
      break;
    case onnx::AttributeProto::SPARSE_TENSOR:
    case onnx::AttributeProto::SPARSE_TENSORS:
      return unsupported(what + " is a sparse tensor, which is not supported");
    default:
      return invalid_model(what + " has no value or an unknown type (" + std::to_string(type) + ")");
  }
  return Status::ok();
}

Status Importer::convert_graph(const onnx::GraphProto& gp, const std::set<std::string>& outer, ir::Graph& g,
                               int depth) {
  if (depth > 64) return invalid_model("subgraphs nested more than 64 deep");
  g.name = gp.name();
  const std::string gwhere = depth == 0 ? std::string() : "subgraph '" + gp.name() + "': ";
  if (gp.sparse_initializer_size() > 0) return unsupported(gwhere + "sparse initializers are not supported");

  for (int i = 0; i < gp.initializer_size(); ++i) {
    const onnx::TensorProto& tp = gp.initializer(i);
    if (tp.name().empty()) return invalid_model(gwhere + "an initializer has no name");
    int v = g.get_or_add_value(tp.name());
    if (g.values[static_cast<size_t>(v)].initializer)
      return invalid_model(gwhere + "initializer '" + tp.name() + "' is defined twice");
    const std::string what = gwhere + "initializer '" + tp.name() + "'";
    TAC_ASSIGN_OR_RETURN(Tensor t, &gp == consumable
                                       ? take_tensor_from_proto(*consumable->mutable_initializer(i), base_dir_, what)
                                       : tensor_from_proto(tp, base_dir_, what));
    ir::Value& val = g.values[static_cast<size_t>(v)];
    val.type.dtype = t.dtype();
    val.type.has_shape = true;
    for (int64_t d : t.shape()) { ir::Dim dim; dim.value = d; val.type.dims.push_back(dim); }
    val.initializer = std::move(t);
  }
  for (const auto& vi : gp.input()) {
    if (vi.name().empty()) return invalid_model(gwhere + "a graph input has no name");
    int v = g.get_or_add_value(vi.name());
    ir::Value& val = g.values[static_cast<size_t>(v)];
    if (val.is_input) return invalid_model(gwhere + "graph input '" + vi.name() + "' is declared twice");
    if (!val.initializer) {  // IR < 4 also lists initializers as inputs: those stay constants
      TAC_ASSIGN_OR_RETURN(val.type, value_type_from_proto(vi.type(), gwhere + "graph input '" + vi.name() + "'"));
      val.is_input = true;
      g.inputs.push_back(v);
    }
  }
  // Register every node output first: nodes may come in any order (bert-toy is unsorted).
  for (const auto& np : gp.node()) {
    for (const auto& out : np.output()) {
      if (out.empty()) continue;
      int v = g.get_or_add_value(out);
      ir::Value& val = g.values[static_cast<size_t>(v)];
      if (val.producer >= 0 || val.initializer || val.is_input)
        return invalid_model(gwhere + "value '" + out + "' is defined more than once");
      val.producer = 0;  // marker until sort_topologically() sets real indices
    }
  }
  std::set<std::string> scope = outer;  // what subgraphs of this graph may refer to
  for (const ir::Value& val : g.values) scope.insert(val.name);

  g.nodes.reserve(static_cast<size_t>(gp.node_size()));
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    ir::Node n;
    n.name = np.name();
    n.op_type = np.op_type();
    n.domain = normalize_domain(np.domain());
    n.index = i;
    const std::string where = gwhere + n.label();
    if (n.op_type.empty()) return invalid_model(where + ": empty op_type");
    auto os = opsets_.find(n.domain);
    if (os == opsets_.end())
      return invalid_model(where + ": domain '" + n.domain + "' is not in the model's opset_import");
    n.opset = static_cast<int>(os->second);
    n.op = n.domain.empty() || n.domain == ir::kInternalDomain ? ir::op_kind_from_name(n.op_type) : ir::OpKind::unknown;
    for (const auto& in : np.input()) {
      if (in.empty()) {
        n.inputs.push_back(ir::kNoValue);
        continue;
      }
      int v = g.find_value(in);
      if (v == ir::kNoValue) {
        if (!outer.count(in))
          return invalid_model(where + ": input '" + in +
                               "' is not a graph input, an initializer or the output of any node");
        v = g.get_or_add_value(in);
        g.values[static_cast<size_t>(v)].is_outer = true;
      }
      n.inputs.push_back(v);
    }
    for (const auto& out : np.output()) n.outputs.push_back(out.empty() ? ir::kNoValue : g.find_value(out));
    const onnx::OpSchema* schema =
        n.domain.empty() && np.attribute_size() > 0 ? onnx::OpSchemaRegistry::Schema(n.op_type, n.opset, "") : nullptr;
    for (const auto& ap : np.attribute()) {
      if (ap.name().empty()) return invalid_model(where + ": an attribute has no name");
      ir::Attribute a;
      TAC_RETURN_IF_ERROR(convert_attribute(ap, schema, scope, where, a, depth));
      if (!n.attrs.emplace(ap.name(), std::move(a)).second)
        return invalid_model(where + ": attribute '" + ap.name() + "' is given twice");
    }
    g.nodes.push_back(std::move(n));
  }
  // Outer-scope references made only inside nested subgraphs must be visible here too, so that
  // the enclosing graph orders its nodes after their producers and the interpreter finds them.
  for (const ir::Node& n : g.nodes)
    for (const ir::Graph* sg : n.subgraphs())
      for (const ir::Value& sv : sg->values)
        if (sv.is_outer && g.find_value(sv.name) == ir::kNoValue) {
          if (!outer.count(sv.name))
            return invalid_model(gwhere + n.label() + ": subgraph refers to unknown value '" + sv.name + "'");
          g.values[static_cast<size_t>(g.get_or_add_value(sv.name))].is_outer = true;
        }
  for (const auto& vi : gp.output()) {
    int v = g.find_value(vi.name());
    if (v == ir::kNoValue) {
      if (!outer.count(vi.name()))
        return invalid_model(gwhere + "graph output '" + vi.name() + "' is not produced by any node");
      v = g.get_or_add_value(vi.name());
      g.values[static_cast<size_t>(v)].is_outer = true;
    }
    TAC_ASSIGN_OR_RETURN(ir::ValueType vt, value_type_from_proto(vi.type(), gwhere + "graph output '" + vi.name() + "'"));
    ir::Value& val = g.values[static_cast<size_t>(v)];
    if (!val.initializer) val.type = vt;
    g.outputs.push_back(v);
  }
  for (const auto& vi : gp.value_info()) {
    int v = g.find_value(vi.name());
    if (v == ir::kNoValue) continue;  // annotation of a value that does not exist: harmless
    TAC_ASSIGN_OR_RETURN(ir::ValueType vt, value_type_from_proto(vi.type(), gwhere + "value '" + vi.name() + "'"));
    ir::Value& val = g.values[static_cast<size_t>(v)];
    if (!val.initializer && !val.is_input) val.type = vt;
  }
  return g.sort_topologically().with_context(gwhere);
}

}  // namespace

namespace {

// FNV-1a 64 over the file's bytes: the model hash plans and tuning databases are keyed by.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const unsigned char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  std::string hex() const {
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
    return out;
  }
};

// With `consume`, the main graph's initializer bytes move out of `mp` into the tensors.
Result<ir::Model> model_from_proto(onnx::ModelProto& mp, bool consume, const std::string& hash,
                                   const std::string& label, const std::string& base_dir) {
  if (!mp.has_graph()) return invalid_model(label + ": the model has no graph");
  ir::Model m;
  m.path = label;
  m.hash = hash;
  m.ir_version = mp.ir_version();
  m.producer = mp.producer_name();
  for (const auto& os : mp.opset_import()) m.opsets[normalize_domain(os.domain())] = os.version();
  if (m.opsets.empty()) m.opsets[""] = 1;  // IR 1-2 models may leave opset_import out
  if (mp.functions_size() > 0) {
    // Model-local functions are not expanded yet; nodes calling them report as unsupported ops.
  }
  Importer imp(label, base_dir, m.opsets);
  if (consume) imp.consumable = mp.mutable_graph();
  Status st = imp.convert_graph(mp.graph(), {}, m.graph, 0);
  if (!st) return st.with_context(label + ": ");
  return m;
}

}  // namespace

Result<ir::Model> load_model_from_bytes(std::string_view bytes, const std::string& label, const std::string& base_dir) {
  onnx::ModelProto mp;
  if (bytes.empty()) return invalid_model(label + ": the file is empty");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return invalid_model(label + ": larger than 2 GiB, more than one protobuf message can hold");
  if (!mp.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return invalid_model(label + ": not an ONNX model (protobuf parse failed)");
  Fnv h;
  h.add(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return model_from_proto(mp, /*consume=*/true, h.hex(), label, base_dir);  // the weights move, not copied
}

// The file is hashed in 1 MB pieces and parsed straight from the descriptor, and the parsed
// weights move into our tensors: they are copied once (by the parser) instead of four or five
// times through a whole-file string. Every page a copy touches first is a page fault, ~10 us on
// the VMs these run on: loading BERT-base (410 MB) took seconds per tuner candidate.
Result<ir::Model> load_model(const std::string& path) {
  TAC_ASSIGN_OR_RETURN(Fd fd, open_regular_file(path));
  Fnv h;
  std::vector<unsigned char> buf(size_t{1} << 20);
  size_t total = 0;
  for (ssize_t n; (n = read(fd.get(), buf.data(), buf.size())) != 0; total += static_cast<size_t>(n)) {
    if (n < 0 && errno == EINTR) n = 0;
    else if (n < 0) return io_error(path + ": read error: " + std::strerror(errno));
    h.add(buf.data(), static_cast<size_t>(n));
  }
  if (total == 0) return invalid_model(path + ": the file is empty");
  if (lseek(fd.get(), 0, SEEK_SET) != 0) return io_error(path + ": cannot seek");
  onnx::ModelProto mp;
  if (!mp.ParseFromFileDescriptor(fd.get()))
    return invalid_model(path + ": not an ONNX model (protobuf parse failed)");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return model_from_proto(mp, true, h.hex(), path, dir.empty() ? "." : dir);
}

}  // namespace tac::io
