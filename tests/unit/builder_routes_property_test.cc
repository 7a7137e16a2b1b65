// Property: random valid routes on the shared models build and pass check.
// For each model of TAC_MODELS_DIR, routes are drawn from its knob space (seeded): random values
// for random subsets of the global knobs (passes, memory planner, in-place, pruning, threads,
// selection, layout.default) and per-node pins (tactic.*, precision.*, layout.*). Each route is built, run on test_data_set_0 and compared
// with the stored expected outputs (MODELS.md: rtol 1e-3, atol 1e-4 scaled by max|expected|
// where that is above 1).
//
// Routes with lower precision (precision.default or precision.<node> at bf16 / int8) are checked
// against their own tolerance instead, on the whole output: bf16 cos >= 0.999 and relative
// l2 <= 3e-2, int8 cos >= 0.99 and relative l2 <= 0.15 (tests/unit/precision_test.cc says why).
//
// A route may pin a tactic that is not applicable on the graph other knobs produced (a pass off
// leaves a node with another signature, builder.prune drops it): build_plan refuses those with
// invalid_argument. They are counted apart and must stay a minority. Every other failure, and
// every mismatch, fails the test and prints the route to replay it with `tactician build`.
#include <chrono>
#include <filesystem>
#include <random>

#include "builder_test_util.h"
#include "io/onnx_import.h"
#include "io/test_case.h"
#include "tuner/accuracy.h"

