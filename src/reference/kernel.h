// The contract between the reference interpreter and its op kernels.
//
// A reference kernel is one small, obviously-correct function per op: `void k(KernelContext&)`.
// It reads inputs and attributes from the context, allocates and fills its outputs, and reports
// errors by calling ctx.fail_*() (which unwinds to the interpreter; nothing escapes the library).
// Accumulate in double (or int64 for integers) where it matters: this is the accuracy oracle.
#pragma once

#include <string>
#include <vector>

#include "core/datum.h"
#include "ir/graph.h"

namespace tac::ref {

// Thrown by fail_*() inside the interpreter only; caught in Interpreter and returned as a Status.
struct KernelError {
  Status status;
};

class Frame;

class KernelContext {
 public:
  KernelContext(const ir::Node& node, std::vector<const Datum*> inputs, Frame* frame);

  const ir::Node& node;
  int opset;  // opset version of the node's domain: pick semantics by it

  // ---- inputs ----
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const;               // declared and not omitted ("")
  const Tensor& input(size_t i) const;          // fails when missing or not a tensor
  const Datum& input_datum(size_t i) const;     // fails when missing
  // ---- outputs ----
  size_t num_outputs() const { return node.outputs.size(); }
  bool wants_output(size_t i) const;            // declared and not omitted
  // Allocates output i zero-filled (fails on absurd sizes) and returns it for filling.
  Tensor& make_output(size_t i, DType dtype, Shape shape);
  // Where >= 0, make_output refuses outputs of more bytes with a not_applicable KernelError (the
  // builder's constant folding: a huge constant is not folded, and not computed either).
  int64_t max_output_bytes = -1;
  void set_output(size_t i, Tensor t);
  void set_output_datum(size_t i, Datum d);
  std::vector<Datum>& outputs() { return outputs_; }

  // ---- attributes: a present attribute of the wrong type fails naming it ----
  bool has_attr(const char* name) const { return node.attr(name) != nullptr; }
  int64_t attr_int(const char* name, int64_t def) const;
  float attr_float(const char* name, float def) const;
  std::string attr_string(const char* name, const std::string& def) const;
  std::vector<int64_t> attr_ints(const char* name, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const char* name, std::vector<float> def = {}) const;
  std::vector<std::string> attr_strings(const char* name, std::vector<std::string> def = {}) const;
  const Tensor* attr_tensor(const char* name) const;  // nullptr when absent
  const ir::Graph* attr_graph(const char* name) const;  // nullptr when absent
  int64_t require_int(const char* name) const;  // fails when absent

  // ---- errors, each naming the node ----
  [[noreturn]] void fail_invalid(const std::string& why) const;      // bad model / inputs
  [[noreturn]] void fail_unsupported(const std::string& why) const;  // valid ONNX we do not do

  // Runs subgraph `g` (an attribute of this node) with `args` bound to its inputs in order;
  // names from enclosing scopes resolve through this node's frame. Returns its outputs.
  std::vector<Datum> run_subgraph(const ir::Graph& g, std::vector<Datum> args);

 private:
  const ir::Attribute* typed_attr(const char* name, ir::Attribute::Type type) const;
  std::vector<const Datum*> inputs_;
  std::vector<Datum> outputs_;
  Frame* frame_;
};

using RefKernel = void (*)(KernelContext&);

// One slot per op; registry.cc fills it from the family tables, explicitly (no static init).
struct KernelTable {
  RefKernel kernels[ir::kNumOps] = {};
  void add(ir::OpKind op, RefKernel k) { kernels[static_cast<int>(op)] = k; }
};

// nullptr when the reference interpreter does not support the op.
RefKernel reference_kernel(ir::OpKind op);
bool reference_supports(const ir::Node& n);

// The family tables (one file each under src/reference/ops_*.cc).
void add_elementwise_kernels(KernelTable& t);
void add_nn_kernels(KernelTable& t);
void add_linalg_kernels(KernelTable& t);
void add_reduce_kernels(KernelTable& t);
void add_shape_kernels(KernelTable& t);
void add_control_kernels(KernelTable& t);
void add_fused_kernels(KernelTable& t);  // the builder's internal ops (FusedConv, ...)

}  // namespace tac::ref
