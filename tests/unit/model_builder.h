// A tiny ONNX model builder over libonnx's protobuf classes, for tests.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "io/onnx_import.h"

namespace tac::test {

// A tiny model builder over libonnx's protobuf classes.
struct ModelBuilder {
  // Adds an opset import for `domain` (e.g. the internal "tactician" domain).
  void import_domain(const std::string& domain, int version) {
    auto* os = m.add_opset_import();
    os->set_domain(domain);
    os->set_version(version);
  }
  onnx::ModelProto m;
  ModelBuilder(int opset = 17) {
    m.set_ir_version(8);
    auto* os = m.add_opset_import();
    os->set_domain("");
    os->set_version(opset);
    m.mutable_graph()->set_name("g");
  }
  onnx::ValueInfoProto* value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                              int dtype, std::vector<std::string> dims) {
    auto* v = list->Add();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype);
    auto* shape = tt->mutable_shape();
    for (const std::string& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
    return v;
  }
  void input(const std::string& n, int dtype, std::vector<std::string> dims) { value(m.mutable_graph()->mutable_input(), n, dtype, dims); }
  void output(const std::string& n, int dtype, std::vector<std::string> dims) { value(m.mutable_graph()->mutable_output(), n, dtype, dims); }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                        const std::string& name = "") {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  void initializer(const std::string& n, std::vector<int64_t> dims, std::vector<float> vals) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : vals) t->add_float_data(v);
  }
  std::string bytes() const { return m.SerializeAsString(); }
  Result<ir::Model> load() const { return io::load_model_from_bytes(bytes(), "test.onnx", ""); }
};

}  // namespace tac::test
