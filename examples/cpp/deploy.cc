// What an application does with Tactician's C++ API (include/tactician/tactician.h): load a
// model, list its knobs, build an engine, run it on the model's test data and check the outputs,
// save the plan and load it back, then tune briefly and build the winner.
//
//   deploy MODEL_DIR [--tune SECONDS]      MODEL_DIR holds model.onnx and test_data_set_0/
#include <tactician/tactician.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

namespace fs = std::filesystem;

static int fail(const tac::Status& s) {
  std::fprintf(stderr, "deploy: %s\n", s.to_string().c_str());
  return 1;
}

// max |got - want| / (1 + |want|) over a float output.
static double worst_error(const tac::Tensor& got, const tac::Tensor& want) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    worst = std::fmax(worst, std::fabs(got.get_f64(i) - want.get_f64(i)) / (1 + std::fabs(want.get_f64(i))));
  return worst;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: deploy MODEL_DIR [--tune SECONDS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const double tune_s = argc >= 4 && std::string(argv[2]) == "--tune" ? std::atof(argv[3]) : 0;

  auto model = tac::Model::load(dir);
  if (!model) return fail(model.status());
  auto knobs = model->knobs("cpu");
  if (!knobs) return fail(knobs.status());
  std::printf("tactician %s: %s, %zu inputs, %zu outputs, %zu knobs\n", tac::version().c_str(), model->path().c_str(),
              model->inputs().size(), model->outputs().size(), knobs->size());

  // The model's test data: input_K.pb and output_K.pb in graph order.
  std::map<std::string, tac::Tensor> inputs;
  std::vector<tac::Tensor> expected;
  const fs::path data = fs::path(dir) / "test_data_set_0";
  for (size_t k = 0; k < model->inputs().size(); ++k) {
    auto t = tac::load_tensor((data / ("input_" + std::to_string(k) + ".pb")).string());
    if (!t) return fail(t.status());
    inputs[model->inputs()[k].name] = *t;
  }
  for (size_t k = 0; k < model->outputs().size(); ++k) {
    auto t = tac::load_tensor((data / ("output_" + std::to_string(k) + ".pb")).string());
    if (!t) return fail(t.status());
    expected.push_back(*t);
  }

  auto check = [&](const tac::Engine& engine, const char* what) -> int {
    auto out = engine.run(inputs);
    if (!out) return fail(out.status());
    for (size_t k = 0; k < expected.size(); ++k) {
      const std::string& name = engine.outputs()[k].name;
      const double err = worst_error(out->at(name), expected[k]);
      std::printf("%s: output %s worst relative error %.3g\n", what, name.c_str(), err);
      if (!(err < 1e-3)) {
        std::fprintf(stderr, "deploy: %s: output %s does not match the test data\n", what, name.c_str());
        return 1;
      }
    }
    return 0;
  };

  auto engine = tac::Engine::build(*model, {.route = "", .backend = "cpu", .threads = 1});
  if (!engine) return fail(engine.status());
  if (int rc = check(*engine, "default route")) return rc;

  const std::string plan = (fs::temp_directory_path() / ("deploy-example-" + std::to_string(::getpid()) + ".plan")).string();
  if (auto s = engine->save(plan); !s) return fail(s);
  auto loaded = tac::Engine::load(plan, *model);
  if (!loaded) return fail(loaded.status());
  if (int rc = check(*loaded, "saved plan")) return rc;
  fs::remove(plan);

  // A wrong name is an error that names it, not a crash.
  auto bad = engine->run(std::map<std::string, tac::Tensor>{{"no_such_input", inputs.begin()->second}});
  if (bad) return fail(tac::internal_error("an unknown input name was accepted"));
  std::printf("unknown input refused: %s\n", bad.status().to_string().c_str());

  if (tune_s > 0) {
    tac::TuneOptions o;
    o.backend = "cpu";
    o.budget_seconds = tune_s;
    o.max_candidates = 8;  // a short demonstration: at most 8 candidates within the budget
    o.threads = 1;
    int lines = 0;
    o.progress = [&](const std::string&) { ++lines; };
    auto tuned = tac::tune(dir, o);
    if (!tuned) return fail(tuned.status());
    std::printf("tuned: %d candidates, default %.3f ms, best %.3f ms (%.2fx), %d progress lines\nbest route: %s\n",
                tuned->candidates, tuned->default_ms, tuned->best_ms, tuned->speedup, lines, tuned->best_route.c_str());
    auto best = tac::Engine::build(*model, {.route = tuned->best_route, .backend = "cpu"});
    if (!best) return fail(best.status());
    if (int rc = check(*best, "tuned route")) return rc;
  }
  std::printf("deploy: ok\n");
  return 0;
}
