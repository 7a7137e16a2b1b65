// FusedElementwise: program parsing, its tactics against the reference kernel (odd sizes, several
// blocks, threads), and the fuse_elementwise pass on and off against the reference interpreter.
#include "builder_test_util.h"
#include "ir/elementwise_chain.h"
#include "kernels/tactic_check.h"

namespace tac {
namespace {

using kernels::check_tactic;
using kernels::random_tensor;
using test::ModelBuilder;

ir::Node chain_node(std::vector<std::string> ops, size_t n_inputs) {
  ir::Node n = kernels::make_node("FusedElementwise", n_inputs, 1);
  n.domain = ir::kInternalDomain;
  ir::Attribute a;
  a.type = ir::Attribute::Type::strings;
  a.strings = std::move(ops);
  n.attrs["ops"] = a;
  return n;
}

TEST(ElementwiseChain, ParsesAndRefusesBadPrograms) {
  auto ok = ir::parse_chain(chain_node({"Sub,x,in1", "Mul,c0.5,x", "Sigmoid", "Max,in0,x"}, 2));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  ASSERT_EQ(ok->size(), 4u);
  EXPECT_EQ(ir::chain_entry((*ok)[1]), "Mul,c0.5,x");
  for (auto bad : std::vector<std::vector<std::string>>{{}, {"Foo"}, {"Add,x"}, {"Add,x,x"}, {"Add,in1,c2"},
                                                        {"Add,x,in5"}, {"Relu,x"}, {"Add,x,q"}})
    EXPECT_FALSE(ir::parse_chain(chain_node(bad, 2)).is_ok()) << (bad.empty() ? "(empty)" : bad[0]);
}

TEST(ElementwiseChain, TacticsMatchReference) {
  const std::vector<std::vector<std::string>> programs = {
      {"Sub,x,in1", "Mul,c0.5,x", "Sigmoid", "Mul,x,in0"},
      {"Add,x,in1", "Relu", "Div,x,c3", "Tanh", "Min,x,c0.25"},
      {"Abs", "Sqrt", "Reciprocal", "Neg", "Exp", "Erf", "Sub,c1,x", "Max,in1,x"},
  };
  int ran = 0;
  for (const char* name : {"avx512", "avx2"}) {
    const kernels::Tactic* t = kernels::find_tactic(ir::OpKind::FusedElementwise, name);
    ASSERT_NE(t, nullptr);
    uint64_t seed = 7;
    for (const auto& prog : programs)
      for (Shape s : {Shape{1}, Shape{3, 5}, Shape{2, 3, 1001}, Shape{5000}})
        for (int threads : {1, 2}) {
          ir::Node n = chain_node(prog, 2);
          std::vector<Tensor> ins = {random_tensor(DType::float32, s, seed), random_tensor(DType::float32, s, seed + 1)};
          seed += 2;
          auto r = check_tactic(*t, n, ins, {false, false}, threads);
          if (r.status.kind() == ErrorKind::not_applicable) continue;
          ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
          // The vectorised exp/erf/tanh/sigmoid are within a few ulp; chains compound that.
          EXPECT_LE(r.max_rel_diff, 2e-5) << name << " " << prog[0] << " " << shape_to_string(s);
          ++ran;
        }
  }
  EXPECT_GT(ran, 0);
}

// x -> Sub(x, m) -> Mul(., 0.5) -> Sigmoid -> Mul(., x) -> y, plus a side branch that is not
// fused (its input has another user).
ir::Model chain_model() {
  ModelBuilder m(17);
  m.input("x", 1, {"2", "3", "37"});
  m.input("m", 1, {"2", "3", "37"});
  m.initializer("half", {}, {0.5f});
  m.node("Sub", {"x", "m"}, {"a"}, "sub");
  m.node("Mul", {"a", "half"}, {"b"}, "mul");
  m.node("Sigmoid", {"b"}, {"c"}, "sig");
  m.node("Mul", {"c", "x"}, {"y"}, "gate");
  m.node("Relu", {"m"}, {"z"}, "relu_alone");
  m.output("y", 1, {});
  m.output("z", 1, {});
  auto model = m.load();
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  return std::move(model).value();
}

TEST(BuilderPasses, FuseElementwiseMakesOneNodeAndMatchesTheReference) {
  ir::Model model = chain_model();
  for (const char* route : {"", "pass.fuse_elementwise=off"}) {
    auto e = test::build_engine(model, route);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    const ir::Graph& g = (*e)->plan().model.graph;
    if (*route == '\0') {
      EXPECT_EQ(test::count_op(g, "FusedElementwise"), 1) << test::op_list(g);
      EXPECT_EQ(g.nodes.size(), 2u) << test::op_list(g);  // the chain and the lone Relu
    } else {
      EXPECT_EQ(test::count_op(g, "FusedElementwise"), 0) << test::op_list(g);
    }
    std::vector<Tensor> in = test::random_inputs(**e, 3);
    auto got = (*e)->run(in);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    auto want = test::reference_outputs(model, in);
    ASSERT_TRUE(want.is_ok()) << want.status().to_string();
    EXPECT_EQ(test::compare_outputs(*got, *want, 1e-5, 1e-4), "") << "route '" << route << "'";
  }
}

// x -> Softmax = s -> [Sub(., m) -> Mul(., 0.5) -> Sigmoid -> Mul(., s)] -> Softmax -> y: the
// FusedElementwise writes over s, which dies there (memory.inplace), although a later link reads s
// again (element i before element i is written); memory.inplace=off gives it a buffer of its own.
TEST(BuilderMemory, FusedElementwiseWritesOverItsDyingInput) {
  ModelBuilder m(17);
  m.input("x", 1, {"4", "301"});
  m.input("m", 1, {"4", "301"});
  m.initializer("half", {}, {0.5f});
  m.node("Softmax", {"x"}, {"s"}, "softmax_in");
  m.node("Sub", {"s", "m"}, {"a"}, "sub");
  m.node("Mul", {"a", "half"}, {"b"}, "mul");
  m.node("Sigmoid", {"b"}, {"c"}, "sig");
  m.node("Mul", {"c", "s"}, {"d"}, "gate");
  m.node("Softmax", {"d"}, {"y"}, "softmax_out");
  m.output("y", 1, {});
  auto model = m.load();
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  for (const char* route : {"", "memory.inplace=off", "tactic.gate=reference"}) {
    auto e = test::build_engine(*model, route);
    ASSERT_TRUE(e.is_ok()) << route << ": " << e.status().to_string();
    const builder::Plan& p = (*e)->plan();
    int chains = 0;
    for (const builder::PlanStep& st : p.steps) {
      if (p.model.graph.nodes[static_cast<size_t>(st.node)].op != ir::OpKind::FusedElementwise) continue;
      ++chains;
      EXPECT_EQ(st.in_place, std::string(route) != "memory.inplace=off") << route;
      const builder::PlanValue &s = p.values[static_cast<size_t>(st.inputs[0])], &y = p.values[static_cast<size_t>(st.outputs[0])];
      EXPECT_EQ(s.offset == y.offset, st.in_place) << route;
    }
    EXPECT_EQ(chains, 1) << route << ": " << test::op_list(p.model.graph);
    EXPECT_EQ(test::mismatch_vs_reference(**e, *model, 5, 1e-6, 1e-5), "") << route;
  }
}

TEST(BuilderPasses, ElementwiseChainStopsAtBroadcastsAndSharedValues) {
  ModelBuilder m(17);
  m.input("x", 1, {"4", "8"});
  m.input("row", 1, {"8"});  // broadcasts: not a chain operand
  m.node("Relu", {"x"}, {"a"}, "relu");
  m.node("Add", {"a", "row"}, {"b"}, "add_row");
  m.node("Exp", {"b"}, {"c"}, "exp");
  m.node("Neg", {"c"}, {"y"}, "neg");
  m.output("y", 1, {});
  m.output("c", 1, {});  // c is an output: the chain must stop there
  auto model = m.load();
  ASSERT_TRUE(model.is_ok());
  auto e = test::build_engine(*model, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(test::count_op((*e)->plan().model.graph, "FusedElementwise"), 0) << test::op_list((*e)->plan().model.graph);
}

}  // namespace
}  // namespace tac
