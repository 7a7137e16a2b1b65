// Helpers for the builder tests (tests/unit/builder_*_test.cc): build an engine for a route,
// run it and the reference interpreter on the same random inputs, and inspect the built graph.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "builder/builder.h"
#include "kernels/tactic_check.h"
#include "model_builder.h"
#include "reference/interpreter.h"
#include "runtime/engine.h"

namespace tac::test {

// ---- more ModelBuilder vocabulary ----
inline void attr_i(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr_f(onnx::NodeProto* n, const std::string& k, float v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void attr_ints(onnx::NodeProto* n, const std::string& k, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void initializer_i64(ModelBuilder& m, const std::string& n, std::vector<int64_t> dims, std::vector<int64_t> vals) {
  auto* t = m.m.mutable_graph()->add_initializer();
  t->set_name(n);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : vals) t->add_int64_data(v);
}
// A float initializer of random values (normal(0,1) scaled), never all zeros.
inline void initializer_random(ModelBuilder& m, const std::string& n, std::vector<int64_t> dims, uint64_t seed,
                               float scale = 1.0f) {
  Tensor t = kernels::random_tensor(DType::float32, Shape(dims.begin(), dims.end()), seed);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i] * scale;
  m.initializer(n, dims, v);
}
// A float initializer of random positive values in [lo, lo + 1) (BatchNorm variances, scales).
inline void initializer_positive(ModelBuilder& m, const std::string& n, std::vector<int64_t> dims, uint64_t seed,
                                 float lo = 0.5f) {
  Tensor t = kernels::random_tensor(DType::float32, Shape(dims.begin(), dims.end()), seed);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = lo + std::fabs(std::fmod(t.data<float>()[i], 1.0f));
  m.initializer(n, dims, v);
}

// ---- building and running ----
inline Result<std::unique_ptr<runtime::Engine>> build_engine(const ir::Model& m, const std::string& route_text,
                                                             const builder::BuildOptions& opts = {}) {
  TAC_ASSIGN_OR_RETURN(builder::Route route, builder::Route::parse(route_text));
  TAC_ASSIGN_OR_RETURN(builder::Plan plan, builder::build_plan(m, route, opts));
  return runtime::Engine::create(std::move(plan));
}

// Random (never zero) inputs of the engine's input specs.
inline std::vector<Tensor> random_inputs(const runtime::Engine& e, uint64_t seed) {
  std::vector<Tensor> in;
  for (const auto& [dt, shape] : e.input_specs()) in.push_back(kernels::random_tensor(dt, shape, seed++));
  return in;
}

inline Result<std::vector<Tensor>> reference_outputs(const ir::Model& m, const std::vector<Tensor>& inputs) {
  std::vector<Datum> in(inputs.begin(), inputs.end());
  TAC_ASSIGN_OR_RETURN(std::vector<Datum> out, ref::run_model(m, in));
  std::vector<Tensor> t;
  for (Datum& d : out) t.push_back(std::move(d.tensor));
  return t;
}

// Every element within atol + rtol·|want|; NaN never passes. Returns "" or a description of
// the first mismatch.
inline std::string compare_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double atol,
                                   double rtol) {
  if (got.size() != want.size())
    return std::to_string(got.size()) + " outputs, wanted " + std::to_string(want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    if (got[o].shape() != want[o].shape() || got[o].dtype() != want[o].dtype())
      return "output " + std::to_string(o) + ": shape/dtype " + dtype_name(got[o].dtype()) +
             shape_to_string(got[o].shape()) + ", wanted " + dtype_name(want[o].dtype()) + shape_to_string(want[o].shape());
    for (int64_t i = 0; i < got[o].numel(); ++i) {
      double g = got[o].get_f64(i), w = want[o].get_f64(i);
      if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w)))
        return "output " + std::to_string(o) + "[" + std::to_string(i) + "]: " + std::to_string(g) + ", wanted " +
               std::to_string(w);
    }
  }
  return "";
}

// Runs `e` on random inputs (from `seed`) and compares its outputs with the reference
// interpreter's on `m`: "" when every element is within atol + rtol·|want|, else what failed.
inline std::string mismatch_vs_reference(runtime::Engine& e, const ir::Model& m, uint64_t seed, double atol,
                                         double rtol) {
  std::vector<Tensor> in = random_inputs(e, seed);
  auto got = e.run(in);
  if (!got) return "engine run failed: " + got.status().to_string();
  auto want = reference_outputs(m, in);
  if (!want) return "reference failed: " + want.status().to_string();
  return compare_outputs(*got, *want, atol, rtol);
}

inline int count_op(const ir::Graph& g, const std::string& op_type) {
  int c = 0;
  for (const ir::Node& n : g.nodes) c += n.op_type == op_type;
  return c;
}
inline std::string op_list(const ir::Graph& g) {
  std::string s;
  for (const ir::Node& n : g.nodes) s += (s.empty() ? "" : " ") + n.op_type;
  return s;
}
inline bool log_mentions(const builder::Plan& p, const std::string& what) {
  for (const std::string& l : p.report.pass_log)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace tac::test
