// Every builder pass with and without it (STYLE.md 12): the pass changes the graph as intended,
// and the engines built with the pass on and off both compute what the reference interpreter
// computes on the original model.
#include <cstring>

#include "builder/precision.h"
#include "builder_test_util.h"
#include "ir/epilogue.h"

namespace tac {
namespace {

using test::ModelBuilder;

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // fp32 kernels against the float64 reference

ir::Model load(const ModelBuilder& mb) {
  auto m = mb.load();
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return std::move(m).value();
}

// Builds `m` with `route`, runs it on random inputs and compares with the reference
// interpreter on the original model. Returns the engine for inspection of its plan.
// fuse_elementwise (tested in elementwise_chain_test.cc) is kept off unless the route names it:
// it would chain the Add/Relu nodes these tests check another pass leaves unfused.
std::unique_ptr<runtime::Engine> build_and_check(const ir::Model& m, const std::string& route_in, uint64_t seed = 1) {
  const std::string route =
      route_in.find("fuse_elementwise") == std::string::npos ? route_in + " pass.fuse_elementwise=off" : route_in;
  auto e = test::build_engine(m, route);
  EXPECT_TRUE(e.is_ok()) << "route '" << route << "': " << e.status().to_string();
  if (!e) return nullptr;
  std::vector<Tensor> in = test::random_inputs(**e, seed);
  auto got = (*e)->run(in);
  EXPECT_TRUE(got.is_ok()) << "route '" << route << "': " << got.status().to_string();
  auto want = test::reference_outputs(m, in);
  EXPECT_TRUE(want.is_ok()) << want.status().to_string();
  if (got && want) {
    std::string diff = test::compare_outputs(*got, *want, kAtol, kRtol);
    EXPECT_EQ(diff, "") << "route '" << route << "', graph " << test::op_list((*e)->plan().model.graph);
  }
  return std::move(e).value();
}

// The plan's value named `name` (a test failure, and the first value, when there is none).
const builder::PlanValue& plan_value(const builder::Plan& p, const char* name) {
  for (size_t v = 0; v < p.model.graph.values.size(); ++v)
    if (p.model.graph.values[v].name == name) return p.values[v];
  ADD_FAILURE() << "no value " << name;
  return p.values[0];
}

const ir::Graph& graph_of(const std::unique_ptr<runtime::Engine>& e) { return e->plan().model.graph; }

std::string tactic_of(const runtime::Engine& e, const std::string& op);

// ---------------------------------------------------------------- fold_batchnorm + fuse_conv

// Conv(bias) -> BatchNormalization -> Add(residual input) -> Relu
ir::Model conv_bn_add_relu(bool conv_bias) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "3", "9", "9"});
  m.input("r", 1, {"1", "4", "9", "9"});
  test::initializer_random(m, "w", {4, 3, 3, 3}, 21, 0.4f);
  std::vector<std::string> conv_in = {"x", "w"};
  if (conv_bias) {
    test::initializer_random(m, "b", {4}, 22);
    conv_in.push_back("b");
  }
  auto* c = m.node("Conv", conv_in, {"c"}, "conv");
  test::attr_ints(c, "pads", {1, 1, 1, 1});
  test::initializer_positive(m, "scale", {4}, 23);
  test::initializer_random(m, "bias", {4}, 24);
  test::initializer_random(m, "mean", {4}, 25);
  test::initializer_positive(m, "var", {4}, 26);
  auto* bn = m.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"}, "bn");
  test::attr_f(bn, "epsilon", 1e-3f);
  m.node("Add", {"n", "r"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  m.output("y", 1, {});
  return load(m);
}

TEST(BuilderPasses, FoldBatchnormThenFuseConvMakeOneFusedConv) {
  ir::Model m = conv_bn_add_relu(true);
  auto on = build_and_check(m, "");
  ASSERT_TRUE(on);
  EXPECT_EQ(test::op_list(graph_of(on)), "FusedConv");
  EXPECT_TRUE(test::log_mentions(on->plan(), "fold_batchnorm: ")) << on->plan().report.pass_log.size();
  EXPECT_TRUE(test::log_mentions(on->plan(), "fuse_conv: "));

  auto no_fold = build_and_check(m, "pass.fold_batchnorm=off");
  ASSERT_TRUE(no_fold);
  // The BatchNormalization stays, and it blocks the Conv -> Add fusion.
  EXPECT_EQ(test::op_list(graph_of(no_fold)), "Conv BatchNormalization Add Relu");
  EXPECT_FALSE(test::log_mentions(no_fold->plan(), "fold_batchnorm"));

  auto no_fuse = build_and_check(m, "pass.fuse_conv=off");
  ASSERT_TRUE(no_fuse);
  EXPECT_EQ(test::op_list(graph_of(no_fuse)), "Conv Add Relu");
  EXPECT_FALSE(test::log_mentions(no_fuse->plan(), "fuse_conv"));

  build_and_check(m, "pass.fold_batchnorm=off pass.fuse_conv=off");
}

TEST(BuilderPasses, FoldBatchnormIntoConvWithoutBias) {
  ir::Model m = conv_bn_add_relu(false);
  auto fused = build_and_check(m, "pass.fuse_conv=off");
  ASSERT_TRUE(fused);
  EXPECT_EQ(test::op_list(graph_of(fused)), "Conv Add Relu");
  // The folded conv gained a bias input.
  const ir::Node& conv = graph_of(fused).nodes[0];
  ASSERT_EQ(conv.inputs.size(), 3u);
  EXPECT_NE(conv.inputs[2], ir::kNoValue);
  build_and_check(m, "pass.fold_batchnorm=off");
}

TEST(BuilderPasses, BatchnormIsNotFoldedIntoAConvWhoseOutputIsUsedTwice) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "2", "6", "6"});
  test::initializer_random(m, "w", {3, 2, 1, 1}, 31);
  m.node("Conv", {"x", "w"}, {"c"}, "conv");
  test::initializer_positive(m, "scale", {3}, 32);
  test::initializer_random(m, "bias", {3}, 33);
  test::initializer_random(m, "mean", {3}, 34);
  test::initializer_positive(m, "var", {3}, 35);
  m.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"}, "bn");
  m.node("Add", {"n", "c"}, {"y"}, "add");  // the raw conv output is read again
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto e = build_and_check(model, "");
  ASSERT_TRUE(e);
  EXPECT_EQ(test::count_op(graph_of(e), "BatchNormalization"), 1) << test::op_list(graph_of(e));
  EXPECT_EQ(test::count_op(graph_of(e), "FusedConv"), 0) << test::op_list(graph_of(e));
}

