// The transformer rewrites (fuse_gelu, fuse_layernorm, eliminate_transpose, merge_reshapes), each
// built with the pass on and with pass.<name>=off: the graph changes as intended (op counts in the
// plan's graph, the pass log) and both engines match the reference interpreter run on the original
// model. Negative cases: an intermediate with a second user blocks the fusion.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "builder/builder.h"
#include "ir/epilogue.h"
#include "kernels/tactic_check.h"
#include "model_builder.h"
#include "reference/interpreter.h"
#include "runtime/engine.h"

namespace tac {
namespace {

using test::ModelBuilder;

constexpr int kFloat = 1;  // onnx::TensorProto::FLOAT

void add_ints_attr(onnx::NodeProto* n, const std::string& k, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void add_int64_initializer(ModelBuilder& m, const std::string& name, std::vector<int64_t> vals) {
  auto* t = m.m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(vals.size()));
  for (int64_t v : vals) t->add_int64_data(v);
}
std::vector<float> random_values(int64_t n, uint64_t seed) {
  Tensor t = kernels::random_tensor(DType::float32, {n}, seed);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

int count_op(const builder::Plan& p, const std::string& op_type) {
  int n = 0;
  for (const ir::Node& node : p.model.graph.nodes) n += node.op_type == op_type;
  return n;
}
int count_log(const builder::Plan& p, const std::string& pass) {
  int n = 0;
  for (const std::string& line : p.report.pass_log) n += line.rfind(pass + ":", 0) == 0;
  return n;
}

// One model built with a pass on and off; both engines run on the same random inputs.
struct Rewrite {
  builder::Plan on, off;
};

// Builds `m` with the default route and with pass.<pass>=off (one thread), runs both engines and
// the reference interpreter on random inputs of `shapes` and checks every output against the
// reference within a tight fp32 tolerance.
Rewrite build_and_check(const ModelBuilder& mb, const std::string& pass, const std::vector<Shape>& shapes) {
  Rewrite r;
  auto model = mb.load();
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  if (!model.is_ok()) return r;
  std::vector<Tensor> inputs;
  std::vector<Datum> ref_inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    inputs.push_back(kernels::random_tensor(DType::float32, shapes[i], 11 + i));
    ref_inputs.emplace_back(inputs.back());
  }
  auto expected = ref::run_model(*model, ref_inputs);
  EXPECT_TRUE(expected.is_ok()) << expected.status().to_string();
  if (!expected.is_ok()) return r;
  for (bool enabled : {true, false}) {
    // fuse_elementwise (tested in elementwise_chain_test.cc) would chain what the pass under test
    // leaves unfused: keep it off so the graph shows this pass's own effect.
    auto route = builder::Route::parse(enabled ? "threads=1 pass.fuse_elementwise=off"
                                               : "threads=1 pass.fuse_elementwise=off pass." + pass + "=off");
    EXPECT_TRUE(route.is_ok()) << route.status().to_string();
    auto plan = builder::build_plan(*model, *route, {});
    EXPECT_TRUE(plan.is_ok()) << plan.status().to_string();
    if (!plan.is_ok()) return r;
    (enabled ? r.on : r.off) = *plan;
    auto engine = runtime::Engine::create(std::move(*plan));
    EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
    if (!engine.is_ok()) return r;
    auto out = (*engine)->run(inputs);
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    if (!out.is_ok()) return r;
    EXPECT_EQ(out->size(), expected->size());
    for (size_t k = 0; k < out->size() && k < expected->size(); ++k) {
      const Tensor& got = (*out)[k];
      const Tensor& want = (*expected)[k].tensor;
      EXPECT_EQ(got.shape(), want.shape());
      if (got.shape() != want.shape()) continue;
      double worst = 0;
      for (int64_t i = 0; i < got.numel(); ++i) {
        const double w = want.get_f64(i), d = std::fabs(got.get_f64(i) - w);
        worst = std::max(worst, d / (1e-5 + 1e-5 * std::fabs(w)));
      }
      EXPECT_LE(worst, 1.0) << "pass." << pass << (enabled ? "=on" : "=off") << ", output " << k
                            << ": error above atol 1e-5 + rtol 1e-5";
    }
  }
  return r;
}

// ---------------------------------------------------------------- fuse_gelu

enum class GeluForm { hf, torch, grouped, mul_rsqrt2 };

// y = gelu(x) written as exporters write it; `extra_use` also outputs an intermediate.
ModelBuilder gelu_model(GeluForm form, bool extra_use = false) {
  ModelBuilder m(17);
  m.input("x", kFloat, {"2", "8", "16"});
  m.initializer("half", {}, {0.5f});
  m.initializer("one", {}, {1.0f});
  if (form == GeluForm::mul_rsqrt2) {
    m.initializer("rsqrt2", {}, {static_cast<float>(1 / std::numbers::sqrt2)});
    m.node("Mul", {"rsqrt2", "x"}, {"s"});
  } else {
    m.initializer("sqrt2", {}, {static_cast<float>(std::numbers::sqrt2)});
    m.node("Div", {"x", "sqrt2"}, {"s"});
  }
  m.node("Erf", {"s"}, {"e"});
  m.node("Add", {"one", "e"}, {"p"});
  switch (form) {
    case GeluForm::hf:  // (x * 0.5) * (1 + erf)
    case GeluForm::mul_rsqrt2:
      m.node("Mul", {"x", "half"}, {"h"});
      m.node("Mul", {"h", "p"}, {"y"});
      break;
    case GeluForm::torch:  // (x * (1 + erf)) * 0.5
      m.node("Mul", {"x", "p"}, {"h"});
      m.node("Mul", {"h", "half"}, {"y"});
      break;
    case GeluForm::grouped:  // x * ((1 + erf) * 0.5)
      m.node("Mul", {"p", "half"}, {"h"});
      m.node("Mul", {"x", "h"}, {"y"});
      break;
  }
  m.output("y", kFloat, {});
  if (extra_use) {
    m.node("Relu", {"h"}, {"h2"});
    m.output("h2", kFloat, {});
  }
  return m;
}

TEST(FuseGelu, EveryExporterFormBecomesOneGelu) {
  for (GeluForm form : {GeluForm::hf, GeluForm::torch, GeluForm::grouped, GeluForm::mul_rsqrt2}) {
    SCOPED_TRACE(static_cast<int>(form));
    Rewrite r = build_and_check(gelu_model(form), "fuse_gelu", {{2, 8, 16}});
    EXPECT_EQ(count_op(r.on, "Gelu"), 1);
    EXPECT_EQ(count_op(r.on, "Erf"), 0);
    EXPECT_EQ(count_op(r.on, "Mul"), 0);
    EXPECT_EQ(count_log(r.on, "fuse_gelu"), 1);
    EXPECT_EQ(count_op(r.off, "Gelu"), 0);
    EXPECT_EQ(count_op(r.off, "Erf"), 1);
    EXPECT_EQ(count_log(r.off, "fuse_gelu"), 0);
  }
}

TEST(FuseGelu, IntermediateWithSecondUserBlocksIt) {
  Rewrite r = build_and_check(gelu_model(GeluForm::hf, /*extra_use=*/true), "fuse_gelu", {{2, 8, 16}});
  EXPECT_EQ(count_op(r.on, "Gelu"), 0);
  EXPECT_EQ(count_op(r.on, "Erf"), 1);
  EXPECT_EQ(count_log(r.on, "fuse_gelu"), 0);
}

TEST(FuseGelu, WrongConstantBlocksIt) {
  ModelBuilder m = gelu_model(GeluForm::hf);
  for (auto& t : *m.m.mutable_graph()->mutable_initializer())
    if (t.name() == "half") t.set_float_data(0, 0.6f);
  Rewrite r = build_and_check(m, "fuse_gelu", {{2, 8, 16}});
  EXPECT_EQ(count_op(r.on, "Gelu"), 0);
  EXPECT_EQ(count_op(r.on, "Erf"), 1);
}

// MatMul -> Add bias -> GELU: fuse_gelu makes the Gelu that fuse_matmul takes into the epilogue.
TEST(FuseGelu, GeluFoldsIntoFusedMatMulEpilogue) {
  ModelBuilder m(17);
  m.input("a", kFloat, {"2", "8", "16"});
  m.initializer("w", {16, 40}, random_values(16 * 40, 3));
  m.initializer("b", {40}, random_values(40, 4));
  m.initializer("half", {}, {0.5f});
  m.initializer("one", {}, {1.0f});
  m.initializer("sqrt2", {}, {static_cast<float>(std::numbers::sqrt2)});
  m.node("MatMul", {"a", "w"}, {"mm"});
  m.node("Add", {"mm", "b"}, {"x"});
  m.node("Div", {"x", "sqrt2"}, {"s"});
  m.node("Erf", {"s"}, {"e"});
  m.node("Add", {"e", "one"}, {"p"});
  m.node("Mul", {"x", "p"}, {"h"});
  m.node("Mul", {"h", "half"}, {"y"});
  m.output("y", kFloat, {});
  Rewrite r = build_and_check(m, "fuse_gelu", {{2, 8, 16}});
  ASSERT_EQ(r.on.model.graph.nodes.size(), 1u);
  const ir::Node& fused = r.on.model.graph.nodes[0];
  EXPECT_EQ(fused.op_type, "FusedMatMul");
  const ir::Attribute* act = fused.attr(ir::Epilogue::kActivation);
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->s, "Gelu");
  // Off: the bias Add still fuses, the GELU subgraph stays as it is.
  EXPECT_EQ(count_op(r.off, "FusedMatMul"), 1);
  EXPECT_EQ(count_op(r.off, "Erf"), 1);
  EXPECT_EQ(count_op(r.off, "Mul"), 2);
}

// ---------------------------------------------------------------- fuse_layernorm

struct LnOptions {
  int opset = 12;           // 18 and above: ReduceMean takes axes as an input
  bool two_subs = false;    // x - mean computed twice (ORT's bert_toy_optimized)
  bool square_mul = false;  // Mul(d, d) instead of Pow(d, 2)
  bool affine = true;       // * gamma + beta
  Shape gamma_shape = {16};
  bool var_used_twice = false;
};

ModelBuilder layernorm_model(const LnOptions& o) {
  ModelBuilder m(o.opset);
  m.input("x", kFloat, {"2", "8", "16"});
  m.initializer("eps", {}, {1e-5f});
  m.initializer("two", {}, {2.0f});
  int64_t gn = 1;
  for (int64_t d : o.gamma_shape) gn *= d;
  m.initializer("gamma", o.gamma_shape, random_values(gn, 5));
  m.initializer("beta", {16}, random_values(16, 6));
  auto mean = [&](const std::string& in, const std::string& out) {
    if (o.opset >= 18) {
      m.node("ReduceMean", {in, "axes"}, {out});
    } else {
      add_ints_attr(m.node("ReduceMean", {in}, {out}), "axes", {-1});
    }
  };
  if (o.opset >= 18) add_int64_initializer(m, "axes", {-1});
  mean("x", "u");
  m.node("Sub", {"x", "u"}, {"d"});
  if (o.square_mul) m.node("Mul", {"d", "d"}, {"sq"});
  else m.node("Pow", {"d", "two"}, {"sq"});
  mean("sq", "var");
  m.node("Add", {"var", "eps"}, {"ve"});
  m.node("Sqrt", {"ve"}, {"sd"});
  if (o.two_subs) m.node("Sub", {"x", "u"}, {"d2"});
  m.node("Div", {o.two_subs ? "d2" : "d", "sd"}, {o.affine ? "n" : "y"});
  if (o.affine) {
    m.node("Mul", {"n", "gamma"}, {"g"});
    m.node("Add", {"beta", "g"}, {"y"});
  }
  m.output("y", kFloat, {});
  if (o.var_used_twice) {
    m.node("Relu", {"var"}, {"var2"});
    m.output("var2", kFloat, {});
  }
  return m;
}

TEST(FuseLayerNorm, DecomposedFormsBecomeLayerNormalization) {
  std::vector<LnOptions> cases(5);
  cases[1].two_subs = true;
  cases[2].square_mul = true;
  cases[3].opset = 18;
  cases[4].affine = false;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    Rewrite r = build_and_check(layernorm_model(cases[i]), "fuse_layernorm", {{2, 8, 16}});
    ASSERT_EQ(r.on.model.graph.nodes.size(), 1u);
    const ir::Node& ln = r.on.model.graph.nodes[0];
    EXPECT_EQ(ln.op_type, "LayerNormalization");
    ASSERT_NE(ln.attr("epsilon"), nullptr);
    EXPECT_FLOAT_EQ(ln.attr("epsilon")->f, 1e-5f);
    EXPECT_EQ(ln.inputs.size(), cases[i].affine ? 3u : 2u);
    EXPECT_EQ(count_log(r.on, "fuse_layernorm"), 1);
    EXPECT_EQ(count_op(r.off, "LayerNormalization"), 0);
    EXPECT_EQ(count_op(r.off, "ReduceMean"), 2);
  }
}

