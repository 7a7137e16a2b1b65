// The CUDA backend. Host-side logic (backend selection, tactic tables, plan stamps) is tested on
// every machine; tests that need a GPU skip with the reason when there is none (CI), and on the
// GPU machine check every CUDA tactic against the reference kernel on random data of odd sizes
// (kernels/tactic_check: inputs uploaded, outputs poisoned on the device, compared on the host).
//
// Bounds: fp32 on both sides, the reference accumulating in float64. Elementwise ops and data
// movement: rtol 1e-6 (device libm functions are within 2 ulp). Reductions, GEMMs and
// convolutions: |got - want| <= 1e-4 * (1 + |want|) (sums of a few hundred products of N(0,1)
// values in float; cuDNN's FFT and Winograd algorithms transform in float: 1e-3 for them).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>

#include "backends/cuda/device.h"
#include "builder/passes/pass.h"
#include "builder/plan_file.h"
#include "builder/precision.h"
#include "ir/epilogue.h"
#include "ir/shape_inference.h"
#include "kernels/elementwise/cuda_kernels.h"
#include "io/onnx_import.h"
#include "reference/interpreter.h"
#include "reference/kernel.h"
#include "runtime/measure.h"
#include "builder_test_util.h"
#include "node_test_util.h"

namespace tac {
namespace {

using test::int64s;
using test::floats;

using kernels::Backend;
using kernels::check_tactic;
using kernels::make_node;
using kernels::random_tensor;
using kernels::set_attr;
using kernels::Tactic;
using kernels::tactics_for;

bool has_tactic(ir::OpKind op, Backend b, const std::string& name) {
  for (const Tactic* t : tactics_for(op, b))
    if (name == t->name) return true;
  return false;
}

// A FusedElementwise node running the program `ops` (ir/elementwise_chain.h) over n_inputs tensors.
ir::Node chain_node(std::vector<std::string> ops, size_t n_inputs) {
  ir::Node n = make_node("FusedElementwise", n_inputs, 1);
  n.domain = ir::kInternalDomain;
  ir::Attribute a;
  a.type = ir::Attribute::Type::strings;
  a.strings = std::move(ops);
  n.attrs["ops"] = a;
  return n;
}
// `times` copies of `links`, then `tail`.
std::vector<std::string> repeat_links(const std::vector<std::string>& links, int times,
                                      const std::vector<std::string>& tail = {}) {
  std::vector<std::string> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), links.begin(), links.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

// ---- host side: runs everywhere ----

TEST(CudaBackend, BackendNamesParseAndBadNamesAreErrors) {
  EXPECT_EQ(*kernels::backend_from_name("cpu"), Backend::cpu);
  EXPECT_EQ(*kernels::backend_from_name("cuda"), Backend::cuda);
  auto bad = kernels::backend_from_name("gpu");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'gpu'"), std::string::npos) << bad.status().message();
  EXPECT_EQ(builder::backend_of_device("cuda:NVIDIA H200 [sm_90, 143771 MiB]"), Backend::cuda);
  EXPECT_EQ(builder::backend_of_device(builder::device_fingerprint()), Backend::cpu);
}

// cuBLASLt is not linked but opened at first use (dlopen): the version line loads it, and in a
// CUDA build (the toolkit is where the build found it) it must load, no device needed.
TEST(CudaBackend, CublasLtLoadsAtFirstUse) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  const std::string v = cuda::library_versions();
  EXPECT_NE(v.find("cuBLASLt 1"), std::string::npos) << v;
  EXPECT_EQ(v.find("not loadable"), std::string::npos) << v;
}

TEST(CudaBackend, TablesSeparateTheBackends) {
  for (int i = 0; i < ir::kNumOps; ++i) {
    auto op = static_cast<ir::OpKind>(i);
    for (const Tactic* t : tactics_for(op, Backend::cpu)) EXPECT_EQ(t->backend, Backend::cpu) << t->name;
    auto cuda = tactics_for(op, Backend::cuda);
    for (const Tactic* t : cuda) EXPECT_EQ(t->backend, Backend::cuda) << t->name;
    if (!cuda::compiled()) {
      EXPECT_TRUE(cuda.empty());
      continue;
    }
    // Every op the reference covers builds on CUDA: host_reference, last.
    if (has_tactic(op, Backend::cpu, "reference")) {
      ASSERT_FALSE(cuda.empty()) << ir::op_name(op);
      EXPECT_STREQ(cuda.back()->name, "host_reference") << ir::op_name(op);
    }
  }
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  for (ir::OpKind op : {ir::OpKind::MatMul, ir::OpKind::Gemm, ir::OpKind::FusedMatMul})
    for (int k = 0; k < 8; ++k) EXPECT_TRUE(has_tactic(op, Backend::cuda, "cublaslt_h" + std::to_string(k)));
  for (ir::OpKind op : {ir::OpKind::Conv, ir::OpKind::FusedConv}) {
    EXPECT_TRUE(has_tactic(op, Backend::cuda, "cudnn_implicit_gemm"));
    EXPECT_TRUE(has_tactic(op, Backend::cuda, "cudnn_winograd"));
  }
  for (ir::OpKind op : {ir::OpKind::Relu, ir::OpKind::Add, ir::OpKind::Softmax, ir::OpKind::LayerNormalization,
                        ir::OpKind::MaxPool, ir::OpKind::Transpose, ir::OpKind::Gather})
    EXPECT_TRUE(has_tactic(op, Backend::cuda, "cuda")) << ir::op_name(op);
  EXPECT_TRUE(has_tactic(ir::OpKind::Concat, Backend::cuda, "cuda_copy"));
  for (ir::OpKind op : {ir::OpKind::Slice, ir::OpKind::Cast, ir::OpKind::DepthToSpace, ir::OpKind::SpaceToDepth})
    EXPECT_TRUE(has_tactic(op, Backend::cuda, "cuda")) << ir::op_name(op);
  for (ir::OpKind op : {ir::OpKind::Conv, ir::OpKind::FusedConv}) EXPECT_TRUE(has_tactic(op, Backend::cuda, "cuda_depthwise"));
  EXPECT_TRUE(has_tactic(ir::OpKind::FusedElementwise, Backend::cuda, "cuda"));
  // Reductions, Resize and the selection ops of shape and detection subgraphs (issue 27).
  for (ir::OpKind op : {ir::OpKind::ReduceMean, ir::OpKind::ReduceSum, ir::OpKind::ReduceMax, ir::OpKind::ReduceLogSumExp,
                        ir::OpKind::ArgMax, ir::OpKind::Resize, ir::OpKind::Upsample, ir::OpKind::Pad, ir::OpKind::Expand,
                        ir::OpKind::Tile, ir::OpKind::Where, ir::OpKind::Equal, ir::OpKind::Less, ir::OpKind::Not,
                        ir::OpKind::And})
    EXPECT_TRUE(has_tactic(op, Backend::cuda, "cuda")) << ir::op_name(op);
  EXPECT_TRUE(has_tactic(ir::OpKind::Split, Backend::cuda, "cuda_copy"));
  EXPECT_FALSE(has_tactic(ir::OpKind::MatMul, Backend::cpu, "cublaslt_h0"));
  EXPECT_EQ(kernels::find_tactic(ir::OpKind::MatMul, "cublaslt_h0"), nullptr);  // the CPU lookup
  EXPECT_NE(kernels::find_tactic(ir::OpKind::MatMul, "cublaslt_h0", Backend::cuda), nullptr);
}

// A small CNN: conv (+bias) -> relu -> global pool -> flatten -> gemm -> softmax.
ir::Model small_cnn() {
  test::ModelBuilder m(17);
  m.input("x", 1, {"2", "3", "9", "11"});
  test::initializer_random(m, "w", {5, 3, 3, 3}, 1, 0.4f);
  test::initializer_random(m, "b", {5}, 2);
  auto* c = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  test::attr_ints(c, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"}, "relu");
  auto* p = m.node("MaxPool", {"r"}, {"mp"}, "pool");
  test::attr_ints(p, "kernel_shape", {3, 3});
  test::attr_ints(p, "strides", {2, 2});
  test::attr_ints(p, "pads", {1, 1, 1, 1});
  m.node("GlobalAveragePool", {"mp"}, {"g"}, "gap");
  m.node("Flatten", {"g"}, {"f"}, "flatten");
  test::initializer_random(m, "fw", {7, 5}, 3);
  test::initializer_random(m, "fb", {7}, 4);
  auto* gm = m.node("Gemm", {"f", "fw", "fb"}, {"fc"}, "fc");
  test::attr_i(gm, "transB", 1);
  m.node("Softmax", {"fc"}, {"y"}, "softmax");
  m.output("y", 1, {});
  m.output("r", 1, {});
  return m.load().value();
}

TEST(CudaBackend, KnobSpaceListsCudaTacticsOrSaysWhyNot) {
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  auto space = builder::knob_space(small_cnn(), opts);
  if (!cuda::compiled()) {
    ASSERT_FALSE(space.is_ok());
    GTEST_SKIP() << "built without the CUDA backend";
  }
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  const builder::Knob* fc = space->find("tactic.fc");
  ASSERT_NE(fc, nullptr);
  EXPECT_NE(std::find(fc->values.begin(), fc->values.end(), "cublaslt_h0"), fc->values.end());
  EXPECT_NE(std::find(fc->values.begin(), fc->values.end(), "host_reference"), fc->values.end());
  EXPECT_EQ(std::find(fc->values.begin(), fc->values.end(), "reference"), fc->values.end());
  EXPECT_NE(space->find("cuda.workspace_mb"), nullptr);
  auto cpu = builder::knob_space(small_cnn(), builder::BuildOptions{});
  ASSERT_TRUE(cpu.is_ok());
  EXPECT_EQ(cpu->find("cuda.workspace_mb"), nullptr);
}


// x -> MatMul(W1) -> Add(b) -> LayerNormalization -> Relu -> MatMul(W2) -> y: the CUDA precision
// rewrite in fp16 lowers both MatMuls and the nodes between them follow (no device needed).
ir::Model mlp() {
  test::ModelBuilder m(17);
  m.input("x", 1, {"3", "16"});
  test::initializer_random(m, "w1", {16, 24}, 1);
  test::initializer_random(m, "b1", {24}, 2);
  test::initializer_random(m, "g", {24}, 3);
  test::initializer_random(m, "be", {24}, 4);
  test::initializer_random(m, "w2", {24, 8}, 5);
  m.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
  m.node("Add", {"h", "b1"}, {"hb"}, "add");
  m.node("LayerNormalization", {"hb", "g", "be"}, {"ln"}, "ln");
  m.node("Relu", {"ln"}, {"r"}, "relu");
  m.node("MatMul", {"r", "w2"}, {"y"}, "mm2");
  m.output("y", 1, {});
  return m.load().value();
}

TEST(CudaBackend, PrecisionAndGraphKnobsAreOfferedOnCudaOnly) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  builder::BuildOptions cu;
  cu.backend = Backend::cuda;
  auto space = builder::knob_space(mlp(), cu);
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  const builder::Knob* def = space->find("precision.default");
  ASSERT_NE(def, nullptr);
  std::vector<std::string> want = {"fp32", "tf32", "fp16", "bf16"};
  if (cuda::device_capability() >= builder::kFp8Capability) want.push_back("fp8");  // Ada, Hopper and later
  EXPECT_EQ(def->values, want);
  ASSERT_NE(space->find("cuda.graphs"), nullptr);
  EXPECT_EQ(space->find("cuda.graphs")->default_value, "on");
  // Every pass has the CPU's default (fuse_elementwise too, now that FusedElementwise has a CUDA
  // tactic).
  ASSERT_NE(space->find("pass.fuse_elementwise"), nullptr);
  EXPECT_EQ(space->find("pass.fuse_elementwise")->default_value, "on");
  EXPECT_EQ(space->find("pass.fuse_attention")->default_value, "on");
  auto cpu = builder::knob_space(mlp(), {});
  ASSERT_TRUE(cpu.is_ok());
  EXPECT_EQ(cpu->find("cuda.graphs"), nullptr);
  EXPECT_EQ(cpu->find("pass.fuse_attention")->default_value, "on");
  for (const builder::Knob& k : space->knobs())
    if (k.name.rfind("pass.", 0) == 0) {
      ASSERT_NE(cpu->find(k.name), nullptr) << k.name;
      EXPECT_EQ(k.default_value, cpu->find(k.name)->default_value) << k.name;
    }
  for (const std::string& v : cpu->find("precision.default")->values) EXPECT_TRUE(v != "fp16" && v != "tf32") << v;
  // Bad values name the knob.
  builder::Route r;
  r.values["precision.default"] = "fp4";
  Status st = builder::validate_route(r, *space);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("precision.default"), std::string::npos) << st.message();
}

TEST(CudaBackend, Fp16RewriteLetsTheNodesBetweenGemmsFollow) {
  ir::Model m = mlp();
  ASSERT_TRUE(ir::infer_shapes(m).is_ok());
  std::map<std::string, std::string> choice = {{"mm1", "fp16"}, {"mm2", "fp16"}};
  builder::PrecisionReport rep;
  ASSERT_TRUE(builder::apply_precision(m, choice, nullptr, &rep, Backend::cuda).is_ok());
  EXPECT_EQ(rep.fp16_nodes, 2);
  EXPECT_EQ(rep.followed_nodes, 3);  // Add, LayerNormalization, Relu
  EXPECT_EQ(rep.casts, 2);           // x in, y out
  for (const ir::Node& n : m.graph.nodes) {
    if (n.op == ir::OpKind::Cast) continue;
    EXPECT_EQ(m.graph.values[static_cast<size_t>(n.outputs[0])].type.dtype, DType::float16) << n.name;
  }
  // tf32 adds no casts: the GEMMs carry the math mode.
  ir::Model t = mlp();
  ASSERT_TRUE(ir::infer_shapes(t).is_ok());
  builder::PrecisionReport rt;
  ASSERT_TRUE(builder::apply_precision(t, {{"mm1", "tf32"}, {"mm2", "tf32"}}, nullptr, &rt, Backend::cuda).is_ok());
  EXPECT_EQ(rt.casts, 0);
  EXPECT_EQ(rt.tf32_nodes, 2);
  // On the CPU fp16 is not a precision.
  ir::Model c = mlp();
  ASSERT_TRUE(ir::infer_shapes(c).is_ok());
  EXPECT_FALSE(builder::apply_precision(c, choice, nullptr, nullptr, Backend::cpu).is_ok());
}