// ---------------------------------------------------------------- fuse_conv

TEST(BuilderPasses, FuseConvAbsorbsResidualAddAndActivation) {
  struct Case {
    const char* name;
    bool residual;
    const char* act;  // "" for none
    const char* unfused;
  };
  const Case cases[] = {
      {"relu only", false, "Relu", "Conv Relu"},
      {"add only", true, "", "Conv Add"},
      {"add + clip", true, "Clip", "Conv Add Clip"},
      {"add + sigmoid", true, "Sigmoid", "Conv Add Sigmoid"},
      {"leaky relu", false, "LeakyRelu", "Conv LeakyRelu"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ModelBuilder m(17);
    m.input("x", 1, {"1", "3", "7", "7"});
    test::initializer_random(m, "w", {5, 3, 3, 3}, 41, 0.4f);
    test::initializer_random(m, "b", {5}, 42);
    auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
    test::attr_ints(conv, "strides", {2, 2});
    std::string y = "c";
    if (c.residual) {
      m.input("r", 1, {"1", "5", "3", "3"});
      m.node("Add", {"r", y}, {"s"}, "add");  // the conv output as the Add's second operand
      y = "s";
    }
    if (std::string(c.act) == "Clip") {
      m.initializer("lo", {}, {0.0f});
      m.initializer("hi", {}, {0.75f});
      m.node("Clip", {y, "lo", "hi"}, {"y"}, "act");
    } else if (*c.act) {
      auto* a = m.node(c.act, {y}, {"y"}, "act");
      if (std::string(c.act) == "LeakyRelu") test::attr_f(a, "alpha", 0.2f);
    } else {
      m.node("Identity", {y}, {"y"}, "id");  // keep the fused value off the graph output
    }
    m.output("y", 1, {});
    ir::Model model = load(m);
    auto on = build_and_check(model, "");
    auto off = build_and_check(model, "pass.fuse_conv=off");
    ASSERT_TRUE(on && off);
    std::string on_ops = test::op_list(graph_of(on)), off_ops = test::op_list(graph_of(off));
    EXPECT_EQ(on_ops, *c.act ? "FusedConv" : "FusedConv Identity");
    EXPECT_EQ(off_ops, *c.act ? c.unfused : std::string(c.unfused) + " Identity");
  }
}

TEST(BuilderPasses, FuseConvTakesTheOtherConvAsResidual) {
  // ResNet's downsampling block: act(conv_a(x) + conv_b(x)).
  ModelBuilder m(17);
  m.input("x", 1, {"1", "4", "8", "8"});
  test::initializer_random(m, "wa", {6, 4, 3, 3}, 51, 0.3f);
  test::initializer_random(m, "wb", {6, 4, 1, 1}, 52, 0.3f);
  auto* a = m.node("Conv", {"x", "wa"}, {"ca"}, "conv_a");
  test::attr_ints(a, "pads", {1, 1, 1, 1});
  m.node("Conv", {"x", "wb"}, {"cb"}, "conv_b");
  m.node("Add", {"ca", "cb"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto on = build_and_check(model, "");
  ASSERT_TRUE(on);
  EXPECT_EQ(test::count_op(graph_of(on), "FusedConv"), 1) << test::op_list(graph_of(on));
  EXPECT_EQ(test::count_op(graph_of(on), "Conv"), 1) << test::op_list(graph_of(on));
  EXPECT_EQ(graph_of(on).nodes.size(), 2u) << test::op_list(graph_of(on));
  auto off = build_and_check(model, "pass.fuse_conv=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(graph_of(off).nodes.size(), 4u);
}

TEST(BuilderPasses, ConvOutputUsedTwiceIsNotFusedAway) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "3", "6", "6"});
  test::initializer_random(m, "w", {3, 3, 3, 3}, 61, 0.4f);
  auto* conv = m.node("Conv", {"x", "w"}, {"c"}, "conv");
  test::attr_ints(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"a"}, "relu");
  m.node("Add", {"a", "c"}, {"y"}, "add");  // c read by the Relu and by the Add
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto e = build_and_check(model, "");
  ASSERT_TRUE(e);
  EXPECT_EQ(test::op_list(graph_of(e)), "Conv Relu Add");
}

TEST(BuilderPasses, ConvOutputThatIsAGraphOutputIsNotFusedAway) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "3", "6", "6"});
  test::initializer_random(m, "w", {3, 3, 3, 3}, 62, 0.4f);
  m.node("Conv", {"x", "w"}, {"c"}, "conv");
  m.node("Relu", {"c"}, {"y"}, "relu");
  m.output("c", 1, {});
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto e = build_and_check(model, "");
  ASSERT_TRUE(e);
  EXPECT_EQ(test::op_list(graph_of(e)), "Conv Relu");

  // The same for the Add in the middle of the chain: the activation must stay separate.
  ModelBuilder m2(17);
  m2.input("x", 1, {"1", "3", "6", "6"});
  m2.input("r", 1, {"1", "3", "4", "4"});
  test::initializer_random(m2, "w", {3, 3, 3, 3}, 63, 0.4f);
  m2.node("Conv", {"x", "w"}, {"c"}, "conv");
  m2.node("Add", {"c", "r"}, {"s"}, "add");
  m2.node("Relu", {"s"}, {"y"}, "relu");
  m2.output("s", 1, {});
  m2.output("y", 1, {});
  ir::Model model2 = load(m2);
  auto e2 = build_and_check(model2, "");
  ASSERT_TRUE(e2);
  EXPECT_EQ(test::op_list(graph_of(e2)), "FusedConv Relu");
}

