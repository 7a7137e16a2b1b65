// The CPU Pad tactic (kernels/elementwise/pad.cc) against the reference kernel (check_tactic), at
// 1 and 3 threads, on random data: every mode, every element size, positive, zero and negative
// pads (cropping) on inner and outer axes, pads wider than the axis (reflect and wrap repeat),
// axes (opset 18), constant_value as a constant, a run-time input or absent, the attribute forms
// (opsets 1 and 2), empty axes, and the ONNX backend suite's own Pad cases.
//
// Bound: exact, byte for byte: Pad only moves elements (and writes the constant).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/onnx_import.h"
#include "io/test_case.h"
#include "kernels/tactic_check.h"
#include "node_test_util.h"

namespace tac::kernels {
namespace {

using test::int64s;

void expect_exact(const ir::Node& n, const std::vector<Tensor>& in, const std::vector<bool>& cmask, const std::string& what,
                  bool applies = true) {
  const Tactic* t = find_tactic(ir::OpKind::Pad, "copy");
  ASSERT_NE(t, nullptr);
  for (int threads : {1, 3}) {
    TacticCheck r = check_tactic(*t, n, in, cmask, threads);
    if (!r.status && r.status.kind() == ErrorKind::not_applicable) {
      EXPECT_FALSE(applies) << what << ": " << r.status.to_string();
      return;
    }
    ASSERT_TRUE(r.status.is_ok()) << what << ": " << r.status.to_string();
    EXPECT_TRUE(applies) << what << " applied";
    ASSERT_EQ(r.outputs.size(), 1u);
    ASSERT_EQ(r.outputs[0].shape(), r.expected[0].shape()) << what;
    ASSERT_EQ(r.outputs[0].bytes(), r.expected[0].bytes()) << what;
    if (std::memcmp(r.outputs[0].raw(), r.expected[0].raw(), r.expected[0].bytes()) == 0) continue;
    const size_t e = dtype_size(r.expected[0].dtype());
    int bad = 0;
    for (int64_t i = 0; i < r.expected[0].numel() && bad < 5; ++i) {
      const size_t at = static_cast<size_t>(i) * e;
      if (std::memcmp(static_cast<const char*>(r.outputs[0].raw()) + at, static_cast<const char*>(r.expected[0].raw()) + at, e) == 0)
        continue;
      ++bad;
      ADD_FAILURE() << what << " threads=" << threads << " out[" << i << "]: got " << r.outputs[0].get_f64(i) << " want "
                    << r.expected[0].get_f64(i);
    }
  }
}

Tensor scalar(DType dt, double v) {
  Tensor t = Tensor::create(dt, {}).value();
  t.set_f64(0, v);
  return t;
}
std::string str(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (int64_t x : v) s += std::to_string(x) + ",";
  return s + "}";
}

const char* const kModes[] = {"constant", "edge", "reflect", "wrap"};

struct Geom {
  Shape x;
  std::vector<int64_t> pads;  // before per axis, then after
};
// Pads on the last axis only, on outer axes only (whole inner blocks), on every axis, zero pads,
// negative pads (cropping), mixed; wider than the axis (reflect / wrap wrap around); rank 1 and 5.
const std::vector<Geom> kGeoms = {
    {{2, 3, 7, 9}, {0, 0, 0, 2, 0, 0, 0, 3}},    {{2, 3, 7, 9}, {0, 1, 2, 0, 0, 2, 1, 0}},
    {{2, 3, 7, 9}, {1, 0, 2, 3, 2, 0, 1, 4}},    {{2, 3, 7, 9}, {0, 0, 0, 0, 0, 0, 0, 0}},
    {{2, 3, 7, 9}, {0, -1, 2, -3, 1, 0, -2, 3}}, {{2, 3, 7, 9}, {0, 0, -3, -2, 0, 0, -1, -4}},
    {{2, 3, 4, 3}, {0, 0, 5, 7, 0, 0, 6, 8}},    {{13}, {3, 4}},
    {{2, 1, 3, 2, 5}, {0, 1, 1, 0, 2, 1, 0, 2, 1, 1}},
    {{1, 1, 1, 6}, {0, 0, 1, 2, 0, 0, 2, 1}},    // axes of size 1: reflect repeats the element
};

TEST(PadTactics, EveryModeEveryGeometry) {
  uint64_t seed = 1;
  for (const char* mode : kModes)
    for (const Geom& g : kGeoms) {
      const std::string what = std::string(mode) + " x" + shape_to_string(g.x) + " pads " + str(g.pads);
      ir::Node n = make_node("Pad", 3, 1, 19);
      set_attr(n, "mode", std::string(mode));
      expect_exact(n, {random_tensor(DType::float32, g.x, ++seed), int64s(g.pads), scalar(DType::float32, 2.5)}, {false, true, true},
                   what);
      ir::Node n2 = make_node("Pad", 2, 1, 19);  // no constant_value: 0
      set_attr(n2, "mode", std::string(mode));
      expect_exact(n2, {random_tensor(DType::float32, g.x, ++seed), int64s(g.pads)}, {false, true}, what + " no value");
    }
}

TEST(PadTactics, EveryElementSize) {
  uint64_t seed = 100;
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int64, DType::int32, DType::uint8,
                   DType::int8, DType::boolean, DType::uint16})
    for (const char* mode : kModes)
      for (const Geom& g : {kGeoms[2], kGeoms[4], kGeoms[6]}) {
        const std::string what = std::string(mode) + " " + dtype_name(dt) + " pads " + str(g.pads);
        ir::Node n = make_node("Pad", 3, 1, 19);
        set_attr(n, "mode", std::string(mode));
        expect_exact(n, {random_tensor(dt, g.x, ++seed), int64s(g.pads), scalar(dt, 1)}, {false, true, true}, what);
      }
}