TEST(FuseLayerNorm, IntermediateWithSecondUserBlocksIt) {
  LnOptions o;
  o.var_used_twice = true;
  Rewrite r = build_and_check(layernorm_model(o), "fuse_layernorm", {{2, 8, 16}});
  EXPECT_EQ(count_op(r.on, "LayerNormalization"), 0);
  EXPECT_EQ(count_op(r.on, "ReduceMean"), 2);
  EXPECT_EQ(count_log(r.on, "fuse_layernorm"), 0);
}

// A gamma that is not one value per column is not a LayerNorm scale: the normalisation fuses,
// the Mul and Add stay.
TEST(FuseLayerNorm, FullShapedGammaStaysOutside) {
  LnOptions o;
  o.gamma_shape = {8, 16};
  Rewrite r = build_and_check(layernorm_model(o), "fuse_layernorm", {{2, 8, 16}});
  EXPECT_EQ(count_op(r.on, "LayerNormalization"), 1);
  EXPECT_EQ(count_op(r.on, "Mul"), 1);
  EXPECT_EQ(count_op(r.on, "Add"), 1);
}

// ---------------------------------------------------------------- eliminate_transpose

TEST(EliminateTranspose, ChainBecomesOneTranspose) {
  ModelBuilder m(17);
  m.input("x", kFloat, {"2", "3", "4", "5"});
  add_ints_attr(m.node("Transpose", {"x"}, {"t1"}), "perm", {0, 2, 1, 3});
  add_ints_attr(m.node("Transpose", {"t1"}, {"t2"}), "perm", {0, 1, 3, 2});
  add_ints_attr(m.node("Transpose", {"t2"}, {"t3"}), "perm", {3, 2, 1, 0});
  m.node("Relu", {"t3"}, {"y"});
  m.output("y", kFloat, {});
  Rewrite r = build_and_check(m, "eliminate_transpose", {{2, 3, 4, 5}});
  EXPECT_EQ(count_op(r.on, "Transpose"), 1);
  EXPECT_GE(count_log(r.on, "eliminate_transpose"), 1);
  EXPECT_EQ(count_op(r.off, "Transpose"), 3);
}