namespace tac {
namespace {

struct ModelCase {
  const char* name;
  int routes;          // how many random routes to draw
  bool allow_isolated; // builder.selection=isolated times every tactic: only on small models
};

// Counts are set so the whole test stays well under a minute on 2 cores.
constexpr ModelCase kModels[] = {
    {"mnist-cntk", 30, true},       {"super-resolution", 10, true}, {"bert-toy", 20, true},
    {"tiny-gpt", 24, true},         {"squeezenet1.1", 12, false},   {"mobilenet_v2", 8, false},
    {"resnet18", 8, false},
};

constexpr uint64_t kSeed = 20261202;

std::string dims_flags(const builder::BuildOptions& opts) {
  std::string s;
  for (const auto& [k, v] : opts.dims) s += " --dim " + k + "=" + std::to_string(v);
  return s;
}

// Binds symbolic input dims from the test inputs (as `tactician check` does).
builder::BuildOptions options_for(const ir::Model& m, const std::vector<Datum>& inputs) {
  builder::BuildOptions opts;
  Status st = builder::bind_dims(m.graph, inputs, opts);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return opts;
}

builder::Route random_route(const builder::KnobSpace& space, const ModelCase& mc, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto pick = [&](const std::vector<std::string>& v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
  builder::Route r;
  // Per route, how eagerly knobs are set: from "one or two knobs" to "most knobs".
  const double p_global = 0.15 + 0.6 * u(rng);
  std::vector<const builder::Knob*> tactic_knobs;
  for (const builder::Knob& k : space.knobs()) {
    if (k.scope != builder::KnobScope::global) {
      if (k.values.size() > 1) tactic_knobs.push_back(&k);
      continue;
    }
    if (k.name == "threads") {
      if (u(rng) < p_global) r.values[k.name] = u(rng) < 0.5 ? "1" : "2";  // this machine's cores
      continue;
    }
    if (k.name == "builder.selection") {
      if (mc.allow_isolated && u(rng) < 0.15) r.values[k.name] = "isolated";
      continue;
    }
    if (u(rng) < p_global) r.values[k.name] = pick(k.values);
  }
  // Tactic pins: a random number of random nodes, each pinned to a random value (may be "auto").
  // Pins and builder.prune are not combined: a pin outside the top-K is refused by design (that
  // is what pruning means; BuilderPrune.PinOutsideTheTopKIsRefused covers it), and with a dozen
  // tactics per conv most random pin sets would be.
  if (!tactic_knobs.empty() && !(r.values.count("builder.prune") && r.values["builder.prune"] != "0")) {
    const size_t n_pins = std::uniform_int_distribution<size_t>(0, std::min<size_t>(tactic_knobs.size(), 12))(rng);
    std::shuffle(tactic_knobs.begin(), tactic_knobs.end(), rng);
    for (size_t i = 0; i < n_pins; ++i) r.values[tactic_knobs[i]->name] = pick(tactic_knobs[i]->values);
  }
  return r;
}

// MODELS.md: |got - want| <= atol·max(1, max|want|) + rtol·|want|, rtol 1e-3, atol 1e-4.
std::string compare_with_expected(const std::vector<Tensor>& got, const std::vector<Datum>& expected) {
  std::vector<Tensor> want;
  double scale = 1.0;
  for (const Datum& d : expected) {
    want.push_back(d.tensor);
    for (int64_t i = 0; i < d.tensor.numel(); ++i) scale = std::max(scale, std::fabs(d.tensor.get_f64(i)));
  }
  return test::compare_outputs(got, want, 1e-4 * scale, 1e-3);
}

// The lowest precision a route asks for: "fp32", "bf16" or "int8".
std::string route_precision(const builder::Route& r) {
  std::string lowest = "fp32";
  for (const auto& [k, v] : r.values) {
    if (k.rfind("precision.", 0) != 0) continue;
    if (v == "int8") lowest = "int8";
    else if (v == "bf16" && lowest == "fp32") lowest = "bf16";
  }
  return lowest;
}

std::string compare_lowp(const std::vector<Tensor>& got, const std::vector<Datum>& expected, const std::string& precision) {
  const double cos_min = precision == "bf16" ? 0.999 : 0.99, l2_max = precision == "bf16" ? 3e-2 : 0.15;
  if (got.size() != expected.size()) return "output count differs";
  for (size_t o = 0; o < got.size(); ++o) {
    auto m = tuner::compute_metrics(got[o], expected[o].tensor, 1e-4, 1e-3);
    if (!m) return m.status().to_string();
    if (!m->finite || !(m->cos >= cos_min) || !(m->l2 <= l2_max))
      return precision + " output " + std::to_string(o) + ": cos " + std::to_string(m->cos) + ", l2 " +
             std::to_string(m->l2) + " (wanted cos >= " + std::to_string(cos_min) + ", l2 <= " + std::to_string(l2_max) + ")";
  }
  return "";
}

enum class Outcome { ok, pin_refused, failed };

// Builds `route`, runs test data set 0 and compares with its expected outputs. Failures other
// than an inapplicable pin are test failures (fold_constants=off routes too: the shape chains it
// leaves unfolded become dynamic steps) that print the replay command.
Outcome check_route(const ir::Model& model, const builder::Route& route, const builder::BuildOptions& opts,
                    const io::TestDataSet& set, const std::string& replay) {
  auto plan = builder::build_plan(model, route, opts);
  if (!plan) {
    const Status& st = plan.status();
    if (st.kind() == ErrorKind::invalid_argument && st.message().find("is not a candidate") != std::string::npos)
      return Outcome::pin_refused;
    ADD_FAILURE() << "build failed: " << st.to_string() << "\n  replay: " << replay;
    return Outcome::failed;
  }
  auto engine = runtime::Engine::create(std::move(plan).value());
  if (!engine) {
    ADD_FAILURE() << "engine creation failed: " << engine.status().to_string() << "\n  replay: " << replay;
    return Outcome::failed;
  }
  std::vector<Tensor> inputs;
  for (const Datum& d : set.inputs) inputs.push_back(d.tensor);
  auto got = (*engine)->run(inputs);
  if (!got) {
    ADD_FAILURE() << "run failed: " << got.status().to_string() << "\n  replay: " << replay;
    return Outcome::failed;
  }
  const std::string precision = route_precision(route);
  std::string diff = precision == "fp32" ? compare_with_expected(*got, set.outputs) : compare_lowp(*got, set.outputs, precision);
  if (!diff.empty()) {
    ADD_FAILURE() << "outputs differ from " << set.dir << ": " << diff << "\n  replay: " << replay;
    return Outcome::failed;
  }
  return Outcome::ok;
}

TEST(BuilderRoutesProperty, RandomValidRoutesOnSharedModelsBuildAndPassCheck) {
  const std::string zoo = TAC_MODELS_DIR;
  if (!std::filesystem::exists(zoo)) GTEST_SKIP() << "no model zoo at " << zoo;
  std::mt19937_64 rng(kSeed);
  int built = 0, pin_refused = 0, models = 0;
  const auto t_start = std::chrono::steady_clock::now();
  for (const ModelCase& mc : kModels) {
    const std::string dir = zoo + "/" + mc.name;
    if (!std::filesystem::exists(dir + "/model.onnx")) {
      ADD_FAILURE() << "model missing from the zoo: " << dir;
      continue;
    }
    SCOPED_TRACE(mc.name);
    const auto t_model = std::chrono::steady_clock::now();
    auto model = io::load_model(dir + "/model.onnx");
    ASSERT_TRUE(model.is_ok()) << model.status().to_string();
    auto data = io::load_test_data(*model, dir);
    ASSERT_TRUE(data.is_ok() && !data->empty()) << data.status().to_string();
    const io::TestDataSet& set = (*data)[0];
    const builder::BuildOptions opts = options_for(*model, set.inputs);
    auto space = builder::knob_space(*model, opts);
    ASSERT_TRUE(space.is_ok()) << space.status().to_string();
    ++models;
    int model_refused = 0, model_built = 0;
    for (int i = 0; i < mc.routes; ++i) {
      // The first route of each model is the default one; each drawn route gets a layout too
      // (so every model meets the layout rewrite, over the other knobs' random values).
      builder::Route route = i == 0 ? builder::Route{} : random_route(*space, mc, rng);
      if (i > 0 && !route.values.count("layout.default"))
        route.values["layout.default"] = i % 2 ? "blocked" : "nhwc";
      const std::string replay = "tactician build " + dir + "/model.onnx" + dims_flags(opts) + " --route \"" +
                                 route.to_string() + "\"";
      Outcome out = check_route(*model, route, opts, set, replay);
      if (out == Outcome::pin_refused) {
        ++pin_refused;
        ++model_refused;
      }
      if (out == Outcome::ok) {
        ++built;
        ++model_built;
      }
    }
    EXPECT_LT(2 * model_refused, mc.routes) << "most routes pinned inapplicable tactics: the generator or the knob "
                                               "space is off";
    std::printf("[ property ] %-18s %d routes: %d built and checked, %d refused pins, %.1f s\n",
                mc.name, mc.routes, model_built, model_refused,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t_model).count());
  }
  std::printf("[ property ] %d models, %d routes built and checked, %d refused for an inapplicable pin, %.1f s\n",
              models, built, pin_refused, std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  EXPECT_LT(pin_refused, built) << "inapplicable pins must be a minority";
}

}  // namespace
}  // namespace tac

namespace tac {
namespace {

// Issue 32: a knob read under a name the knob space does not declare (a typo such as
// "memory.inplac" once read as silently "off") is an internal error naming it, not a default.
TEST(RouteView, UndeclaredKnobReadsAreReported) {
  builder::KnobSpace space;
  space.add({builder::knob::kInplace, {"on", "off"}, "on", "", builder::KnobScope::global});
  space.add({"tactic.conv_1", {"auto", "onednn"}, "auto", "", builder::KnobScope::node});
  builder::Route route;
  route.values["tactic.conv_1"] = "onednn";
  builder::RouteView view(route, space);
  EXPECT_TRUE(view.on(builder::knob::kInplace));
  EXPECT_EQ(view.get_node(builder::knob::kTactic, "conv_1"), "onednn");
  EXPECT_EQ(view.get_node(builder::knob::kTactic, "relu_2"), "");  // a node without the knob: not an error
  EXPECT_TRUE(view.check_declared().is_ok());
  EXPECT_FALSE(view.on("memory.inplac"));
  Status st = view.check_declared();
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.kind(), ErrorKind::internal);
  EXPECT_NE(st.message().find("'memory.inplac'"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tac