// fp8 lowers a MatMul with constant weights whose dims are multiples of 16 as fp16 (its casts
// and followers alike) and marks it for the cublaslt_fp8 tactics with its input's calibrated
// |max|; another MatMul is refused by name, and under precision.default=fp8 computes in fp16.
TEST(CudaBackend, Fp8RewriteMarksTheMatMulsWithTheirCalibratedRange) {
  test::ModelBuilder b(17);
  b.input("x", 1, {"3", "32"});
  test::initializer_random(b, "w1", {32, 48}, 1);
  test::initializer_random(b, "w2", {48, 8}, 2);
  b.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
  b.node("Relu", {"h"}, {"r"}, "relu");
  b.node("MatMul", {"r", "w2"}, {"y"}, "mm2");
  b.output("y", 1, {});
  const ir::Model src = b.load().value();
  builder::Calibration calib;
  calib.ranges["x"] = {2.5f, false};
  ir::Model m = src;
  ASSERT_TRUE(ir::infer_shapes(m).is_ok());
  builder::PrecisionReport rep;
  ASSERT_TRUE(builder::apply_precision(m, {{"mm1", "fp8"}, {"mm2", "fp16"}}, &calib, &rep, Backend::cuda).is_ok());
  EXPECT_EQ(rep.fp8_nodes, 1);
  EXPECT_EQ(rep.fp16_nodes, 1);
  EXPECT_EQ(rep.casts, 2);  // x in, y out: Relu follows, mm2 reads fp16
  int marked = 0;
  for (const ir::Node& n : m.graph.nodes) {
    if (n.name != "mm1") continue;
    ASSERT_NE(n.attr("tac_math"), nullptr);
    EXPECT_EQ(n.attr("tac_math")->s, "fp8");
    ASSERT_NE(n.attr("tac_fp8_amax"), nullptr);
    EXPECT_EQ(n.attr("tac_fp8_amax")->f, 2.5f);
    EXPECT_EQ(m.graph.values[static_cast<size_t>(n.outputs[0])].type.dtype, DType::float16);
    ++marked;
  }
  EXPECT_EQ(marked, 1);
  ir::Model bad = src;
  ASSERT_TRUE(ir::infer_shapes(bad).is_ok());
  Status st = builder::apply_precision(bad, {{"mm2", "fp8"}}, &calib, nullptr, Backend::cuda);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("precision.mm2=fp8"), std::string::npos) << st.message();
  // chosen_precisions: the default fp8 where a node can take it, fp16 elsewhere; a pin that
  // cannot apply is inactive and says why.
  ir::Model g = src;
  ASSERT_TRUE(ir::infer_shapes(g).is_ok());
  builder::Route r;
  r.values["precision.default"] = "fp8";
  r.values["precision.mm2"] = "fp8";
  builder::KnobSpace space;
  space.add({"precision.default", {"fp32", "fp16", "fp8"}, "fp32", "", builder::KnobScope::global});
  std::vector<std::string> inactive;
  const auto chosen = builder::chosen_precisions(g.graph, builder::RouteView(r, space), &inactive);
  EXPECT_EQ(chosen.at("mm1"), "fp8");
  EXPECT_EQ(chosen.at("mm2"), "fp16");
  ASSERT_EQ(inactive.size(), 1u);
  EXPECT_NE(inactive[0].find("precision.mm2=fp8"), std::string::npos) << inactive[0];
}

// x -> MatMul(W1) = h, x -> MatMul(W3) = g; Tanh(0.5 h) + g -> Relu -> MatMul(W2) -> y: the
// fuse_elementwise pass makes Mul, Tanh, Add and Relu one FusedElementwise, and in fp16 or bf16 it
// follows the lowered MatMuls like the unfused ops would (no Cast around it; no device needed).
TEST(CudaBackend, FusedElementwiseFollowsLowPrecision) {
  for (const char* low : {"fp16", "bf16"}) {
    test::ModelBuilder mb(17);
    mb.input("x", 1, {"3", "16"});
    test::initializer_random(mb, "w1", {16, 24}, 1);
    test::initializer_random(mb, "w3", {16, 24}, 3);
    test::initializer_random(mb, "w2", {24, 8}, 2);
    mb.initializer("half", {}, {0.5f});
    mb.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
    mb.node("MatMul", {"x", "w3"}, {"g"}, "mm3");
    mb.node("Mul", {"h", "half"}, {"a"}, "mul");
    mb.node("Tanh", {"a"}, {"b"}, "tanh");
    mb.node("Add", {"b", "g"}, {"c"}, "add");
    mb.node("Relu", {"c"}, {"r"}, "relu");
    mb.node("MatMul", {"r", "w2"}, {"y"}, "mm2");
    mb.output("y", 1, {});
    ir::Model m = mb.load().value();
    ASSERT_TRUE(ir::infer_shapes(m).is_ok());
    builder::PassContext ctx{m, {}, 1, {}};
    ASSERT_TRUE(builder::fuse_elementwise(m.graph, ctx).is_ok());
    ASSERT_EQ(test::count_op(m.graph, "FusedElementwise"), 1) << test::op_list(m.graph);
    ASSERT_TRUE(ir::infer_shapes(m).is_ok());
    builder::PrecisionReport rep;
    ASSERT_TRUE(builder::apply_precision(m, {{"mm1", low}, {"mm2", low}, {"mm3", low}}, nullptr, &rep, Backend::cuda).is_ok());
    EXPECT_EQ(rep.followed_nodes, 1) << low;  // the FusedElementwise
    EXPECT_EQ(rep.casts, 2) << low;           // x in, y out
    const DType want = std::string(low) == "fp16" ? DType::float16 : DType::bfloat16;
    for (const ir::Node& n : m.graph.nodes) {
      if (n.op == ir::OpKind::Cast) continue;
      EXPECT_EQ(m.graph.values[static_cast<size_t>(n.outputs[0])].type.dtype, want) << low << " " << n.name;
      if (n.op != ir::OpKind::FusedElementwise) continue;
      for (int v : n.inputs) EXPECT_EQ(m.graph.values[static_cast<size_t>(v)].type.dtype, want) << low << " " << n.name;
    }
  }
}

// The FusedElementwise "cuda" tactic's constraints, host side: fp32, fp16 and bf16, every input
// of the output's type and X's shape; a chain longer than one launch's links needs a workspace of
// 4 bytes per element, refused under cuda.workspace_mb like any tactic's.
TEST(CudaBackend, FusedElementwiseTacticSaysWhatItRefuses) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  const Tactic* t = kernels::find_tactic(ir::OpKind::FusedElementwise, "cuda", Backend::cuda);
  ASSERT_NE(t, nullptr);
  auto step = [](const ir::Node& n, std::vector<DType> dts, std::vector<Shape> shapes) {
    kernels::StepDesc s;
    s.node = &n;
    s.in_dtypes = dts;
    s.in_shapes = shapes;
    s.constants.assign(dts.size(), nullptr);
    s.out_dtypes = {dts[0]};
    s.out_shapes = {shapes[0]};
    return s;
  };
  auto refusal = [&](const kernels::StepDesc& s) {
    const Status st = t->applies(s);
    EXPECT_EQ(st.kind(), ErrorKind::not_applicable) << st.to_string();
    return st.message();
  };
  const ir::Node n = chain_node({"Add,x,in1", "Relu"}, 2);
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16})
    EXPECT_TRUE(t->applies(step(n, {dt, dt}, {Shape{3, 5}, Shape{3, 5}})).is_ok()) << dtype_name(dt);
  refusal(step(n, {DType::float64, DType::float64}, {Shape{3, 5}, Shape{3, 5}}));
  EXPECT_NE(refusal(step(n, {DType::float32, DType::float16}, {Shape{3, 5}, Shape{3, 5}})).find("type"), std::string::npos);
  EXPECT_NE(refusal(step(n, {DType::float32, DType::float32}, {Shape{3, 5}, Shape{1, 5}})).find("X's shape"), std::string::npos);
  // 64 links run in one launch, without workspace; 150 in three, through 4 bytes per element.
  const ir::Node one = chain_node(repeat_links({"Tanh", "Add,x,in1"}, 32), 2);
  kernels::StepDesc os = step(one, {DType::float16, DType::float16}, {Shape{1000}, Shape{1000}});
  os.workspace_limit = 0;
  EXPECT_TRUE(t->applies(os).is_ok()) << t->applies(os).to_string();
  const ir::Node three = chain_node(repeat_links({"Tanh", "Add,x,in1", "Mul,c0.5,x"}, 50), 2);
  kernels::StepDesc ts = step(three, {DType::float16, DType::float16}, {Shape{1000}, Shape{1000}});
  EXPECT_TRUE(t->applies(ts).is_ok()) << t->applies(ts).to_string();
  ts.workspace_limit = 3999;
  EXPECT_NE(refusal(ts).find("cuda.workspace_mb"), std::string::npos);
  ts.workspace_limit = 4000;
  EXPECT_TRUE(t->applies(ts).is_ok()) << t->applies(ts).to_string();
}

// The CUDA knob space of each zoo model prepares the graph in fp32, bf16 and fp16 (the rewrite,
// the nodes that follow, cast cancellation and shape completion on real graphs; no device).
TEST(CudaBackend, ZooGraphsPrepareInEveryCudaPrecision) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  if (!std::filesystem::exists(TAC_MODELS_DIR)) GTEST_SKIP() << "no model zoo";
  builder::BuildOptions cu;
  cu.backend = Backend::cuda;
  for (const char* name : {"super-resolution", "bert-toy", "mobilenet_v2", "bert-mini-like", "tiny-gpt"}) {
    auto m = io::load_model(std::string(TAC_MODELS_DIR) + "/" + name + "/model.onnx");
    ASSERT_TRUE(m.is_ok()) << name << ": " << m.status().to_string();
    auto space = builder::knob_space(*m, cu);
    EXPECT_TRUE(space.is_ok()) << name << ": " << space.status().to_string();
  }
}

TEST(CudaBackend, BuildingForCudaWithoutADeviceIsAClearError) {
  if (cuda::device_present()) GTEST_SKIP() << "a CUDA device is present";
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  auto plan = builder::build_plan(small_cnn(), builder::Route{}, opts);
  ASSERT_FALSE(plan.is_ok());
  EXPECT_NE(plan.status().message().find("CUDA"), std::string::npos) << plan.status().message();
}

// CUDA plans are fixed-shape: a step whose shapes are known only at run time (NonZero here) is
// refused at build time, naming the node and the way out, on any machine with the backend.
TEST(CudaBackend, PlanForAnotherGpuIsRefused) {
  auto plan = builder::build_plan(small_cnn(), builder::Route{}, {});
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  const std::string other = "cuda:Some Other GPU [sm_80, 40960 MiB]";
  plan->device = other;
  plan->backend = Backend::cuda;
  const auto path = std::filesystem::temp_directory_path() / ("tac_cuda_plan_" + std::to_string(::getpid()) + ".plan");
  ASSERT_TRUE(builder::save_plan(*plan, path.string()).is_ok());
  auto loaded = builder::load_plan(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(loaded.is_ok()) << "a plan for another GPU was accepted";
  EXPECT_EQ(loaded.status().kind(), ErrorKind::invalid_argument);
  EXPECT_NE(loaded.status().message().find("built for " + other), std::string::npos) << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("rebuild"), std::string::npos) << loaded.status().message();
}

// ---- on the device ----

#define REQUIRE_DEVICE()                                                                      \
  do {                                                                                        \
    if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";                  \
    if (!cuda::device_present()) GTEST_SKIP() << "no CUDA device on this machine";            \
  } while (0)

// Checks every CUDA tactic of `n.op` but host_reference (or only `only`) against the reference.
// Returns how many applied.
int expect_cuda_tactics(const ir::Node& n, const std::vector<Tensor>& in, const std::vector<bool>& cmask, double rtol,
                        double atol, const std::string& only = "") {
  int applied = 0;
  for (const Tactic* t : tactics_for(n.op, Backend::cuda)) {
    if (std::string(t->name) == "host_reference" || (!only.empty() && only != t->name)) continue;
    kernels::TacticCheck r = check_tactic(*t, n, in, cmask);
    if (r.status.kind() == ErrorKind::not_applicable) continue;
    EXPECT_TRUE(r.status.is_ok()) << n.op_type << " " << t->name << ": " << r.status.to_string();
    if (!r.status) continue;
    ++applied;
    // FFT and Winograd convolutions round more; an approximate tactic (cuBLASLt's tanh GELU)
    // may differ from the op by its documented bound, 4.8e-4.
    const double tol_atol = std::string(t->name).find("fft") != std::string::npos ||
                                    std::string(t->name).find("winograd") != std::string::npos
                                ? 10 * atol
                                : t->approximate ? atol + 4.8e-4 : atol;
    for (size_t k = 0; k < r.outputs.size(); ++k) {
      int bad = 0;
      for (int64_t i = 0; i < r.expected[k].numel() && bad < 3; ++i) {
        const double want = r.expected[k].get_f64(i), got = r.outputs[k].get_f64(i);
        if (got == want || (std::isnan(got) && std::isnan(want))) continue;  // infinities, NaN from NaN
        if (!(std::fabs(got - want) <= tol_atol * (1 + std::fabs(want)) + rtol * std::fabs(want))) {
          ++bad;
          ADD_FAILURE() << n.op_type << " " << t->name << " out" << k << "[" << i << "]: got " << got << " want " << want;
        }
      }
    }
  }
  return applied;
}

// A model with dynamic steps (ReduceSum's axes a graph input, NonZero's data-dependent output)
// beside a fixed-shape part: x -> Relu -> y (on the device), ReduceSum(y, axes) and NonZero(y).
test::ModelBuilder dynamic_model() {
  test::ModelBuilder m(17);
  m.input("x", 1, {"3", "5"});
  m.input("axes", 7, {"1"});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.node("ReduceSum", {"y", "axes"}, {"s"}, "reducesum");
  m.node("NonZero", {"y"}, {"nz"}, "nonzero");
  m.output("y", 1, {"3", "5"});
  m.output("s", 1, {"a", "b"});
  m.output("nz", 7, {"2", "n"});
  return m;
}

// Dynamic steps build on CUDA: they run on the host (host_reference, its run_dynamic), the rest
// on the device.
TEST(CudaEngine, DynamicStepsRunOnTheHost) {
  REQUIRE_DEVICE();
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  auto plan = builder::build_plan(dynamic_model().load().value(), builder::Route{}, opts);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  int dynamic = 0;
  for (const builder::PlanStep& st : plan->steps) {
    const ir::Node& n = plan->model.graph.nodes[static_cast<size_t>(st.node)];
    if (n.op == ir::OpKind::Relu) {
      EXPECT_FALSE(st.dynamic);
      EXPECT_STREQ(st.tactic->name, "cuda");
    } else {
      EXPECT_TRUE(st.dynamic) << n.name;
      EXPECT_STREQ(st.tactic->name, "host_reference") << n.name;
      ++dynamic;
    }
  }
  EXPECT_EQ(dynamic, 2);
}

TEST(CudaEngine, DynamicStepsMatchTheReference) {
  REQUIRE_DEVICE();
  const ir::Model m = dynamic_model().load().value();
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  auto plan = builder::build_plan(m, builder::Route{}, opts);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  auto e = runtime::Engine::create(std::move(plan).value());
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_TRUE((*e)->dynamic());
  EXPECT_NE((*e)->graph_state().find("dynamic"), std::string::npos) << (*e)->graph_state();
  for (int64_t axis : {0, 1, -1}) {
    std::vector<Tensor> in = {kernels::random_tensor(DType::float32, {3, 5}, 80 + static_cast<uint64_t>(axis + 1)),
                              Tensor::create(DType::int64, {1}).value()};
    in[1].set_f64(0, static_cast<double>(axis));
    auto got = (*e)->run(in);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    auto want = test::reference_outputs(m, in);
    ASSERT_TRUE(want.is_ok()) << want.status().to_string();
    EXPECT_EQ(test::compare_outputs(*got, *want, 1e-6, 1e-6), "") << "axis " << axis;
  }
  // Device-side timing needs a plan that runs on the device alone.
  EXPECT_EQ((*e)->launch().kind(), ErrorKind::invalid_argument);
}

TEST(CudaTactics, UnaryOps) {
  REQUIRE_DEVICE();
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "Abs", "Floor", "Ceil", "Sin", "Cos", "Softplus",
                         "HardSwish", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Gelu"}) {
    ir::Node n = make_node(op, 1, 1, 20);
    EXPECT_EQ(expect_cuda_tactics(n, {random_tensor(DType::float32, {3, 7, 37}, 1)}, {false}, 4e-6, 1e-7), 1) << op;
  }
  // Sqrt, Log, Reciprocal on positive data.
  Tensor pos = random_tensor(DType::float32, {5, 41}, 2);
  for (int64_t i = 0; i < pos.numel(); ++i) pos.set_f64(i, std::fabs(pos.get_f64(i)) + 0.1);
  for (const char* op : {"Sqrt", "Log", "Reciprocal"})
    EXPECT_EQ(expect_cuda_tactics(make_node(op, 1, 1), {pos}, {false}, 4e-6, 1e-7), 1) << op;
  ir::Node clip = make_node("Clip", 3, 1, 13);
  Tensor lo = Tensor::create(DType::float32, {}).value(), hi = Tensor::create(DType::float32, {}).value();
  lo.set_f64(0, -0.5), hi.set_f64(0, 0.75);
  EXPECT_EQ(expect_cuda_tactics(clip, {random_tensor(DType::float32, {129}, 3), lo, hi}, {false, true, true}, 0, 0), 1);
}

