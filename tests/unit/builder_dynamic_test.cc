// Dynamic steps: values whose shape depends on data (NonZero, Range, Loop, If), sequences and
// symbolic dims. The static part of a plan keeps its arena and fast tactics; the dynamic part
// runs with run-time shapes and matches the reference interpreter on inputs that change those
// shapes from run to run; plans with dynamic steps round-trip through plan files.
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "builder/plan_file.h"
#include "builder_test_util.h"

namespace tac {
namespace {

using test::ModelBuilder;

// A subgraph attribute: `fill` adds its nodes, inputs and outputs.
onnx::GraphProto* attr_graph(onnx::NodeProto* n, const std::string& key) {
  auto* a = n->add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(key);
  return a->mutable_g();
}
void graph_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name, int dtype,
                 std::vector<std::string> dims, bool with_shape = true) {
  auto* v = list->Add();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dtype);
  if (!with_shape) return;
  auto* shape = tt->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}
onnx::NodeProto* graph_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                            std::vector<std::string> outs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

Tensor bool_scalar(bool v) {
  Tensor t = Tensor::create(DType::boolean, {}).value();
  t.set_i64(0, v);
  return t;
}
Tensor i64_scalar(int64_t v) {
  Tensor t = Tensor::create(DType::int64, {}).value();
  t.set_i64(0, v);
  return t;
}

// Runs the engine and the reference on `inputs`; "" when every output matches.
std::string compare_with_reference(runtime::Engine& e, const ir::Model& m, const std::vector<Datum>& inputs) {
  auto got = e.run_values(inputs);
  if (!got) return "engine: " + got.status().to_string();
  auto want = ref::run_model(m, inputs);
  if (!want) return "reference: " + want.status().to_string();
  if (got->size() != want->size()) return "output count differs";
  std::vector<Tensor> g, w;
  for (size_t i = 0; i < got->size(); ++i) {
    if ((*got)[i].kind != (*want)[i].kind) return "output " + std::to_string(i) + ": kind differs";
    if ((*got)[i].kind == Datum::Kind::tensor) {
      g.push_back((*got)[i].tensor);
      w.push_back((*want)[i].tensor);
    }
    if ((*got)[i].kind == Datum::Kind::sequence) {
      if ((*got)[i].sequence.size() != (*want)[i].sequence.size()) return "sequence length differs";
      g.insert(g.end(), (*got)[i].sequence.begin(), (*got)[i].sequence.end());
      w.insert(w.end(), (*want)[i].sequence.begin(), (*want)[i].sequence.end());
    }
  }
  return test::compare_outputs(g, w, 1e-5, 1e-4);
}

const builder::PlanStep& step_of(const builder::Plan& p, const std::string& node) {
  for (const builder::PlanStep& st : p.steps)
    if (p.model.graph.nodes[static_cast<size_t>(st.node)].name == node) return st;
  static builder::PlanStep none;
  ADD_FAILURE() << "no step for node " << node;
  return none;
}

// x -> Greater(x, 0) -> NonZero -> Transpose -> GatherND(x, .) -> Mul(., 2) -> y (dynamic),
// and x -> Sigmoid -> s (static, beside it).
ir::Model nonzero_model() {
  ModelBuilder m(17);
  m.input("x", 1, {"4", "6"});
  m.initializer("zero", {}, {0.0f});
  m.initializer("two", {}, {2.0f});
  m.node("Greater", {"x", "zero"}, {"pos"}, "greater");
  m.node("NonZero", {"pos"}, {"nz"}, "nonzero");
  auto* t = m.node("Transpose", {"nz"}, {"idx"}, "transpose");
  test::attr_ints(t, "perm", {1, 0});
  m.node("GatherND", {"x", "idx"}, {"vals"}, "gather");
  m.node("Mul", {"vals", "two"}, {"y"}, "double");
  m.node("Sigmoid", {"x"}, {"s"}, "sigmoid");
  m.output("y", 1, {"n"});
  m.output("s", 1, {"4", "6"});
  return m.load().value();
}

