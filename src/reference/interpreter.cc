#include "reference/interpreter.h"

#include <algorithm>
#include <new>
#include <stdexcept>

#include "reference/kernel.h"

namespace tac::ref {

namespace {
void collect_unsupported(const ir::Graph& g, std::vector<const ir::Node*>& out) {
  for (const ir::Node& n : g.nodes) {
    if (!reference_supports(n)) out.push_back(&n);
    for (const auto& [key, a] : n.attrs) {
      if (a.g) collect_unsupported(*a.g, out);
      for (const auto& sg : a.graphs) collect_unsupported(*sg, out);
    }
  }
}

// Names a subgraph (or one nested in it) reads from enclosing scopes.
void collect_outer_names(const ir::Graph& g, std::vector<std::string>& out) {
  for (const ir::Value& v : g.values)
    if (v.is_outer) out.push_back(v.name);
  for (const ir::Node& n : g.nodes)
    for (const auto& [key, a] : n.attrs) {
      if (a.g) collect_outer_names(*a.g, out);
      for (const auto& sg : a.graphs) collect_outer_names(*sg, out);
    }
}
}  // namespace

std::vector<const ir::Node*> unsupported_nodes(const ir::Graph& g) {
  std::vector<const ir::Node*> out;
  collect_unsupported(g, out);
  return out;
}

const Datum* Frame::lookup(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent) {
    int v = f->graph.find_value(name);
    if (v != ir::kNoValue && f->defined[static_cast<size_t>(v)]) return &f->values[static_cast<size_t>(v)];
  }
  return nullptr;
}

void run_frame(Frame& frame) {
  const ir::Graph& g = frame.graph;
  // Initializers and outer-scope values become defined first.
  for (size_t v = 0; v < g.values.size(); ++v) {
    const ir::Value& val = g.values[v];
    if (val.initializer && !frame.defined[v]) {
      frame.values[v] = Datum(*val.initializer);
      frame.defined[v] = true;
    } else if (val.is_outer && !frame.defined[v]) {
      const Datum* d = frame.parent ? frame.parent->lookup(val.name) : nullptr;
      if (!d) throw KernelError{invalid_model("outer-scope value '" + val.name + "' is not defined")};
      frame.values[v] = *d;
      frame.defined[v] = true;
    }
  }
  // Last use of each value, so intermediates are freed as soon as possible.
  std::vector<int> last_use(g.values.size(), -1);
  for (const ir::Node& n : g.nodes)
    for (int v : n.inputs)
      if (v != ir::kNoValue) last_use[static_cast<size_t>(v)] = n.index;
  // A value read by a node's subgraph (If/Loop/Scan bodies) stays alive at least until that node.
  for (const ir::Node& n : g.nodes) {
    std::vector<std::string> names;
    for (const auto& [key, a] : n.attrs) {
      if (a.g) collect_outer_names(*a.g, names);
      for (const auto& sg : a.graphs) collect_outer_names(*sg, names);
    }
    for (const std::string& name : names) {
      int v = g.find_value(name);
      if (v != ir::kNoValue) last_use[static_cast<size_t>(v)] = std::max(last_use[static_cast<size_t>(v)], n.index);
    }
  }
  for (int v : g.outputs) last_use[static_cast<size_t>(v)] = static_cast<int>(g.nodes.size());

  for (const ir::Node& n : g.nodes) {
    RefKernel k = reference_supports(n) ? reference_kernel(n.op) : nullptr;
    if (!k) {
      std::string op = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
      throw KernelError{unsupported(n.label() + ": op " + op + " is not supported")};
    }
    std::vector<const Datum*> ins;
    for (int v : n.inputs) {
      if (v == ir::kNoValue) {
        ins.push_back(nullptr);
        continue;
      }
      if (!frame.defined[static_cast<size_t>(v)])
        throw KernelError{invalid_model(n.label() + ": input '" + g.values[static_cast<size_t>(v)].name +
                                        "' has no value (a graph input not given?)")};
      ins.push_back(&frame.values[static_cast<size_t>(v)]);
    }
    KernelContext ctx(n, std::move(ins), &frame);
    try {
      k(ctx);
    } catch (const std::bad_alloc&) {
      throw KernelError{invalid_model(n.label() + ": out of memory")};
    } catch (const std::length_error&) {
      throw KernelError{invalid_model(n.label() + ": tensor too large")};
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      int v = n.outputs[i];
      if (v == ir::kNoValue) continue;
      Datum& d = ctx.outputs()[i];
      if (d.kind == Datum::Kind::tensor && d.tensor.empty())
        throw KernelError{internal_error(n.label() + ": kernel did not produce output " + std::to_string(i))};
      frame.values[static_cast<size_t>(v)] = std::move(d);
      frame.defined[static_cast<size_t>(v)] = true;
    }
    if (frame.observer && *frame.observer) {
      std::vector<Datum> outs(n.outputs.size());
      for (size_t i = 0; i < n.outputs.size(); ++i)
        if (n.outputs[i] != ir::kNoValue) outs[i] = frame.values[static_cast<size_t>(n.outputs[i])];
      (*frame.observer)(n, outs);
    }
    for (int v : n.inputs)
      if (v != ir::kNoValue && last_use[static_cast<size_t>(v)] == n.index && !g.values[static_cast<size_t>(v)].is_outer)
        frame.values[static_cast<size_t>(v)] = Datum();
  }
}