TEST(CudaTactics, BinaryOpsWithBroadcasting) {
  REQUIRE_DEVICE();
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 7, 5}, {3, 7, 5}}, {{3, 1, 5}, {4, 5}}, {{2, 3, 4, 5}, {}}, {{1}, {6, 1, 3}}, {{4, 1}, {1, 9}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    for (const auto& [a, b] : shapes) {
      ir::Node n = make_node(op, 2, 1);
      EXPECT_EQ(expect_cuda_tactics(n, {random_tensor(DType::float32, a, 4), random_tensor(DType::float32, b, 5)},
                                    {false, false}, 1e-7, 0),
                1)
          << op << shape_to_string(a) << shape_to_string(b);
    }
  Tensor base = random_tensor(DType::float32, {5, 3}, 6);
  for (int64_t i = 0; i < base.numel(); ++i) base.set_f64(i, std::fabs(base.get_f64(i)) + 0.5);
  EXPECT_EQ(expect_cuda_tactics(make_node("Pow", 2, 1), {base, random_tensor(DType::float32, {3}, 7)}, {false, false}, 4e-6, 0), 1);
}

TEST(CudaTactics, SoftmaxLayerNormPooling) {
  REQUIRE_DEVICE();
  for (int64_t axis : {-1, 1}) {
    ir::Node n = make_node("Softmax", 1, 1, 13);
    set_attr(n, "axis", axis);
    EXPECT_EQ(expect_cuda_tactics(n, {random_tensor(DType::float32, {3, 37, 5}, 8)}, {false}, 1e-5, 1e-7), 1) << axis;
  }
  ir::Node old = make_node("Softmax", 1, 1, 11);  // coerced to 2-D at axis 1
  EXPECT_EQ(expect_cuda_tactics(old, {random_tensor(DType::float32, {3, 4, 5}, 9)}, {false}, 1e-5, 1e-7), 1);
  ir::Node ls = make_node("LogSoftmax", 1, 1, 13);
  EXPECT_EQ(expect_cuda_tactics(ls, {random_tensor(DType::float32, {7, 1000}, 10)}, {false}, 1e-5, 1e-6), 1);

  for (int64_t cols : {257, 768, 1024}) {  // the block kernel; a warp per row (up to 1024 fp32 columns)
    ir::Node ln = make_node("LayerNormalization", 3, 1, 17);
    set_attr(ln, "epsilon", 1e-5f);
    EXPECT_EQ(expect_cuda_tactics(ln, {random_tensor(DType::float32, {2, 9, cols}, 11), random_tensor(DType::float32, {cols}, 12),
                                       random_tensor(DType::float32, {cols}, 13)},
                                  {false, true, true}, 1e-5, 1e-5),
              1)
        << cols;
  }

  for (const char* op : {"MaxPool", "AveragePool"})
    for (int64_t cip : {0, 1}) {
      ir::Node n = make_node(op, 1, 1, 19);
      set_attr(n, "kernel_shape", std::vector<int64_t>{3, 2});
      set_attr(n, "strides", std::vector<int64_t>{2, 1});
      set_attr(n, "pads", std::vector<int64_t>{1, 0, 1, 1});
      if (std::string(op) == "AveragePool") set_attr(n, "count_include_pad", cip);
      EXPECT_EQ(expect_cuda_tactics(n, {random_tensor(DType::float32, {2, 3, 11, 8}, 14)}, {false}, 1e-6, 1e-7), 1) << op;
    }
  ir::Node ceil = make_node("MaxPool", 1, 1, 19);
  set_attr(ceil, "kernel_shape", std::vector<int64_t>{3, 3});
  set_attr(ceil, "strides", std::vector<int64_t>{2, 2});
  set_attr(ceil, "ceil_mode", int64_t{1});
  EXPECT_EQ(expect_cuda_tactics(ceil, {random_tensor(DType::float32, {1, 2, 10, 10}, 15)}, {false}, 0, 0), 1);
  EXPECT_EQ(expect_cuda_tactics(make_node("GlobalAveragePool", 1, 1), {random_tensor(DType::float32, {2, 5, 7, 9}, 16)}, {false},
                                1e-6, 1e-7),
            1);
}

TEST(CudaTactics, DataMovement) {
  REQUIRE_DEVICE();
  ir::Node tr = make_node("Transpose", 1, 1);
  set_attr(tr, "perm", std::vector<int64_t>{2, 0, 3, 1});
  EXPECT_EQ(expect_cuda_tactics(tr, {random_tensor(DType::float32, {2, 3, 5, 7}, 17)}, {false}, 0, 0), 1);
  EXPECT_EQ(expect_cuda_tactics(tr, {random_tensor(DType::int64, {2, 3, 5, 7}, 18)}, {false}, 0, 0), 1);
  ir::Node cat = make_node("Concat", 3, 1);
  set_attr(cat, "axis", int64_t{1});
  EXPECT_EQ(expect_cuda_tactics(cat, {random_tensor(DType::float32, {2, 3, 5}, 19), random_tensor(DType::float32, {2, 1, 5}, 20),
                                      random_tensor(DType::float32, {2, 4, 5}, 21)},
                                {false, false, false}, 0, 0),
            1);
  ir::Node g = make_node("Gather", 2, 1);
  set_attr(g, "axis", int64_t{1});
  Tensor idx = Tensor::create(DType::int64, {2, 3}).value();
  for (int64_t i = 0; i < 6; ++i) idx.set_i64(i, i % 2 ? -(i % 4) - 1 : i % 7);
  EXPECT_EQ(expect_cuda_tactics(g, {random_tensor(DType::float32, {3, 7, 5}, 22), idx}, {false, false}, 0, 0), 1);
  ir::Node rs = make_node("Reshape", 2, 1);
  Tensor shape = Tensor::create(DType::int64, {2}).value();
  shape.set_i64(0, 5), shape.set_i64(1, -1);
  EXPECT_EQ(expect_cuda_tactics(rs, {random_tensor(DType::float32, {2, 3, 5}, 23), shape}, {false, true}, 0, 0), 1);
  // Transposes that move the innermost dim, tiles of 32 with ragged edges (the shared-memory
  // tiled path), batch dims before, between and after the tile's dims; fp16 and fp32.
  struct TiledCase {
    Shape in;
    std::vector<int64_t> perm;
  };
  for (const TiledCase& c : {TiledCase{{2, 3, 40, 70}, {0, 1, 3, 2}}, TiledCase{{37, 3, 65}, {2, 1, 0}},
                             TiledCase{{5, 33, 2, 50}, {3, 0, 2, 1}}, TiledCase{{64, 96}, {1, 0}}})
    for (DType dt : {DType::float16, DType::float32}) {
      ir::Node tp = make_node("Transpose", 1, 1);
      set_attr(tp, "perm", c.perm);
      EXPECT_EQ(expect_cuda_tactics(tp, {random_tensor(dt, c.in, 24)}, {false}, 0, 0), 1)
          << shape_to_string(c.in) << " " << dtype_name(dt);
    }
}

TEST(CudaTactics, CublasLtGemms) {
  REQUIRE_DEVICE();
  // Batched, broadcast B, 2-D.
  ir::Node mm = make_node("MatMul", 2, 1);
  EXPECT_GE(expect_cuda_tactics(mm, {random_tensor(DType::float32, {2, 3, 37, 29}, 24), random_tensor(DType::float32, {2, 3, 29, 41}, 25)},
                                {false, false}, 0, 1e-4),
            1);
  EXPECT_GE(expect_cuda_tactics(mm, {random_tensor(DType::float32, {2, 3, 37, 29}, 26), random_tensor(DType::float32, {29, 41}, 27)},
                                {false, true}, 0, 1e-4),
            1);
  EXPECT_GE(expect_cuda_tactics(mm, {random_tensor(DType::float32, {2, 37, 29}, 28), random_tensor(DType::float32, {3, 1, 29, 41}, 29)},
                                {false, false}, 0, 1e-4),
            0);  // partial broadcast: host_reference only, unless strided
  // Gemm with transposes, alpha/beta and a bias row / full C.
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1})
      for (bool full_c : {false, true}) {
        ir::Node g = make_node("Gemm", 3, 1);
        set_attr(g, "transA", ta);
        set_attr(g, "transB", tb);
        set_attr(g, "alpha", 0.75f);
        set_attr(g, "beta", 1.5f);
        Shape a = ta ? Shape{23, 13} : Shape{13, 23}, b = tb ? Shape{19, 23} : Shape{23, 19};
        Shape c = full_c ? Shape{13, 19} : Shape{19};
        EXPECT_GE(expect_cuda_tactics(g, {random_tensor(DType::float32, a, 30), random_tensor(DType::float32, b, 31),
                                          random_tensor(DType::float32, c, 32)},
                                      {false, true, true}, 0, 1e-4),
                  1)
            << ta << tb << full_c;
      }
  // FusedMatMul: bias + ReLU in cuBLASLt's epilogue; GELU + residual in ours.
  for (const char* act : {"Relu", "Gelu", ""}) {
    ir::Node f = make_node("FusedMatMul", 4, 1);
    f.domain = "tactician";
    set_attr(f, "transB", int64_t{1});
    set_attr(f, "activation", std::string(act));
    const bool res = std::string(act) == "Gelu";
    EXPECT_GE(expect_cuda_tactics(f, {random_tensor(DType::float32, {2, 17, 31}, 33), random_tensor(DType::float32, {21, 31}, 34),
                                      random_tensor(DType::float32, {21}, 35),
                                      res ? random_tensor(DType::float32, {2, 17, 21}, 36) : Tensor()},
                                  {false, true, true, false}, 0, 1e-4),
              1)
        << act;
  }
  // A whole residual matrix per batch is cuBLASLt's C (beta): with bias + ReLU, without, and
  // batched (B not shared), in fp32 and fp16.
  for (DType dt : {DType::float32, DType::float16})
    for (const char* act : {"Relu", ""})
      for (bool batched_b : {false, true}) {
        ir::Node f = make_node("FusedMatMul", 4, 1);
        f.domain = "tactician";
        set_attr(f, "activation", std::string(act));
        Shape b = batched_b ? Shape{2, 32, 24} : Shape{32, 24};
        EXPECT_GE(expect_cuda_tactics(f, {random_tensor(dt, {2, 17, 32}, 37), random_tensor(dt, b, 38),
                                          random_tensor(DType::float32, {24}, 39), random_tensor(dt, {2, 17, 24}, 40)},
                                      {false, !batched_b, true, false}, 0, dt == DType::float32 ? 1e-4 : 3e-3),
                  1)
            << dtype_name(dt) << " act=" << act << " batched_b=" << batched_b;
      }
}