// SiLU as torch exports it (EfficientNet, YOLO): Conv -> y * Sigmoid(y) becomes one FusedConv with
// a silu epilogue; not when y has a third reader.
TEST(BuilderPasses, FuseConvAbsorbsSiluWrittenAsSigmoidAndMul) {
  for (bool third_user : {false, true}) {
    SCOPED_TRACE(third_user ? "y also read by a Relu" : "plain SiLU");
    ModelBuilder m(17);
    m.input("x", 1, {"1", "3", "7", "7"});
    test::initializer_random(m, "w", {4, 3, 3, 3}, 41, 0.4f);
    test::initializer_random(m, "b", {4}, 42);
    auto* c = m.node("Conv", {"x", "w", "b"}, {"y"}, "conv");
    test::attr_ints(c, "pads", {1, 1, 1, 1});
    m.node("Sigmoid", {"y"}, {"s"}, "sigmoid");
    m.node("Mul", {"s", "y"}, {"z"}, "mul");
    if (third_user) {
      m.node("Relu", {"y"}, {"r"}, "relu");
      m.node("Add", {"z", "r"}, {"out"}, "add");
    } else {
      m.node("Identity", {"z"}, {"out"}, "id");
    }
    m.output("out", 1, {});
    ir::Model model = load(m);
    auto on = build_and_check(model, "");
    ASSERT_TRUE(on);
    if (third_user) {
      EXPECT_EQ(test::count_op(graph_of(on), "Sigmoid"), 1) << test::op_list(graph_of(on));
      continue;
    }
    EXPECT_EQ(test::op_list(graph_of(on)), "FusedConv Identity");
    const ir::Node& fused = graph_of(on).nodes[0];
    auto ep = ir::epilogue_of(fused);
    ASSERT_TRUE(ep.is_ok());
    EXPECT_EQ(ep->act, ir::Epilogue::Act::silu);
    auto off = build_and_check(model, "pass.fuse_conv=off");
    ASSERT_TRUE(off);
    EXPECT_EQ(test::op_list(graph_of(off)), "Conv Sigmoid Mul Identity");
  }
}

// MobileNetV3's HardSwish after a convolution goes into the epilogue.
TEST(BuilderPasses, FuseConvAbsorbsHardSwish) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "3", "7", "7"});
  test::initializer_random(m, "w", {4, 3, 3, 3}, 43, 0.6f);
  auto* c = m.node("Conv", {"x", "w"}, {"y"}, "conv");
  test::attr_ints(c, "pads", {1, 1, 1, 1});
  m.node("HardSwish", {"y"}, {"z"}, "hswish");
  m.output("z", 1, {});
  ir::Model model = load(m);
  auto on = build_and_check(model, "");
  ASSERT_TRUE(on);
  EXPECT_EQ(test::op_list(graph_of(on)), "FusedConv");
  auto ep = ir::epilogue_of(graph_of(on).nodes[0]);
  ASSERT_TRUE(ep.is_ok());
  EXPECT_EQ(ep->act, ir::Epilogue::Act::hard_swish);
  auto off = build_and_check(model, "pass.fuse_conv=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(test::op_list(graph_of(off)), "Conv HardSwish");
}

