// Import and bad-input handling: every malformed model gives a clear error, never a crash.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "io/onnx_import.h"
#include "io/tensor_io.h"
#include "ir/shape_inference.h"
#include "reference/interpreter.h"
#include "model_builder.h"

namespace tac {
namespace {

using test::ModelBuilder;

Tensor random_tensor(Shape shape, uint64_t seed) {
  auto t = Tensor::create(DType::float32, std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = nd(rng);
  return std::move(t).value();
}

TEST(Import, RejectsNonOnnxAndTruncatedFiles) {
  auto r = io::load_model_from_bytes("this is not a model", "junk.onnx", "");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::invalid_model);
  EXPECT_NE(r.status().message().find("junk.onnx"), std::string::npos);

  ModelBuilder b;
  b.input("x", 1, {"2"});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", 1, {"2"});
  std::string full = b.bytes();
  for (size_t cut : {full.size() / 3, full.size() / 2, full.size() - 3}) {
    auto t = io::load_model_from_bytes(full.substr(0, cut), "cut.onnx", "");
    EXPECT_FALSE(t.is_ok()) << "cut at " << cut;
  }
  EXPECT_FALSE(io::load_model_from_bytes("", "empty.onnx", "").is_ok());
  auto missing = io::load_model("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::io_error);
}

TEST(Import, DanglingInputNamesNodeAndValue) {
  ModelBuilder b;
  b.input("x", 1, {"2"});
  b.node("Add", {"x", "ghost"}, {"y"}, "add_1");
  b.output("y", 1, {"2"});
  auto r = b.load();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("add_1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("ghost"), std::string::npos) << r.status().message();
}

TEST(Import, DuplicateDefinitionAndCycleAreErrors) {
  ModelBuilder dup;
  dup.input("x", 1, {"2"});
  dup.node("Relu", {"x"}, {"y"});
  dup.node("Neg", {"x"}, {"y"});
  dup.output("y", 1, {"2"});
  EXPECT_FALSE(dup.load().is_ok());

  ModelBuilder cyc;
  cyc.input("x", 1, {"2"});
  cyc.node("Add", {"x", "b"}, {"a"}, "n1");
  cyc.node("Relu", {"a"}, {"b"}, "n2");
  cyc.output("b", 1, {"2"});
  auto r = cyc.load();
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("cycle"), std::string::npos) << r.status().message();
}

TEST(Import, UnsortedNodesAreSorted) {
  ModelBuilder b;
  b.input("x", 1, {"3"});
  b.node("Neg", {"r"}, {"y"}, "second");
  b.node("Relu", {"x"}, {"r"}, "first");
  b.output("y", 1, {"3"});
  auto m = b.load();
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  ASSERT_EQ(m->graph.nodes.size(), 2u);
  EXPECT_EQ(m->graph.nodes[0].name, "first");
  EXPECT_EQ(m->graph.nodes[1].name, "second");
}

TEST(Import, UnsupportedDtypeIsNamed) {
  ModelBuilder b;
  b.input("s", 8 /* string */, {"2"});
  b.node("Identity", {"s"}, {"y"});
  b.output("y", 8, {"2"});
  auto r = b.load();
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::unsupported);
  EXPECT_NE(r.status().message().find("string"), std::string::npos) << r.status().message();

  ModelBuilder f8;
  f8.input("x", 17 /* float8e4m3fn */, {"2"});
  f8.node("Identity", {"x"}, {"y"});
  f8.output("y", 17, {"2"});
  auto r8 = f8.load();
  ASSERT_FALSE(r8.is_ok());
  EXPECT_NE(r8.status().message().find("float8e4m3fn"), std::string::npos) << r8.status().message();
}

TEST(Import, UnsupportedOpIsReportedWithItsNode) {
  ModelBuilder b;
  b.input("x", 1, {"2"});
  b.node("FancyOp", {"x"}, {"y"}, "fancy");
  b.output("y", 1, {"2"});
  auto m = b.load();
  ASSERT_TRUE(m.is_ok());
  auto missing = ref::unsupported_nodes(m->graph);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->name, "fancy");
  auto run = ref::run_model(*m, {Datum(random_tensor({2}, 1))});
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().kind(), ErrorKind::unsupported);
  EXPECT_NE(run.status().message().find("fancy"), std::string::npos);
}

TEST(Import, WrongAttributeTypeFailsNamingTheAttribute) {
  ModelBuilder b;
  b.input("x", 1, {"2"});
  auto* n = b.node("Constant", {}, {"y"}, "k");
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::FLOAT);  // must be a tensor
  a->set_f(1.0f);
  b.output("y", 1, {});
  // Refused at import against ONNX's schema, before any kernel could read it as absent.
  auto m = b.load();
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("node 'k' (Constant): attribute 'value' must be a tensor"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("got a float"), std::string::npos) << m.status().message();
}

