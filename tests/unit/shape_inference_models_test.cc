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

}  // namespace
}  // namespace tac