TEST(DynamicPlan, NonZeroThenGatherMatchesTheReferenceAsShapesChange) {
  ir::Model m = nonzero_model();
  auto plan = builder::build_plan(m, {}, {});
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  // NonZero and everything downstream of it is dynamic; Greater and Sigmoid keep fixed shapes.
  EXPECT_FALSE(step_of(*plan, "greater").dynamic);
  EXPECT_FALSE(step_of(*plan, "sigmoid").dynamic);
  EXPECT_STRNE(step_of(*plan, "sigmoid").tactic->name, "reference") << "the static part keeps its fast tactics";
  for (const char* n : {"nonzero", "transpose", "gather", "double"}) EXPECT_TRUE(step_of(*plan, n).dynamic) << n;
  EXPECT_EQ(plan->dynamic_steps(), 4);
  const ir::Graph& g = plan->model.graph;
  EXPECT_TRUE(plan->values[static_cast<size_t>(g.find_value("y"))].is_dynamic());
  EXPECT_EQ(plan->values[static_cast<size_t>(g.find_value("s"))].kind, builder::PlanValue::Kind::arena);
  EXPECT_EQ(plan->values[static_cast<size_t>(g.find_value("y"))].bytes, 0);
  auto e = runtime::Engine::create(std::move(plan).value());
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  // Random data: a different number of positive elements each time, so a different y shape.
  std::set<int64_t> sizes;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    std::vector<Datum> in = {kernels::random_tensor(DType::float32, {4, 6}, seed)};
    EXPECT_EQ(compare_with_reference(**e, m, in), "");
    auto out = (*e)->run_values(in);
    ASSERT_TRUE(out.is_ok());
    sizes.insert((*out)[0].tensor.numel());
  }
  EXPECT_GT(sizes.size(), 1u) << "the test data never changed the dynamic shape";
  // The Tensor API runs it too.
  auto out = (*e)->run({kernels::random_tensor(DType::float32, {4, 6}, 9)});
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  // A wrong static input is refused, naming it.
  auto bad = (*e)->run({kernels::random_tensor(DType::float32, {4, 5}, 9)});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos) << bad.status().message();
}

