#include "ir/graph.h"

#include <algorithm>
#include <array>
#include <queue>
#include <sstream>

namespace tac::ir {

namespace {
constexpr std::array<const char*, kNumOps> kOpNames = {
#define TAC_OP(name) #name,
#include "ir/ops.def"
#undef TAC_OP
};
}  // namespace

OpKind op_kind_from_name(std::string_view name) {
  static const std::unordered_map<std::string_view, OpKind> table = [] {
    std::unordered_map<std::string_view, OpKind> m;
    for (int i = 0; i < kNumOps; ++i) m.emplace(kOpNames[static_cast<size_t>(i)], static_cast<OpKind>(i));
    return m;
  }();
  auto it = table.find(name);
  return it == table.end() ? OpKind::unknown : it->second;
}

const char* op_name(OpKind op) {
  int i = static_cast<int>(op);
  return i >= 0 && i < kNumOps ? kOpNames[static_cast<size_t>(i)] : "unknown";
}

const char* attribute_type_name(Attribute::Type t) {
  switch (t) {
    case Attribute::Type::undefined: return "undefined";
    case Attribute::Type::f: return "float";
    case Attribute::Type::i: return "int";
    case Attribute::Type::s: return "string";
    case Attribute::Type::t: return "tensor";
    case Attribute::Type::g: return "graph";
    case Attribute::Type::floats: return "floats";
    case Attribute::Type::ints: return "ints";
    case Attribute::Type::strings: return "strings";
    case Attribute::Type::tensors: return "tensors";
    case Attribute::Type::graphs: return "graphs";
    case Attribute::Type::type_proto: return "type_proto";
  }
  return "unknown";
}

std::string ValueType::to_string() const {
  std::string elem = dtype_name(dtype);
  if (has_shape) {
    elem += "[";
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i) elem += ",";
      if (dims[i].known()) elem += std::to_string(dims[i].value);
      else elem += dims[i].symbol.empty() ? "?" : dims[i].symbol;
    }
    elem += "]";
  }
  switch (kind) {
    case ValueKind::tensor: return elem;
    case ValueKind::sequence: return "seq(" + elem + ")";
    case ValueKind::optional: return "optional(" + elem + ")";
  }
  return elem;
}

std::vector<const Graph*> Node::subgraphs() const {
  std::vector<const Graph*> subs;
  for (const auto& [key, a] : attrs) {
    if (a.g) subs.push_back(a.g.get());
    for (const auto& sg : a.graphs) subs.push_back(sg.get());
  }
  return subs;
}

std::string Node::label() const {
  std::string who = name.empty() ? "#" + std::to_string(index) : "'" + name + "'";
  return "node " + who + " (" + op_type + ")";
}

int Graph::get_or_add_value(const std::string& n) {
  auto it = value_by_name_.find(n);
  if (it != value_by_name_.end()) return it->second;
  int id = static_cast<int>(values.size());
  Value v;
  v.name = n;
  values.push_back(std::move(v));
  value_by_name_.emplace(n, id);
  return id;
}

std::vector<std::vector<int>> Graph::consumers() const {
  std::vector<std::vector<int>> c(values.size());
  for (const Node& n : nodes)
    for (int v : n.inputs)
      if (v != kNoValue) c[static_cast<size_t>(v)].push_back(n.index);
  return c;
}

// Outer-scope names used inside a node's subgraphs (recursively): the node depends on them.
static void collect_outer_refs(const Graph& g, std::vector<std::string>& out) {
  for (const Value& v : g.values)
    if (v.is_outer) out.push_back(v.name);
}

Status Graph::sort_topologically() {
  const size_t n = nodes.size();
  std::vector<int> producer_of(values.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (int v : nodes[i].outputs)
      if (v != kNoValue) producer_of[static_cast<size_t>(v)] = static_cast<int>(i);
  // Dependencies: data inputs plus outer-scope references from subgraphs.
  std::vector<std::vector<int>> deps(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<int> ins = nodes[i].inputs;
    std::vector<std::string> outer;
    for (const auto& [key, a] : nodes[i].attrs) {
      if (a.g) collect_outer_refs(*a.g, outer);
      for (const auto& sg : a.graphs) collect_outer_refs(*sg, outer);
    }
    for (const std::string& name : outer) {
      int v = find_value(name);
      if (v != kNoValue) ins.push_back(v);
    }
    for (int v : ins) {
      if (v == kNoValue) continue;
      int p = producer_of[static_cast<size_t>(v)];
      if (p >= 0 && p != static_cast<int>(i)) deps[i].push_back(p);
    }
  }
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> users(n);
  for (size_t i = 0; i < n; ++i)
    for (int p : deps[i]) {
      ++indegree[i];
      users[static_cast<size_t>(p)].push_back(static_cast<int>(i));
    }
  // Kahn's algorithm with a min-heap on the original index: stable for sorted graphs.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[static_cast<size_t>(i)])
      if (--indegree[static_cast<size_t>(u)] == 0) ready.push(u);
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (indegree[i] > 0) return invalid_model("the graph has a cycle through " + nodes[i].label());
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int i : order) sorted.push_back(std::move(nodes[static_cast<size_t>(i)]));
  nodes = std::move(sorted);
  for (size_t i = 0; i < n; ++i) nodes[i].index = static_cast<int>(i);
  for (Value& v : values) v.producer = -1;
  for (const Node& nd : nodes)
    for (int v : nd.outputs)
      if (v != kNoValue) values[static_cast<size_t>(v)].producer = nd.index;
  return Status::ok();
}

size_t Graph::node_count_recursive() const {
  size_t count = nodes.size();
  for (const Node& nd : nodes)
    for (const auto& [key, a] : nd.attrs) {
      if (a.g) count += a.g->node_count_recursive();
      for (const auto& sg : a.graphs) count += sg->node_count_recursive();
    }
  return count;
}

std::string print_graph(const Graph& g) {
  std::ostringstream os;
  auto name_of = [&](int v) { return v == kNoValue ? std::string("-") : g.values[static_cast<size_t>(v)].name; };
  os << "graph " << g.name << "\n";
  for (int v : g.inputs) os << "  input " << g.values[static_cast<size_t>(v)].name << ": " << g.values[static_cast<size_t>(v)].type.to_string() << "\n";
  for (const Node& n : g.nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << name_of(n.outputs[i]);
    os << " = " << n.op_type << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << name_of(n.inputs[i]);
    os << ")";
    if (!n.name.empty()) os << "  # " << n.name;
    for (int v : n.outputs)
      if (v != kNoValue) os << "  -> " << g.values[static_cast<size_t>(v)].type.to_string();
    os << "\n";
  }
  for (int v : g.outputs) os << "  output " << g.values[static_cast<size_t>(v)].name << ": " << g.values[static_cast<size_t>(v)].type.to_string() << "\n";
  return os.str();
}

}  // namespace tac::ir
