// The public C++ API (include/tactician/tactician.h) through libtactician.so, with no internal
// header: results against the model's own test data, and every error as a Status naming what
// is wrong.
#include <tactician/tactician.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

namespace fs = std::filesystem;

namespace {

const std::string kModel = std::string(TAC_SOURCE_DIR) + "/models/squeezenet1.1";

tac::Tensor test_tensor(const std::string& file) {
  auto t = tac::load_tensor(kModel + "/test_data_set_0/" + file);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? *t : tac::Tensor();
}

double worst_error(const tac::Tensor& got, const tac::Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  double worst = 0;
  for (int64_t i = 0; i < got.numel() && i < want.numel(); ++i)
    worst = std::fmax(worst, std::fabs(got.get_f64(i) - want.get_f64(i)) / (1 + std::fabs(want.get_f64(i))));
  return worst;
}

tac::Tensor random_like(const tac::TensorInfo& info, uint64_t seed) {
  auto t = tac::Tensor::create(info.dtype, info.shape);
  EXPECT_TRUE(t.is_ok());
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  for (int64_t i = 0; i < t->numel(); ++i) t->set_f64(i, nd(rng));
  return *t;
}

}  // namespace

TEST(Api, ModelInfoAndKnobs) {
  auto m = tac::Model::load(kModel);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  ASSERT_EQ(m->inputs().size(), 1u);
  EXPECT_EQ(m->inputs()[0].name, "data_0");
  EXPECT_EQ(m->inputs()[0].dtype, tac::DType::float32);
  EXPECT_EQ(m->inputs()[0].shape, (tac::Shape{1, 3, 224, 224}));
  EXPECT_EQ(m->outputs().size(), 1u);
  EXPECT_EQ(m->hash().size(), 16u);
  auto knobs = m->knobs("cpu");
  ASSERT_TRUE(knobs.is_ok()) << knobs.status().to_string();
  bool threads = false, per_node = false;
  for (const tac::KnobInfo& k : *knobs) {
    threads |= k.name == "threads" && !k.per_node;
    per_node |= k.name.rfind("tactic.", 0) == 0 && k.per_node && !k.values.empty();
  }
  EXPECT_TRUE(threads);
  EXPECT_TRUE(per_node);
  EXPECT_NE(std::find(tac::available_backends().begin(), tac::available_backends().end(), "cpu"),
            tac::available_backends().end());
}

TEST(Api, RunMatchesTestDataByNameAndPosition) {
  auto m = tac::Model::load(kModel);
  ASSERT_TRUE(m.is_ok());
  auto e = tac::Engine::build(*m, {.backend = "cpu", .threads = 1});
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(e->backend(), "cpu");
  EXPECT_EQ(e->threads(), 1);
  const tac::Tensor in = test_tensor("input_0.pb"), want = test_tensor("output_0.pb");
  auto named = e->run({{"data_0", in}});
  ASSERT_TRUE(named.is_ok()) << named.status().to_string();
  ASSERT_EQ(named->count(e->outputs()[0].name), 1u);
  EXPECT_LT(worst_error(named->at(e->outputs()[0].name), want), 1e-4);
  auto positional = e->run(std::vector<tac::Tensor>{in});
  ASSERT_TRUE(positional.is_ok());
  EXPECT_EQ(worst_error((*positional)[0], named->at(e->outputs()[0].name)), 0.0);
}

