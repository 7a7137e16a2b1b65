// The IR: a Model holds a Graph of Nodes connected by Values. Built by src/io/onnx_import.cc,
// read by the reference interpreter and (later) the builder.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/layout.h"
#include "tactician/status.h"
#include "tactician/tensor.h"

namespace tac::ir {

enum class OpKind : int32_t {
#define TAC_OP(name) name,
#include "ir/ops.def"
#undef TAC_OP
  kCount,
  unknown = kCount,  // an op outside the list or outside the default domain
};

// Domain of the internal ops the builder creates (FusedConv, ...).
inline constexpr const char* kInternalDomain = "tactician";
// "Conv" -> OpKind::Conv; OpKind::unknown when not in the list.
OpKind op_kind_from_name(std::string_view name);
const char* op_name(OpKind op);
constexpr int kNumOps = static_cast<int>(OpKind::kCount);

// One dimension of a declared shape: a known size, a named symbol ("batch"), or unknown.
struct Dim {
  int64_t value = -1;   // >= 0 when known
  std::string symbol;   // non-empty for a symbolic dim
  bool known() const { return value >= 0; }
  bool operator==(const Dim&) const = default;
};

enum class ValueKind { tensor, sequence, optional };

// What is known statically about a value: element type and (maybe) shape.
struct ValueType {
  ValueKind kind = ValueKind::tensor;
  ValueKind inner = ValueKind::tensor;  // element kind of a sequence / optional
  DType dtype = DType::undefined;       // element type of the (inner) tensors
  bool has_shape = false;
  std::vector<Dim> dims;
  std::string to_string() const;  // "float[batch,3,224,224]", "seq(float)"
};

class Graph;

struct Attribute {
  enum class Type { undefined, f, i, s, t, g, floats, ints, strings, tensors, graphs, type_proto };
  Type type = Type::undefined;
  float f = 0;
  int64_t i = 0;
  std::string s;  // a string; for type_proto, the serialized onnx.TypeProto
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
};
const char* attribute_type_name(Attribute::Type t);

constexpr int kNoValue = -1;  // an omitted optional input or output

struct Node {
  std::string name;     // may be empty in ONNX; see label()
  std::string op_type;  // as written in the model
  std::string domain;   // "" for the default domain
  OpKind op = OpKind::unknown;
  int opset = 0;  // opset version of this node's domain, from the model's opset_import
  std::vector<int> inputs;   // value ids, kNoValue for an omitted optional input
  std::vector<int> outputs;  // value ids, kNoValue for an omitted optional output
  std::map<std::string, Attribute> attrs;

  const Attribute* attr(const std::string& key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : &it->second;
  }
  // "node 'conv1' (Conv)" or "node #12 (Conv)": how errors name a node.
  std::string label() const;
  // The graphs of its graph-valued attributes (If's branches, Loop's and Scan's bodies), in
  // attribute order.
  std::vector<const Graph*> subgraphs() const;
  int index = -1;  // position in Graph::nodes
};

struct Value {
  std::string name;
  ValueType type;
  int producer = -1;   // node index, -1 for graph inputs, initializers and outer-scope values
  bool is_input = false;
  bool is_outer = false;  // defined in an enclosing graph (subgraphs of If/Loop/Scan)
  std::optional<Tensor> initializer;  // constant data (initializers)
  // How the buffer holds the (logical, NCHW) shape; set by the builder's layout rewrite only.
  Layout layout = Layout::nchw;
};

class Graph {
 public:
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;  // topologically sorted after import
  std::vector<int> inputs;  // graph inputs that are not initializers, in declaration order
  std::vector<int> outputs;

  int find_value(const std::string& name) const {
    auto it = value_by_name_.find(name);
    return it == value_by_name_.end() ? kNoValue : it->second;
  }
  // The value named `name`, created (with an unknown type) when absent.
  int get_or_add_value(const std::string& name);
  // Consumers of each value (node indices), recomputed on demand.
  std::vector<std::vector<int>> consumers() const;
  // Sort nodes so that every node comes after the producers of its inputs. Fails naming a node
  // on a cycle. Keeps the original order where it is already valid (stable).
  Status sort_topologically();
  // Number of nodes including those in subgraphs.
  size_t node_count_recursive() const;

 private:
  std::unordered_map<std::string, int> value_by_name_;
};

struct Model {
  std::string path;  // file it was loaded from, for error messages
  int64_t ir_version = 0;
  std::string producer;
  std::string hash;  // FNV-1a 64 of the model file's bytes, hex (plans and tuning records cite it)
  std::map<std::string, int64_t> opsets;  // domain ("" = default) -> version
  Graph graph;
};

// A human-readable listing of the graph (one line per node), for --dump and debugging.
std::string print_graph(const Graph& g);

}  // namespace tac::ir
