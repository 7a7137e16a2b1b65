// Routes: text form parsing, validation against the knob space, and the knob space itself.
#include <cmath>
#include <filesystem>
#include <set>

#include "builder_test_util.h"
#include "io/onnx_import.h"

namespace tac {
namespace {

using builder::KnobSpace;
using builder::Route;
using test::ModelBuilder;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Conv -> Relu -> MatMul: nodes with several tactics each, and the fusion passes apply.
ir::Model small_model() {
  ModelBuilder m(17);
  m.input("x", 1, {"1", "3", "8", "8"});
  test::initializer_random(m, "w", {4, 3, 3, 3}, 11, 0.3f);
  auto* c = m.node("Conv", {"x", "w"}, {"c"}, "conv0");
  test::attr_ints(c, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"}, "relu0");
  test::initializer_random(m, "b", {8, 5}, 12);
  m.node("MatMul", {"r", "b"}, {"y"}, "mm0");
  m.output("y", 1, {});
  auto model = m.load();
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  return std::move(model).value();
}

KnobSpace space_of(const ir::Model& m) {
  auto s = builder::knob_space(m, {});
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return std::move(s).value();
}

TEST(BuilderRoute, ParsesPairsAcrossSpacesNewlinesAndComments) {
  auto r = Route::parse("# a route file\n  pass.fuse_conv=off\tthreads=1 # trailing comment\n\n"
                        "memory.planner=no_reuse\n#builder.prune=3\n");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->values.size(), 3u);
  EXPECT_EQ(r->values.at("pass.fuse_conv"), "off");
  EXPECT_EQ(r->values.at("threads"), "1");
  EXPECT_EQ(r->values.at("memory.planner"), "no_reuse");
  EXPECT_EQ(r->values.count("builder.prune"), 0u) << "a commented-out pair must be ignored";
  // '#' ends the value too.
  auto c = Route::parse("memory.inplace=off#no reuse in place");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->values.at("memory.inplace"), "off");
}

TEST(BuilderRoute, EmptyTextIsTheDefaultRoute) {
  for (const char* text : {"", "   \n\t\n", "# only a comment\n"}) {
    auto r = Route::parse(text);
    ASSERT_TRUE(r.is_ok()) << text;
    EXPECT_TRUE(r->empty()) << text;
    EXPECT_EQ(r->to_string(), "");
  }
}

TEST(BuilderRoute, CanonicalTextIsSortedAndRoundTrips) {
  auto r = Route::parse("threads=1\nmemory.planner=no_reuse pass.fuse_conv=off");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->to_string(), "memory.planner=no_reuse pass.fuse_conv=off threads=1");
  auto again = Route::parse(r->to_string());
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->values, r->values);
}

TEST(BuilderRoute, MalformedPairsAreErrorsQuotingThePair) {
  for (const char* bad : {"pass.fuse_conv", "=off", "pass.fuse_conv=", "threads=1 memory.planner"}) {
    auto r = Route::parse(bad);
    ASSERT_FALSE(r.is_ok()) << "'" << bad << "' parsed";
    EXPECT_EQ(r.status().kind(), ErrorKind::invalid_argument);
    EXPECT_TRUE(contains(r.status().message(), "knob=value")) << r.status().message();
  }
  auto r = Route::parse("threads=1 memory.planner");
  EXPECT_TRUE(contains(r.status().message(), "'memory.planner'")) << r.status().message();
}

TEST(BuilderRoute, AKnobSetTwiceWithDifferentValuesIsAnError) {
  auto r = Route::parse("pass.fuse_conv=on\nthreads=1\npass.fuse_conv=off");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::invalid_argument);
  const std::string& msg = r.status().message();
  EXPECT_TRUE(contains(msg, "pass.fuse_conv") && contains(msg, "twice")) << msg;
  EXPECT_TRUE(contains(msg, "'on'") && contains(msg, "'off'")) << msg;
}

