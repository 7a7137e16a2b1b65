#include "reference/kernel.h"

#include <algorithm>

#include "reference/interpreter.h"

namespace tac::ref {

KernelContext::KernelContext(const ir::Node& n, std::vector<const Datum*> inputs, Frame* frame)
    : node(n), opset(n.opset), inputs_(std::move(inputs)), outputs_(n.outputs.size()), frame_(frame) {}

bool KernelContext::has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }

const Datum& KernelContext::input_datum(size_t i) const {
  if (!has_input(i)) fail_invalid("required input " + std::to_string(i) + " is missing");
  return *inputs_[i];
}

const Tensor& KernelContext::input(size_t i) const {
  const Datum& d = input_datum(i);
  if (d.kind != Datum::Kind::tensor || d.tensor.empty())
    fail_invalid("input " + std::to_string(i) + " must be a tensor");
  return d.tensor;
}

bool KernelContext::wants_output(size_t i) const { return i < node.outputs.size() && node.outputs[i] != ir::kNoValue; }

Tensor& KernelContext::make_output(size_t i, DType dtype, Shape shape) {
  if (i >= outputs_.size()) outputs_.resize(i + 1);  // unused trailing outputs: kept, never stored
  if (max_output_bytes >= 0) {
    const int64_t n = shape_numel(shape);
    if (n < 0 || static_cast<uint64_t>(n) > static_cast<uint64_t>(max_output_bytes) / std::max<size_t>(1, dtype_size(dtype)))
      throw KernelError{Status(ErrorKind::not_applicable, node.label() + ": output " + std::to_string(i) + " of shape " +
                                                              shape_to_string(shape) + " is over the size limit")};
  }
  auto t = Tensor::create(dtype, std::move(shape));
  if (!t) throw KernelError{t.status().with_context(node.label() + ": ")};
  outputs_[i] = Datum(std::move(t).value());
  return outputs_[i].tensor;
}

void KernelContext::set_output(size_t i, Tensor t) { set_output_datum(i, Datum(std::move(t))); }

void KernelContext::set_output_datum(size_t i, Datum d) {
  if (i >= outputs_.size()) outputs_.resize(i + 1);
  outputs_[i] = std::move(d);
}

const ir::Attribute* KernelContext::typed_attr(const char* name, ir::Attribute::Type type) const {
  const ir::Attribute* a = node.attr(name);
  if (a && a->type != type)
    fail_invalid(std::string("attribute '") + name + "' must be " + ir::attribute_type_name(type) + ", got " +
                 ir::attribute_type_name(a->type));
  return a;
}

int64_t KernelContext::attr_int(const char* name, int64_t def) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::i);
  return a ? a->i : def;
}
float KernelContext::attr_float(const char* name, float def) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::f);
  return a ? a->f : def;
}
std::string KernelContext::attr_string(const char* name, const std::string& def) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::s);
  return a ? a->s : def;
}
std::vector<int64_t> KernelContext::attr_ints(const char* name, std::vector<int64_t> def) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::ints);
  return a ? a->ints : def;
}
std::vector<float> KernelContext::attr_floats(const char* name, std::vector<float> def) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::floats);
  return a ? a->floats : def;
}
std::vector<std::string> KernelContext::attr_strings(const char* name, std::vector<std::string> def) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::strings);
  return a ? a->strings : def;
}
const Tensor* KernelContext::attr_tensor(const char* name) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::t);
  return a ? &a->t : nullptr;
}
const ir::Graph* KernelContext::attr_graph(const char* name) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::g);
  return a ? a->g.get() : nullptr;
}
int64_t KernelContext::require_int(const char* name) const {
  const ir::Attribute* a = typed_attr(name, ir::Attribute::Type::i);
  if (!a) fail_invalid(std::string("attribute '") + name + "' is required");
  return a->i;
}

void KernelContext::fail_invalid(const std::string& why) const {
  throw KernelError{invalid_model(node.label() + ": " + why)};
}
void KernelContext::fail_unsupported(const std::string& why) const {
  throw KernelError{unsupported(node.label() + ": " + why)};
}

std::vector<Datum> KernelContext::run_subgraph(const ir::Graph& g, std::vector<Datum> args) {
  if (args.size() != g.inputs.size())
    fail_invalid("subgraph '" + g.name + "' takes " + std::to_string(g.inputs.size()) + " inputs, " +
                 std::to_string(args.size()) + " given");
  Frame sub(g, frame_);
  for (size_t i = 0; i < args.size(); ++i) {
    sub.values[static_cast<size_t>(g.inputs[i])] = std::move(args[i]);
    sub.defined[static_cast<size_t>(g.inputs[i])] = true;
  }
  run_frame(sub);
  std::vector<Datum> outs;
  for (int v : g.outputs) {
    if (!sub.defined[static_cast<size_t>(v)])
      fail_invalid("subgraph output '" + g.values[static_cast<size_t>(v)].name + "' was not computed");
    outs.push_back(sub.values[static_cast<size_t>(v)]);
  }
  return outs;
}

}  // namespace tac::ref
