// The default tolerance against real engines: on every model of the zoo, the engine built for
// the default route must pass Tolerance::default_fp32() against the stored reference outputs
// (otherwise the tuner would reject its own baseline).
#include <gtest/gtest.h>

#include <filesystem>

#include "builder/builder.h"
#include "io/onnx_import.h"
#include "io/test_case.h"
#include "runtime/engine.h"
#include "tuner/accuracy.h"

namespace tac::tuner {
namespace {

class TunerAccuracyZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(TunerAccuracyZoo, DefaultRoutePassesDefaultTolerance) {
  const std::string dir = std::string(TAC_MODELS_DIR) + "/" + GetParam();
  if (!std::filesystem::exists(dir + "/model.onnx")) GTEST_SKIP() << "model zoo not found at " << dir;
  auto m = io::load_model(dir + "/model.onnx");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto sets = io::load_test_data(*m, dir);
  ASSERT_TRUE(sets.is_ok() && !sets->empty());
  const io::TestDataSet& ds = (*sets)[0];
  std::vector<Tensor> inputs;
  for (const Datum& d : ds.inputs) {
    ASSERT_TRUE(d.is_tensor());
    inputs.push_back(d.tensor);
  }
  builder::BuildOptions opts;
  ASSERT_TRUE(builder::bind_dims(m->graph, ds.inputs, opts).is_ok());
  auto plan = builder::build_plan(*m, builder::Route{}, opts);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  auto engine = runtime::Engine::create(std::move(*plan));
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  auto outs = (*engine)->run(inputs);
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  ASSERT_GE(outs->size(), ds.outputs.size());

  const Tolerance tol = Tolerance::default_fp32();
  std::vector<Metrics> per_output;
  for (size_t k = 0; k < ds.outputs.size(); ++k) {
    ASSERT_TRUE(ds.outputs[k].is_tensor());
    auto metrics = compute_metrics((*outs)[k], ds.outputs[k].tensor, tol.atol, tol.rtol);
    ASSERT_TRUE(metrics.is_ok()) << "output " << k << ": " << metrics.status().to_string();
    per_output.push_back(*metrics);
  }
  std::printf("[ metrics  ] %s %s\n", GetParam().c_str(), metrics_json(per_output).c_str());
  EXPECT_EQ(check_tolerance(tol, per_output), "") << metrics_json(per_output);
}

INSTANTIATE_TEST_SUITE_P(Models, TunerAccuracyZoo,
                         ::testing::Values("mnist-cntk", "squeezenet1.1", "resnet18", "mobilenet_v2",
                                           "super-resolution", "bert-toy", "bert-mini-like", "tiny-gpt"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-' || c == '.') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tac::tuner
