// Plan files: save -> load -> engine gives bitwise-identical outputs; corrupt, truncated, foreign
// and mismatched files are refused with clear errors.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "builder/plan_file.h"
#include "builder_test_util.h"
#include "io/onnx_import.h"
#include "io/test_case.h"

namespace tac {
namespace {

using test::ModelBuilder;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Plan file layout (plan_file.cc): magic[8] "TACPLAN\0", u32 version, u64 payload size,
// u64 FNV-1a of the payload, then the payload: str(tool version), str(device), ... where
// str is a u64 length and the bytes.
constexpr size_t kMagicBytes = 8, kVersionAt = 8, kSizeAt = 12, kSumAt = 20, kHeaderBytes = 28;

uint64_t fnv1a(const std::string& s) {  // as plan_file.cc computes the checksum
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
template <class T> T get_pod(const std::string& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
template <class T> void put_pod(std::string& b, size_t at, T v) { std::memcpy(b.data() + at, &v, sizeof v); }

// Rewrites the payload's size and checksum in the header after an edit of the payload, so
// that the checks after the checksum are what refuses the file.
void fix_header(std::string& file) {
  put_pod<uint64_t>(file, kSizeAt, file.size() - kHeaderBytes);
  put_pod<uint64_t>(file, kSumAt, fnv1a(file.substr(kHeaderBytes)));
}

class PlanFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tac_plan_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    // A model with a fusion, a fold, several steps and a constant folded at build time.
    ModelBuilder m(17);
    m.input("x", 1, {"1", "3", "8", "8"});
    test::initializer_random(m, "w", {4, 3, 3, 3}, 1, 0.4f);
    test::initializer_random(m, "b", {4}, 2);
    auto* c = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
    test::attr_ints(c, "pads", {1, 1, 1, 1});
    m.node("Relu", {"c"}, {"r"}, "relu");
    m.node("GlobalAveragePool", {"r"}, {"p"}, "gap");
    m.node("Flatten", {"p"}, {"f"}, "flatten");
    test::initializer_random(m, "fw", {5, 4}, 3);
    test::initializer_random(m, "fb", {5}, 4);
    auto* g = m.node("Gemm", {"f", "fw", "fb"}, {"g"}, "fc");
    test::attr_i(g, "transB", 1);
    m.node("Softmax", {"g"}, {"y"}, "softmax");
    m.output("y", 1, {});
    m.output("r", 1, {});
    auto model = m.load();
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    model_ = std::move(model).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Builds with `route`, saves the plan to `name`, returns the engine.
  std::unique_ptr<runtime::Engine> build_and_save(const std::string& route, const std::string& name) {
    auto e = test::build_engine(model_, route);
    EXPECT_TRUE(e.is_ok()) << e.status().to_string();
    if (!e) return nullptr;
    Status st = builder::save_plan((*e)->plan(), path(name));
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    return std::move(e).value();
  }
  Status load_status(const std::string& name) {
    auto p = builder::load_plan(path(name));
    return p.status();
  }

  std::filesystem::path dir_;
  ir::Model model_;
};

TEST_F(PlanFileTest, RoundTripGivesBitwiseIdenticalOutputs) {
  for (const char* route : {"", "pass.fuse_conv=off memory.planner=no_reuse", "memory.inplace=off threads=1",
                            "pass.fuse_matmul=off builder.prune=1", "layout.conv=blocked",
                            "layout.conv=nhwc memory.planner=greedy_by_order"}) {
    SCOPED_TRACE(route);
    auto e = build_and_save(route, "a.plan");
    ASSERT_TRUE(e);
    auto loaded = builder::load_plan(path("a.plan"));
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    const builder::Plan& p0 = e->plan();
    EXPECT_EQ(loaded->route, p0.route);
    EXPECT_EQ(loaded->device, p0.device);
    EXPECT_EQ(loaded->model_hash, p0.model_hash);
    EXPECT_EQ(loaded->threads, p0.threads);
    EXPECT_EQ(loaded->arena_bytes, p0.arena_bytes);
    EXPECT_EQ(loaded->report.pass_log, p0.report.pass_log);
    // Layout tags and the buffer sizes they imply travel with the plan.
    auto layouts = [](const builder::Plan& p) {
      std::multiset<std::pair<int, int64_t>> s;
      for (const builder::PlanValue& v : p.values)
        if (v.kind != builder::PlanValue::Kind::unused) s.insert({static_cast<int>(v.layout), v.bytes});
      return s;
    };
    EXPECT_EQ(layouts(*loaded), layouts(p0));
    if (std::string(route).find("layout") != std::string::npos) {
      EXPECT_GT(p0.report.reformats, 0);
    }
    ASSERT_EQ(loaded->steps.size(), p0.steps.size());
    for (size_t i = 0; i < p0.steps.size(); ++i) {
      EXPECT_EQ(loaded->steps[i].tactic, p0.steps[i].tactic) << "step " << i;
      EXPECT_EQ(loaded->steps[i].in_place, p0.steps[i].in_place) << "step " << i;
      EXPECT_EQ(loaded->steps[i].in_place_input, p0.steps[i].in_place_input) << "step " << i;
    }
    auto e2 = runtime::Engine::create(std::move(loaded).value());
    ASSERT_TRUE(e2.is_ok()) << e2.status().to_string();
    for (uint64_t seed : {5u, 6u}) {
      std::vector<Tensor> in = test::random_inputs(*e, seed);
      auto a = e->run(in);
      auto b = (*e2)->run(in);
      ASSERT_TRUE(a.is_ok() && b.is_ok());
      ASSERT_EQ(a->size(), b->size());
      for (size_t o = 0; o < a->size(); ++o) {
        ASSERT_EQ((*a)[o].bytes(), (*b)[o].bytes());
        EXPECT_EQ(std::memcmp((*a)[o].raw(), (*b)[o].raw(), (*a)[o].bytes()), 0) << "output " << o << " differs";
      }
      // And both agree with the reference.
      auto want = test::reference_outputs(model_, in);
      ASSERT_TRUE(want.is_ok());
      EXPECT_EQ(test::compare_outputs(*b, *want, 1e-5, 1e-4), "");
    }
    // Saving is deterministic, and a re-saved loaded plan loads again (its value order may
    // differ: the loaded graph numbers its values anew).
    ASSERT_TRUE(builder::save_plan(e->plan(), path("a2.plan")).is_ok());
    EXPECT_TRUE(read_bytes(path("a.plan")) == read_bytes(path("a2.plan"))) << "saving the same plan twice differs";
    ASSERT_TRUE(builder::save_plan((*e2)->plan(), path("b.plan")).is_ok());
    auto again = builder::load_plan(path("b.plan"));
    EXPECT_TRUE(again.is_ok()) << again.status().to_string();
  }
}

TEST_F(PlanFileTest, CorruptedByteIsRefusedByTheChecksum) {
  ASSERT_TRUE(build_and_save("", "good.plan"));
  const std::string good = read_bytes(path("good.plan"));
  ASSERT_GT(good.size(), kHeaderBytes + 100);
  // Flip one byte at several places in the payload: start, middle (weights), end.
  for (size_t at : {kHeaderBytes + 3, good.size() / 2, good.size() - 1}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    write_bytes(path("bad.plan"), bad);
    Status st = load_status("bad.plan");
    ASSERT_FALSE(st.is_ok()) << "flipped byte " << at << " was accepted";
    EXPECT_EQ(st.kind(), ErrorKind::invalid_argument);
    EXPECT_TRUE(contains(st.message(), "checksum mismatch")) << st.message();
    EXPECT_TRUE(contains(st.message(), "bad.plan")) << st.message();
  }
}

TEST_F(PlanFileTest, TruncatedOrExtendedFileIsRefused) {
  ASSERT_TRUE(build_and_save("", "good.plan"));
  const std::string good = read_bytes(path("good.plan"));
  for (size_t keep : {good.size() - 1, good.size() / 2, kHeaderBytes + 1, kHeaderBytes}) {
    write_bytes(path("cut.plan"), good.substr(0, keep));
    Status st = load_status("cut.plan");
    ASSERT_FALSE(st.is_ok()) << "kept " << keep << " bytes";
    EXPECT_TRUE(contains(st.message(), "truncated")) << st.message();
  }
  for (size_t keep : {size_t{0}, size_t{5}, kHeaderBytes - 1}) {  // not even a header
    write_bytes(path("cut.plan"), good.substr(0, keep));
    Status st = load_status("cut.plan");
    ASSERT_FALSE(st.is_ok()) << "kept " << keep << " bytes";
    EXPECT_TRUE(contains(st.message(), "not a Tactician plan")) << st.message();
  }
  write_bytes(path("long.plan"), good + "x");
  Status st = load_status("long.plan");
  ASSERT_FALSE(st.is_ok());
  EXPECT_TRUE(contains(st.message(), "trailing bytes")) << st.message();
}

TEST_F(PlanFileTest, WrongMagicOrVersionIsRefused) {
  ASSERT_TRUE(build_and_save("", "good.plan"));
  const std::string good = read_bytes(path("good.plan"));
  ASSERT_EQ(good.substr(0, kMagicBytes), std::string("TACPLAN\0", 8));
  std::string bad = good;
  bad[0] = 'X';
  write_bytes(path("magic.plan"), bad);
  Status st = load_status("magic.plan");
  ASSERT_FALSE(st.is_ok());
  EXPECT_TRUE(contains(st.message(), "not a Tactician plan")) << st.message();
  // An ONNX model is not a plan either.
  write_bytes(path("model.plan"), test::ModelBuilder().bytes() + std::string(64, '\0'));
  EXPECT_TRUE(contains(load_status("model.plan").message(), "not a Tactician plan"));

  bad = good;
  put_pod<uint32_t>(bad, kVersionAt, builder::kPlanFormatVersion + 1);
  write_bytes(path("version.plan"), bad);
  st = load_status("version.plan");
  ASSERT_FALSE(st.is_ok());
  EXPECT_TRUE(contains(st.message(), "format version")) << st.message();
  EXPECT_TRUE(contains(st.message(), "rebuild")) << st.message();

  st = load_status("missing.plan");
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.kind(), ErrorKind::io_error);
}

TEST_F(PlanFileTest, PlanForAnotherDeviceIsRefusedByTheDeviceCheck) {
  ASSERT_TRUE(build_and_save("", "good.plan"));
  std::string file = read_bytes(path("good.plan"));
  // Payload: str(tool version), str(device).
  size_t at = kHeaderBytes;
  const uint64_t tool_len = get_pod<uint64_t>(file, at);
  at += 8 + tool_len;
  const uint64_t dev_len = get_pod<uint64_t>(file, at);
  const std::string device = file.substr(at + 8, dev_len);
  ASSERT_EQ(device, builder::device_fingerprint());
  // Another device string, of another length: the payload size changes too.
  const std::string other = "cpu:Some Other CPU @ 1.00GHz [sse]";
  ASSERT_NE(other, device);
  file.replace(at, 8 + dev_len, std::string(8, '\0') + other);
  put_pod<uint64_t>(file, at, other.size());
  fix_header(file);
  write_bytes(path("foreign.plan"), file);
  Status st = load_status("foreign.plan");
  ASSERT_FALSE(st.is_ok()) << "a plan built for another device was accepted";
  EXPECT_EQ(st.kind(), ErrorKind::invalid_argument);
  EXPECT_FALSE(contains(st.message(), "checksum")) << st.message();
  EXPECT_TRUE(contains(st.message(), "built for " + other)) << st.message();
  EXPECT_TRUE(contains(st.message(), "rebuild")) << st.message();

  // Sanity of the helper: the unedited payload with a recomputed header still loads.
  std::string same = read_bytes(path("good.plan"));
  fix_header(same);
  write_bytes(path("same.plan"), same);
  EXPECT_TRUE(load_status("same.plan").is_ok()) << load_status("same.plan").to_string();
}

TEST_F(PlanFileTest, PlanFromAnotherToolVersionIsRefused) {
  ASSERT_TRUE(build_and_save("", "good.plan"));
  std::string file = read_bytes(path("good.plan"));
  const uint64_t tool_len = get_pod<uint64_t>(file, kHeaderBytes);
  const std::string other = "0.0.0-other";
  file.replace(kHeaderBytes, 8 + tool_len, std::string(8, '\0') + other);
  put_pod<uint64_t>(file, kHeaderBytes, other.size());
  fix_header(file);
  write_bytes(path("tool.plan"), file);
  Status st = load_status("tool.plan");
  ASSERT_FALSE(st.is_ok());
  EXPECT_TRUE(contains(st.message(), "built by tactician " + other)) << st.message();
}

TEST_F(PlanFileTest, ValidChecksumButMalformedPayloadIsRefusedNotCrashing) {
  ASSERT_TRUE(build_and_save("", "good.plan"));
  const std::string good = read_bytes(path("good.plan"));
  // Cut the payload at many places and fix the header: every prefix must fail cleanly.
  int refused = 0;
  for (size_t keep = kHeaderBytes; keep < good.size(); keep += std::max<size_t>(1, (good.size() - kHeaderBytes) / 97)) {
    std::string cut = good.substr(0, keep);
    fix_header(cut);
    write_bytes(path("cut.plan"), cut);
    Status st = load_status("cut.plan");
    EXPECT_FALSE(st.is_ok()) << "a payload cut at " << keep << " of " << good.size() << " loaded";
    EXPECT_NE(st.kind(), ErrorKind::internal) << st.to_string();
    refused += !st.is_ok();
  }
  EXPECT_GT(refused, 50);
}

// The shared models: a saved and reloaded plan computes bitwise what the original engine does.
// A branch of an If reads a constant of the main graph (folded into an initializer by the
// builder) and an Optional carries its type as a TypeProto attribute: the plan's graph must keep
// both (the export used to drop initializers only subgraphs read, and TypeProto attributes).
TEST_F(PlanFileTest, SubgraphReadsOfMainGraphConstantsAndTypeAttributesRoundTrip) {
  ModelBuilder m(17);
  m.input("x", onnx::TensorProto::FLOAT, {"2"});
  m.input("cond", onnx::TensorProto::BOOL, {});
  auto* k = m.node("Constant", {}, {"k"}, "k");
  auto* kv = k->add_attribute();
  kv->set_name("value");
  kv->set_type(onnx::AttributeProto::TENSOR);
  kv->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  kv->mutable_t()->add_dims(2);
  kv->mutable_t()->add_float_data(1.5f);
  kv->mutable_t()->add_float_data(-2.0f);
  auto* iff = m.node("If", {"cond"}, {"y"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* g = a->mutable_g();
    g->set_name(branch);
    auto* n = g->add_node();
    n->set_op_type(std::string(branch) == "then_branch" ? "Add" : "Sub");
    n->add_input("x");
    n->add_input("k");
    n->add_output(std::string(branch) + "_out");
    auto* out = g->add_output();
    out->set_name(std::string(branch) + "_out");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  auto* opt = m.node("Optional", {}, {"none"}, "opt");
  auto* ta = opt->add_attribute();
  ta->set_name("type");
  ta->set_type(onnx::AttributeProto::TYPE_PROTO);
  ta->mutable_tp()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  m.node("OptionalHasElement", {"none"}, {"has"}, "has");
  m.output("y", onnx::TensorProto::FLOAT, {"2"});
  m.output("has", onnx::TensorProto::BOOL, {});
  auto model = m.load();
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  auto e = test::build_engine(*model, "");
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  ASSERT_TRUE(builder::save_plan((*e)->plan(), path("if.plan")).is_ok());
  auto loaded = builder::load_plan(path("if.plan"));
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  auto e2 = runtime::Engine::create(std::move(loaded).value());
  ASSERT_TRUE(e2.is_ok()) << e2.status().to_string();
  for (bool c : {true, false}) {
    SCOPED_TRACE(c);
    Tensor x = kernels::random_tensor(DType::float32, {2}, c ? 11 : 12);
    Tensor cond = Tensor::create(DType::boolean, {}).value();
    cond.set_i64(0, c);
    auto want = test::reference_outputs(*model, {x, cond});
    auto got = (*e2)->run({x, cond});
    ASSERT_TRUE(want.is_ok() && got.is_ok()) << want.status().to_string() << " / " << got.status().to_string();
    EXPECT_EQ(test::compare_outputs(*got, *want, 0, 0), "");
  }
}

TEST_F(PlanFileTest, SharedModelPlansRoundTripBitwise) {
  const std::string zoo = TAC_MODELS_DIR;
  if (!std::filesystem::exists(zoo)) GTEST_SKIP() << "no model zoo at " << zoo;
  for (const char* name : {"mnist-cntk", "bert-toy", "tiny-gpt", "mobilenet_v2", "resnet18"}) {
    SCOPED_TRACE(name);
    const std::string dir = zoo + "/" + name;
    auto model = io::load_model(dir + "/model.onnx");
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    auto data = io::load_test_data(*model, dir);
    ASSERT_TRUE(data.is_ok() && !data->empty()) << data.status().to_string();
    std::vector<Tensor> in;
    for (const Datum& d : (*data)[0].inputs) in.push_back(d.tensor);
    builder::BuildOptions opts;
    ASSERT_TRUE(builder::bind_dims(model->graph, (*data)[0].inputs, opts).is_ok());
    auto plan = builder::build_plan(*model, {}, opts);
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    auto e = runtime::Engine::create(std::move(plan).value());
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    ASSERT_TRUE(builder::save_plan((*e)->plan(), path("m.plan")).is_ok());
    auto loaded = builder::load_plan(path("m.plan"));
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    EXPECT_EQ(loaded->weight_bytes(), (*e)->plan().weight_bytes());
    auto e2 = runtime::Engine::create(std::move(loaded).value());
    ASSERT_TRUE(e2.is_ok()) << e2.status().to_string();
    auto a = (*e)->run(in);
    auto b = (*e2)->run(in);
    ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.status().to_string() << " / " << b.status().to_string();
    ASSERT_EQ(a->size(), b->size());
    for (size_t o = 0; o < a->size(); ++o) {
      ASSERT_EQ((*a)[o].bytes(), (*b)[o].bytes());
      EXPECT_EQ(std::memcmp((*a)[o].raw(), (*b)[o].raw(), (*a)[o].bytes()), 0) << "output " << o << " differs";
    }
  }
}

}  // namespace
}  // namespace tac