// Range(0, n, 1) with n an input: its length is data; the Cast and the Add after it follow.
TEST(DynamicPlan, RangeOfAnInputLength) {
  ModelBuilder mb(17);
  mb.input("n", 7, {});
  test::initializer_i64(mb, "start", {}, {0});
  test::initializer_i64(mb, "step", {}, {1});
  mb.initializer("half", {}, {0.5f});
  mb.node("Range", {"start", "n", "step"}, {"r"}, "range");
  auto* c = mb.node("Cast", {"r"}, {"rf"}, "cast");
  test::attr_i(c, "to", 1);
  mb.node("Add", {"rf", "half"}, {"y"}, "add");
  mb.output("y", 1, {"n"});
  ir::Model m = mb.load().value();
  auto e = test::build_engine(m, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ((*e)->plan().dynamic_steps(), 3);
  for (int64_t n : {0, 1, 5, 17}) {
    SCOPED_TRACE(n);
    EXPECT_EQ(compare_with_reference(**e, m, {i64_scalar(n)}), "");
    auto out = (*e)->run({i64_scalar(n)});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    EXPECT_EQ((*out)[0].shape(), Shape{n});
  }
}

// If whose branches give different shapes, and a Loop with a trip count input and a scan output:
// each runs as one dynamic step through the reference interpreter's subgraph execution.
ir::Model control_flow_model() {
  ModelBuilder mb(17);
  mb.input("cond", 9, {});
  mb.input("trips", 7, {});
  mb.input("x", 1, {"3"});
  auto* n_if = mb.node("If", {"cond"}, {"b"}, "if");
  onnx::GraphProto* then_g = attr_graph(n_if, "then_branch");
  graph_node(then_g, "Relu", {"x"}, {"t_out"});
  graph_value(then_g->mutable_output(), "t_out", 1, {"3"});
  onnx::GraphProto* else_g = attr_graph(n_if, "else_branch");
  auto* cat = graph_node(else_g, "Concat", {"x", "x"}, {"e_out"});
  test::attr_i(cat, "axis", 0);
  graph_value(else_g->mutable_output(), "e_out", 1, {"6"});
  // Loop: v <- v + x for `trips` iterations; every v is stacked into a scan output.
  mb.initializer("v0", {3}, {0.0f, 1.0f, -1.0f});
  auto* n_loop = mb.node("Loop", {"trips", "", "v0"}, {"v", "vs"}, "loop");
  onnx::GraphProto* body = attr_graph(n_loop, "body");
  graph_value(body->mutable_input(), "i", 7, {});
  graph_value(body->mutable_input(), "c_in", 9, {});
  graph_value(body->mutable_input(), "v_in", 1, {"3"});
  graph_node(body, "Identity", {"c_in"}, {"c_out"});
  graph_node(body, "Add", {"v_in", "x"}, {"v_out"});
  graph_node(body, "Identity", {"v_in"}, {"scan"});
  graph_value(body->mutable_output(), "c_out", 9, {});
  graph_value(body->mutable_output(), "v_out", 1, {"3"});
  graph_value(body->mutable_output(), "scan", 1, {"3"});
  mb.node("Sigmoid", {"b"}, {"y"}, "after_if");
  mb.output("y", 1, {"m"});
  mb.output("v", 1, {"3"});
  mb.output("vs", 1, {"k", "3"});
  return mb.load().value();
}

TEST(DynamicPlan, IfAndLoopRunAsDynamicSteps) {
  ir::Model m = control_flow_model();
  auto e = test::build_engine(m, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  const builder::Plan& p = (*e)->plan();
  EXPECT_TRUE(step_of(p, "if").dynamic);
  EXPECT_TRUE(step_of(p, "loop").dynamic);
  EXPECT_TRUE(step_of(p, "after_if").dynamic);
  for (bool cond : {true, false})
    for (int64_t trips : {0, 1, 4}) {
      SCOPED_TRACE(std::to_string(cond) + " " + std::to_string(trips));
      std::vector<Datum> in = {bool_scalar(cond), i64_scalar(trips), kernels::random_tensor(DType::float32, {3}, 3)};
      EXPECT_EQ(compare_with_reference(**e, m, in), "");
    }
}

// A declared output shape that a run contradicts: the file declares the If's output float[3], and
// the else branch gives float[6]. The builder trusts only shapes it derives, so the If is a
// dynamic step and the engine gives what the reference gives, in both branches.
TEST(DynamicPlan, DeclaredShapesOfComputedValuesAreNotTrusted) {
  ModelBuilder mb(17);
  mb.input("cond", 9, {});
  mb.input("x", 1, {"3"});
  auto* n_if = mb.node("If", {"cond"}, {"y"}, "if");
  onnx::GraphProto* then_g = attr_graph(n_if, "then_branch");
  graph_node(then_g, "Relu", {"x"}, {"t_out"});
  graph_value(then_g->mutable_output(), "t_out", 1, {"3"});
  onnx::GraphProto* else_g = attr_graph(n_if, "else_branch");
  auto* cat = graph_node(else_g, "Concat", {"x", "x"}, {"e_out"});
  test::attr_i(cat, "axis", 0);
  graph_value(else_g->mutable_output(), "e_out", 1, {"6"});
  mb.output("y", 1, {"3"});
  ir::Model m = mb.load().value();
  auto e = test::build_engine(m, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_TRUE(step_of((*e)->plan(), "if").dynamic);
  const Tensor x = kernels::random_tensor(DType::float32, {3}, 1);
  for (bool cond : {true, false}) EXPECT_EQ(compare_with_reference(**e, m, {bool_scalar(cond), x}), "");
}

// A sequence input and a sequence output: engines take and give any run-time value.
TEST(DynamicPlan, SequenceInputAndOutput) {
  ModelBuilder mb(17);
  auto* in = mb.m.mutable_graph()->add_input();
  in->set_name("seq");
  in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  auto* cat = mb.node("ConcatFromSequence", {"seq"}, {"c"}, "concat");
  test::attr_i(cat, "axis", 0);
  mb.node("Relu", {"c"}, {"y"}, "relu");
  mb.node("SequenceLength", {"seq"}, {"len"}, "length");
  mb.node("SequenceInsert", {"seq", "y"}, {"seq2"}, "insert");
  mb.output("y", 1, {"n", "2"});
  mb.output("len", 7, {});
  auto* out = mb.m.mutable_graph()->add_output();
  out->set_name("seq2");
  out->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  ir::Model m = mb.load().value();
  auto e = test::build_engine(m, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_TRUE((*e)->has_dynamic_inputs());
  for (size_t items : {1u, 3u}) {
    std::vector<Tensor> ts;
    for (size_t i = 0; i < items; ++i) ts.push_back(kernels::random_tensor(DType::float32, {int64_t(i + 1), 2}, i + 1));
    EXPECT_EQ(compare_with_reference(**e, m, {Datum::make_sequence(ts, DType::float32)}), "");
  }
  // A tensor where the graph takes a sequence: refused, naming the input.
  auto wrong = (*e)->run_values({kernels::random_tensor(DType::float32, {1, 2}, 1)});
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("input 'seq': expected a sequence"), std::string::npos) << wrong.status().message();
  auto r = (*e)->run_values({Datum::make_sequence({kernels::random_tensor(DType::float32, {1, 2}, 1)}, DType::float32)});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)[2].kind, Datum::Kind::sequence);
}

// The Tensor API cannot return a sequence: a clear error naming the output (run_values can).
TEST(DynamicPlan, TensorApiRefusesASequenceOutput) {
  ModelBuilder mb(17);
  mb.input("x", 1, {"4", "2"});
  mb.node("SplitToSequence", {"x"}, {"parts"}, "split");
  auto* out = mb.m.mutable_graph()->add_output();
  out->set_name("parts");
  out->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  ir::Model m = mb.load().value();
  auto e = test::build_engine(m, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  const Tensor x = kernels::random_tensor(DType::float32, {4, 2}, 1);
  auto bad = (*e)->run({x});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("output 'parts' is a sequence"), std::string::npos) << bad.status().message();
  EXPECT_EQ(compare_with_reference(**e, m, {x}), "");
}

// Symbolic dims: the plan is built for the bound sizes, records them, and refuses other sizes
// with an error naming the input and the dims.
TEST(DynamicPlan, SymbolicDimsAreBoundAtBuildTime) {
  ModelBuilder mb(17);
  mb.input("x", 1, {"batch", "4"});
  mb.node("Relu", {"x"}, {"y"}, "relu");
  mb.output("y", 1, {"batch", "4"});
  ir::Model m = mb.load().value();
  builder::BuildOptions opts;
  opts.dims["batch"] = 3;
  auto e = test::build_engine(m, "", opts);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ((*e)->plan().dims, (std::map<std::string, int64_t>{{"batch", 3}}));
  EXPECT_EQ((*e)->plan().dynamic_steps(), 0);
  EXPECT_TRUE((*e)->run({kernels::random_tensor(DType::float32, {3, 4}, 1)}).is_ok());
  auto bad = (*e)->run({kernels::random_tensor(DType::float32, {5, 4}, 1)});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("batch=3"), std::string::npos) << bad.status().message();
  // Unbound: 1.
  auto e1 = test::build_engine(m, "");
  ASSERT_TRUE(e1.is_ok());
  EXPECT_EQ((*e1)->plan().dims.at("batch"), 1);
}