TEST(BuilderRoute, UnknownKnobIsRejectedByName) {
  ir::Model m = small_model();
  KnobSpace space = space_of(m);
  for (const char* name : {"pass.fold_batchnrom", "bogus", "tactic.no_such_node", "memory.plannr"}) {
    Route r;
    r.values[name] = "on";
    Status st = builder::validate_route(r, space);
    ASSERT_FALSE(st.is_ok()) << name;
    EXPECT_EQ(st.kind(), ErrorKind::invalid_argument);
    EXPECT_TRUE(contains(st.message(), std::string("unknown knob '") + name + "'")) << st.message();
  }
  // A typo in the suffix suggests the knobs with the same prefix.
  Route r;
  r.values["pass.fold_batchnrom"] = "off";
  Status st = builder::validate_route(r, space);
  EXPECT_TRUE(contains(st.message(), "pass.fold_batchnorm")) << st.message();
}

TEST(BuilderRoute, OutOfDomainValueNamesTheKnobAndListsTheAllowedValues) {
  ir::Model m = small_model();
  KnobSpace space = space_of(m);
  struct Case {
    const char* knob;
    const char* value;
    std::vector<std::string> allowed;
  };
  const Case cases[] = {
      {"memory.planner", "fastest", {"greedy_by_size", "greedy_by_order", "no_reuse"}},
      {"pass.fuse_conv", "maybe", {"on", "off"}},
      {"memory.inplace", "1", {"on", "off"}},
      {"builder.prune", "9", {"0", "1", "8"}},
      {"builder.selection", "route", {"heuristic", "isolated"}},
      {"threads", "0", {"1"}},
      {"tactic.conv0", "no_such_tactic", {"auto"}},
  };
  for (const Case& c : cases) {
    Route r;
    r.values[c.knob] = c.value;
    Status st = builder::validate_route(r, space);
    ASSERT_FALSE(st.is_ok()) << c.knob << "=" << c.value;
    EXPECT_EQ(st.kind(), ErrorKind::invalid_argument);
    EXPECT_TRUE(contains(st.message(), std::string("'") + c.knob + "'")) << st.message();
    EXPECT_TRUE(contains(st.message(), std::string("'") + c.value + "'")) << st.message();
    EXPECT_TRUE(contains(st.message(), "allowed:")) << st.message();
    for (const std::string& a : c.allowed) EXPECT_TRUE(contains(st.message(), a)) << st.message();
  }
  // Every tactic of the conv knob is listed.
  const builder::Knob* conv = space.find("tactic.conv0");
  ASSERT_NE(conv, nullptr);
  Route r;
  r.values["tactic.conv0"] = "no_such_tactic";
  Status st = builder::validate_route(r, space);
  for (const std::string& t : conv->values) EXPECT_TRUE(contains(st.message(), t)) << t << " missing in " << st.message();
}

TEST(BuilderRoute, EveryValueOfEveryKnobValidates) {
  ir::Model m = small_model();
  KnobSpace space = space_of(m);
  for (const builder::Knob& k : space.knobs())
    for (const std::string& v : k.values) {
      Route r;
      r.values[k.name] = v;
      EXPECT_TRUE(builder::validate_route(r, space).is_ok()) << k.name << "=" << v;
    }
}

TEST(BuilderRoute, BuildPlanRefusesBadRoutesAsInvalidArgument) {
  ir::Model m = small_model();
  for (const char* text : {"pass.fuse_cnv=off", "memory.planner=fastest", "tactic.conv0=nope"}) {
    auto route = Route::parse(text);
    ASSERT_TRUE(route.is_ok());
    auto plan = builder::build_plan(m, *route, {});
    ASSERT_FALSE(plan.is_ok()) << text;
    EXPECT_EQ(plan.status().kind(), ErrorKind::invalid_argument) << plan.status().to_string();
    std::string knob = std::string(text).substr(0, std::string(text).find('='));
    EXPECT_TRUE(contains(plan.status().message(), knob)) << plan.status().message();
  }
}