TEST(CudaTactics, CudnnConvolutions) {
  REQUIRE_DEVICE();
  struct Case {
    Shape x, w;
    std::vector<int64_t> pads, strides;
    int64_t group;
  };
  for (const Case& c : {Case{{2, 3, 13, 11}, {8, 3, 3, 3}, {1, 1, 1, 1}, {1, 1}, 1},
                        Case{{1, 16, 15, 15}, {16, 1, 3, 3}, {1, 1, 1, 1}, {2, 2}, 16},
                        Case{{1, 12, 9, 9}, {10, 12, 1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
                        Case{{1, 6, 17, 17}, {6, 3, 5, 5}, {2, 2, 2, 2}, {2, 2}, 2}}) {
    ir::Node n = make_node("Conv", 3, 1);
    set_attr(n, "pads", c.pads);
    set_attr(n, "strides", c.strides);
    set_attr(n, "group", c.group);
    EXPECT_GE(expect_cuda_tactics(n, {random_tensor(DType::float32, c.x, 37), random_tensor(DType::float32, c.w, 38),
                                      random_tensor(DType::float32, {c.w[0]}, 39)},
                                  {false, true, true}, 0, 1e-4),
              1)
        << shape_to_string(c.x) << shape_to_string(c.w);
  }
  ir::Node f = make_node("FusedConv", 4, 1);
  f.domain = "tactician";
  set_attr(f, "pads", std::vector<int64_t>{1, 1, 1, 1});
  set_attr(f, "activation", std::string("Clip"));
  set_attr(f, "act_alpha", 0.0f);
  set_attr(f, "act_beta", 6.0f);
  EXPECT_GE(expect_cuda_tactics(f, {random_tensor(DType::float32, {2, 4, 10, 9}, 40), random_tensor(DType::float32, {6, 4, 3, 3}, 41),
                                    random_tensor(DType::float32, {6}, 42), random_tensor(DType::float32, {2, 6, 10, 9}, 43)},
                                {false, true, true, false}, 0, 1e-4),
            1);
}


// The v9 graph API's engine configurations (cudnn_graph_h*): the whole Conv / FusedConv (bias,
// residual, activation) as one operation graph. Each configuration that applies must match the
// reference. At least one must apply to a plain fp32 nchw convolution and to fp16 / bf16 nhwc
// convolution + bias + residual + ReLU (tensor-core runtime fusion); for the other cases cuDNN
// may have no engine (its runtime fusion engines want tensor cores and channels-last), and the
// test prints what cuDNN said.
TEST(CudaTactics, CudnnGraphEngines) {
  REQUIRE_DEVICE();
  struct Case {
    std::string what;
    ir::Node node;
    std::vector<Tensor> in;
    double tol;
    std::vector<ir::Layout> in_layouts;
    ir::Layout out_layout;
    bool must_apply;
  };
  auto conv = [](const char* act, std::vector<int64_t> pads, int inputs, const char* math = nullptr) {
    ir::Node n = make_node(inputs == 2 ? "Conv" : "FusedConv", inputs, 1);
    if (inputs != 2) n.domain = "tactician";
    set_attr(n, "pads", pads);
    if (act) set_attr(n, "activation", std::string(act));
    if (act && std::string(act) == "Clip") set_attr(n, "act_alpha", 0.0f), set_attr(n, "act_beta", 2.0f);
    if (math) set_attr(n, "tac_math", std::string(math));
    return n;
  };
  const std::vector<ir::Layout> nhwc4{ir::Layout::nhwc, ir::Layout::nchw, ir::Layout::nchw, ir::Layout::nhwc};
  auto inputs = [](DType dt, bool fused, uint64_t seed) {
    std::vector<Tensor> in{random_tensor(dt, {2, 16, 12, 10}, seed), random_tensor(dt, {32, 16, 3, 3}, seed + 1)};
    if (fused) in.push_back(random_tensor(DType::float32, {32}, seed + 2)), in.push_back(random_tensor(dt, {2, 32, 12, 10}, seed + 3));
    return in;
  };
  std::vector<Case> cases;
  cases.push_back({"fp32 nchw Conv", conv(nullptr, {1, 1, 1, 1}, 2), inputs(DType::float32, false, 140), 1e-4, {}, ir::Layout::nchw, true});
  // Output 2 x 6 x (10+1+2-3+1) x (9+0+1-3+1) = [2, 6, 11, 8].
  cases.push_back({"fp32 nchw asymmetric pads + bias + residual + Clip", conv("Clip", {1, 0, 2, 1}, 4),
                   {random_tensor(DType::float32, {2, 4, 10, 9}, 150), random_tensor(DType::float32, {6, 4, 3, 3}, 151),
                    random_tensor(DType::float32, {6}, 152), random_tensor(DType::float32, {2, 6, 11, 8}, 153)},
                   1e-4, {}, ir::Layout::nchw, false});
  cases.push_back({"tf32 nhwc bias + residual + Relu", conv("Relu", {1, 1, 1, 1}, 4, "tf32"), inputs(DType::float32, true, 160),
                   1e-2, nhwc4, ir::Layout::nhwc, false});  // tf32 operands: fp16's 10-bit mantissa, fp16's bound
  for (DType dt : {DType::float16, DType::bfloat16})
    cases.push_back({std::string(dtype_name(dt)) + " nhwc bias + residual + Relu", conv("Relu", {1, 1, 1, 1}, 4),
                     inputs(dt, true, 170), dt == DType::float16 ? 1e-2 : 6e-2, nhwc4, ir::Layout::nhwc, true});
  // Output 2 x 32 x (12+0+2-3+1) x (10+1+1-3+1) = [2, 32, 12, 10].
  cases.push_back({"fp16 nhwc asymmetric pads + bias + residual + Clip", conv("Clip", {0, 1, 2, 1}, 4),
                   {random_tensor(DType::float16, {2, 16, 12, 10}, 180), random_tensor(DType::float16, {32, 16, 3, 3}, 181),
                    random_tensor(DType::float32, {32}, 182), random_tensor(DType::float16, {2, 32, 12, 10}, 183)},
                   1e-2, nhwc4, ir::Layout::nhwc, false});
  for (const char* act : {"Sigmoid", "Tanh", "Gelu", "Silu", "LeakyRelu"})
    cases.push_back({std::string("fp16 nhwc bias + residual + ") + act, conv(act, {1, 1, 1, 1}, 4), inputs(DType::float16, true, 190),
                     1e-2, nhwc4, ir::Layout::nhwc, false});
  for (Case& c : cases) {
    int applied = 0;
    std::string reasons;
    for (const Tactic* t : tactics_for(c.node.op, Backend::cuda)) {
      if (std::string(t->name).rfind("cudnn_graph_h", 0) != 0) continue;
      const std::vector<bool> cmask{false, true, true, false};
      kernels::TacticCheck r = check_tactic(*t, c.node, c.in, std::vector<bool>(cmask.begin(), cmask.begin() + c.in.size()), 1,
                                            c.in_layouts.empty() ? c.in_layouts
                                                                 : std::vector<ir::Layout>(c.in_layouts.begin(),
                                                                                           c.in_layouts.begin() + c.in.size()),
                                            c.out_layout);
      if (r.status.kind() == ErrorKind::not_applicable) {
        reasons += std::string("\n  ") + t->name + ": " + r.status.message();
        continue;
      }
      EXPECT_TRUE(r.status.is_ok()) << c.what << ", " << t->name << ": " << r.status.to_string();
      if (!r.status) continue;
      ++applied;
      for (int64_t i = 0, bad = 0; i < r.expected[0].numel() && bad < 3; ++i) {
        const double want = r.expected[0].get_f64(i), got = r.outputs[0].get_f64(i);
        if (!(std::fabs(got - want) <= c.tol * (1 + std::fabs(want)))) {
          ++bad;
          ADD_FAILURE() << c.what << ", " << t->name << " out[" << i << "]: got " << got << " want " << want;
        }
      }
    }
    std::printf("cudnn graph, %s: %d configurations apply%s\n", c.what.c_str(), applied, reasons.c_str());
    if (c.must_apply) {
      EXPECT_GE(applied, 1) << c.what << reasons;
    }
  }
}

// cudnn_graph_mm_h*: MatMul / FusedMatMul as one cuDNN operation graph (matmul + bias +
// activation), fp16 and bf16, the erf GELU of BERT's FFN and other activations cuBLASLt's
// epilogue lacks, a strided batch and a broadcast B. Each configuration that applies must match
// the reference; at least one must apply to bias + GELU (the case the tactic is for).
TEST(CudaTactics, CudnnGraphMatmul) {
  REQUIRE_DEVICE();
  for (DType dt : {DType::float16, DType::bfloat16}) {
    const double tol = dt == DType::float16 ? 3e-3 : 2e-2;
    for (const char* act : {"Gelu", "Silu", "Sigmoid", "Tanh", "Relu", ""}) {
      ir::Node f = make_node("FusedMatMul", 3, 1);
      f.domain = "tactician";
      if (*act) set_attr(f, "activation", std::string(act));
      int applied = 0;
      std::string reasons;
      const std::vector<Tensor> in{random_tensor(dt, {2, 64, 96}, 300), random_tensor(dt, {96, 128}, 301),
                                   random_tensor(DType::float32, {128}, 302)};
      for (const Tactic* t : tactics_for(f.op, Backend::cuda)) {
        if (std::string(t->name).rfind("cudnn_graph_mm_h", 0) != 0) continue;
        const int n = expect_cuda_tactics(f, in, {false, true, true}, 0, tol, t->name);
        if (n == 0) reasons += std::string("\n  ") + t->name + ": " + check_tactic(*t, f, in, {false, true, true}).status.message();
        applied += n;
      }
      std::printf("cudnn graph matmul, %s bias + %s: %d configurations apply%s\n", dtype_name(dt).c_str(), *act ? act : "nothing",
                  applied, reasons.c_str());
      if (std::string(act) == "Gelu") {
        EXPECT_GE(applied, 1) << dtype_name(dt) << reasons;
      }
    }
    // A batched A times a batched B (no broadcast), plain MatMul.
    ir::Node mm = make_node("MatMul", 2, 1);
    int applied = 0;
    for (const Tactic* t : tactics_for(mm.op, Backend::cuda))
      if (std::string(t->name).rfind("cudnn_graph_mm_h", 0) == 0)
        applied += expect_cuda_tactics(mm, {random_tensor(dt, {3, 32, 64}, 310), random_tensor(dt, {3, 64, 48}, 311)}, {false, false}, 0,
                                       tol, t->name);
    std::printf("cudnn graph matmul, %s batched MatMul: %d configurations apply\n", dtype_name(dt).c_str(), applied);
  }
}

// Cast, Slice, DepthToSpace, SpaceToDepth: exact.
TEST(CudaTactics, CastSliceDepthToSpace) {
  REQUIRE_DEVICE();
  const std::vector<DType> types = {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int64,
                                    DType::int32,   DType::int8,    DType::uint8,    DType::boolean};
  for (DType from : types)
    for (DType to : types) {
      ir::Node n = make_node("Cast", 1, 1, 19);
      set_attr(n, "to", static_cast<int64_t>(to));
      Tensor x = random_tensor(from, {3, 37}, 60);
      if (from == DType::float32)  // saturation and NaN too
        x.set_f64(0, 1e10), x.set_f64(1, -1e10), x.set_f64(2, NAN), x.set_f64(3, -2.75), x.set_f64(4, 0.0);
      EXPECT_EQ(expect_cuda_tactics(n, {x}, {false}, 0, 0), 1) << dtype_name(from) << " -> " << dtype_name(to);
    }
  struct SliceCase {
    Shape x;
    std::vector<int64_t> starts, ends, axes, steps;
  };
  for (const SliceCase& c : {SliceCase{{3, 17, 5}, {1, 2}, {3, 15}, {0, 1}, {1, 3}},
                             SliceCase{{3, 17, 5}, {-1, 100}, {-100, 0}, {2, 1}, {-2, -3}},
                             SliceCase{{2, 128, 64}, {0}, {64}, {-1}, {1}},
                             SliceCase{{7, 9}, {-4}, {1000}, {1}, {1}}}) {
    ir::Node n = make_node("Slice", 5, 1, 13);
    auto ints = [](const std::vector<int64_t>& v) {
      Tensor t = Tensor::create(DType::int64, {static_cast<int64_t>(v.size())}).value();
      for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
      return t;
    };
    for (DType dt : {DType::float32, DType::float16, DType::int64})
      EXPECT_EQ(expect_cuda_tactics(n, {random_tensor(dt, c.x, 61), ints(c.starts), ints(c.ends), ints(c.axes), ints(c.steps)},
                                    {false, true, true, true, true}, 0, 0),
                1)
          << shape_to_string(c.x) << dtype_name(dt);
  }
  for (const char* mode : {"DCR", "CRD"}) {
    ir::Node n = make_node("DepthToSpace", 1, 1, 13);
    set_attr(n, "blocksize", int64_t{3});
    set_attr(n, "mode", std::string(mode));
    EXPECT_EQ(expect_cuda_tactics(n, {random_tensor(DType::float32, {2, 18, 5, 7}, 62)}, {false}, 0, 0), 1) << mode;
  }
  ir::Node s2d = make_node("SpaceToDepth", 1, 1, 13);
  set_attr(s2d, "blocksize", int64_t{2});
  EXPECT_EQ(expect_cuda_tactics(s2d, {random_tensor(DType::float32, {2, 3, 6, 10}, 63)}, {false}, 0, 0), 1);
}

// Our depthwise kernel against the reference: strides, dilations, asymmetric pads, a channel
// multiplier, and the fused bias + residual + activation; fp32, fp16, bf16.
TEST(CudaTactics, DepthwiseConvolution) {
  REQUIRE_DEVICE();
  struct Case {
    Shape x;
    int64_t mult, k;
    std::vector<int64_t> pads, strides, dil;
  };
  for (const Case& c : {Case{{2, 7, 13, 11}, 1, 3, {1, 1, 1, 1}, {1, 1}, {1, 1}},
                        Case{{1, 16, 15, 17}, 1, 3, {1, 1, 1, 1}, {2, 2}, {1, 1}},
                        Case{{1, 5, 19, 9}, 2, 5, {2, 1, 0, 3}, {2, 1}, {1, 2}},
                        Case{{3, 9, 8, 8}, 1, 3, {2, 2, 2, 2}, {1, 1}, {2, 2}}})
    for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
      const int64_t C = c.x[1];
      ir::Node n = make_node("Conv", 3, 1);
      set_attr(n, "pads", c.pads);
      set_attr(n, "strides", c.strides);
      set_attr(n, "dilations", c.dil);
      set_attr(n, "group", C);
      const double tol = dt == DType::float32 ? 1e-5 : dt == DType::float16 ? 2e-3 : 1e-2;
      Tensor bias = random_tensor(DType::float32, {C * c.mult}, 66);  // biases stay fp32
      EXPECT_EQ(expect_cuda_tactics(n, {random_tensor(dt, c.x, 64), random_tensor(dt, {C * c.mult, 1, c.k, c.k}, 65), bias},
                                    {false, true, true}, 0, tol, "cuda_depthwise"),
                1)
          << shape_to_string(c.x) << dtype_name(dt);
    }
  ir::Node f = make_node("FusedConv", 4, 1);
  f.domain = "tactician";
  set_attr(f, "pads", std::vector<int64_t>{1, 1, 1, 1});
  set_attr(f, "group", int64_t{6});
  set_attr(f, "activation", std::string("Clip"));
  set_attr(f, "act_alpha", 0.0f);
  set_attr(f, "act_beta", 6.0f);
  EXPECT_EQ(expect_cuda_tactics(f, {random_tensor(DType::float32, {2, 6, 10, 9}, 67), random_tensor(DType::float32, {6, 1, 3, 3}, 68),
                                    random_tensor(DType::float32, {6}, 69), random_tensor(DType::float32, {2, 6, 10, 9}, 70)},
                                {false, true, true, false}, 0, 1e-5, "cuda_depthwise"),
            1);
  // Every epilogue activation, through the depthwise kernel and cuDNN's convolution + our epilogue
  // kernel (a missing case once returned x unchanged: HardSwish in the depthwise kernel).
  for (int a = 1; a < cuda::kern::kNumEpilogueActs; ++a) {
    const char* act = ir::activation_name(static_cast<ir::Epilogue::Act>(a));
    for (const char* tactic : {"cuda_depthwise", "cudnn_implicit_gemm"}) {
      const bool dw = std::string(tactic) == "cuda_depthwise";
      ir::Node g = make_node("FusedConv", 3, 1);
      g.domain = "tactician";
      set_attr(g, "pads", std::vector<int64_t>{1, 1, 1, 1});
      set_attr(g, "group", int64_t{dw ? 6 : 1});
      set_attr(g, "activation", std::string(act));
      set_attr(g, "act_alpha", a == 2 ? -0.5f : 0.2f);  // Clip's min; LeakyRelu's and HardSigmoid's alpha
      set_attr(g, "act_beta", a == 2 ? 1.5f : 0.5f);
      EXPECT_EQ(expect_cuda_tactics(g, {random_tensor(DType::float32, {2, 6, 10, 9}, 71),
                                        random_tensor(DType::float32, {6, dw ? 1 : 6, 3, 3}, 72), random_tensor(DType::float32, {6}, 73)},
                                    {false, true, true}, 0, 1e-5, tactic),
                1)
          << act << " " << tactic;
    }
  }
}

// fp16 / bf16 tactics against the reference on the same fp16 / bf16 inputs (the reference
// accumulates in float64 and rounds once; ours accumulate in fp32): about one unit in the last
// place of the output type.
TEST(CudaTactics, HalfPrecisionTactics) {
  REQUIRE_DEVICE();
  for (DType dt : {DType::float16, DType::bfloat16}) {
    const double tol = dt == DType::float16 ? 3e-3 : 2e-2;
    const std::string name = dtype_name(dt);
    ir::Node mm = make_node("MatMul", 2, 1);
    EXPECT_GE(expect_cuda_tactics(mm, {random_tensor(dt, {2, 3, 37, 29}, 80), random_tensor(dt, {29, 41}, 81)}, {false, true}, 0, tol), 1)
        << name;
    ir::Node fm = make_node("FusedMatMul", 4, 1);  // bias fp32 (as the precision rewrite leaves it), GELU + residual
    fm.domain = "tactician";
    set_attr(fm, "transB", int64_t{1});
    set_attr(fm, "activation", std::string("Gelu"));
    EXPECT_GE(expect_cuda_tactics(fm, {random_tensor(dt, {2, 17, 32}, 82), random_tensor(dt, {24, 32}, 83),
                                       random_tensor(DType::float32, {24}, 84), random_tensor(dt, {2, 17, 24}, 85)},
                                  {false, true, true, false}, 0, tol),
              1)
        << name;
    // Our epilogue 16 bytes at a time (48 columns), without a residual; and one element at a
    // time (45 columns).
    for (int64_t n : {48, 45}) {
      ir::Node fg = make_node("FusedMatMul", 3, 1);
      fg.domain = "tactician";
      set_attr(fg, "activation", std::string("Gelu"));
      EXPECT_GE(expect_cuda_tactics(fg, {random_tensor(dt, {3, 5, 40}, 92), random_tensor(dt, {40, n}, 93),
                                         random_tensor(DType::float32, {n}, 94)},
                                    {false, true, true}, 0, tol),
                1)
          << name << " n=" << n;
    }
    ir::Node fr = make_node("FusedMatMul", 3, 1);  // bias + ReLU in cuBLASLt's epilogue (bias uploaded in D's type)
    fr.domain = "tactician";
    set_attr(fr, "activation", std::string("Relu"));
    EXPECT_GE(expect_cuda_tactics(fr, {random_tensor(dt, {19, 40}, 86), random_tensor(dt, {40, 24}, 87), random_tensor(DType::float32, {24}, 88)},
                                  {false, true, true}, 0, tol),
              1)
        << name;
    ir::Node cv = make_node("Conv", 3, 1);
    set_attr(cv, "pads", std::vector<int64_t>{1, 1, 1, 1});
    EXPECT_GE(expect_cuda_tactics(cv, {random_tensor(dt, {2, 8, 13, 11}, 89), random_tensor(dt, {16, 8, 3, 3}, 90),
                                       random_tensor(DType::float32, {16}, 91)},
                                  {false, true, true}, 0, 3 * tol),
              1)
        << name;
    for (const char* op : {"Relu", "Gelu", "Sigmoid", "Erf"})
      EXPECT_EQ(expect_cuda_tactics(make_node(op, 1, 1, 20), {random_tensor(dt, {3, 7, 37}, 92)}, {false}, 0, tol), 1) << op << name;
    EXPECT_EQ(expect_cuda_tactics(make_node("Add", 2, 1), {random_tensor(dt, {3, 1, 5}, 93), random_tensor(dt, {4, 5}, 94)}, {false, false},
                                  0, tol),
              1)
        << name;
    ir::Node sm = make_node("Softmax", 1, 1, 13);
    EXPECT_EQ(expect_cuda_tactics(sm, {random_tensor(dt, {3, 37, 129}, 95)}, {false}, 0, tol), 1) << name;
    // 257 columns: the block kernel; 768 (BERT-base) and 2048 (the limit): a warp per row, 16-byte
    // loads; 2056: the block kernel again.
    for (int64_t cols : {257, 768, 2048, 2056}) {
      ir::Node ln = make_node("LayerNormalization", 3, 1, 17);
      EXPECT_EQ(expect_cuda_tactics(ln, {random_tensor(dt, {2, 9, cols}, 96), random_tensor(dt, {cols}, 97),
                                         random_tensor(dt, {cols}, 98)},
                                    {false, true, true}, 0, tol),
                1)
          << name << " cols=" << cols;
    }
    ir::Node ln2 = make_node("LayerNormalization", 2, 1, 17);  // no bias
    EXPECT_EQ(expect_cuda_tactics(ln2, {random_tensor(dt, {5, 64}, 99), random_tensor(dt, {64}, 100)}, {false, true}, 0, tol), 1)
        << name;
  }
  // tf32: a math mode on fp32 tensors (10-bit mantissa operands, fp32 accumulation).
  ir::Node mm = make_node("MatMul", 2, 1);
  set_attr(mm, "tac_math", std::string("tf32"));
  EXPECT_GE(expect_cuda_tactics(mm, {random_tensor(DType::float32, {64, 96}, 99), random_tensor(DType::float32, {96, 48}, 100)},
                                {false, true}, 0, 1e-2),
            1);
}

// fp8 E4M3 GEMMs (precision.<node>=fp8): a node marked tac_math=fp8 runs on the cublaslt_fp8
// tactics only. Their tolerance class is fp8's: each operand rounds to 3 mantissa bits (relative
// error <= 2^-4; rms ~2.5% for these normal data), so an output differs from the reference by up
// to (2u + u^2) sum_k |a_ik b_kj| (+ fp16 rounding) and, over random data, by ~4% in relative l2
// (a wrong layout or scale gives ~140%): held to the bound per element for the plain MatMul and
// to 8% relative l2 and cos >= 0.995 for every case.
TEST(CudaTactics, Fp8Gemms) {
  REQUIRE_DEVICE();
  if (cuda::device_capability() < builder::kFp8Capability) GTEST_SKIP() << "this GPU has no fp8 tensor cores";
  auto amax = [](const Tensor& t) {
    double m = 0;
    for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.get_f64(i)));
    return static_cast<float>(m);
  };
  struct Case {
    const char* what;
    ir::Node node;
    std::vector<Tensor> in;
    std::vector<bool> cmask;
  };
  std::vector<Case> cases;
  for (DType dt : {DType::float16, DType::bfloat16}) {
    cases.push_back({"MatMul",
                     make_node("MatMul", 2, 1),
                     {random_tensor(dt, {2, 40, 64}, 1), random_tensor(dt, {64, 48}, 2)},
                     {false, true}});
    ir::Node fg = make_node("FusedMatMul", 3, 1);  // bias (fp32, our epilogue) + erf GELU, weights [N, K]
    fg.domain = "tactician";
    set_attr(fg, "transB", int64_t{1});
    set_attr(fg, "activation", std::string("Gelu"));
    cases.push_back({"FusedMatMul transB + bias + Gelu",
                     fg,
                     {random_tensor(dt, {33, 96}, 3), random_tensor(dt, {32, 96}, 4), random_tensor(DType::float32, {32}, 5)},
                     {false, true, true}});
    ir::Node fr = make_node("FusedMatMul", 4, 1);  // constant bias in cuBLASLt's epilogue + residual as its C + ReLU
    fr.domain = "tactician";
    set_attr(fr, "activation", std::string("Relu"));
    cases.push_back({"FusedMatMul bias + residual + Relu",
                     fr,
                     {random_tensor(dt, {3, 16, 128}, 6), random_tensor(dt, {128, 64}, 7), random_tensor(DType::float32, {64}, 8),
                      random_tensor(dt, {3, 16, 64}, 9)},
                     {false, true, true, false}});
  }
  for (Case& c : cases) {
    const std::string what = std::string(c.what) + " " + dtype_name(c.in[0].dtype());
    set_attr(c.node, "tac_math", std::string("fp8"));
    ir::Attribute a;
    a.type = ir::Attribute::Type::f;
    a.f = amax(c.in[0]);
    c.node.attrs["tac_fp8_amax"] = a;
    int fp8 = 0;
    for (const Tactic* t : tactics_for(c.node.op, Backend::cuda)) {
      const std::string name = t->name;
      if (name == "host_reference") continue;
      kernels::TacticCheck r = check_tactic(*t, c.node, c.in, c.cmask);
      if (name.rfind("cublaslt_fp8_", 0) != 0) {  // fp16 tactics refuse the node
        EXPECT_EQ(r.status.kind(), ErrorKind::not_applicable) << what << " " << name << ": " << r.status.to_string();
        continue;
      }
      if (r.status.kind() == ErrorKind::not_applicable) continue;  // the heuristic offers fewer algorithms
      ASSERT_TRUE(r.status.is_ok()) << what << " " << name << ": " << r.status.to_string();
      ++fp8;
      double dd = 0, ww = 0, gw = 0, gg = 0;
      for (int64_t i = 0; i < r.expected[0].numel(); ++i) {
        const double want = r.expected[0].get_f64(i), got = r.outputs[0].get_f64(i);
        ASSERT_TRUE(std::isfinite(got)) << what << " " << name << " [" << i << "]";
        dd += (got - want) * (got - want), ww += want * want, gw += got * want, gg += got * got;
      }
      EXPECT_LE(std::sqrt(dd / ww), 0.08) << what << " " << name;
      EXPECT_GE(gw / std::sqrt(gg * ww), 0.995) << what << " " << name;
      if (c.node.op != ir::OpKind::MatMul) continue;
      const Tensor &x = c.in[0], &w = c.in[1];
      const int64_t K = w.dim(0), N = w.dim(1), rows = x.numel() / K;
      const double u = 1.0 / 16;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double sum_abs = 0;
          for (int64_t k = 0; k < K; ++k) sum_abs += std::fabs(x.get_f64(i * K + k) * w.get_f64(k * N + j));
          const double want = r.expected[0].get_f64(i * N + j), got = r.outputs[0].get_f64(i * N + j);
          ASSERT_LE(std::fabs(got - want), (2 * u + u * u) * sum_abs + 1e-2 * std::fabs(want) + 1e-3)
              << what << " " << name << " [" << i << "," << j << "]";
        }
    }
    EXPECT_GE(fp8, 1) << what << ": no cublaslt_fp8 tactic ran";
  }
}