TEST(DynamicPlan, PlanFileRoundTripKeepsDynamicSteps) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tac_dyn_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (int which = 0; which < 2; ++which) {
    SCOPED_TRACE(which);
    ir::Model m = which == 0 ? nonzero_model() : control_flow_model();
    auto e = test::build_engine(m, "");
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    const std::string path = (dir / "d.plan").string();
    ASSERT_TRUE(builder::save_plan((*e)->plan(), path).is_ok());
    auto loaded = builder::load_plan(path);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    const builder::Plan& p0 = (*e)->plan();
    ASSERT_EQ(loaded->steps.size(), p0.steps.size());
    for (size_t i = 0; i < p0.steps.size(); ++i) {
      EXPECT_EQ(loaded->steps[i].dynamic, p0.steps[i].dynamic) << "step " << i;
      EXPECT_EQ(loaded->steps[i].tactic, p0.steps[i].tactic) << "step " << i;
    }
    for (size_t v = 0; v < p0.values.size(); ++v) {
      int id = loaded->model.graph.find_value(p0.model.graph.values[v].name);
      if (p0.values[v].kind == builder::PlanValue::Kind::unused || id == ir::kNoValue) continue;
      EXPECT_EQ(loaded->values[static_cast<size_t>(id)].kind, p0.values[v].kind) << p0.model.graph.values[v].name;
    }
    EXPECT_EQ(loaded->dynamic_steps(), p0.dynamic_steps());
    auto e2 = runtime::Engine::create(std::move(loaded).value());
    ASSERT_TRUE(e2.is_ok()) << e2.status().to_string();
    for (uint64_t seed : {1u, 2u, 3u}) {
      std::vector<Datum> in = which == 0 ? std::vector<Datum>{kernels::random_tensor(DType::float32, {4, 6}, seed)}
                                         : std::vector<Datum>{bool_scalar(seed % 2), i64_scalar(int64_t(seed)),
                                                              kernels::random_tensor(DType::float32, {3}, seed)};
      auto a = (*e)->run_values(in);
      auto b = (*e2)->run_values(in);
      ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.status().to_string() << " / " << b.status().to_string();
      for (size_t o = 0; o < a->size(); ++o) {
        const Tensor& ta = (*a)[o].tensor;
        const Tensor& tb = (*b)[o].tensor;
        ASSERT_EQ(ta.shape(), tb.shape());
        EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.bytes()), 0) << "output " << o;
      }
      EXPECT_EQ(compare_with_reference(**e2, m, in), "");
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tac