// BuildOptions::knobs: a caller's knob space is the one build_plan validates against and reads
// (not recomputed), and with the model's own space the plan is the same as without it.
TEST(BuilderRoute, BuildPlanUsesTheKnobSpaceItIsGiven) {
  ir::Model m = small_model();
  auto route = Route::parse("tactic.conv0=reference pass.fuse_conv=off");
  ASSERT_TRUE(route.is_ok());
  auto plain = builder::build_plan(m, *route, {});
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  builder::BuildOptions given;
  given.knobs = std::make_shared<const KnobSpace>(space_of(m));
  auto with = builder::build_plan(m, *route, given);
  ASSERT_TRUE(with.is_ok()) << with.status().to_string();
  ASSERT_EQ(with->steps.size(), plain->steps.size());
  for (size_t i = 0; i < plain->steps.size(); ++i) EXPECT_EQ(with->steps[i].tactic, plain->steps[i].tactic) << i;
  EXPECT_EQ(with->route, plain->route);
  EXPECT_EQ(with->arena_bytes, plain->arena_bytes);
  // A space without conv0's tactic knob: the route's pin is now an unknown knob.
  KnobSpace partial;
  const KnobSpace full = space_of(m);
  for (const builder::Knob& k : full.knobs())
    if (k.name != "tactic.conv0") partial.add(k);
  given.knobs = std::make_shared<const KnobSpace>(std::move(partial));
  auto refused = builder::build_plan(m, *route, given);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().kind(), ErrorKind::invalid_argument) << refused.status().to_string();
  EXPECT_TRUE(contains(refused.status().message(), "tactic.conv0")) << refused.status().message();
}

TEST(BuilderKnobSpace, DeclaresGlobalPassAndTacticKnobsWithValidDefaults) {
  ir::Model m = small_model();
  KnobSpace space = space_of(m);
  std::set<std::string> names;
  for (const builder::Knob& k : space.knobs()) {
    EXPECT_TRUE(names.insert(k.name).second) << "knob declared twice: " << k.name;
    EXPECT_FALSE(k.values.empty()) << k.name;
    EXPECT_NE(std::find(k.values.begin(), k.values.end(), k.default_value), k.values.end())
        << k.name << ": default '" << k.default_value << "' is not one of its values";
    EXPECT_FALSE(k.help.empty()) << k.name;
  }
  for (const char* k : {"threads", "builder.selection", "builder.prune", "memory.planner", "memory.inplace",
                        "pass.fold_constants", "pass.eliminate_identity", "pass.fold_batchnorm", "pass.fuse_conv",
                        "pass.fuse_matmul"})
    EXPECT_TRUE(names.count(k)) << "missing knob " << k;
  // One tactic knob per node, over the default graph and the graph with fusions off, so the
  // Relu that fuse_conv absorbs still has a knob.
  for (const char* node : {"conv0", "relu0", "mm0"}) {
    const builder::Knob* k = space.find(std::string("tactic.") + node);
    ASSERT_NE(k, nullptr) << node;
    EXPECT_EQ(k->scope, builder::KnobScope::node);
    EXPECT_EQ(k->default_value, "auto");
    EXPECT_GE(k->values.size(), 2u) << node << ": auto and at least one tactic";
  }
  // The empty route reads every knob's default.
  Route empty;
  builder::RouteView view(empty, space);
  for (const builder::Knob& k : space.knobs()) EXPECT_EQ(view.get(k.name), k.default_value);
  EXPECT_TRUE(view.on("pass.fuse_conv"));
  Route r;
  r.values["builder.prune"] = "3";
  EXPECT_EQ(builder::RouteView(r, space).get_int("builder.prune"), 3);
}

// The reference fallback stays a value (pinnable) but is not searched where a real kernel
// applies; a node whose only kernel is the reference still searches it.
TEST(BuilderKnobSpace, TheReferenceFallbackIsPinnableButNotSearched) {
  ir::Model m = small_model();
  KnobSpace space = space_of(m);
  for (const char* node : {"conv0", "mm0"}) {
    const builder::Knob* k = space.find(std::string("tactic.") + node);
    ASSERT_NE(k, nullptr) << node;
    EXPECT_NE(std::find(k->values.begin(), k->values.end(), "reference"), k->values.end()) << node;
    ASSERT_GE(k->search_values.size(), 2u) << node;
    EXPECT_EQ(std::find(k->search_values.begin(), k->search_values.end(), "reference"), k->search_values.end()) << node;
  }
  ModelBuilder mb(17);  // Det: only the reference kernel computes it
  mb.input("a", 1, {"2", "3", "3"});
  mb.node("Det", {"a"}, {"d"}, "det0");
  mb.output("d", 1, {});
  auto model = mb.load();
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  KnobSpace only_ref = space_of(*model);
  const builder::Knob* k = only_ref.find("tactic.det0");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->search_values, (std::vector<std::string>{"auto", "reference"}));
}