// Conv1d (audio front ends): grouped, strided, asymmetric pads, with a fused residual and ReLU,
// runs as a 2-D convolution of height 1 on a real tactic; off, on the reference kernel.
TEST(BuilderPasses, Conv1dRunsAsA2dConvolution) {
  ModelBuilder m(17);
  m.input("x", 1, {"2", "4", "11"});
  m.input("r", 1, {"2", "6", "5"});
  test::initializer_random(m, "w", {6, 2, 3}, 61, 0.5f);
  test::initializer_random(m, "b", {6}, 62);
  auto* c = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  test::attr_i(c, "group", 2);
  test::attr_ints(c, "pads", {1, 0});
  test::attr_ints(c, "strides", {2});
  m.node("Add", {"c", "r"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  test::initializer_random(m, "w2", {3, 6, 2}, 63, 0.5f);
  auto* c2 = m.node("Conv", {"y", "w2"}, {"z"}, "conv2");
  test::attr_ints(c2, "dilations", {2});
  m.output("z", 1, {});
  ir::Model model = load(m);
  auto on = build_and_check(model, "");
  ASSERT_TRUE(on);
  EXPECT_TRUE(test::log_mentions(on->plan(), "conv1d_as_2d: node 'conv'"));
  EXPECT_TRUE(test::log_mentions(on->plan(), "conv1d_as_2d: node 'conv2'"));
  for (const char* op : {"FusedConv", "Conv"}) EXPECT_NE(tactic_of(*on, op), "reference") << op;
  auto off = build_and_check(model, "pass.conv1d_as_2d=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(tactic_of(*off, "FusedConv"), "reference");
  EXPECT_EQ(test::op_list(graph_of(off)), "FusedConv Conv");
}

TEST(BuilderPasses, ConvAddOfAConstantIsNotAResidual) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "2", "5", "5"});
  test::initializer_random(m, "w", {2, 2, 3, 3}, 64);
  test::initializer_random(m, "k", {1, 2, 3, 3}, 65);
  m.node("Conv", {"x", "w"}, {"c"}, "conv");
  m.node("Add", {"c", "k"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto e = build_and_check(model, "");
  ASSERT_TRUE(e);
  EXPECT_EQ(test::op_list(graph_of(e)), "Conv Add Relu");
}

// ---------------------------------------------------------------- fuse_matmul

TEST(BuilderPasses, FuseMatmulAbsorbsBiasResidualAndActivation) {
  ModelBuilder m(17);
  m.input("a", 1, {"2", "3", "8"});
  m.input("r", 1, {"2", "3", "16"});
  test::initializer_random(m, "w", {8, 16}, 71, 0.5f);
  test::initializer_random(m, "bias", {16}, 72);
  m.node("MatMul", {"a", "w"}, {"mm"}, "mm");
  m.node("Add", {"bias", "mm"}, {"b"}, "add_bias");
  m.node("Add", {"b", "r"}, {"s"}, "add_res");
  m.node("Relu", {"s"}, {"y"}, "relu");
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto on = build_and_check(model, "");
  ASSERT_TRUE(on);
  EXPECT_EQ(test::op_list(graph_of(on)), "FusedMatMul");
  EXPECT_TRUE(test::log_mentions(on->plan(), "fuse_matmul: "));
  const ir::Node& f = graph_of(on).nodes[0];
  EXPECT_EQ(f.inputs.size(), 4u) << "A, B, bias, residual";
  auto off = build_and_check(model, "pass.fuse_matmul=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(test::op_list(graph_of(off)), "MatMul Add Add Relu");
}

TEST(BuilderPasses, FuseMatmulTakesGemmWithTransBAndC) {
  struct Case {
    const char* name;
    bool trans_b;
    const char* c;  // "bias" (constant [N]), "bias2d" (constant [1, N]), "full" (input [M, N]), "" none
    float alpha;
    bool fused;
  };
  const Case cases[] = {
      {"transB + bias", true, "bias", 1.0f, true},   {"bias [1,N]", false, "bias2d", 1.0f, true},
      {"C full input", true, "full", 1.0f, true},    {"no C", false, "", 1.0f, true},
      {"alpha stays Gemm", true, "bias", 0.5f, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ModelBuilder m(17);
    m.input("a", 1, {"4", "8"});
    test::initializer_random(m, "w", c.trans_b ? std::vector<int64_t>{16, 8} : std::vector<int64_t>{8, 16}, 81, 0.5f);
    std::vector<std::string> ins = {"a", "w"};
    if (std::string(c.c) == "bias") test::initializer_random(m, "cc", {16}, 82);
    if (std::string(c.c) == "bias2d") test::initializer_random(m, "cc", {1, 16}, 82);
    if (std::string(c.c) == "full") m.input("cc", 1, {"4", "16"});
    if (*c.c) ins.push_back("cc");
    auto* g = m.node("Gemm", ins, {"g"}, "gemm");
    if (c.trans_b) test::attr_i(g, "transB", 1);
    if (c.alpha != 1.0f) test::attr_f(g, "alpha", c.alpha);
    m.node("Tanh", {"g"}, {"y"}, "tanh");
    m.output("y", 1, {});
    ir::Model model = load(m);
    auto on = build_and_check(model, "");
    auto off = build_and_check(model, "pass.fuse_matmul=off");
    ASSERT_TRUE(on && off);
    EXPECT_EQ(test::op_list(graph_of(on)), c.fused ? "FusedMatMul" : "Gemm Tanh");
    EXPECT_EQ(test::op_list(graph_of(off)), "Gemm Tanh");
  }
}

TEST(BuilderPasses, MatmulOutputUsedTwiceOrAGraphOutputIsNotFusedAway) {
  {
    ModelBuilder m(17);
    m.input("a", 1, {"3", "8"});
    test::initializer_random(m, "w", {8, 8}, 91);
    test::initializer_random(m, "bias", {8}, 92);
    m.node("MatMul", {"a", "w"}, {"mm"}, "mm");
    m.node("Add", {"mm", "bias"}, {"b"}, "add_bias");
    m.node("Add", {"b", "mm"}, {"y"}, "add_again");  // mm read twice
    m.output("y", 1, {});
    ir::Model model = load(m);
    auto e = build_and_check(model, "");
    ASSERT_TRUE(e);
    EXPECT_EQ(test::op_list(graph_of(e)), "MatMul Add Add");
  }
  {
    ModelBuilder m(17);
    m.input("a", 1, {"3", "8"});
    test::initializer_random(m, "w", {8, 8}, 93);
    m.node("MatMul", {"a", "w"}, {"mm"}, "mm");
    m.node("Relu", {"mm"}, {"y"}, "relu");
    m.output("mm", 1, {});
    m.output("y", 1, {});
    ir::Model model = load(m);
    auto e = build_and_check(model, "");
    ASSERT_TRUE(e);
    EXPECT_EQ(test::op_list(graph_of(e)), "MatMul Relu");
  }
}

TEST(BuilderPasses, MatmulOfTwoActivationsWithAMaskAdd) {
  // Attention scores: Q·Kᵀ + mask, where the mask is a constant that is not a bias over N.
  ModelBuilder m(17);
  m.input("q", 1, {"2", "4", "8"});
  m.input("kt", 1, {"2", "8", "4"});
  test::initializer_random(m, "mask", {1, 4, 4}, 95);
  m.node("MatMul", {"q", "kt"}, {"s"}, "scores");
  m.node("Add", {"s", "mask"}, {"y"}, "add_mask");
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto e = build_and_check(model, "");
  ASSERT_TRUE(e);
  EXPECT_EQ(test::count_op(graph_of(e), "Add"), 1) << test::op_list(graph_of(e));
  build_and_check(model, "pass.fuse_matmul=off");
}


TEST(BuilderPasses, FuseMatmulEdgeShapes) {
  struct Case {
    const char* name;
    std::vector<std::string> a_shape;
    std::vector<int64_t> b_shape;
    std::vector<int64_t> bias_shape;
    const char* fused;  // the graph with fuse_matmul on
  };
  const Case cases[] = {
      {"1-D A", {"8"}, {8, 16}, {16}, "FusedMatMul"},
      {"batched B", {"2", "3", "8"}, {2, 8, 16}, {16}, "FusedMatMul"},
      {"4-D A", {"2", "2", "3", "8"}, {8, 16}, {1, 1, 16}, "FusedMatMul"},
      {"broadcast scalar is no bias", {"3", "8"}, {8, 16}, {1}, "MatMul Add Relu"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ModelBuilder m(17);
    m.input("a", 1, c.a_shape);
    test::initializer_random(m, "w", c.b_shape, 121, 0.5f);
    test::initializer_random(m, "bias", c.bias_shape, 122);
    m.node("MatMul", {"a", "w"}, {"mm"}, "mm");
    m.node("Add", {"mm", "bias"}, {"s"}, "add");
    m.node("Relu", {"s"}, {"y"}, "relu");
    m.output("y", 1, {});
    ir::Model model = load(m);
    auto on = build_and_check(model, "");
    auto off = build_and_check(model, "pass.fuse_matmul=off");
    ASSERT_TRUE(on && off);
    EXPECT_EQ(test::op_list(graph_of(on)), c.fused);
    EXPECT_EQ(test::op_list(graph_of(off)), "MatMul Add Relu");
  }
}

// ---------------------------------------------------------------- fold_constants

TEST(BuilderPasses, FoldConstantsEvaluatesConstantSubgraphs) {
  ModelBuilder m(17);
  m.input("x", 1, {"2", "6"});
  test::initializer_random(m, "c1", {6}, 101);
  test::initializer_random(m, "c2", {6}, 102);
  m.node("Add", {"c1", "c2"}, {"c3"}, "const_add");
  m.node("Neg", {"c3"}, {"c4"}, "const_neg");
  m.node("Mul", {"x", "c4"}, {"y"}, "mul");
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto on = build_and_check(model, "");
  ASSERT_TRUE(on);
  EXPECT_EQ(test::op_list(graph_of(on)), "Mul");
  EXPECT_TRUE(test::log_mentions(on->plan(), "fold_constants: 2 nodes"));
  auto off = build_and_check(model, "pass.fold_constants=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(test::op_list(graph_of(off)), "Add Neg Mul");
}

// x -> Shape -> Gather(0) -> Unsqueeze -> Concat(-1) -> Reshape(x) -> Relu: the exported-
// transformer shape chain that only constant folding with bound input shapes removes.
ir::Model shape_chain() {
  ModelBuilder m(17);
  m.input("x", 1, {"batch", "3", "4"});
  m.node("Shape", {"x"}, {"s"}, "shape");
  test::initializer_i64(m, "i0", {}, {0});
  auto* g = m.node("Gather", {"s", "i0"}, {"d0"}, "gather");
  test::attr_i(g, "axis", 0);
  test::initializer_i64(m, "ax0", {1}, {0});
  m.node("Unsqueeze", {"d0", "ax0"}, {"d0u"}, "unsq");
  test::initializer_i64(m, "minus1", {1}, {-1});
  auto* cat = m.node("Concat", {"d0u", "minus1"}, {"shp"}, "concat");
  test::attr_i(cat, "axis", 0);
  m.node("Reshape", {"x", "shp"}, {"r"}, "reshape");
  m.node("Relu", {"r"}, {"y"}, "relu");
  m.output("y", 1, {});
  return load(m);
}

TEST(BuilderPasses, FoldConstantsTurnsAShapeChainIntoAConstantReshape) {
  ir::Model model = shape_chain();
  builder::BuildOptions opts;
  opts.dims["batch"] = 2;
  auto route = builder::Route::parse("");
  auto plan = builder::build_plan(model, *route, opts);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(test::op_list(plan->model.graph), "Reshape Relu");
  const ir::Graph& g = plan->model.graph;
  const ir::Value& y = g.values[static_cast<size_t>(g.outputs[0])];
  ASSERT_EQ(y.type.dims.size(), 2u);
  EXPECT_EQ(y.type.dims[0].value, 2);
  EXPECT_EQ(y.type.dims[1].value, 12);
  auto e = runtime::Engine::create(std::move(plan).value());
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  std::vector<Tensor> in = test::random_inputs(**e, 3);
  auto got = (*e)->run(in);
  auto want = test::reference_outputs(model, in);
  ASSERT_TRUE(got.is_ok() && want.is_ok());
  EXPECT_EQ(test::compare_outputs(*got, *want, kAtol, kRtol), "");
}

TEST(BuilderPasses, ShapeChainWithoutConstantFoldingBuildsDynamicSteps) {
  // Without folding, the Reshape's target shape is computed at run time: the Reshape and what
  // follows are dynamic steps, and the plan still computes what the reference does.
  ir::Model model = shape_chain();
  builder::BuildOptions opts;
  opts.dims["batch"] = 2;
  auto route = builder::Route::parse("pass.fold_constants=off");
  auto plan = builder::build_plan(model, *route, opts);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  EXPECT_EQ(test::count_op(plan->model.graph, "Shape"), 1);
  EXPECT_EQ(plan->dynamic_steps(), 2) << "Reshape and Relu";
  auto e = runtime::Engine::create(std::move(plan).value());
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  std::vector<Tensor> in = test::random_inputs(**e, 3);
  auto got = (*e)->run(in);
  auto want = test::reference_outputs(model, in);
  ASSERT_TRUE(got.is_ok() && want.is_ok()) << got.status().to_string() << " / " << want.status().to_string();
  EXPECT_EQ(test::compare_outputs(*got, *want, kAtol, kRtol), "");
}

// ---------------------------------------------------------------- eliminate_identity

TEST(BuilderPasses, EliminateIdentityRemovesIdentityAndInferenceDropout) {
  ModelBuilder m(17);
  m.input("x", 1, {"2", "5"});
  m.node("Identity", {"x"}, {"a"}, "id_in");
  m.node("Sigmoid", {"a"}, {"b"}, "sig");
  m.node("Dropout", {"b"}, {"c"}, "drop");
  m.node("Add", {"c", "x"}, {"s"}, "add");
  m.node("Identity", {"s"}, {"y"}, "id_out");  // names a graph output: must stay
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto on = build_and_check(model, "");
  ASSERT_TRUE(on);
  EXPECT_EQ(test::op_list(graph_of(on)), "Sigmoid Add Identity");
  EXPECT_TRUE(test::log_mentions(on->plan(), "eliminate_identity: 2 nodes"));
  auto off = build_and_check(model, "pass.eliminate_identity=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(test::op_list(graph_of(off)), "Identity Sigmoid Dropout Add Identity");
}

TEST(BuilderPasses, EliminateIdentityUnhidesConvActivationFusion) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "2", "5", "5"});
  test::initializer_random(m, "w", {3, 2, 3, 3}, 111, 0.5f);
  m.node("Conv", {"x", "w"}, {"c"}, "conv");
  m.node("Identity", {"c"}, {"d"}, "id");
  m.node("Relu", {"d"}, {"y"}, "relu");
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto on = build_and_check(model, "");
  ASSERT_TRUE(on);
  EXPECT_EQ(test::op_list(graph_of(on)), "FusedConv");
  auto off = build_and_check(model, "pass.eliminate_identity=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(test::op_list(graph_of(off)), "Conv Identity Relu");
}

TEST(BuilderPasses, EliminateIdentityRemovesAPadByZeroAndKeepsARealPad) {
  // torch's AvgPool2d export: Pad(pads all 0) -> AveragePool; then a Pad that pads.
  ModelBuilder m(17);
  m.input("x", 1, {"1", "2", "6", "6"});
  test::initializer_i64(m, "zero", {8}, {0, 0, 0, 0, 0, 0, 0, 0});
  test::initializer_i64(m, "one", {8}, {0, 0, 1, 0, 0, 0, 0, 1});
  m.node("Pad", {"x", "zero"}, {"p"}, "pad0");
  auto* pool = m.node("AveragePool", {"p"}, {"a"}, "pool");
  test::attr_ints(pool, "kernel_shape", {2, 2});
  test::attr_ints(pool, "strides", {2, 2});
  m.node("Pad", {"a", "one"}, {"y"}, "pad1");
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto on = build_and_check(model, "");
  ASSERT_TRUE(on);
  EXPECT_EQ(test::op_list(graph_of(on)), "AveragePool Pad");
  EXPECT_TRUE(test::log_mentions(on->plan(), "eliminate_identity: 1 nodes"));
  auto off = build_and_check(model, "pass.eliminate_identity=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(test::op_list(graph_of(off)), "Pad AveragePool Pad");
}

TEST(BuilderPasses, DropoutWhoseMaskIsUsedStays) {
  ModelBuilder m(17);
  m.input("x", 1, {"2", "5"});
  m.node("Dropout", {"x"}, {"d", "mask"}, "drop");
  m.node("Cast", {"mask"}, {"mf"}, "cast");
  test::attr_i(m.m.mutable_graph()->mutable_node(1), "to", 1);
  m.node("Add", {"d", "mf"}, {"y"}, "add");
  m.output("y", 1, {});
  ir::Model model = load(m);
  auto e = build_and_check(model, "");
  ASSERT_TRUE(e);
  EXPECT_EQ(test::count_op(graph_of(e), "Dropout"), 1) << test::op_list(graph_of(e));
}

// ---------------------------------------------------------------- memory knobs

TEST(BuilderPasses, MemoryKnobsKeepOutputsAndChangeTheArena) {
  ir::Model m = conv_bn_add_relu(true);
  // A chain long enough that reuse and in-place matter.
  ModelBuilder mb(17);
  mb.input("x", 1, {"4", "64"});
  std::string v = "x";
  for (int i = 0; i < 6; ++i) {
    std::string o = "t" + std::to_string(i);
    mb.node(i % 2 ? "Tanh" : "Sigmoid", {v}, {o}, "act" + std::to_string(i));
    v = o;
  }
  mb.node("Neg", {v}, {"y"}, "neg");
  mb.output("y", 1, {});
  ir::Model chain = load(mb);
  int64_t arena[3] = {};
  int i = 0;
  for (const char* route : {"memory.planner=no_reuse memory.inplace=off", "memory.planner=greedy_by_order memory.inplace=off",
                            "memory.planner=greedy_by_size memory.inplace=on"}) {
    auto e = build_and_check(chain, route);
    ASSERT_TRUE(e);
    arena[i++] = e->plan().arena_bytes;
    build_and_check(m, route);
  }
  const int64_t tensor_bytes = 4 * 64 * 4;
  EXPECT_EQ(arena[0], 7 * tensor_bytes) << "no_reuse gives every intermediate its own buffer";
  EXPECT_LT(arena[1], arena[0]);
  EXPECT_LE(arena[2], arena[1]);
}

// ---------------------------------------------------------------- memory.concat_alias

// A fire-module-like graph: two convs concatenated on channels (batch 1: aliased), a Sigmoid that
// reads one slice after the Concat (must not run in place over it), a Relu of the Concat output
// (must not run in place over the slices either), and a batch-2 Concat on axis 1 (not aliased:
// its inputs are not contiguous slices of the output).
TEST(BuilderMemory, ConcatInputsLiveInTheirSlicesAndResultsMatch) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "3", "8", "8"});  // slices of 5 and 7 channels x 64 floats: 64-byte aligned
  m.input("x2", 1, {"2", "3", "4", "4"});
  test::initializer_random(m, "w1", {5, 3, 1, 1}, 31, 0.5f);
  test::initializer_random(m, "w3", {7, 3, 3, 3}, 32, 0.3f);
  m.node("Conv", {"x", "w1"}, {"a"}, "e1");
  auto* c3 = m.node("Conv", {"x", "w3"}, {"b"}, "e3");
  test::attr_ints(c3, "pads", {1, 1, 1, 1});
  auto* cat = m.node("Concat", {"a", "b"}, {"cat"}, "cat");
  test::attr_i(cat, "axis", 1);
  m.node("Relu", {"cat"}, {"y"}, "relu");
  m.node("Sigmoid", {"a"}, {"s"}, "sig");
  m.node("Neg", {"x2"}, {"n1"}, "n1");
  m.node("Abs", {"x2"}, {"n2"}, "n2");
  auto* cat2 = m.node("Concat", {"n1", "n2"}, {"cat2"}, "cat2");
  test::attr_i(cat2, "axis", 1);
  m.node("Tanh", {"cat2"}, {"z"}, "tanh");
  m.output("y", 1, {});
  m.output("s", 1, {});
  m.output("z", 1, {});
  ir::Model model = load(m);
  for (const char* planner : {"greedy_by_size", "greedy_by_order", "no_reuse"})
    for (const char* alias : {"on", "off"}) {
      const std::string route = std::string("memory.planner=") + planner + " memory.concat_alias=" + alias;
      auto e = build_and_check(model, route);
      ASSERT_TRUE(e);
      const builder::Plan& p = e->plan();
      auto value = [&](const char* name) -> const builder::PlanValue& { return plan_value(p, name); };
      const bool on = std::string(alias) == "on";
      EXPECT_EQ(value("a").offset == value("cat").offset, on) << route;
      EXPECT_EQ(value("b").offset == value("cat").offset + value("a").bytes, on) << route;
      EXPECT_NE(value("n1").offset, value("cat2").offset) << route << ": batch 2, axis 1 is not aliased";
      for (const builder::PlanStep& st : p.steps) {
        const std::string& name = p.model.graph.nodes[static_cast<size_t>(st.node)].name;
        if (on && (name == "relu" || name == "sig")) {
          EXPECT_FALSE(st.in_place) << route << ": " << name;
        }
      }
    }
}

// oneDNN's convolutions write over the residual of their sum post-op (Tactic::over_input = 3) when
// nothing reads it afterwards: p = Relu(Conv(x)) feeds only the fused Add, so the fused conv's output takes
// p's buffer (no copy into dst); a tactic that does not declare it (im2col_gemm) and memory.inplace=off
// keep separate buffers. Results match the reference every way.
TEST(BuilderMemory, OnednnConvWritesOverItsResidual) {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "16", "8", "8"});
  test::initializer_random(m, "w0", {16, 16, 1, 1}, 41, 0.3f);
  test::initializer_random(m, "w1", {16, 16, 1, 1}, 42, 0.3f);
  test::initializer_random(m, "w2", {16, 16, 3, 3}, 43, 0.1f);
  m.node("Conv", {"x", "w0"}, {"p0"}, "conv_p");
  m.node("Relu", {"p0"}, {"p"}, "relu_p");  // so that the Add fuses into conv2, not into conv_p
  m.node("Conv", {"x", "w1"}, {"q0"}, "conv_q");
  m.node("Relu", {"q0"}, {"q"}, "relu_q");
  auto* c2 = m.node("Conv", {"q", "w2"}, {"h"}, "conv2");
  test::attr_ints(c2, "pads", {1, 1, 1, 1});
  m.node("Add", {"h", "p"}, {"c"}, "add");
  m.node("Relu", {"c"}, {"y"}, "relu");
  m.output("y", 1, {});
  ir::Model model = load(m);
  for (const char* layout : {"nchw", "nhwc"})
    for (const char* tactic : {"onednn", "im2col_gemm"})
      for (const char* inplace : {"on", "off"}) {
        if (std::string(layout) == "nhwc" && std::string(tactic) == "im2col_gemm") continue;  // nchw only
        const std::string route = std::string("layout.default=") + layout + " tactic.conv2=" + tactic +
                                  " memory.inplace=" + inplace;
        auto e = build_and_check(model, route);
        ASSERT_TRUE(e);
        const builder::Plan& p = e->plan();
        const bool expect = std::string(tactic) == "onednn" && std::string(inplace) == "on";
        int fused = 0;
        for (const builder::PlanStep& st : p.steps) {
          const ir::Node& n = p.model.graph.nodes[static_cast<size_t>(st.node)];
          if (n.op != ir::OpKind::FusedConv || n.inputs.size() < 4 || n.inputs[3] == ir::kNoValue) continue;
          ++fused;
          EXPECT_EQ(st.in_place, expect) << route;
          if (expect) {
            EXPECT_EQ(st.in_place_input, 3) << route;
            EXPECT_EQ(plan_value(p, "p").offset, p.values[static_cast<size_t>(n.outputs[0])].offset) << route;
          }
        }
        EXPECT_EQ(fused, 1) << route << ": the Add did not fuse into conv2 (" << test::op_list(p.model.graph) << ")";
      }
}

// ---------------------------------------------------------------- memory.view_alias

// Views share their input's buffer and run nothing; an elementwise step after a view must not
// write over the shared buffer while the viewed value is still read (Neg after the Reshape: its
// input dies there, but `a`, the same bytes, is read later by the Sigmoid). A view of a graph
// input is not aliased (inputs live outside the arena). Results match the reference either way.
TEST(BuilderMemory, ViewsAliasTheirInputAndInPlaceRespectsTheSharedBuffer) {
  ModelBuilder m(17);
  m.input("x", 1, {"4", "16"});
  test::initializer_i64(m, "shape", {1}, {64});
  m.node("Relu", {"x"}, {"a"}, "relu");
  m.node("Reshape", {"a", "shape"}, {"b"}, "reshape");
  m.node("Neg", {"b"}, {"c"}, "neg");
  m.node("Sigmoid", {"a"}, {"s"}, "sig");
  m.node("Flatten", {"s"}, {"f"}, "flatten");
  m.node("Identity", {"x"}, {"i"}, "ident");
  m.output("c", 1, {});
  m.output("f", 1, {});
  m.output("i", 1, {});
  ir::Model model = load(m);
  for (const char* alias : {"on", "off"})
    for (const char* inplace : {"on", "off"}) {
      const std::string route = std::string("memory.view_alias=") + alias + " memory.inplace=" + inplace;
      auto e = build_and_check(model, route);
      ASSERT_TRUE(e);
      const builder::Plan& p = e->plan();
      auto value = [&](const char* name) -> const builder::PlanValue& { return plan_value(p, name); };
      const bool on = std::string(alias) == "on";
      EXPECT_EQ(value("a").offset == value("b").offset, on) << route;
      EXPECT_EQ(value("s").offset == value("f").offset, on) << route;
      for (const builder::PlanStep& st : p.steps) {
        const std::string& name = p.model.graph.nodes[static_cast<size_t>(st.node)].name;
        if (name == "reshape" || name == "flatten") {
          EXPECT_EQ(st.in_place, on) << route << ": " << name;
        }
        if (name == "neg" && on) {
          EXPECT_FALSE(st.in_place) << route << ": the Reshape's buffer is still `a`";
        }
        if (name == "ident") {
          EXPECT_FALSE(st.in_place) << route << ": a graph input is not aliased";
        }
      }
    }
}

// Transposes that move only size-1 dims and Gathers of one constant index over a contiguous block
// are views too: a stacked QKV-like projection [3][4][16] picked apart by Gathers (offsets 0, 1, 2
// blocks inside the Relu's buffer), a [1][4][16] -> [4][1][16] Transpose (a view) and a
// [4][16] -> [16][4] one (a real copy). Results match the reference.
TEST(BuilderMemory, SizeOneTransposesAndConstantGathersAreViews) {
  ModelBuilder m(17);
  m.input("x", 1, {"3", "4", "16"});
  test::initializer_i64(m, "i0", {}, {0});
  test::initializer_i64(m, "i2", {}, {-1});
  test::initializer_i64(m, "shape", {3}, {1, 4, 16});
  m.node("Relu", {"x"}, {"a"}, "relu");
  m.node("Gather", {"a", "i0"}, {"q"}, "gq");
  m.node("Gather", {"a", "i2"}, {"v"}, "gv");
  m.node("Reshape", {"q", "shape"}, {"q3"}, "reshape");
  auto* t1 = m.node("Transpose", {"q3"}, {"qt"}, "t_view");
  test::attr_ints(t1, "perm", {1, 0, 2});
  auto* t2 = m.node("Transpose", {"v"}, {"vt"}, "t_copy");
  test::attr_ints(t2, "perm", {1, 0});
  m.node("Neg", {"qt"}, {"y"}, "neg");
  m.node("Sigmoid", {"vt"}, {"z"}, "sig");
  m.node("Tanh", {"a"}, {"w"}, "tanh");
  m.output("y", 1, {});
  m.output("z", 1, {});
  m.output("w", 1, {});
  ir::Model model = load(m);
  for (const char* alias : {"on", "off"}) {
    const std::string route = std::string("memory.view_alias=") + alias;
    auto e = build_and_check(model, route);
    ASSERT_TRUE(e);
    const builder::Plan& p = e->plan();
    auto value = [&](const char* name) -> const builder::PlanValue& { return plan_value(p, name); };
    const bool on = std::string(alias) == "on";
    const int64_t block = 4 * 16 * 4;
    EXPECT_EQ(value("q").offset == value("a").offset, on) << route;
    EXPECT_EQ(value("v").offset == value("a").offset + 2 * block, on) << route;
    EXPECT_EQ(value("qt").offset == value("a").offset, on) << route;
    for (const builder::PlanStep& st : p.steps) {
      const std::string& name = p.model.graph.nodes[static_cast<size_t>(st.node)].name;
      if (name == "gq" || name == "gv" || name == "reshape" || name == "t_view") {
        EXPECT_EQ(st.in_place, on) << route << ": " << name;
      }
      if (name == "t_copy") {
        EXPECT_FALSE(st.in_place) << route << ": [4][16] -> [16][4] moves data";
      }
      if (name == "neg" && on) {
        EXPECT_FALSE(st.in_place) << route << ": `a` is read later by the Tanh";
      }
    }
  }
}


// ---------------------------------------------------------------- widen_storage

// A model stored in fp16: x, the weights and y in fp16, with an fp32 island (Cast up, Sigmoid,
// Cast down) as mixed-precision exports write them.
// Tolerance: the reference rounds every op's output to fp16 (2^-11 relative), the engine only
// the final output: a few fp16 ulps of outputs of size ~2 (atol 1e-2, rtol 5e-3).
void initializer_f16(ModelBuilder& m, const std::string& n, std::vector<int64_t> dims, uint64_t seed, float scale) {
  Tensor t = kernels::random_tensor(DType::float32, Shape(dims.begin(), dims.end()), seed);
  auto* p = m.m.mutable_graph()->add_initializer();
  p->set_name(n);
  p->set_data_type(onnx::TensorProto::FLOAT16);
  for (int64_t d : dims) p->add_dims(d);
  std::string raw(static_cast<size_t>(t.numel()) * 2, '\0');
  for (int64_t i = 0; i < t.numel(); ++i) {
    const Float16 h(t.data<float>()[i] * scale);
    std::memcpy(raw.data() + 2 * i, &h.bits, 2);
  }
  p->set_raw_data(raw);
}

ir::Model fp16_stored_conv() {
  ModelBuilder m(17);
  m.input("x", onnx::TensorProto::FLOAT16, {"1", "3", "9", "9"});
  initializer_f16(m, "w", {4, 3, 3, 3}, 31, 0.4f);
  initializer_f16(m, "b", {4}, 32, 1.0f);
  auto* c = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  test::attr_ints(c, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"}, "relu");
  test::attr_i(m.node("Cast", {"r"}, {"r32"}, "up"), "to", onnx::TensorProto::FLOAT);
  m.node("Sigmoid", {"r32"}, {"s32"}, "sigmoid");
  test::attr_i(m.node("Cast", {"s32"}, {"s"}, "down"), "to", onnx::TensorProto::FLOAT16);
  m.node("Add", {"r", "s"}, {"y"}, "add");
  m.output("y", onnx::TensorProto::FLOAT16, {});
  return load(m);
}

std::unique_ptr<runtime::Engine> build_and_check_fp16(const ir::Model& m, const std::string& route) {
  auto e = test::build_engine(m, route);
  EXPECT_TRUE(e.is_ok()) << "route '" << route << "': " << e.status().to_string();
  if (!e) return nullptr;
  EXPECT_EQ(test::mismatch_vs_reference(**e, m, 7, 1e-2, 5e-3), "") << "route '" << route << "'";
  return std::move(e).value();
}

std::string tactic_of(const runtime::Engine& e, const std::string& op) {
  const builder::Plan& p = e.plan();
  for (const builder::PlanStep& s : p.steps)
    if (p.model.graph.nodes[static_cast<size_t>(s.node)].op_type == op) return s.tactic->name;
  return "(no " + op + " step)";
}

TEST(BuilderPasses, WidenStorageComputesAnFp16ModelInFp32BetweenItsInputsAndOutputs) {
  ir::Model m = fp16_stored_conv();
  auto on = build_and_check_fp16(m, "pass.fuse_elementwise=off pass.fuse_conv=off");
  ASSERT_TRUE(on);
  EXPECT_TRUE(test::log_mentions(on->plan(), "widen_storage: computes in fp32 (2 constants widened, 2 Casts between "
                                             "float types dropped, 0 Casts to fp32, 2 Casts at the inputs and outputs)"))
      << on->plan().report.pass_log.size();
  // The interface keeps the stored types; inside, a real (fp32) tactic runs the convolution
  // where the fp16 graph had only the reference kernel.
  EXPECT_EQ(on->input_specs()[0].first, DType::float16);
  EXPECT_NE(tactic_of(*on, "Conv"), "reference");
  EXPECT_EQ(test::op_list(graph_of(on)), "Cast Conv Relu Sigmoid Add Cast");

  auto off = build_and_check_fp16(m, "pass.widen_storage=off pass.fuse_elementwise=off pass.fuse_conv=off");
  ASSERT_TRUE(off);
  EXPECT_EQ(tactic_of(*off, "Conv"), "reference");
  EXPECT_FALSE(test::log_mentions(off->plan(), "widen_storage"));
  // With the default passes (the fusions see the fp32 graph) and in the other layout.
  build_and_check_fp16(m, "");
  build_and_check_fp16(m, "layout.default=nchw");
}

TEST(BuilderPasses, PrecisionDefaultFollowsTheStoredTypeWhereTheBackendComputesInIt) {
  ir::Model fp16 = fp16_stored_conv();
  // The CPU has no fp16 tactics: fp32 (the widened graph); CUDA computes in fp16 as stored.
  EXPECT_EQ(builder::stored_precision(fp16, kernels::Backend::cpu), "fp32");
  EXPECT_EQ(builder::stored_precision(fp16, kernels::Backend::cuda), "fp16");
  EXPECT_EQ(builder::stored_precision(conv_bn_add_relu(true), kernels::Backend::cuda), "fp32");
  auto space = builder::knob_space(fp16, {});
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  EXPECT_EQ(space->find("precision.default")->default_value, "fp32");
}

TEST(BuilderPasses, WidenStorageLeavesAGraphWithASubgraphAsStored) {
  // z = Neg(x); If(cond) then y = z + z else y = z * z, all fp16: the pass logs why and changes
  // nothing.
  ModelBuilder m(17);
  m.input("x", onnx::TensorProto::FLOAT16, {"4"});
  m.input("cond", onnx::TensorProto::BOOL, {});
  m.node("Neg", {"x"}, {"z"}, "neg");
  auto* n = m.node("If", {"cond"}, {"y"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* g = a->mutable_g();
    g->set_name(branch);
    auto* op = g->add_node();
    op->set_op_type(std::string(branch) == "then_branch" ? "Add" : "Mul");
    op->add_input("z");
    op->add_input("z");
    op->add_output(std::string(branch) + "_y");
    auto* o = g->add_output();
    o->set_name(std::string(branch) + "_y");
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
  }
  m.output("y", onnx::TensorProto::FLOAT16, {});
  ir::Model model = load(m);
  auto e = test::build_engine(model, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_TRUE(test::log_mentions((*e)->plan(), "widen_storage: the graph keeps its fp16/bf16 types (node 'if'"))
      << ((*e)->plan().report.pass_log.empty() ? "" : (*e)->plan().report.pass_log[0]);
  EXPECT_EQ(test::mismatch_vs_reference(**e, model, 3, 0, 0), "");
}

}  // namespace
}  // namespace tac
