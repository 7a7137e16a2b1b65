// Shape inference against real data: on every model of the zoo, each value whose type the
// inference claims to know must have exactly that dtype and shape when the reference
// interpreter runs the model, and each symbolic dim must take one value throughout.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "io/onnx_import.h"
#include "io/test_case.h"
#include "ir/shape_inference.h"
#include "reference/interpreter.h"
#include "builder_test_util.h"
#include "kernels/tactic_check.h"

#include <limits>

namespace tac {
namespace {

class ZooShapes : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooShapes, InferredShapesMatchRuntimeShapes) {
  const std::string dir = std::string(TAC_MODELS_DIR) + "/" + GetParam();
  if (!std::filesystem::exists(dir + "/model.onnx")) GTEST_SKIP() << "model zoo not found at " << dir;
  auto m = io::load_model(dir + "/model.onnx");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  ASSERT_TRUE(ir::infer_shapes(*m).is_ok());
  auto sets = io::load_test_data(*m, dir);
  ASSERT_TRUE(sets.is_ok() && !sets->empty());
  const ir::Graph& g = m->graph;
  std::map<std::string, int64_t> symbols;
  int checked = 0;
  auto run = ref::run_model(*m, (*sets)[0].inputs, [&](const ir::Node& n, const std::vector<Datum>& outs) {
    for (size_t i = 0; i < outs.size(); ++i) {
      if (n.outputs[i] == ir::kNoValue || outs[i].kind != Datum::Kind::tensor) continue;
      const ir::ValueType& t = g.values[static_cast<size_t>(n.outputs[i])].type;
      const Tensor& x = outs[i].tensor;
      if (t.dtype != DType::undefined) {
        EXPECT_EQ(t.dtype, x.dtype()) << n.label();
      }
      if (!t.has_shape) continue;
      ASSERT_EQ(t.dims.size(), x.shape().size()) << n.label() << " inferred " << t.to_string();
      for (size_t k = 0; k < t.dims.size(); ++k) {
        if (t.dims[k].known()) {
          EXPECT_EQ(t.dims[k].value, x.shape()[k]) << n.label() << " inferred " << t.to_string();
        } else if (!t.dims[k].symbol.empty()) {
          auto [it, fresh] = symbols.emplace(t.dims[k].symbol, x.shape()[k]);
          if (!fresh) {
            EXPECT_EQ(it->second, x.shape()[k]) << n.label() << " symbol " << t.dims[k].symbol;
          }
        }
      }
      ++checked;
    }
  });
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, ZooShapes,
                         ::testing::Values("mnist-cntk", "squeezenet1.1", "super-resolution", "bert-toy", "resnet18",
                                           "mobilenet_v2", "bert-mini-like", "tiny-gpt"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });


// Slice's shape rule (exact, so the builder probes no Slice) against the reference interpreter on
// the edge cases of ONNX's clamping: negative starts and ends, ends past the dim (INT64_MAX),
// negative steps down to INT64_MIN, steps > 1, empty results, negative axes, axes omitted.
TEST(SliceShapes, RuleMatchesTheReference) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  struct Case {
    std::vector<int64_t> starts, ends, axes, steps;  // axes / steps empty: input omitted
  };
  const Case cases[] = {
      {{1, 0}, {3, kMax}, {0, 2}, {}},       {{-2}, {kMax}, {1}, {}},        {{-100}, {100}, {2}, {2}},
      {{4}, {1}, {2}, {}},                   {{6}, {kMin}, {2}, {-1}},       {{-1, 5}, {-4, 0}, {-1, 0}, {-2, -3}},
      {{0, 1, 2}, {2, 4, 7}, {}, {}},        {{3}, {3}, {-3}, {1}},          {{10}, {-10}, {2}, {-3}},
  };
  for (const Case& c : cases) {
    test::ModelBuilder m(13);
    m.input("x", 1, {"2", "5", "7"});
    test::initializer_i64(m, "starts", {static_cast<int64_t>(c.starts.size())}, c.starts);
    test::initializer_i64(m, "ends", {static_cast<int64_t>(c.ends.size())}, c.ends);
    std::vector<std::string> ins = {"x", "starts", "ends"};
    if (!c.axes.empty() || !c.steps.empty()) {
      std::vector<int64_t> axes = c.axes;
      if (axes.empty())
        for (size_t i = 0; i < c.starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
      test::initializer_i64(m, "axes", {static_cast<int64_t>(axes.size())}, axes);
      ins.push_back("axes");
    }
    if (!c.steps.empty()) {
      test::initializer_i64(m, "steps", {static_cast<int64_t>(c.steps.size())}, c.steps);
      ins.push_back("steps");
    }
    m.node("Slice", ins, {"y"}, "slice");
    m.output("y", 1, {});
    auto model = m.load();
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    ASSERT_TRUE(ir::infer_shapes(*model).is_ok());
    const ir::ValueType& t = model->graph.values[static_cast<size_t>(model->graph.outputs[0])].type;
    ASSERT_TRUE(t.has_shape);
    Shape inferred;
    for (const ir::Dim& d : t.dims) {
      ASSERT_TRUE(d.known());
      inferred.push_back(d.value);
    }
    auto want = test::reference_outputs(*model, {kernels::random_tensor(DType::float32, {2, 5, 7}, 3)});
    ASSERT_TRUE(want.is_ok()) << want.status().to_string();
    EXPECT_EQ(shape_to_string(inferred), shape_to_string((*want)[0].shape()))
        << "starts " << c.starts.size() << " first " << c.starts[0] << " ends first " << c.ends[0];
  }
}

}  // namespace
}  // namespace tac