TEST(EliminateTranspose, CancellingPairDisappears) {
  ModelBuilder m(17);
  m.input("x", kFloat, {"2", "3", "4", "5"});
  add_ints_attr(m.node("Transpose", {"x"}, {"t1"}), "perm", {0, 2, 3, 1});
  add_ints_attr(m.node("Transpose", {"t1"}, {"t2"}), "perm", {0, 3, 1, 2});
  m.node("Relu", {"t2"}, {"y"});
  // A cancelling pair right before a graph output leaves an Identity under the output's name.
  add_ints_attr(m.node("Transpose", {"x"}, {"u1"}), "perm", {1, 0, 2, 3});
  add_ints_attr(m.node("Transpose", {"u1"}, {"z"}), "perm", {1, 0, 2, 3});
  m.output("y", kFloat, {});
  m.output("z", kFloat, {});
  Rewrite r = build_and_check(m, "eliminate_transpose", {{2, 3, 4, 5}});
  EXPECT_EQ(count_op(r.on, "Transpose"), 0);
  EXPECT_EQ(count_op(r.off, "Transpose"), 4);
}

// The inner Transpose has a second user: it stays, the outer one reads x with the composed perm.
TEST(EliminateTranspose, SharedInnerTransposeStays) {
  ModelBuilder m(17);
  m.input("x", kFloat, {"2", "3", "4", "5"});
  add_ints_attr(m.node("Transpose", {"x"}, {"t1"}), "perm", {0, 2, 1, 3});
  add_ints_attr(m.node("Transpose", {"t1"}, {"t2"}), "perm", {0, 1, 3, 2});
  m.node("Relu", {"t2"}, {"y"});
  m.node("Sigmoid", {"t1"}, {"z"});
  m.output("y", kFloat, {});
  m.output("z", kFloat, {});
  Rewrite r = build_and_check(m, "eliminate_transpose", {{2, 3, 4, 5}});
  EXPECT_EQ(count_op(r.on, "Transpose"), 2);
  const ir::Graph& g = r.on.model.graph;
  for (const ir::Node& n : g.nodes) {
    if (n.op_type == "Transpose") {
      EXPECT_EQ(g.values[static_cast<size_t>(n.inputs[0])].name, "x");  // neither reads the other
    }
  }
}