// constant_value computed at run time (not a constant), or an empty tensor (0); of another type:
// not applicable (the reference fails).
TEST(PadTactics, ConstantValueForms) {
  Tensor x = random_tensor(DType::float32, {3, 5, 6}, 200);
  ir::Node n = make_node("Pad", 3, 1, 19);
  expect_exact(n, {x, int64s({1, 0, 2, 0, 3, 1}), scalar(DType::float32, -7.25)}, {false, true, false}, "run-time value");
  expect_exact(n, {x, int64s({1, 0, 2, 0, 3, 1}), Tensor::create(DType::float32, {0}).value()}, {false, true, true}, "empty value");
  const Tactic* t = find_tactic(ir::OpKind::Pad, "copy");
  ir::Node m = make_node("Pad", 3, 1, 19);
  Tensor pads = int64s({1, 0, 2, 0, 3, 1});
  Tensor cv = scalar(DType::float64, 1);
  StepDesc s;
  s.node = &m;
  s.in_dtypes = {DType::float32, DType::int64, DType::float64};
  s.in_shapes = {{3, 5, 6}, {6}, {}};
  s.constants = {nullptr, &pads, &cv};
  s.out_dtypes = {DType::float32};
  s.out_shapes = {{4, 8, 9}};
  EXPECT_EQ(t->applies(s).kind(), ErrorKind::not_applicable);
  s.in_dtypes[2] = DType::float32;
  cv = scalar(DType::float32, 1);
  EXPECT_TRUE(t->applies(s).is_ok());
  s.constants[1] = nullptr;  // pads computed at run time
  EXPECT_EQ(t->applies(s).kind(), ErrorKind::not_applicable);
}

TEST(PadTactics, AxesInput) {
  uint64_t seed = 300;
  for (const char* mode : kModes)
    for (const auto& [axes, pads] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
             {{-1, 1}, {2, 1, 3, 0}}, {{0}, {1, 2}}, {{3, 2}, {-1, 2, 3, -2}}, {{2}, {4, 5}}}) {
      ir::Node n = make_node("Pad", 4, 1, 18);
      set_attr(n, "mode", std::string(mode));
      expect_exact(n, {random_tensor(DType::float32, {2, 3, 7, 9}, ++seed), int64s(pads), Tensor(), int64s(axes)},
                   {false, true, true, true}, std::string(mode) + " axes " + str(axes) + " pads " + str(pads));
    }
}