// FusedElementwise chains of every link kind, tensor operands and constants on either side,
// against the reference (float64, rounded once). fp32: a few ulp per link; fp16 / bf16 (fp32
// arithmetic, rounded once): about one unit in the last place. Sizes: one element, odd counts
// (16-byte groups, then a tail one element at a time), several blocks. Chains of 64 links (one
// launch), 65 and 150 (two and three, through the fp32 workspace). NaN stays NaN through Relu,
// Max and Min, as in the reference.
TEST(CudaTactics, FusedElementwiseChains) {
  REQUIRE_DEVICE();
  struct Program {
    std::vector<std::string> ops;
    size_t inputs;
  };
  const std::vector<Program> programs = {
      {{"Sub,x,in1", "Mul,c0.5,x", "Sigmoid", "Mul,x,in0"}, 2},
      {{"Add,x,in1", "Relu", "Div,x,c3", "Tanh", "Min,x,c0.25", "Max,in2,x"}, 3},
      {{"Abs", "Sqrt", "Reciprocal", "Neg", "Exp", "Erf", "Sub,c1,x", "Max,in1,x"}, 2},
      {{"Neg", "Exp", "Add,c1,x", "Div,in1,x", "Mul,x,in2", "Sub,in2,x", "Min,in1,x"}, 3},
      {repeat_links({"Tanh", "Add,x,in1"}, 32), 2},
      {repeat_links({"Tanh", "Add,x,in1", "Mul,c0.5,x"}, 21, {"Neg", "Abs"}), 2},
      {repeat_links({"Tanh", "Add,x,in1", "Mul,c0.5,x"}, 50), 2},
  };
  uint64_t seed = 200;
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
    const double rtol = dt == DType::float32 ? 1e-5 : 0, atol = dt == DType::float32 ? 1e-6 : dt == DType::float16 ? 3e-3 : 2e-2;
    for (const Program& p : programs)
      for (const Shape& shape : {Shape{1}, Shape{7}, Shape{3, 5}, Shape{2, 3, 1001}, Shape{4096}, Shape{65541}}) {
        std::vector<Tensor> ins;
        for (size_t i = 0; i < p.inputs; ++i) ins.push_back(random_tensor(dt, shape, seed++));
        EXPECT_EQ(expect_cuda_tactics(chain_node(p.ops, p.inputs), ins, std::vector<bool>(p.inputs, false), rtol, atol, "cuda"), 1)
            << dtype_name(dt) << " " << p.ops.size() << " links from " << p.ops[0] << " " << shape_to_string(shape);
      }
    // NaN in X (through Relu) and in the Max operand.
    Tensor x = random_tensor(dt, {5, 13}, seed++), o = random_tensor(dt, {5, 13}, seed++);
    for (int64_t i : {0, 7, 30}) x.set_f64(i, NAN);
    for (int64_t i : {3, 30, 50}) o.set_f64(i, NAN);
    const ir::Node nan_chain = chain_node({"Relu", "Max,x,in1", "Mul,x,c2", "Min,c0.5,x", "Add,x,c1"}, 2);
    kernels::TacticCheck r = check_tactic(*kernels::find_tactic(ir::OpKind::FusedElementwise, "cuda", Backend::cuda), nan_chain,
                                          {x, o}, {false, false});
    ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const bool nan = i == 0 || i == 7 || i == 30 || i == 3 || i == 50;
      EXPECT_EQ(std::isnan(r.expected[0].get_f64(i)), nan) << "reference [" << i << "]";
      EXPECT_EQ(std::isnan(r.outputs[0].get_f64(i)), nan) << dtype_name(dt) << " [" << i << "]";
    }
  }
}

// The FusedElementwise kernel on buffers as an engine may hand them: y over X (memory.inplace:
// the chain reads X again in later links, and a three-launch chain reads it after the workspace
// launches), and pointers off 16-byte alignment (views at odd element offsets: one element at a
// time), aligned or not, in place or not, against the reference.
TEST(CudaTactics, FusedElementwiseInPlaceAndUnaligned) {
  REQUIRE_DEVICE();
  const Tactic* t = kernels::find_tactic(ir::OpKind::FusedElementwise, "cuda", Backend::cuda);
  ASSERT_NE(t, nullptr);
  // `ins` placed offsets[i] elements into device buffers of their own; y at out_offset in another,
  // or over input 0 (out_offset < 0). Returns y.
  auto run_at = [&](const ir::Node& n, const std::vector<Tensor>& ins, const std::vector<int64_t>& offsets,
                    int64_t out_offset) -> Result<Tensor> {
    kernels::StepDesc s;
    s.node = &n;
    for (const Tensor& x : ins) {
      s.in_dtypes.push_back(x.dtype());
      s.in_shapes.push_back(x.shape());
      s.constants.push_back(nullptr);
    }
    s.out_dtypes = {ins[0].dtype()};
    s.out_shapes = {ins[0].shape()};
    TAC_RETURN_IF_ERROR(t->applies(s));
    TAC_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Kernel> k, t->prepare(s));
    const size_t es = dtype_size(ins[0].dtype());
    std::vector<cuda::DeviceBuffer> bufs;
    std::vector<kernels::TensorView> in, out;
    for (size_t i = 0; i < ins.size(); ++i) {
      TAC_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::allocate(ins[i].bytes() + static_cast<size_t>(offsets[i]) * es));
      void* at = static_cast<std::byte*>(b.get()) + offsets[i] * static_cast<int64_t>(es);
      TAC_RETURN_IF_ERROR(cuda::copy_to_device(at, ins[i].raw(), ins[i].bytes()));
      in.push_back({at, ins[i].dtype(), ins[i].shape()});
      bufs.push_back(std::move(b));
    }
    if (out_offset < 0) {
      out.push_back(in[0]);
    } else {
      const size_t bytes = ins[0].bytes() + static_cast<size_t>(out_offset) * es;
      TAC_ASSIGN_OR_RETURN(cuda::DeviceBuffer b, cuda::DeviceBuffer::allocate(bytes));
      TAC_RETURN_IF_ERROR(cuda::fill_bytes(b.get(), 0x7f, bytes));
      out.push_back({static_cast<std::byte*>(b.get()) + out_offset * static_cast<int64_t>(es), ins[0].dtype(), ins[0].shape()});
      bufs.push_back(std::move(b));
    }
    TAC_ASSIGN_OR_RETURN(cuda::DeviceBuffer ws, cuda::DeviceBuffer::allocate(k->workspace_bytes()));
    TAC_RETURN_IF_ERROR(k->run(in, out, ws.get()));
    Tensor y = Tensor::create(ins[0].dtype(), ins[0].shape()).value();
    TAC_RETURN_IF_ERROR(cuda::copy_to_host(y.raw(), out[0].data, y.bytes()));
    TAC_RETURN_IF_ERROR(cuda::synchronize());
    return y;
  };
  const std::vector<std::vector<std::string>> programs = {
      {"Mul,x,c1.5", "Sub,x,in1", "Add,in0,x", "Relu", "Mul,x,in0"},
      repeat_links({"Tanh", "Add,x,in1", "Mul,c0.5,x"}, 49, {"Mul,x,in0", "Add,x,in1", "Sub,in0,x"}),
  };
  // {offset of X, offset of in1, offset of y (-1: over X)}
  const std::vector<std::array<int64_t, 3>> placements = {{0, 0, -1}, {0, 0, 0}, {1, 0, 0}, {0, 3, 1}, {1, 1, -1}, {0, 0, 5}};
  uint64_t seed = 300;
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
    const double rtol = dt == DType::float32 ? 1e-5 : 0, atol = dt == DType::float32 ? 1e-6 : dt == DType::float16 ? 3e-3 : 2e-2;
    for (const auto& prog : programs)
      for (const Shape& shape : {Shape{1}, Shape{7}, Shape{3, 37}, Shape{4099}}) {
        const ir::Node n = chain_node(prog, 2);
        const std::vector<Tensor> ins = {random_tensor(dt, shape, seed), random_tensor(dt, shape, seed + 1)};
        seed += 2;
        kernels::TacticCheck ref = check_tactic(*t, n, ins, {false, false});
        ASSERT_TRUE(ref.status.is_ok()) << ref.status.to_string();
        for (const auto& [ox, o1, oy] : placements) {
          const std::string where = std::string(dtype_name(dt)) + " " + std::to_string(prog.size()) + " links " +
                                    shape_to_string(shape) + " offsets " + std::to_string(ox) + "," + std::to_string(o1) +
                                    (oy < 0 ? " in place" : " y at " + std::to_string(oy));
          auto got = run_at(n, ins, {ox, o1}, oy);
          ASSERT_TRUE(got.is_ok()) << where << ": " << got.status().to_string();
          int bad = 0;
          for (int64_t i = 0; i < got->numel() && bad < 3; ++i) {
            const double want = ref.expected[0].get_f64(i), g = got->get_f64(i);
            if (!(std::fabs(g - want) <= atol * (1 + std::fabs(want)) + rtol * std::fabs(want))) {
              ++bad;
              ADD_FAILURE() << where << " [" << i << "]: got " << g << " want " << want;
            }
          }
        }
      }
  }
}