// ---------------------------------------------------------------- merge_reshapes

TEST(MergeReshapes, ChainBecomesOneReshape) {
  ModelBuilder m(17);
  m.input("x", kFloat, {"2", "3", "4"});
  add_int64_initializer(m, "s1", {6, 4});
  add_int64_initializer(m, "ax0", {0});
  add_int64_initializer(m, "s2", {0, 2, -1});
  m.node("Reshape", {"x", "s1"}, {"r1"});
  m.node("Unsqueeze", {"r1", "ax0"}, {"r2"});  // [1, 6, 4]
  m.node("Reshape", {"r2", "s2"}, {"r3"});     // [1, 2, 12]
  m.node("Relu", {"r3"}, {"y"});
  m.output("y", kFloat, {});
  Rewrite r = build_and_check(m, "merge_reshapes", {{2, 3, 4}});
  EXPECT_EQ(count_op(r.on, "Reshape"), 1);
  EXPECT_EQ(count_op(r.on, "Unsqueeze"), 0);
  EXPECT_EQ(count_op(r.off, "Reshape") + count_op(r.off, "Unsqueeze"), 3);
}

TEST(MergeReshapes, UnsqueezeSqueezePairDisappears) {
  ModelBuilder m(17);
  m.input("x", kFloat, {"2", "3", "4"});
  add_int64_initializer(m, "ax", {1});
  m.node("Unsqueeze", {"x", "ax"}, {"u"});
  m.node("Squeeze", {"u", "ax"}, {"s"});
  m.node("Relu", {"s"}, {"y"});
  m.output("y", kFloat, {});
  Rewrite r = build_and_check(m, "merge_reshapes", {{2, 3, 4}});
  ASSERT_EQ(r.on.model.graph.nodes.size(), 1u);
  EXPECT_EQ(r.on.model.graph.nodes[0].op_type, "Relu");
  EXPECT_EQ(r.off.model.graph.nodes.size(), 3u);
}

}  // namespace
}  // namespace tac