TEST(Api, RouteChangesTheEngineAndBadRoutesNameTheKnob) {
  auto m = tac::Model::load(kModel);
  ASSERT_TRUE(m.is_ok());
  auto bf16 = tac::Engine::build(*m, {.route = "precision.default=bf16", .backend = "cpu", .threads = 1});
  ASSERT_TRUE(bf16.is_ok()) << bf16.status().to_string();
  EXPECT_NE(bf16->route().find("precision.default=bf16"), std::string::npos);
  auto out = bf16->run({{"data_0", test_tensor("input_0.pb")}});
  ASSERT_TRUE(out.is_ok());
  EXPECT_LT(worst_error(out->begin()->second, test_tensor("output_0.pb")), 5e-2);  // bf16: ~3 significant digits

  auto bad = tac::Engine::build(*m, {.route = "pass.no_such_pass=on"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().kind(), tac::ErrorKind::invalid_argument);
  EXPECT_NE(bad.status().message().find("pass.no_such_pass"), std::string::npos) << bad.status().message();
  auto conflict = tac::Engine::build(*m, {.route = "threads=2", .threads = 1});
  ASSERT_FALSE(conflict.is_ok());
  EXPECT_NE(conflict.status().message().find("conflicts"), std::string::npos);
}

TEST(Api, PlanRoundTripAndForeignPlanRefused) {
  auto m = tac::Model::load(kModel);
  ASSERT_TRUE(m.is_ok());
  auto e = tac::Engine::build(*m, {.backend = "cpu", .threads = 1});
  ASSERT_TRUE(e.is_ok());
  const fs::path dir = fs::temp_directory_path() / ("tactician-api-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string plan = (dir / "m.plan").string();
  ASSERT_TRUE(e->save(plan).is_ok());
  auto loaded = tac::Engine::load(plan, *m);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const tac::Tensor in = test_tensor("input_0.pb");
  auto a = e->run({{"data_0", in}});
  auto b = loaded->run({{"data_0", in}});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(worst_error(a->begin()->second, b->begin()->second), 0.0);

  // A plan of another model (the bundled tiny one, if the zoo is here) is refused when the model is given.
  auto other = tac::Model::load(std::string(TAC_MODELS_DIR) + "/mnist-cntk");
  if (other.is_ok()) {
    auto foreign = tac::Engine::load(plan, *other);
    ASSERT_FALSE(foreign.is_ok());
    EXPECT_NE(foreign.status().message().find("another model"), std::string::npos) << foreign.status().message();
  }
  // A corrupt plan is an error value, not a crash.
  {
    std::string bytes(64, 'x');
    FILE* f = std::fopen((dir / "bad.plan").c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    auto bad = tac::Engine::load((dir / "bad.plan").string());
    EXPECT_FALSE(bad.is_ok());
    EXPECT_NE(bad.status().message().find("bad.plan"), std::string::npos) << bad.status().message();
  }
  fs::remove_all(dir);
}

TEST(Api, ErrorsNameWhatIsWrong) {
  auto missing = tac::Model::load("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.onnx"), std::string::npos);

  auto m = tac::Model::load(kModel);
  ASSERT_TRUE(m.is_ok());
  auto e = tac::Engine::build(*m, {.backend = "cpu", .threads = 1});
  ASSERT_TRUE(e.is_ok());
  auto no_input = e->run(std::map<std::string, tac::Tensor>{});
  ASSERT_FALSE(no_input.is_ok());
  EXPECT_NE(no_input.status().message().find("'data_0' is missing"), std::string::npos) << no_input.status().message();
  auto unknown = e->run({{"data_0", test_tensor("input_0.pb")}, {"extra", test_tensor("input_0.pb")}});
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().message().find("'extra'"), std::string::npos);
  auto wrong_shape = tac::Tensor::create(tac::DType::float32, {1, 3, 8, 8});
  ASSERT_TRUE(wrong_shape.is_ok());
  auto shape = e->run({{"data_0", *wrong_shape}});
  ASSERT_FALSE(shape.is_ok());
  EXPECT_EQ(shape.status().kind(), tac::ErrorKind::invalid_argument) << shape.status().to_string();
  auto backend = tac::Engine::build(*m, {.backend = "tpu"});
  ASSERT_FALSE(backend.is_ok());
  EXPECT_NE(backend.status().message().find("tpu"), std::string::npos);
  auto tol = tac::tune(kModel, {.tolerance = "cos>=banana"});
  ASSERT_FALSE(tol.is_ok());
  EXPECT_NE(tol.status().message().find("banana"), std::string::npos) << tol.status().message();
}

// Runs from several threads on one engine take turns: every result is the one of its own input.
TEST(Api, ConcurrentRunsOnOneEngine) {
  auto m = tac::Model::load(kModel);
  ASSERT_TRUE(m.is_ok());
  auto e = tac::Engine::build(*m, {.backend = "cpu", .threads = 1});
  ASSERT_TRUE(e.is_ok());
  std::vector<tac::Tensor> inputs, alone;
  for (uint64_t s = 0; s < 4; ++s) {
    inputs.push_back(random_like(e->inputs()[0], s + 1));
    auto out = e->run(std::vector<tac::Tensor>{inputs.back()});
    ASSERT_TRUE(out.is_ok());
    alone.push_back((*out)[0]);
  }
  std::vector<double> errors(inputs.size(), -1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inputs.size(); ++i)
    threads.emplace_back([&, i] {
      auto out = e->run(std::vector<tac::Tensor>{inputs[i]});
      errors[i] = out.is_ok() ? worst_error((*out)[0], alone[i]) : INFINITY;
    });
  for (auto& t : threads) t.join();
  for (double err : errors) EXPECT_EQ(err, 0.0);
}

// Two tunes at once in one process (a serving process tuning two models, say): each has its own
// temporary data folder and database; both finish with a result that builds and matches.
TEST(Api, TwoTunesAtOnceInOneProcess) {
  std::vector<tac::Result<tac::TuneResult>> results(2, tac::internal_error("did not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      results[static_cast<size_t>(i)] =
          tac::tune(kModel, {.backend = "cpu", .budget_seconds = 30, .max_candidates = 2, .threads = 1,
                             .seed = static_cast<uint64_t>(i)});
    });
  for (auto& t : threads) t.join();
  auto m = tac::Model::load(kModel);
  ASSERT_TRUE(m.is_ok());
  for (const auto& r : results) {
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_GE(r->candidates, 1);
    auto e = tac::Engine::build(*m, {.route = r->best_route, .backend = "cpu"});
    ASSERT_TRUE(e.is_ok()) << e.status().to_string();
    auto out = e->run({{"data_0", test_tensor("input_0.pb")}});
    ASSERT_TRUE(out.is_ok());
    EXPECT_LT(worst_error(out->begin()->second, test_tensor("output_0.pb")), 1e-4);
  }
}