TEST(PadTactics, AttributeForms) {
  uint64_t seed = 400;
  for (const char* mode : kModes) {
    ir::Node a = make_node("Pad", 1, 1, 2);
    set_attr(a, "mode", std::string(mode));
    set_attr(a, "pads", std::vector<int64_t>{0, 1, 2, 0, 3, 1});
    set_attr(a, "value", 1.5f);
    expect_exact(a, {random_tensor(DType::float32, {3, 7, 9}, ++seed)}, {false}, std::string("Pad-2 ") + mode);
    ir::Node b = make_node("Pad", 1, 1, 1);
    set_attr(b, "mode", std::string(mode));
    set_attr(b, "paddings", std::vector<int64_t>{1, 0, 2, 3});
    expect_exact(b, {random_tensor(DType::float32, {5, 4}, ++seed)}, {false}, std::string("Pad-1 ") + mode);
    ir::Node i = make_node("Pad", 1, 1, 2);  // the value attribute converted to an integer type
    set_attr(i, "mode", std::string(mode));
    set_attr(i, "pads", std::vector<int64_t>{0, 1, 2, 0, 3, 1});
    set_attr(i, "value", -3.0f);
    expect_exact(i, {random_tensor(DType::int32, {3, 7, 9}, ++seed)}, {false}, std::string("Pad-2 int32 ") + mode);
  }
}

// An empty input axis padded with the constant; in the other modes the reference fails, so the
// tactic does not apply. Cropping a whole axis away gives an empty output.
TEST(PadTactics, EmptyAxes) {
  Tensor x = Tensor::create(DType::float32, {2, 0, 3}).value();
  for (const char* mode : kModes) {
    ir::Node n = make_node("Pad", 3, 1, 19);
    set_attr(n, "mode", std::string(mode));
    const bool constant = std::string(mode) == "constant";
    if (constant) expect_exact(n, {x, int64s({0, 1, 1, 0, 2, 0}), scalar(DType::float32, 4)}, {false, true, true}, "empty axis");
    ir::Node c = make_node("Pad", 2, 1, 19);
    set_attr(c, "mode", std::string(mode));
    expect_exact(c, {random_tensor(DType::float32, {2, 3, 4}, 500), int64s({0, -2, 0, 0, -1, 1})}, {false, true},
                 std::string("crop to empty ") + mode);
  }
}

// Large enough for three threads; DenseNet-like and padding of feature maps.
TEST(PadTactics, LargeThreaded) {
  uint64_t seed = 600;
  for (const char* mode : kModes)
    for (const Geom& g : std::vector<Geom>{{{1, 64, 56, 56}, {0, 0, 1, 1, 0, 0, 1, 1}},
                                           {{2, 32, 40, 41}, {0, 0, 3, 2, 0, 0, 2, 3}},
                                           {{4, 20000}, {1, 5, 2, 7}}}) {
      ir::Node n = make_node("Pad", 3, 1, 19);
      set_attr(n, "mode", std::string(mode));
      expect_exact(n, {random_tensor(DType::float32, g.x, ++seed), int64s(g.pads), scalar(DType::float32, -1)}, {false, true, true},
                   std::string(mode) + " large x" + shape_to_string(g.x));
    }
}

// The ONNX backend suite's Pad node tests, pads / axes / constant_value as constants.
TEST(PadTactics, OnnxNodeTests) {
  // The suite's default place (TAC_ONNX_BACKEND_DIR in CMakeLists.txt): ../shared beside the source tree.
  const std::filesystem::path root = test::onnx_node_suite();
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "no ONNX backend suite at " << root;
  int tested = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name.find("pad") == std::string::npos) continue;
    auto model = io::load_model((entry.path() / "model.onnx").string());
    if (!model.is_ok() || model->graph.nodes.size() != 1 || model->graph.nodes[0].op != ir::OpKind::Pad) continue;
    const ir::Graph& g = model->graph;
    const ir::Node& n = g.nodes[0];
    auto data = io::load_test_data(*model, entry.path().string());
    ASSERT_TRUE(data.is_ok() && !data->empty()) << name;
    for (const io::TestDataSet& ds : *data) {
      std::vector<Tensor> in;
      std::vector<bool> cmask;
      test::single_node_inputs(g, n, ds, in, cmask);
      expect_exact(n, in, cmask, name);
      TacticCheck r = check_tactic(*find_tactic(ir::OpKind::Pad, "copy"), n, in, cmask, 1);
      ASSERT_TRUE(r.status.is_ok()) << name;
      ASSERT_EQ(r.outputs[0].bytes(), ds.outputs[0].tensor.bytes()) << name;
      EXPECT_EQ(std::memcmp(r.outputs[0].raw(), ds.outputs[0].tensor.raw(), r.outputs[0].bytes()), 0) << name;
      ++tested;
    }
  }
  EXPECT_GE(tested, 6);
}

}  // namespace
}  // namespace tac::kernels