Status check_inputs(const ir::Graph& g, const std::vector<Datum>& inputs) {
  if (inputs.size() != g.inputs.size())
    return invalid_argument("the model has " + std::to_string(g.inputs.size()) + " inputs, " +
                            std::to_string(inputs.size()) + " were given");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& val = g.values[static_cast<size_t>(g.inputs[i])];
    const Datum& d = inputs[i];
    if (val.type.kind != ir::ValueKind::tensor) continue;
    if (!d.is_tensor()) return invalid_argument("input '" + val.name + "': expected a tensor");
    if (val.type.dtype != DType::undefined && d.tensor.dtype() != val.type.dtype)
      return invalid_argument("input '" + val.name + "': expected " + dtype_name(val.type.dtype) + ", got " +
                              dtype_name(d.tensor.dtype()));
    if (val.type.has_shape) {
      bool ok = val.type.dims.size() == d.tensor.shape().size();
      for (size_t k = 0; ok && k < val.type.dims.size(); ++k)
        ok = !val.type.dims[k].known() || val.type.dims[k].value == d.tensor.shape()[k];
      if (!ok)
        return invalid_argument("input '" + val.name + "': expected shape " + val.type.to_string() + ", got " +
                                shape_to_string(d.tensor.shape()));
    }
  }
  return Status::ok();
}

Result<std::vector<Datum>> run_model(const ir::Model& m, const std::vector<Datum>& inputs,
                                     const NodeObserver& observer) {
  const ir::Graph& g = m.graph;
  TAC_RETURN_IF_ERROR(check_inputs(g, inputs).with_context(m.path + ": "));
  Frame frame(g, nullptr);
  frame.observer = &observer;
  for (size_t i = 0; i < inputs.size(); ++i) {
    frame.values[static_cast<size_t>(g.inputs[i])] = inputs[i];
    frame.defined[static_cast<size_t>(g.inputs[i])] = true;
  }
  try {
    run_frame(frame);
  } catch (const KernelError& e) {
    return e.status.with_context(m.path + ": ");
  } catch (const std::bad_alloc&) {
    return invalid_model(m.path + ": out of memory");
  }
  std::vector<Datum> outs;
  for (int v : g.outputs) {
    if (!frame.defined[static_cast<size_t>(v)])
      return invalid_model(m.path + ": output '" + g.values[static_cast<size_t>(v)].name + "' was not computed");
    outs.push_back(frame.values[static_cast<size_t>(v)]);
  }
  return outs;
}

}  // namespace tac::ref