TEST(CudaTactics, HostReferenceRunsAnyOp) {
  REQUIRE_DEVICE();
  ir::Node n = make_node("ReduceMean", 1, 1, 13);
  set_attr(n, "axes", std::vector<int64_t>{1});
  EXPECT_EQ(expect_cuda_tactics(n, {random_tensor(DType::float32, {3, 5, 7}, 44)}, {false}, 0, 0, "host_reference"), 0);
  kernels::TacticCheck r = check_tactic(*kernels::find_tactic(n.op, "host_reference", Backend::cuda), n,
                                        {random_tensor(DType::float32, {3, 5, 7}, 44)}, {false});
  ASSERT_TRUE(r.status.is_ok()) << r.status.to_string();
  EXPECT_EQ(r.max_abs_diff, 0);
}

// cuBLASLt's GELU epilogue (the tanh approximation) is a tactic of the FusedMatMul that ends in
// GELU, within its bound of the erf GELU: the default never picks it (nor does the isolated
// selection), a route that pins it gets it, and the knob space offers it to the tuner's search.
TEST(CudaEngine, ApproximateGeluTacticIsSearchedNeverDefault) {
  REQUIRE_DEVICE();
  test::ModelBuilder mb(20);
  mb.input("x", 1, {"4", "32", "64"});
  test::initializer_random(mb, "w", {64, 96}, 1, 0.3f);
  test::initializer_random(mb, "b", {96}, 2);
  mb.node("MatMul", {"x", "w"}, {"h"}, "ffn_in");
  mb.node("Add", {"h", "b"}, {"hb"}, "bias");
  mb.node("Gelu", {"hb"}, {"y"}, "gelu");
  mb.output("y", 1, {});
  ir::Model m = mb.load().value();
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  auto space = builder::knob_space(m, opts);
  ASSERT_TRUE(space.is_ok()) << space.status().to_string();
  std::string knob;
  for (const builder::Knob& k : space->knobs())
    if (k.name.rfind("tactic.", 0) == 0 && std::find(k.search_values.begin(), k.search_values.end(), "cublaslt_gelu_h0") != k.search_values.end())
      knob = k.name;
  ASSERT_NE(knob, "") << "cublaslt_gelu_h0 is not a search value of any node";
  for (const char* route : {"precision.default=fp16", "precision.default=fp16 builder.selection=isolated"}) {
    auto e = test::build_engine(m, route, opts);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    for (const builder::PlanStep& st : (*e)->plan().steps) EXPECT_FALSE(st.tactic->approximate) << route << ": " << st.tactic->name;
    if (std::string(route).find("isolated") == std::string::npos) continue;
    // The isolated selection times every exact tactic and none of the approximate ones nor the
    // catch-all host_reference: their recorded cost is NaN (untimed), not a model estimate ranked
    // beside measured times.
    int timed = 0, untimed = 0;
    for (const builder::TacticRanking& rk : (*e)->plan().report.rankings)
      for (const auto& [t, cost] : rk.candidates) {
        const kernels::Tactic* tac = kernels::find_tactic(ir::OpKind::FusedMatMul, t, Backend::cuda);
        if (tac && (tac->approximate || tac->catch_all)) {
          EXPECT_TRUE(std::isnan(cost)) << t << " " << cost;
          ++untimed;
        } else if (rk.why == "isolated") {
          EXPECT_GT(cost, 0) << t;
          ++timed;
        }
      }
    EXPECT_GT(untimed, 0);
    EXPECT_GT(timed, 0);
  }
  for (const char* precision : {"fp32", "fp16"}) {
    auto e = test::build_engine(m, std::string("precision.default=") + precision + " " + knob + "=cublaslt_gelu_h0", opts);
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    bool pinned = false;
    for (const builder::PlanStep& st : (*e)->plan().steps) pinned |= std::string(st.tactic->name) == "cublaslt_gelu_h0";
    EXPECT_TRUE(pinned) << precision;
    auto in = test::random_inputs(**e, 53);
    auto got = (*e)->run(in);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    auto want = test::reference_outputs(m, in);
    ASSERT_TRUE(want.is_ok());
    const double atol = std::string(precision) == "fp32" ? 5e-4 : 5e-3;
    EXPECT_EQ(test::compare_outputs(*got, *want, atol, 1e-3), "") << precision;
  }
}

TEST(CudaEngine, SmallCnnMatchesTheReferenceAndPlansRoundTrip) {
  REQUIRE_DEVICE();
  ir::Model m = small_cnn();
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  auto e = test::build_engine(m, "", opts);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ((*e)->plan().backend, Backend::cuda);
  EXPECT_EQ((*e)->plan().device.rfind("cuda:", 0), 0u) << (*e)->plan().device;
  for (const builder::PlanStep& st : (*e)->plan().steps) EXPECT_EQ(st.tactic->backend, Backend::cuda);
  auto in = test::random_inputs(**e, 50);
  auto got = (*e)->run(in);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  auto want = test::reference_outputs(m, in);
  ASSERT_TRUE(want.is_ok());
  EXPECT_EQ(test::compare_outputs(*got, *want, 1e-4, 1e-4), "");
  // Twice: no state leaks between runs.
  auto again = (*e)->run(in);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(test::compare_outputs(*again, *got, 0, 0), "");
  // Saved and loaded on the same GPU: same outputs, bit for bit.
  const auto path = std::filesystem::temp_directory_path() / ("tac_cuda_rt_" + std::to_string(::getpid()) + ".plan");
  ASSERT_TRUE(builder::save_plan((*e)->plan(), path.string()).is_ok());
  auto loaded = builder::load_plan(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  auto e2 = runtime::Engine::create(std::move(loaded).value());
  ASSERT_TRUE(e2.is_ok()) << e2.status().to_string();
  auto got2 = (*e2)->run(in);
  ASSERT_TRUE(got2.is_ok());
  EXPECT_EQ(test::compare_outputs(*got2, *got, 0, 0), "");
}


// cuda.workspace_mb: tactics needing more scratch are skipped, and the build report lists them
// (a hidden pruning made visible); the engine still builds and matches the reference.
TEST(CudaEngine, WorkspaceLimitSkipsTacticsAndSaysSo) {
  REQUIRE_DEVICE();
  ir::Model m = small_cnn();
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  auto space = builder::knob_space(m, opts);
  ASSERT_TRUE(space.is_ok());
  ASSERT_NE(space->find("cuda.workspace_mb"), nullptr);
  // A cuDNN algorithm that needs workspace on the conv (FFT, or Winograd unfused): pinned with no
  // limit it builds; at 0 the pin is refused as no candidate.
  std::string pin;
  for (const builder::Knob& k : space->knobs())
    for (const char* t : {"cudnn_fft_tiling", "cudnn_fft", "cudnn_winograd_nonfused"})
      if (pin.empty() && k.name.rfind("tactic.", 0) == 0 && std::find(k.values.begin(), k.values.end(), t) != k.values.end()) {
        auto e = test::build_engine(m, k.name + "=" + t, opts);
        if (e.is_ok() && (*e)->plan().workspace_bytes > 0) pin = k.name + "=" + t;
      }
  ASSERT_NE(pin, "") << "no conv tactic needing workspace on this GPU";
  auto refused = test::build_engine(m, pin + " cuda.workspace_mb=0", opts);
  ASSERT_FALSE(refused.is_ok()) << pin;
  EXPECT_NE(refused.status().message().find("not a candidate"), std::string::npos) << refused.status().message();
  auto e = test::build_engine(m, "cuda.workspace_mb=0", opts);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ((*e)->plan().workspace_bytes, 0);
  EXPECT_FALSE((*e)->plan().report.workspace_skipped.empty());
  for (const std::string& s : (*e)->plan().report.workspace_skipped)
    EXPECT_NE(s.find("cuda.workspace_mb=0"), std::string::npos) << s;
  auto in = test::random_inputs(**e, 52);
  auto got = (*e)->run(in);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  auto want = test::reference_outputs(m, in);
  ASSERT_TRUE(want.is_ok());
  EXPECT_EQ(test::compare_outputs(*got, *want, 1e-4, 1e-4), "");
}

// fp16 and bf16 engines against the fp32 reference; CUDA graphs on and off give the same
// outputs bit for bit; device timing with and without an L2 flush runs.
TEST(CudaEngine, LowPrecisionGraphsAndDeviceTiming) {
  REQUIRE_DEVICE();
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  for (const ir::Model& m : {small_cnn(), mlp()}) {
    ir::Model mm = m;
    auto fp32 = test::build_engine(mm, "cuda.graphs=off", opts);
    ASSERT_TRUE(fp32.is_ok()) << fp32.status().to_string();
    auto in = test::random_inputs(**fp32, 51);
    auto want = test::reference_outputs(mm, in);
    ASSERT_TRUE(want.is_ok());
    for (const char* p : {"fp16", "bf16", "tf32"}) {
      auto e = test::build_engine(mm, std::string("precision.default=") + p, opts);
      ASSERT_TRUE(e.is_ok()) << p << ": " << e.status().to_string();
      auto got = (*e)->run(in);
      ASSERT_TRUE(got.is_ok()) << p << ": " << got.status().to_string();
      const double tol = std::string(p) == "bf16" ? 5e-2 : 1e-2;
      EXPECT_EQ(test::compare_outputs(*got, *want, tol, tol), "") << p;
      EXPECT_EQ((*e)->graph_state().rfind("on", 0), 0u) << (*e)->graph_state();
      auto again = (*e)->run(in);  // replayed from the graph
      ASSERT_TRUE(again.is_ok());
      EXPECT_EQ(test::compare_outputs(*again, *got, 0, 0), "") << p;
    }
    auto g_on = test::build_engine(mm, "", opts);
    ASSERT_TRUE(g_on.is_ok());
    auto a = (*g_on)->run(in), b = (*fp32)->run(in);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    EXPECT_EQ(test::compare_outputs(*a, *b, 0, 0), "");
    EXPECT_EQ((*fp32)->graph_state(), "off (route: cuda.graphs=off)");
    for (bool flush : {false, true}) {
      auto lat = runtime::measure(**g_on, {in}, 5, 0.0, 1, flush);
      ASSERT_TRUE(lat.is_ok()) << lat.status().to_string();
      EXPECT_GT(lat->median_ms, 0);
    }
  }
}

// precision.default=fp8 end to end: both MatMuls (dims multiples of 16) run on cublaslt_fp8
// tactics with scales calibrated by the build, the rest in fp16; outputs within fp8's class of
// the reference (two layers: 10% relative l2, cos >= 0.99), and the CUDA graph's replay identical.
TEST(CudaEngine, Fp8RouteRunsItsMatMulsInFp8) {
  REQUIRE_DEVICE();
  if (cuda::device_capability() < builder::kFp8Capability) GTEST_SKIP() << "this GPU has no fp8 tensor cores";
  test::ModelBuilder b(17);
  b.input("x", 1, {"8", "64"});
  test::initializer_random(b, "w1", {64, 128}, 1);
  test::initializer_random(b, "b1", {128}, 2);
  test::initializer_random(b, "w2", {128, 32}, 3);
  b.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
  b.node("Add", {"h", "b1"}, {"hb"}, "add");
  b.node("Relu", {"hb"}, {"r"}, "relu");
  b.node("MatMul", {"r", "w2"}, {"y"}, "mm2");
  b.output("y", 1, {});
  ir::Model m = b.load().value();
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  auto e = test::build_engine(m, "precision.default=fp8", opts);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  int fp8_steps = 0;
  for (const builder::PlanStep& st : (*e)->plan().steps) fp8_steps += std::string(st.tactic->name).rfind("cublaslt_fp8_", 0) == 0;
  EXPECT_EQ(fp8_steps, 2);
  auto in = test::random_inputs(**e, 61);
  auto want = test::reference_outputs(m, in);
  ASSERT_TRUE(want.is_ok());
  auto got = (*e)->run(in);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  const Tensor &g = (*got)[0], &w = (*want)[0];
  double dd = 0, ww = 0, gw = 0, gg = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const double a = g.get_f64(i), r = w.get_f64(i);
    dd += (a - r) * (a - r), ww += r * r, gw += a * r, gg += a * a;
  }
  EXPECT_LE(std::sqrt(dd / ww), 0.10);
  EXPECT_GE(gw / std::sqrt(gg * ww), 0.99);
  auto again = (*e)->run(in);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(test::compare_outputs(*again, *got, 0, 0), "");
}

// x -> MatMul(W) = h -> Softmax = s; Sub(s, m) -> Mul(., 0.5) -> Sigmoid -> Mul(., h) -> Softmax
// -> y. On CUDA the default route fuses the four links into one FusedElementwise that the "cuda"
// tactic runs, over s's buffer (s dies there; memory.inplace=off gives it its own); in fp16 it
// follows the MatMul. Every route matches the reference, pass.fuse_elementwise=off too.
TEST(CudaEngine, FusedElementwiseIsOnByDefault) {
  REQUIRE_DEVICE();
  test::ModelBuilder mb(17);
  mb.input("x", 1, {"6", "32"});
  mb.input("m", 1, {"6", "40"});
  test::initializer_random(mb, "w", {32, 40}, 1, 0.3f);
  mb.initializer("half", {}, {0.5f});
  mb.node("MatMul", {"x", "w"}, {"h"}, "mm");
  mb.node("Softmax", {"h"}, {"s"}, "softmax_in");
  mb.node("Sub", {"s", "m"}, {"a"}, "sub");
  mb.node("Mul", {"a", "half"}, {"b"}, "mul");
  mb.node("Sigmoid", {"b"}, {"c"}, "sig");
  mb.node("Mul", {"c", "h"}, {"d"}, "gate");
  mb.node("Softmax", {"d"}, {"y"}, "softmax_out");
  mb.output("y", 1, {});
  ir::Model m = mb.load().value();
  builder::BuildOptions opts;
  opts.backend = Backend::cuda;
  for (const char* route : {"", "memory.inplace=off", "precision.default=fp16", "precision.default=bf16",
                            "pass.fuse_elementwise=off"}) {
    auto e = test::build_engine(m, route, opts);
    ASSERT_TRUE(e.is_ok()) << route << ": " << e.status().to_string();
    const builder::Plan& p = (*e)->plan();
    const bool fused = std::string(route) != "pass.fuse_elementwise=off";
    int chains = 0;
    for (const builder::PlanStep& st : p.steps) {
      const ir::Node& n = p.model.graph.nodes[static_cast<size_t>(st.node)];
      EXPECT_EQ(st.tactic->backend, Backend::cuda) << route << ": " << n.name;
      if (n.op != ir::OpKind::FusedElementwise) continue;
      ++chains;
      EXPECT_STREQ(st.tactic->name, "cuda") << route;
      EXPECT_EQ(n.attr("ops")->strings.size(), 4u) << route;
      EXPECT_EQ(st.in_place, std::string(route) != "memory.inplace=off") << route;
      const DType want = std::string(route).find("fp16") != std::string::npos   ? DType::float16
                         : std::string(route).find("bf16") != std::string::npos ? DType::bfloat16
                                                                                 : DType::float32;
      EXPECT_EQ(p.values[static_cast<size_t>(st.outputs[0])].dtype, want) << route;
    }
    EXPECT_EQ(chains, fused ? 1 : 0) << route << ": " << test::op_list(p.model.graph);
    auto in = test::random_inputs(**e, 54);
    auto got = (*e)->run(in);
    ASSERT_TRUE(got.is_ok()) << route << ": " << got.status().to_string();
    auto want = test::reference_outputs(m, in);
    ASSERT_TRUE(want.is_ok());
    const double tol = std::string(route).find("bf16") != std::string::npos   ? 5e-2
                       : std::string(route).find("fp16") != std::string::npos ? 1e-2
                                                                               : 1e-5;
    EXPECT_EQ(test::compare_outputs(*got, *want, tol, tol), "") << route;
  }
}