TEST(Import, InputOfWrongShapeOrTypeIsRejected) {
  ModelBuilder b;
  b.input("x", 1, {"batch", "3"});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", 1, {"batch", "3"});
  auto m = b.load();
  ASSERT_TRUE(m.is_ok());
  EXPECT_TRUE(ref::run_model(*m, {Datum(random_tensor({5, 3}, 2))}).is_ok());  // symbolic batch
  auto bad_shape = ref::run_model(*m, {Datum(random_tensor({5, 4}, 2))});
  ASSERT_FALSE(bad_shape.is_ok());
  EXPECT_NE(bad_shape.status().message().find("'x'"), std::string::npos);
  auto ints = Tensor::create(DType::int64, {5, 3});
  EXPECT_FALSE(ref::run_model(*m, {Datum(*ints)}).is_ok());
  EXPECT_FALSE(ref::run_model(*m, {}).is_ok());
}

TEST(Import, ReadsExternalData) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("tac_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<float> w = {1.5f, -2.0f, 3.25f, 0.5f};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    float pad = 0;
    f.write(reinterpret_cast<const char*>(&pad), 4);  // offset 4
    f.write(reinterpret_cast<const char*>(w.data()), 16);
  }
  ModelBuilder b;
  b.input("x", 1, {"4"});
  auto* t = b.m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  kv = t->add_external_data();
  kv->set_key("offset");
  kv->set_value("4");
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y", 1, {"4"});
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    f << b.bytes();
  }
  auto m = io::load_model((dir / "model.onnx").string());
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  Tensor x = random_tensor({4}, 3);
  auto out = ref::run_model(*m, {Datum(x)});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ((*out)[0].tensor.data<float>()[i], x.data<float>()[i] + w[static_cast<size_t>(i)]);
  fs::resize_file(dir / "weights.bin", 8);  // now too short
  auto short_file = io::load_model((dir / "model.onnx").string());
  EXPECT_FALSE(short_file.is_ok());
  fs::remove_all(dir);
}

TEST(TensorIo, NpyAndPbRoundTrip) {
  namespace fs = std::filesystem;
  Tensor t = random_tensor({2, 3, 4}, 7);
  std::string npy = (fs::temp_directory_path() / "tac_rt.npy").string();
  std::string pb = (fs::temp_directory_path() / "tac_rt.pb").string();
  ASSERT_TRUE(io::save_npy(t, npy).is_ok());
  ASSERT_TRUE(io::save_tensor_pb(t, "t", pb).is_ok());
  for (const std::string& p : {npy, pb}) {
    auto back = p == npy ? io::load_npy(p) : io::load_tensor_pb(p);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back->shape(), t.shape());
    EXPECT_EQ(0, std::memcmp(back->raw(), t.raw(), t.bytes()));
  }
  std::ofstream(npy, std::ios::binary | std::ios::trunc) << "\x93NUMPY";  // truncated
  EXPECT_FALSE(io::load_npy(npy).is_ok());
  fs::remove(npy);
  fs::remove(pb);
}

TEST(ShapeInference, ConvPoolAndSymbolicBatch) {
  ModelBuilder b(17);
  b.input("x", 1, {"N", "3", "32", "32"});
  b.initializer("w", {8, 3, 3, 3}, std::vector<float>(8 * 3 * 3 * 3, 0.1f));
  auto* c = b.node("Conv", {"x", "w"}, {"c"}, "conv");
  auto* a = c->add_attribute();
  a->set_name("strides");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(2);
  a->add_ints(2);
  b.node("Relu", {"c"}, {"r"});
  b.node("GlobalAveragePool", {"r"}, {"y"});
  b.output("y", 1, {});
  auto m = b.load();
  ASSERT_TRUE(m.is_ok());
  ASSERT_TRUE(ir::infer_shapes(*m).is_ok());
  const ir::Graph& g = m->graph;
  EXPECT_EQ(g.values[static_cast<size_t>(g.find_value("c"))].type.to_string(), "float[N,8,15,15]");
  EXPECT_EQ(g.values[static_cast<size_t>(g.find_value("y"))].type.to_string(), "float[N,8,1,1]");
}

TEST(ShapeInference, InconsistentShapesNameTheNode) {
  ModelBuilder b;
  b.input("a", 1, {"2", "3"});
  b.input("b", 1, {"4"});
  b.node("Add", {"a", "b"}, {"y"}, "bad_add");
  b.output("y", 1, {});
  auto m = b.load();
  ASSERT_TRUE(m.is_ok());
  Status st = ir::infer_shapes(*m);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("bad_add"), std::string::npos) << st.message();

  ModelBuilder c;
  c.input("x", 1, {"1", "4", "8", "8"});
  c.initializer("w", {2, 3, 1, 1}, std::vector<float>(6, 1.0f));
  c.node("Conv", {"x", "w"}, {"y"}, "bad_conv");
  c.output("y", 1, {});
  auto mc = c.load();
  ASSERT_TRUE(mc.is_ok());
  EXPECT_FALSE(ir::infer_shapes(*mc).is_ok());
}

}  // namespace
}  // namespace tac
