#include <set>

#include "builder/passes/pass.h"

namespace tac::builder {

std::vector<std::vector<int>> value_users(const ir::Graph& g) {
  std::vector<std::vector<int>> users = g.consumers();
  for (int v : g.outputs) users[static_cast<size_t>(v)].push_back(-1);
  return users;
}

bool has_single_user(const std::vector<std::vector<int>>& users, int v) {
  const auto& u = users[static_cast<size_t>(v)];
  return u.size() == 1 && u[0] >= 0;
}

const Tensor* constant_of(const ir::Graph& g, int v) {
  if (v == ir::kNoValue) return nullptr;
  const ir::Value& val = g.values[static_cast<size_t>(v)];
  return val.initializer ? &*val.initializer : nullptr;
}

void set_constant(ir::Graph& g, int v, Tensor t) {
  ir::Value& val = g.values[static_cast<size_t>(v)];
  val.type.kind = ir::ValueKind::tensor;
  val.type.dtype = t.dtype();
  val.type.has_shape = true;
  val.type.dims.clear();
  for (int64_t d : t.shape()) {
    ir::Dim dim;
    dim.value = d;
    val.type.dims.push_back(dim);
  }
  val.producer = -1;
  val.initializer = std::move(t);
}

int add_value(ir::Graph& g, const std::string& base, ir::ValueType type) {
  std::string name = base;
  for (int k = 1; g.find_value(name) != ir::kNoValue; ++k) name = base + "_" + std::to_string(k);
  const int v = g.get_or_add_value(name);
  g.values[static_cast<size_t>(v)].type = std::move(type);
  return v;
}

int add_constant(ir::Graph& g, const std::string& base, Tensor t) {
  const int v = add_value(g, base, {});
  set_constant(g, v, std::move(t));
  return v;
}

void replace_uses(ir::Graph& g, int from, int to) {
  for (ir::Node& n : g.nodes)
    for (int& v : n.inputs)
      if (v == from) v = to;
  for (int& v : g.outputs)
    if (v == from) v = to;
}

Status remove_nodes(ir::Graph& g, const std::vector<bool>& dead_in) {
  std::vector<bool> dead = dead_in;
  dead.resize(g.nodes.size(), false);
  // Iterate to a fixpoint: removing a node can leave its producers unused.
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<int> uses(g.values.size(), 0);
    for (const ir::Node& n : g.nodes)
      if (!dead[static_cast<size_t>(n.index)])
        for (int v : n.inputs)
          if (v != ir::kNoValue) ++uses[static_cast<size_t>(v)];
    for (const ir::Node& n : g.nodes)  // outer-scope reads from subgraphs keep values alive
      if (!dead[static_cast<size_t>(n.index)])
        for (const ir::Graph* sg : n.subgraphs())
          for (const ir::Value& sv : sg->values)
            if (sv.is_outer)
              if (int v = g.find_value(sv.name); v != ir::kNoValue) ++uses[static_cast<size_t>(v)];
    for (int v : g.outputs) ++uses[static_cast<size_t>(v)];
    for (const ir::Node& n : g.nodes) {
      if (dead[static_cast<size_t>(n.index)]) continue;
      bool used = false;
      for (int v : n.outputs) used |= v != ir::kNoValue && uses[static_cast<size_t>(v)] > 0;
      if (!used) {
        dead[static_cast<size_t>(n.index)] = true;
        changed = true;
      }
    }
  }
  std::vector<ir::Node> kept;
  for (ir::Node& n : g.nodes)
    if (!dead[static_cast<size_t>(n.index)]) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
  for (size_t i = 0; i < g.nodes.size(); ++i) g.nodes[i].index = static_cast<int>(i);
  return g.sort_topologically();
}

}  // namespace tac::builder