// ---- reductions, Resize and the selection ops (issue 27: no host fallbacks) ----
// Each case is checked twice: here, on any machine, that its CUDA tactic applies to the step
// check_tactic builds (output shapes from the reference); on the device, against the reference.

struct TacticCase {
  std::string what;
  ir::Node node;
  std::vector<Tensor> in;
  std::vector<bool> cmask;
  double rtol = 0, atol = 0;
  const char* tactic = "cuda";
};

// x with every value mapped by f (then rounded to x's type).
template <class F>
Tensor mapped(Tensor x, F f) {
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, f(x.get_f64(i)));
  return x;
}
std::string axes_name(const std::vector<int64_t>& axes) {
  std::string s = "{";
  for (int64_t a : axes) s += std::to_string(a) + ",";
  return s + "}";
}

std::vector<TacticCase> reduction_cases() {
  std::vector<TacticCase> cases;
  struct Shape_axes {
    Shape x;
    std::vector<int64_t> axes;
  };
  // Rows (innermost reduced; short, warp and block per output), columns (innermost kept), axes
  // that are not neighbours (the general strided offsets), negative axes, all axes, size-1 dims.
  const std::vector<Shape_axes> geoms = {
      {{3, 37, 5, 67}, {3}},     {{3, 37, 5, 67}, {1}},      {{3, 37, 5, 67}, {1, 3}}, {{3, 37, 5, 67}, {0, 2}},
      {{3, 37, 5, 67}, {2, 3}},  {{3, 37, 5, 67}, {-1, -3}}, {{3, 37, 5, 67}, {}},     {{50, 7}, {1}},
      {{2, 3001}, {-1}},         {{2011, 33}, {0}},          {{4, 1, 9, 1, 11}, {1, 3, 4}}, {{5, 1, 13}, {1}}};
  const std::vector<std::string> ops = {"ReduceSum",  "ReduceMean", "ReduceMax",       "ReduceMin",      "ReduceProd",
                                        "ReduceL1",   "ReduceL2",   "ReduceLogSum",    "ReduceLogSumExp", "ReduceSumSquare"};
  uint64_t seed = 200;
  for (const std::string& op : ops)
    for (const Shape_axes& g : geoms)
      for (int64_t keep : {0, 1}) {
        const int since = op == "ReduceSum" ? 13 : 18;
        for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
          if (dt != DType::float32 && (keep == 0 || g.x.size() != 4)) continue;  // low precision: a subset
          Tensor x = random_tensor(dt, g.x, ++seed);
          if (op == "ReduceLogSum") x = mapped(x, [](double v) { return std::fabs(v) + 0.1; });
          if (op == "ReduceProd") x = mapped(x, [](double v) { return 1 + 0.1 * v; });
          const double tol = dt == DType::float32 ? 2e-4 : dt == DType::float16 ? 3e-3 : 2e-2;
          // Axes as a constant input (opset 13 / 18) and, for fp32, as the attribute (opset 11).
          TacticCase c{op + axes_name(g.axes) + shape_to_string(g.x) + " keepdims=" + std::to_string(keep) + " " +
                           dtype_name(dt),
                       make_node(op, g.axes.empty() ? 1 : 2, 1, since), {x}, {false}, 1e-5, tol};
          set_attr(c.node, "keepdims", keep);
          if (!g.axes.empty()) c.in.push_back(int64s(g.axes)), c.cmask.push_back(true);
          cases.push_back(c);
          if (dt == DType::float32) {
            TacticCase a{c.what + " (attribute)", make_node(op, 1, 1, 11), {x}, {false}, 1e-5, tol};
            set_attr(a.node, "keepdims", keep);
            if (!g.axes.empty()) set_attr(a.node, "axes", g.axes);
            cases.push_back(a);
          }
        }
      }
  // noop_with_empty_axes: each output is the op on one element.
  for (const char* op : {"ReduceSum", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"}) {
    TacticCase c{std::string(op) + " noop", make_node(op, 1, 1, 18), {random_tensor(DType::float32, {3, 5, 7}, 300)}, {false},
                 1e-6, 1e-7};
    set_attr(c.node, "noop_with_empty_axes", int64_t{1});
    cases.push_back(c);
  }
  // NaN propagates through Max / Min and wins ArgMax / ArgMin; ties (integer-valued data) go to
  // the first or, with select_last_index, the last index.
  Tensor nan_x = random_tensor(DType::float32, {6, 45}, 301);
  nan_x.set_f64(3 * 45 + 17, NAN), nan_x.set_f64(3 * 45 + 30, NAN), nan_x.set_f64(5 * 45 + 2, NAN);
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceLogSumExp"}) {
    TacticCase c{std::string(op) + " with NaN", make_node(op, 2, 1, 18), {nan_x, int64s({1})}, {false, true}, 1e-6, 1e-6};
    cases.push_back(c);
  }
  for (const char* op : {"ArgMax", "ArgMin"})
    for (const Shape_axes& g : std::vector<Shape_axes>{{{3, 37, 5, 67}, {1}}, {{3, 37, 5, 67}, {-1}}, {{2, 3001}, {1}},
                                                       {{2011, 33}, {0}}, {{50, 7}, {1}}, {{6, 45}, {1}}})
      for (int64_t keep : {0, 1})
        for (int64_t last : {0, 1})
          for (DType dt : {DType::float32, DType::float16}) {
            Tensor x = mapped(random_tensor(dt, g.x, ++seed), [](double v) { return std::round(2 * v); });
            if (g.x == Shape{6, 45}) x = nan_x;
            if (g.x == Shape{6, 45} && dt != DType::float32) continue;
            TacticCase c{std::string(op) + axes_name(g.axes) + shape_to_string(g.x) + " keepdims=" + std::to_string(keep) +
                             " last=" + std::to_string(last) + " " + dtype_name(dt),
                         make_node(op, 1, 1, 13), {x}, {false}, 0, 0};
            set_attr(c.node, "axis", g.axes[0]);
            set_attr(c.node, "keepdims", keep);
            set_attr(c.node, "select_last_index", last);
            cases.push_back(c);
          }
  return cases;
}

std::vector<TacticCase> resize_cases() {
  std::vector<TacticCase> cases;
  const Shape x4 = {2, 3, 7, 9};
  // scales (up on H, down on W), sizes (down on H, up on W).
  auto with_scales = [&](TacticCase c, const std::vector<double>& sc) {
    c.in.push_back(Tensor()), c.in.push_back(floats(sc)), c.cmask = {false, true, true};
    c.what += " scales";
    return c;
  };
  auto with_sizes = [&](TacticCase c, const std::vector<int64_t>& sz) {
    c.in.push_back(Tensor()), c.in.push_back(Tensor()), c.in.push_back(int64s(sz)), c.cmask = {false, true, true, true};
    c.what += " sizes";
    return c;
  };
  const std::vector<std::string> coords = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                           "asymmetric", "tf_half_pixel_for_nn"};
  uint64_t seed = 400;
  for (const std::string& coord : coords)
    for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      TacticCase c{"nearest " + coord + " " + nm, make_node("Resize", 3, 1, 19), {random_tensor(DType::float32, x4, ++seed)},
                   {}, 0, 0};
      set_attr(c.node, "mode", std::string("nearest"));
      set_attr(c.node, "coordinate_transformation_mode", coord);
      set_attr(c.node, "nearest_mode", std::string(nm));
      cases.push_back(with_scales(c, {1, 1, 2.3, 0.6}));
      c.node = make_node("Resize", 4, 1, 19);
      set_attr(c.node, "mode", std::string("nearest"));
      set_attr(c.node, "coordinate_transformation_mode", coord);
      set_attr(c.node, "nearest_mode", std::string(nm));
      cases.push_back(with_sizes(c, {2, 3, 4, 20}));
    }
  for (const char* mode : {"linear", "cubic"})
    for (const std::string& coord : coords)
      for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
        if (dt != DType::float32 && coord != "half_pixel" && coord != "align_corners") continue;
        const double tol = dt == DType::float32 ? 1e-5 : dt == DType::float16 ? 3e-3 : 2e-2;
        TacticCase c{std::string(mode) + " " + coord + " " + dtype_name(dt), make_node("Resize", 3, 1, 13),
                     {random_tensor(dt, x4, ++seed)}, {}, 1e-5, tol};
        set_attr(c.node, "mode", std::string(mode));
        set_attr(c.node, "coordinate_transformation_mode", coord);
        cases.push_back(with_scales(c, {1, 1, 2.3, 0.6}));
        c.node = make_node("Resize", 4, 1, 13);
        set_attr(c.node, "mode", std::string(mode));
        set_attr(c.node, "coordinate_transformation_mode", coord);
        cases.push_back(with_sizes(c, {2, 3, 4, 20}));
      }
  // tf_crop_and_resize: roi, extrapolation outside it.
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    TacticCase c{std::string("tf_crop_and_resize ") + mode, make_node("Resize", 4, 1, 13),
                 {random_tensor(DType::float32, x4, ++seed), floats({0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3}), Tensor(),
                  int64s({2, 3, 11, 6})},
                 {false, true, true, true}, 1e-5, 1e-5};
    set_attr(c.node, "mode", std::string(mode));
    set_attr(c.node, "coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    set_attr(c.node, "extrapolation_value", 0.5f);
    cases.push_back(c);
  }
  // cubic with exclude_outside and another coefficient; antialiased downscaling (opset 18).
  {
    TacticCase c{"cubic exclude_outside a=-0.5", make_node("Resize", 3, 1, 13), {random_tensor(DType::float32, x4, ++seed)}, {},
                 1e-5, 1e-5};
    set_attr(c.node, "mode", std::string("cubic"));
    set_attr(c.node, "exclude_outside", int64_t{1});
    set_attr(c.node, "cubic_coeff_a", -0.5f);
    cases.push_back(with_scales(c, {1, 1, 1.6, 0.7}));
  }
  for (const char* mode : {"linear", "cubic"}) {
    TacticCase c{std::string("antialias ") + mode, make_node("Resize", 3, 1, 18),
                 {random_tensor(DType::float32, {1, 2, 31, 29}, ++seed)}, {}, 1e-5, 1e-5};
    set_attr(c.node, "mode", std::string(mode));
    set_attr(c.node, "antialias", int64_t{1});
    cases.push_back(with_scales(c, {1, 1, 0.3, 0.45}));
  }
  // axes (opset 18) with keep_aspect_ratio_policy; N-D linear (three resized dims).
  for (const char* policy : {"stretch", "not_larger", "not_smaller"}) {
    TacticCase c{std::string("axes policy ") + policy, make_node("Resize", 4, 1, 18), {random_tensor(DType::float32, x4, ++seed)},
                 {}, 1e-5, 1e-5};
    set_attr(c.node, "mode", std::string("linear"));
    set_attr(c.node, "axes", std::vector<int64_t>{-1, 2});
    set_attr(c.node, "keep_aspect_ratio_policy", std::string(policy));
    cases.push_back(with_sizes(c, {13, 5}));
  }
  {
    TacticCase c{"trilinear", make_node("Resize", 3, 1, 13), {random_tensor(DType::float32, {1, 2, 5, 6, 7}, ++seed)}, {}, 1e-5,
                 1e-5};
    set_attr(c.node, "mode", std::string("linear"));
    cases.push_back(with_scales(c, {1, 1, 1.5, 2, 0.5}));
  }
  // Resize-10 and Upsample-9: scales, asymmetric.
  for (const char* op : {"Resize", "Upsample"})
    for (const char* mode : {"nearest", "linear"}) {
      TacticCase c{std::string(op) + " legacy " + mode, make_node(op, 2, 1, std::string(op) == "Resize" ? 10 : 9),
                   {random_tensor(DType::float32, x4, ++seed), floats({1, 1, 2, 1.5})}, {false, true}, 1e-5, 1e-5};
      set_attr(c.node, "mode", std::string(mode));
      cases.push_back(c);
    }
  return cases;
}