TEST(BuilderKnobSpace, JsonListsEveryKnob) {
  ir::Model m = small_model();
  KnobSpace space = space_of(m);
  std::string j = space.to_json();
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j.front(), '[');
  EXPECT_EQ(j.back(), ']');
  for (const builder::Knob& k : space.knobs()) EXPECT_TRUE(contains(j, "\"name\": \"" + k.name + "\"")) << k.name;
}

}  // namespace
}  // namespace tac

namespace tac {
namespace {

// builder.prune=K keeps only the top-K ranked tactics: the plan takes the top-ranked one and a
// pin outside the top K is refused naming the knob (the classic pruning, reproduced on demand).
// builder.selection=isolated times a tactic once per kind of step: two MatMuls of the same
// signature get the same measured times (two timings would not agree to the last bit), and the
// catch-all reference kernel is not timed (NaN) where real kernels apply.
TEST(BuilderSelection, IsolatedTimesEachKindOfStepOnceAndNotTheCatchAll) {
  ModelBuilder mb(17);
  mb.input("x", 1, {"4", "16"});
  test::initializer_random(mb, "w1", {16, 16}, 21);
  test::initializer_random(mb, "w2", {16, 16}, 22);
  mb.node("MatMul", {"x", "w1"}, {"h"}, "mm1");
  mb.node("MatMul", {"h", "w2"}, {"y"}, "mm2");
  mb.output("y", 1, {});
  auto m = mb.load();
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto route = Route::parse("builder.selection=isolated threads=1");
  ASSERT_TRUE(route.is_ok());
  auto plan = builder::build_plan(*m, *route, {});
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  std::map<std::string, const builder::TacticRanking*> by_node;
  for (const builder::TacticRanking& rk : plan->report.rankings) by_node[rk.node] = &rk;
  ASSERT_TRUE(by_node.count("mm1") && by_node.count("mm2"));
  const auto &a = *by_node["mm1"], &b = *by_node["mm2"];
  EXPECT_EQ(a.why, "isolated");
  ASSERT_EQ(a.candidates.size(), b.candidates.size());
  ASSERT_GT(a.candidates.size(), 2u);
  int timed = 0;
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    const auto& [name, cost] = a.candidates[i];
    EXPECT_EQ(name, b.candidates[i].first);
    if (name == "reference") {
      EXPECT_TRUE(std::isnan(cost)) << cost;
      continue;
    }
    EXPECT_GT(cost, 0) << name;
    EXPECT_EQ(cost, b.candidates[i].second) << name;
    ++timed;
  }
  EXPECT_GE(timed, 2);
}

TEST(BuilderPrune, PinOutsideTheTopKIsRefused) {
  const std::string path = std::string(TAC_MODELS_DIR) + "/mnist-cntk/model.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no model zoo";
  auto model = io::load_model(path);
  ASSERT_TRUE(model.is_ok());
  auto plain = builder::build_plan(*model, *builder::Route::parse("threads=1"), {});
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  const builder::TacticRanking* conv = nullptr;
  for (const auto& r : plain->report.rankings)
    if (r.op == "FusedConv" || r.op == "Conv") conv = &r;
  ASSERT_NE(conv, nullptr);
  ASSERT_GE(conv->candidates.size(), 2u) << "a conv with a single tactic cannot show pruning";
  const std::string top = conv->candidates[0].first, second = conv->candidates[1].first;
  auto pruned = builder::build_plan(*model, *builder::Route::parse("threads=1 builder.prune=1"), {});
  ASSERT_TRUE(pruned.is_ok()) << pruned.status().to_string();
  for (const auto& r : pruned->report.rankings) EXPECT_EQ(r.candidates.size(), 1u) << r.node;
  auto pinned_ok = builder::build_plan(
      *model, *builder::Route::parse("threads=1 builder.prune=2 tactic." + conv->node + "=" + second), {});
  EXPECT_TRUE(pinned_ok.is_ok()) << pinned_ok.status().to_string();
  auto refused = builder::build_plan(
      *model, *builder::Route::parse("threads=1 builder.prune=1 tactic." + conv->node + "=" + second), {});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().kind(), ErrorKind::invalid_argument);
  EXPECT_NE(refused.status().message().find("tactic." + conv->node), std::string::npos) << refused.status().message();
  (void)top;
}

}  // namespace
}  // namespace tac