std::vector<TacticCase> selection_cases() {
  std::vector<TacticCase> cases;
  uint64_t seed = 500;
  const std::vector<std::pair<Shape, Shape>> shapes = {{{3, 7, 5}, {3, 7, 5}}, {{3, 1, 5}, {4, 5}}, {{2, 3, 4, 5}, {}}, {{1}, {6, 1, 3}}};
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    for (const auto& [a, b] : shapes)
      for (DType dt : {DType::float32, DType::float16, DType::int64, DType::int32}) {
        // Integer-valued floats: ties are common, so equality is tested too.
        auto data = [&](const Shape& s) { return mapped(random_tensor(dt, s, ++seed), [](double v) { return std::round(v); }); };
        cases.push_back({std::string(op) + shape_to_string(a) + shape_to_string(b) + dtype_name(dt), make_node(op, 2, 1, 19),
                         {data(a), data(b)}, {false, false}});
      }
  for (const char* op : {"And", "Or", "Xor"})
    for (const auto& [a, b] : shapes)
      cases.push_back({std::string(op) + shape_to_string(a) + shape_to_string(b), make_node(op, 2, 1),
                       {random_tensor(DType::boolean, a, ++seed), random_tensor(DType::boolean, b, ++seed)}, {false, false}});
  cases.push_back({"Equal bool", make_node("Equal", 2, 1, 19),
                   {random_tensor(DType::boolean, {3, 1, 5}, ++seed), random_tensor(DType::boolean, {4, 5}, ++seed)}, {false, false}});
  cases.push_back({"Not", make_node("Not", 1, 1), {random_tensor(DType::boolean, {3, 37}, ++seed)}, {false}});
  for (DType dt : {DType::float32, DType::float16, DType::int64, DType::uint8})
    for (const std::vector<Shape>& s : std::vector<std::vector<Shape>>{{{3, 1, 5}, {4, 5}, {1}}, {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                                                                      {{7}, {3, 1, 1}, {1, 5, 7}}})
      cases.push_back({"Where " + shape_to_string(s[0]) + shape_to_string(s[1]) + shape_to_string(s[2]) + dtype_name(dt),
                       make_node("Where", 3, 1, 16),
                       {random_tensor(DType::boolean, s[0], ++seed), random_tensor(dt, s[1], ++seed), random_tensor(dt, s[2], ++seed)},
                       {false, false, false}});
  // Pad: each mode, negative pads (cropping), axes (opset 18), the attribute form (opset 2).
  for (const char* mode : {"constant", "edge", "reflect", "wrap"})
    for (DType dt : {DType::float32, DType::float16, DType::int64}) {
      const std::vector<int64_t> pads = {1, 0, 2, 3, 2, 0, 1, 4};  // [2, 3, 7, 9]: before (N, C, H, W), then after
      Tensor cv = Tensor::create(dt, {}).value();
      cv.set_f64(0, 3);
      TacticCase c{std::string("Pad ") + mode + " " + dtype_name(dt), make_node("Pad", 3, 1, 19),
                   {random_tensor(dt, {2, 3, 7, 9}, ++seed), int64s(pads), cv}, {false, true, true}};
      set_attr(c.node, "mode", std::string(mode));
      cases.push_back(c);
      TacticCase n{std::string("Pad negative ") + mode + " " + dtype_name(dt), make_node("Pad", 2, 1, 19),
                   {random_tensor(dt, {2, 3, 7, 9}, ++seed), int64s({0, -1, 2, -3, 1, 0, -2, 3})}, {false, true}};
      set_attr(n.node, "mode", std::string(mode));
      cases.push_back(n);
    }
  {
    TacticCase c{"Pad axes", make_node("Pad", 4, 1, 18),
                 {random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), int64s({2, 1, 3, 0}), Tensor(), int64s({-1, 1})},
                 {false, true, true, true}};
    set_attr(c.node, "mode", std::string("reflect"));
    cases.push_back(c);
    TacticCase a{"Pad attribute", make_node("Pad", 1, 1, 2), {random_tensor(DType::float32, {3, 7, 9}, ++seed)}, {false}};
    set_attr(a.node, "pads", std::vector<int64_t>{0, 1, 2, 0, 3, 1});
    set_attr(a.node, "value", 1.5f);
    cases.push_back(a);
  }
  // Expand and Tile.
  for (DType dt : {DType::float32, DType::float16, DType::int64, DType::boolean}) {
    cases.push_back({"Expand " + dtype_name(dt), make_node("Expand", 2, 1, 13),
                     {random_tensor(dt, {3, 1, 5}, ++seed), int64s({2, 3, 4, 5})}, {false, true}});
    cases.push_back({"Expand scalar-like " + dtype_name(dt), make_node("Expand", 2, 1, 13),
                     {random_tensor(dt, {1}, ++seed), int64s({7, 1})}, {false, true}});
    cases.push_back({"Tile " + dtype_name(dt), make_node("Tile", 2, 1, 13),
                     {random_tensor(dt, {2, 3, 5}, ++seed), int64s({2, 1, 3})}, {false, true}});
    cases.push_back({"Tile 4-D " + dtype_name(dt), make_node("Tile", 2, 1, 13),
                     {random_tensor(dt, {1, 3, 2, 5}, ++seed), int64s({3, 2, 2, 1})}, {false, true}});
  }
  // Split: sizes as an input (opset 13), equal parts (opset 18, num_outputs, the last smaller).
  {
    TacticCase c{"Split sizes", make_node("Split", 2, 2, 13), {random_tensor(DType::float32, {2, 7, 5}, ++seed), int64s({3, 4})},
                 {false, true}};
    set_attr(c.node, "axis", int64_t{1});
    c.tactic = "cuda_copy";
    cases.push_back(c);
    TacticCase e{"Split num_outputs", make_node("Split", 1, 3, 18), {random_tensor(DType::float16, {2, 8, 13}, ++seed)}, {false}};
    set_attr(e.node, "axis", int64_t{-1});
    set_attr(e.node, "num_outputs", int64_t{3});
    e.tactic = "cuda_copy";
    cases.push_back(e);
  }
  return cases;
}

// Inference BatchNormalization (DenseNet's pre-activation BNs): nchw of rank 2 to 5, fp32 and
// fp16 x, parameters fp32 or of x's type; variances kept positive.
std::vector<TacticCase> batch_norm_cases() {
  std::vector<TacticCase> cases;
  uint64_t seed = 900;
  for (const Shape& x : std::vector<Shape>{{2, 37, 5, 7}, {3, 5}, {2, 6, 11}, {1, 4, 3, 2, 5}, {1, 256, 14, 14}})
    for (DType dt : {DType::float32, DType::float16})
      for (DType pt : dt == DType::float32 ? std::vector<DType>{dt} : std::vector<DType>{DType::float32, dt}) {
        const Shape c{x[1]};
        TacticCase k{"BatchNormalization " + shape_to_string(x) + " " + dtype_name(dt) + " params " + dtype_name(pt),
                     make_node("BatchNormalization", 5, 1, 15),
                     {random_tensor(dt, x, ++seed), random_tensor(pt, c, ++seed), random_tensor(pt, c, ++seed),
                      random_tensor(pt, c, ++seed), mapped(random_tensor(pt, c, ++seed), [](double v) { return 0.5 + v * v; })},
                     {false, true, true, true, true}};
        set_attr(k.node, "epsilon", 1e-3f);
        // fp32: x * s + t with s = gamma / sqrt(var + eps) and t = beta - mean * s rounded to float
        // (the reference: (x - mean) / sqrt(var + eps) * gamma + beta in double). Rounding s, t, the
        // product and the sum errs by up to four half-ulps of the largest term, |x * s| + |t|, which
        // can be far above the output where the two cancel (an H100 was 1.9e-7 off an output of
        // 5e-4): the absolute bound is that, from this case's data. fp16: the output's rounding.
        if (dt == DType::float16) {
          k.rtol = 2e-3, k.atol = 2e-3;
        } else {
          double largest = 0;
          const Tensor &xs = k.in[0], &gamma = k.in[1], &beta = k.in[2], &mean = k.in[3], &var = k.in[4];
          const int64_t C = x[1], inner = xs.numel() / (x[0] * C);
          for (int64_t i = 0; i < xs.numel(); ++i) {
            const int64_t ch = (i / inner) % C;
            const double sc = gamma.get_f64(ch) / std::sqrt(var.get_f64(ch) + 1e-3);
            largest = std::max(largest, std::fabs(xs.get_f64(i) * sc) + std::fabs(beta.get_f64(ch) - mean.get_f64(ch) * sc));
          }
          k.rtol = 1e-6, k.atol = 4 * 0x1p-24 * largest;
        }
        cases.push_back(k);
      }
  return cases;
}

// LSTM / GRU / RNN through cuDNN (lstm_audio's LSTMs with initial states, its bidirectional
// linear-before-reset GRU; batch above 1 with two directions takes the transposing copy of Y;
// layout 1; fp16).
std::vector<TacticCase> rnn_cases() {
  std::vector<TacticCase> cases;
  uint64_t seed = 1300;
  struct Geom {
    const char* op;
    int64_t T, N, I, H, D;
    bool bias, states;
    int64_t layout;
    DType dt;
  };
  for (const Geom& g : {Geom{"LSTM", 7, 1, 12, 8, 1, true, true, 0, DType::float32},
                        Geom{"LSTM", 5, 3, 6, 10, 2, true, false, 0, DType::float32},
                        Geom{"LSTM", 4, 2, 5, 7, 1, false, true, 1, DType::float32},
                        Geom{"LSTM", 6, 2, 16, 16, 1, true, true, 0, DType::float16},
                        Geom{"GRU", 6, 1, 9, 8, 2, true, true, 0, DType::float32},
                        Geom{"GRU", 5, 3, 4, 6, 2, true, false, 0, DType::float32},
                        Geom{"GRU", 3, 2, 8, 8, 1, false, true, 0, DType::float16},
                        Geom{"RNN", 5, 2, 7, 9, 2, true, true, 0, DType::float32}}) {
    const bool lstm = std::string(g.op) == "LSTM", gru = std::string(g.op) == "GRU";
    const int64_t G = lstm ? 4 : gru ? 3 : 1;
    const Shape x = g.layout ? Shape{g.N, g.T, g.I} : Shape{g.T, g.N, g.I};
    const Shape state = g.layout ? Shape{g.N, g.D, g.H} : Shape{g.D, g.N, g.H};
    // Weights scaled to keep the gates off saturation (a test of the arithmetic, not of tanh's tails).
    auto w = [&](const Shape& sh) { return mapped(random_tensor(g.dt, sh, ++seed), [](double v) { return 0.5 * v; }); };
    TacticCase c{std::string(g.op) + " T" + std::to_string(g.T) + " N" + std::to_string(g.N) + " D" + std::to_string(g.D) +
                     " layout" + std::to_string(g.layout) + " " + dtype_name(g.dt),
                 make_node(g.op, lstm ? 7 : 6, lstm ? 3 : 2, 14),
                 {random_tensor(g.dt, x, ++seed), w({g.D, G * g.H, g.I}), w({g.D, G * g.H, g.H}),
                  g.bias ? w({g.D, 2 * G * g.H}) : Tensor(), Tensor(), g.states ? random_tensor(g.dt, state, ++seed) : Tensor()},
                 {false, true, true, true, true, false},
                 g.dt == DType::float16 ? 1e-2 : 1e-4,
                 g.dt == DType::float16 ? 5e-3 : 1e-5,
                 "cudnn"};
    if (lstm) {
      c.in.push_back(g.states ? random_tensor(g.dt, state, ++seed) : Tensor());
      c.cmask.push_back(false);
    }
    set_attr(c.node, "hidden_size", g.H);
    if (g.D == 2) set_attr(c.node, "direction", std::string("bidirectional"));
    if (gru) set_attr(c.node, "linear_before_reset", int64_t{1});
    if (g.layout) set_attr(c.node, "layout", g.layout);
    if (std::string(g.op) == "RNN") {
      ir::Attribute a;
      a.type = ir::Attribute::Type::strings;
      a.strings = {"Relu", "Relu"};
      c.node.attrs["activations"] = a;
    }
    cases.push_back(c);
  }
  return cases;
}

// The step check_tactic hands a tactic (output shapes from the reference), and the tactic's
// verdict on it; no device needed.
Status applies_on_host(const Tactic& t, const ir::Node& n, const std::vector<Tensor>& in, const std::vector<bool>& cmask) {
  std::vector<Datum> data(in.size());
  std::vector<const Datum*> ptrs;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].empty()) {
      ptrs.push_back(nullptr);
      continue;
    }
    data[i] = Datum(in[i]);
    ptrs.push_back(&data[i]);
  }
  ir::Graph empty;
  ref::Frame frame(empty, nullptr);
  ref::KernelContext ctx(n, ptrs, &frame);
  try {
    ref::reference_kernel(n.op)(ctx);
  } catch (const ref::KernelError& e) {
    return e.status.with_context("reference: ");
  }
  kernels::StepDesc step;
  step.node = &n;
  for (size_t i = 0; i < in.size(); ++i) {
    step.in_dtypes.push_back(in[i].empty() ? DType::undefined : in[i].dtype());
    step.in_shapes.push_back(in[i].shape());
    step.constants.push_back(i < cmask.size() && cmask[i] && !in[i].empty() ? &in[i] : nullptr);
  }
  for (const Datum& d : ctx.outputs()) {
    step.out_dtypes.push_back(d.tensor.dtype());
    step.out_shapes.push_back(d.tensor.shape());
  }
  return t.applies(step);
}

void expect_cases_apply(const std::vector<TacticCase>& cases) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  for (const TacticCase& c : cases) {
    const Tactic* t = kernels::find_tactic(c.node.op, c.tactic, Backend::cuda);
    ASSERT_NE(t, nullptr) << c.what;
    const Status st = applies_on_host(*t, c.node, c.in, c.cmask);
    EXPECT_TRUE(st.is_ok()) << c.what << ": " << st.to_string();
  }
}
void expect_cases_match(const std::vector<TacticCase>& cases) {
  for (const TacticCase& c : cases)
    EXPECT_EQ(expect_cuda_tactics(c.node, c.in, c.cmask, c.rtol, c.atol, c.tactic), 1) << c.what;
}

TEST(CudaBackend, ReductionTacticsApply) { expect_cases_apply(reduction_cases()); }
TEST(CudaBackend, ResizeTacticsApply) { expect_cases_apply(resize_cases()); }
TEST(CudaBackend, SelectionTacticsApply) { expect_cases_apply(selection_cases()); }
TEST(CudaBackend, BatchNormTacticsApply) { expect_cases_apply(batch_norm_cases()); }
TEST(CudaBackend, RnnTacticsApply) { expect_cases_apply(rnn_cases()); }

// What the new tactics refuse, saying why (host_reference runs these).
TEST(CudaBackend, NewTacticsRefuseWhatTheyDoNotCover) {
  if (!cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend";
  auto verdict = [](const char* tactic, const ir::Node& n, const std::vector<Tensor>& in, const std::vector<bool>& cmask) {
    return applies_on_host(*kernels::find_tactic(n.op, tactic, Backend::cuda), n, in, cmask);
  };
  // Axes computed at run time; integer data.
  Status s = verdict("cuda", make_node("ReduceMean", 2, 1, 18), {random_tensor(DType::float32, {3, 5}, 1), int64s({1})}, {false, false});
  EXPECT_EQ(s.kind(), ErrorKind::not_applicable) << s.to_string();
  s = verdict("cuda", make_node("ReduceSum", 1, 1, 13), {random_tensor(DType::int64, {3, 5}, 1)}, {false});
  EXPECT_EQ(s.kind(), ErrorKind::not_applicable) << s.to_string();
  // Resize with scales computed at run time.
  ir::Node r = make_node("Resize", 3, 1, 13);
  s = verdict("cuda", r, {random_tensor(DType::float32, {1, 1, 4, 4}, 1), Tensor(), floats({1, 1, 2, 2})}, {false, true, false});
  EXPECT_EQ(s.kind(), ErrorKind::not_applicable) << s.to_string();
  EXPECT_NE(s.message().find("constant"), std::string::npos) << s.to_string();
  // cuDNN's RNN: no reverse direction, GRU only with linear_before_reset=1.
  for (const char* what : {"reverse", "lbr0"}) {
    const bool rev = std::string(what) == "reverse";
    ir::Node n = make_node(rev ? "LSTM" : "GRU", 3, 1, 14);
    const int64_t G = rev ? 4 : 3;
    set_attr(n, "hidden_size", int64_t{4});
    if (rev) set_attr(n, "direction", std::string("reverse"));
    s = verdict("cudnn", n,
                {random_tensor(DType::float32, {3, 1, 5}, 1), random_tensor(DType::float32, {1, G * 4, 5}, 2),
                 random_tensor(DType::float32, {1, G * 4, 4}, 3)},
                {false, true, true});
    EXPECT_EQ(s.kind(), ErrorKind::not_applicable) << what << ": " << s.to_string();
    EXPECT_NE(s.message().find(rev ? "reverse" : "linear_before_reset"), std::string::npos) << s.to_string();
  }
}

TEST(CudaTactics, Reductions) {
  REQUIRE_DEVICE();
  expect_cases_match(reduction_cases());
}
TEST(CudaTactics, Resize) {
  REQUIRE_DEVICE();
  expect_cases_match(resize_cases());
}
TEST(CudaTactics, Selection) {
  REQUIRE_DEVICE();
  expect_cases_match(selection_cases());
}
TEST(CudaTactics, BatchNorm) {
  REQUIRE_DEVICE();
  expect_cases_match(batch_norm_cases());
}
TEST(CudaTactics, Rnn) {
  REQUIRE_DEVICE();
  expect_cases_match(rnn_cases());
}

}  // namespace
}  // namespace tac
