// The tuning loop end to end on a small model: candidates evaluated in child processes, recorded
// in the database, resumed on a second run; durations and search spaces.
#include "tuner/tune.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <thread>

#include "tuner/database.h"
#include "tuner/evaluator.h"
#include "tuner/interrupt.h"

namespace tac::tuner {
namespace {

namespace fs = std::filesystem;

TEST(TuneDuration, ParsesUnitsAndRejectsJunk) {
  EXPECT_DOUBLE_EQ(*parse_duration("90s"), 90);
  EXPECT_DOUBLE_EQ(*parse_duration("10m"), 600);
  EXPECT_DOUBLE_EQ(*parse_duration("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*parse_duration("45"), 45);
  for (const char* bad : {"", "m", "10x", "-5s", "0s"}) EXPECT_FALSE(parse_duration(bad).is_ok()) << bad;
}

TEST(TuneSpace, GroupsNodesBySignatureAndHonoursGlobs) {
  builder::KnobSpace ks;
  ks.add(builder::searched(builder::Searched::never, {"threads", {"1", "2"}, "2", "", builder::KnobScope::global}));
  ks.add({"memory.planner", {"a", "b", "c"}, "a", "", builder::KnobScope::global});
  ks.add(builder::searched(builder::Searched::with_user_tolerance,
                           {"precision.default", {"fp32", "bf16"}, "fp32", "", builder::KnobScope::global}));
  ks.add(builder::searched(builder::Searched::when_named,
                           {"builder.prune", {"0", "1", "2"}, "0", "", builder::KnobScope::global}));
  ks.add({"tactic.c1", {"auto", "x", "y"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.c2", {"auto", "x", "y", "z"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.c3", {"auto", "x"}, "auto", "", builder::KnobScope::node, "Conv(sig2)"});
  auto all = make_search_space(ks, {});
  ASSERT_TRUE(all.is_ok());
  // threads is fixed by the caller, builder.* and precision.* are searched only when named: 3
  // dimensions remain.
  ASSERT_EQ(all->dims.size(), 3u);
  EXPECT_EQ(all->dims[0].name, "memory.planner");
  EXPECT_EQ(all->dims[1].knobs, (std::vector<std::string>{"tactic.c1", "tactic.c2"}));
  EXPECT_EQ(all->dims[1].values, (std::vector<std::string>{"auto", "x", "y"}));  // common to the group
  EXPECT_EQ(all->size(), 3u * 3u * 2u);
  auto classic = make_search_space(ks, {"builder.prune"});
  ASSERT_TRUE(classic.is_ok());
  EXPECT_EQ(classic->dims.size(), 1u);
  auto precision = make_search_space(ks, {"precision.*"});
  ASSERT_TRUE(precision.is_ok());
  EXPECT_EQ(precision->dims.size(), 1u);
  // A tolerance of the user's own (with_precision) adds the precision knobs to the whole space;
  // builder.* still needs naming.
  auto with_precision = make_search_space(ks, {}, {}, true);
  ASSERT_TRUE(with_precision.is_ok());
  ASSERT_EQ(with_precision->dims.size(), 4u);
  EXPECT_EQ(with_precision->dims[1].name, "precision.default");
  EXPECT_EQ(with_precision->dims[1].values, (std::vector<std::string>{"fp32", "bf16"}));
  auto only = make_search_space(ks, {"tactic.c3"});
  ASSERT_TRUE(only.is_ok());
  ASSERT_EQ(only->dims.size(), 1u);
  EXPECT_FALSE(make_search_space(ks, {"nosuch.*"}).is_ok());
  // The policy is the knob's field, not its name: a knob of any name declared when_named is left
  // out until named, and one named builder.* declared by_default is searched.
  builder::KnobSpace renamed;
  renamed.add(builder::searched(builder::Searched::when_named, {"memory.exotic", {"a", "b"}, "a", "",
                                                                builder::KnobScope::global}));
  renamed.add({"builder.plain", {"a", "b"}, "a", "", builder::KnobScope::global});
  auto by_field = make_search_space(renamed, {});
  ASSERT_TRUE(by_field.is_ok());
  ASSERT_EQ(by_field->dims.size(), 1u);
  EXPECT_EQ(by_field->dims[0].name, "builder.plain");
  builder::Route r = route_of(*all, {1, 2, 0});
  EXPECT_EQ(r.to_string(), "memory.planner=b tactic.c1=y tactic.c2=y");
  // Fixed settings (tune --route) are not searched; every route of the space carries them.
  auto fixed = make_search_space(ks, {}, builder::Route::parse("memory.planner=c threads=2").value());
  ASSERT_TRUE(fixed.is_ok());
  ASSERT_EQ(fixed->dims.size(), 2u);
  EXPECT_EQ(fixed->dims[0].knobs, (std::vector<std::string>{"tactic.c1", "tactic.c2"}));
  EXPECT_EQ(route_of(*fixed, {0, 0}).to_string(), "memory.planner=c");
  EXPECT_EQ(route_of(*fixed, {2, 1}).to_string(), "memory.planner=c tactic.c1=y tactic.c2=y tactic.c3=x");
}

TEST(TuneSpace, RefinesTheGroupsCarryingTheMostTimePerNode) {
  builder::KnobSpace ks;
  ks.add(builder::searched(builder::Searched::never, {"threads", {"1", "2"}, "2", "", builder::KnobScope::global}));
  ks.add({"memory.planner", {"a", "b"}, "a", "", builder::KnobScope::global});
  ks.add({"tactic.c1", {"auto", "x", "y"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.c2", {"auto", "x", "y", "z"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.m1", {"auto", "p", "q"}, "auto", "", builder::KnobScope::node, "MatMul(sig3)"});
  ks.add({"tactic.m2", {"auto", "p", "q"}, "auto", "", builder::KnobScope::node, "MatMul(sig3)"});
  ks.add({"tactic.c3", {"auto", "x"}, "auto", "", builder::KnobScope::node, "Conv(sig2)"});
  auto grouped = make_search_space(ks, {});
  ASSERT_TRUE(grouped.is_ok());
  ASSERT_EQ(grouped->dims.size(), 4u);  // memory.planner, Conv(sig1), MatMul(sig3), tactic.c3
  builder::Route inc;
  inc.values = {{"memory.planner", "b"}, {"tactic.m1", "q"}, {"tactic.m2", "q"}};
  // The MatMul group carries more time than the Conv group; only one group is refined.
  std::map<std::string, double> ms = {{"c1", 1.0}, {"c2", 1.5}, {"m1", 2.0}, {"m2", 1.0}, {"c3", 9.0}};
  auto r = make_refine_space(*grouped, ks, inc, ms, 1);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->dims.size(), 2u);
  EXPECT_EQ(r->dims[0].name, "tactic.m1");
  EXPECT_EQ(r->dims[1].name, "tactic.m2");
  EXPECT_EQ(r->dims[0].values[static_cast<size_t>(r->dims[0].default_index)], "q");  // the incumbent's value
  // The default point is the incumbent; moving one node changes only that node.
  EXPECT_EQ(route_of(*r, default_point(*r)).to_string(), inc.to_string());
  Point p = default_point(*r);
  p[1] = 1;  // tactic.m2 = p
  EXPECT_EQ(route_of(*r, p).to_string(), "memory.planner=b tactic.m1=q tactic.m2=p");
  // Two groups: the Conv group's nodes get all their own values (c2 has z, not common to c1).
  auto r2 = make_refine_space(*grouped, ks, inc, ms, 4);
  ASSERT_TRUE(r2.is_ok());
  ASSERT_EQ(r2->dims.size(), 4u);
  EXPECT_EQ(r2->dims[3].name, "tactic.c2");
  EXPECT_EQ(r2->dims[3].values.size(), 4u);
  // Without profile times nothing is refined.
  auto none = make_refine_space(*grouped, ks, inc, {}, 4);
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->dims.empty());
}

TEST(TuneSpace, IsolatedSeedPinsWhatDiffersAndVotesPerGroup) {
  builder::KnobSpace ks;
  ks.add(builder::searched(builder::Searched::never, {"threads", {"1", "2"}, "2", "", builder::KnobScope::global}));
  ks.add({"memory.planner", {"a", "b"}, "a", "", builder::KnobScope::global});
  ks.add({"tactic.c1", {"auto", "x", "y"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.c2", {"auto", "x", "y"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.c3", {"auto", "x", "y"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.m1", {"auto", "p", "q"}, "auto", "", builder::KnobScope::node, "MatMul(sig3)"});
  ks.add({"tactic.m2", {"auto", "p", "q"}, "auto", "", builder::KnobScope::node, "MatMul(sig3)"});
  auto space = make_search_space(ks, {});
  ASSERT_TRUE(space.is_ok());
  ASSERT_EQ(space->dims.size(), 3u);  // memory.planner, Conv(sig1), MatMul(sig3)
  // The default build chose x everywhere in the Conv group and p in the MatMul group; isolated
  // timing chose y on c1 and c2 (a majority), x on c3; q on m1 only (one against one: a tie).
  // "unknown" is no value of any knob (a tactic a route cannot pin) and "gone" no knob.
  const std::map<std::string, std::string> def = {{"c1", "x"}, {"c2", "x"}, {"c3", "x"}, {"m1", "p"}, {"m2", "p"}};
  const std::map<std::string, std::string> iso = {{"c1", "y"}, {"c2", "y"}, {"c3", "x"}, {"m1", "q"},
                                                  {"m2", "unknown"}, {"gone", "x"}};
  IsolatedSeed s = isolated_seed(*space, ks, builder::Route::parse("memory.planner=b").value(), def, iso);
  EXPECT_EQ(s.pinned, 3u);
  EXPECT_EQ(s.exact.to_string(), "memory.planner=b tactic.c1=y tactic.c2=y tactic.m1=q");
  ASSERT_EQ(s.grouped.size(), 3u);
  EXPECT_EQ(s.grouped[0], space->dims[0].default_index);  // not a tactic dimension
  EXPECT_EQ(space->dims[1].values[static_cast<size_t>(s.grouped[1])], "y");  // 2 of 3 nodes
  EXPECT_EQ(space->dims[2].values[static_cast<size_t>(s.grouped[2])], "auto");  // the tie keeps the default
  // A setting the caller fixed is never overridden by the seed.
  IsolatedSeed f = isolated_seed(*space, ks, builder::Route::parse("tactic.c1=x").value(), def, iso);
  EXPECT_EQ(f.exact.values.at("tactic.c1"), "x");
  EXPECT_EQ(f.pinned, 2u);
  // Nothing differs: nothing pinned, the grouped point is the default point.
  IsolatedSeed same = isolated_seed(*space, ks, {}, def, def);
  EXPECT_EQ(same.pinned, 0u);
  EXPECT_EQ(same.grouped, default_point(*space));
}

TEST(TuneSpace, WeighsDimensionsByTheTimeTheirNodesCarry) {
  builder::KnobSpace ks;
  ks.add({"memory.planner", {"a", "b"}, "a", "", builder::KnobScope::global});
  ks.add({"tactic.c1", {"auto", "x"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.c2", {"auto", "x"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"layout.c3", {"nchw", "nhwc"}, "nhwc", "", builder::KnobScope::node});
  ks.add({"tactic.m1", {"auto", "p"}, "auto", "", builder::KnobScope::node, "MatMul(sig3)"});
  auto space = make_search_space(ks, {});
  ASSERT_TRUE(space.is_ok());
  ASSERT_EQ(space->dims.size(), 4u);  // memory.planner, Conv(sig1) group, layout.c3, tactic.m1
  SearchSpace unweighted = *space;
  weigh_by_time(unweighted, {});  // no profile: unchanged
  for (const Dimension& d : unweighted.dims) EXPECT_DOUBLE_EQ(d.weight, 1);
  // Node dims: group 3+5 = 8 ms, c3 4 ms, m1 0 ms (floored at a tenth of the 4 ms mean); the
  // global memory.planner gets the mean, 4. Raw 4, 8, 4, 0.4 (sum 16.4), scaled to mean 1.
  weigh_by_time(*space, {{"c1", 3.0}, {"c2", 5.0}, {"c3", 4.0}, {"m1", 0.0}, {"other", 7.0}});
  const double scale = 4.0 / 16.4;
  EXPECT_NEAR(space->dims[0].weight, 4.0 * scale, 1e-12);
  EXPECT_NEAR(space->dims[1].weight, 8.0 * scale, 1e-12);
  EXPECT_NEAR(space->dims[2].weight, 4.0 * scale, 1e-12);
  EXPECT_NEAR(space->dims[3].weight, 0.4 * scale, 1e-12);
}

TEST(TuneSpace, ValuePriorsFollowIsolatedCosts) {
  builder::KnobSpace ks;
  ks.add({"memory.planner", {"a", "b"}, "a", "", builder::KnobScope::global});
  ks.add({"tactic.c1", {"auto", "x", "y", "z"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.c2", {"auto", "x", "y", "z"}, "auto", "", builder::KnobScope::node, "Conv(sig1)"});
  ks.add({"tactic.m1", {"auto", "p", "q"}, "auto", "", builder::KnobScope::node, "MatMul(sig3)"});
  auto space = make_search_space(ks, {});
  ASSERT_TRUE(space.is_ok());
  ASSERT_EQ(space->dims.size(), 3u);
  // c1 and c2: x is the heuristic's choice ("auto"), y the fastest summed (100+100 vs 150+150);
  // z has no cost on c2 (not applicable there). m1 has no costs: its prior stays uniform.
  NodeCosts costs = {{"c1", {{"x", 150}, {"y", 100}, {"z", 300}}}, {"c2", {{"x", 150}, {"y", 100}}}};
  set_value_priors(*space, costs);
  EXPECT_TRUE(space->dims[0].prior.empty());
  EXPECT_TRUE(space->dims[2].prior.empty());
  const std::vector<double>& pr = space->dims[1].prior;  // values auto, x, y, z
  ASSERT_EQ(pr.size(), 4u);
  double total = 0;
  for (double x : pr) total += x;
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(pr[0], pr[1]);  // auto is x
  EXPECT_GT(pr[2], pr[1]);
  EXPECT_NEAR(pr[3], 1.0 / 16, 1e-12);  // no cost on c2: the floor, 1/(4k)
  // y: floor + (3/4) * 1 / (1 + 2 * (100/150)^4).
  const double r4 = std::pow(100.0 / 150.0, 4);
  EXPECT_NEAR(pr[2], 1.0 / 16 + 0.75 / (1 + 2 * r4), 1e-12);
  EXPECT_NEAR(pr[1], 1.0 / 16 + 0.75 * r4 / (1 + 2 * r4), 1e-12);
}

// The tactician binary candidates are evaluated by: this build's, or TACTICIAN_BINARY's where the
// tests run from a package (scripts/pack_gpu.sh sets it; the build tree is not on that machine).
std::string tactician_binary() {
  const char* env = std::getenv("TACTICIAN_BINARY");
  return env && *env ? env : TAC_BINARY;
}

// mnist-cntk's test data as the tuner writes it (input_0.pb, and expected_0.pb with `expected`)
// in a fresh folder removed with the object, and a request for its model at threads=1.
struct MnistRequest {
  fs::path dir;
  EvalRequest rq;
  MnistRequest(const std::string& tag, bool expected) {
    const fs::path zoo = fs::path(TAC_MODELS_DIR) / "mnist-cntk";
    dir = fs::temp_directory_path() / (tag + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(zoo / "test_data_set_0" / "input_0.pb", dir / "input_0.pb");
    if (expected) fs::copy_file(zoo / "test_data_set_0" / "output_0.pb", dir / "expected_0.pb");
    rq.model_path = (zoo / "model.onnx").string();
    rq.data_dir = dir.string();
    rq.route = "threads=1";
  }
  ~MnistRequest() { fs::remove_all(dir); }
  static bool available() { return fs::exists(fs::path(TAC_MODELS_DIR) / "mnist-cntk" / "model.onnx"); }
};

// Runs `evaluate` while another thread asks for an interrupt (SIGINT) half a second in; the
// result and how long it took in `seconds`. The interrupt stays requested.
EvalResult interrupted_midway(const std::function<EvalResult()>& evaluate, double& seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    request_interrupt(SIGINT);
  });
  EvalResult r = evaluate();
  stopper.join();
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Paired timing in one child: both engines built and timed in alternating blocks; a compare route
// that does not build fails the request naming it.
TEST(Evaluator, ComparesTwoRoutesInOneChild) {
  if (!MnistRequest::available()) GTEST_SKIP() << "no model zoo";
  MnistRequest m("tac_eval_cmp_", false);
  EvalRequest& rq = m.rq;
  rq.compare_route = "threads=1 memory.planner=no_reuse pass.fuse_conv=off";
  rq.check = false;
  rq.min_seconds = 0.2;
  rq.compare_rounds = 3;
  EvalLimits lim;
  lim.binary = tactician_binary();
  EvalResult r = evaluate_in_child(rq, lim);
  ASSERT_EQ(r.status, "ok") << r.reason;
  EXPECT_GT(r.median_ms, 0);
  EXPECT_GT(r.compare_median_ms, 0);
  EXPECT_GT(r.paired_ratio, 0);
  EXPECT_LE(r.paired_low, r.paired_ratio);
  EXPECT_GE(r.paired_high, r.paired_ratio);
  EXPECT_GE(r.runs, 9);
  rq.compare_route = "threads=1 pass.fuse_conv=sometimes";
  EvalResult bad = evaluate_in_child(rq, lim);
  EXPECT_EQ(bad.status, "build_failed");
  EXPECT_NE(bad.reason.find("compare route"), std::string::npos) << bad.reason;
  EXPECT_NE(bad.reason.find("pass.fuse_conv"), std::string::npos) << bad.reason;
}

// An interrupt (tuner/interrupt.h) kills the running child and reports "interrupted" (never a
// crash: it is not recorded); a child asked to finish (saving the best plan) runs regardless.
TEST(Evaluator, AnInterruptStopsTheChildUnlessAskedToFinish) {
  EvalRequest rq;
  rq.model_path = "/nonexistent/model.onnx";
  rq.route = "threads=1";
  EvalLimits lim;
  lim.binary = tactician_binary();
  request_interrupt(SIGTERM);
  EXPECT_EQ(interrupt_reason(), "interrupted (SIGTERM)");
  EvalResult before = evaluate_in_child(rq, lim);
  EXPECT_EQ(before.status, "interrupted");
  EXPECT_EQ(before.reason, "interrupted (SIGTERM) before it started");
  EvalResult finish = evaluate_in_child(rq, lim, OnInterrupt::finish);
  EXPECT_EQ(finish.status, "build_failed") << finish.reason;  // it ran
  EXPECT_NE(finish.reason.find("/nonexistent/model.onnx"), std::string::npos) << finish.reason;
  clear_interrupt();
  EXPECT_EQ(interrupt_signal(), 0);

  if (!MnistRequest::available()) GTEST_SKIP() << "no model zoo";
  MnistRequest m("tac_eval_int_", false);
  m.rq.check = false;
  m.rq.min_seconds = 60;  // measures for a minute unless stopped
  double s = 0;
  const EvalResult cut = interrupted_midway([&] { return evaluate_in_child(m.rq, lim); }, s);
  clear_interrupt();
  EXPECT_EQ(cut.status, "interrupted") << cut.reason;
  EXPECT_EQ(cut.reason, "interrupted (SIGINT): the child was killed");
  EXPECT_LT(s, 5.0);
}

// The persistent evaluator (EvalWorker): one process serves request after request; a crash, a
// hang and a build failure are recorded as such and the next request gets a fresh worker; an
// accuracy rejection keeps it. Results match a fresh child's.
TEST(Evaluator, APersistentWorkerServesRequestsAndIsReplacedAfterAFault) {
  if (!MnistRequest::available()) GTEST_SKIP() << "no model zoo";
  MnistRequest m("tac_eval_worker_", true);
  EvalRequest& rq = m.rq;
  rq.tolerance = "cos>=0.9999";
  rq.min_seconds = 0.05;
  rq.planted_faults = true;
  EvalLimits lim;
  lim.binary = tactician_binary();
  lim.timeout_s = 5;
  ASSERT_TRUE(lim.persistent);
  EvalWorker w;
  auto with = [&](const std::string& route) {
    EvalRequest r = rq;
    r.route = route;
    return r;
  };
  const EvalResult fresh = evaluate_in_child(rq, lim);
  ASSERT_EQ(fresh.status, "ok") << fresh.reason;
  const EvalResult a = w.evaluate(rq, lim);
  ASSERT_EQ(a.status, "ok") << a.reason;
  EXPECT_TRUE(w.running());
  EXPECT_EQ(a.metrics_json, fresh.metrics_json);  // same engine, same numbers
  EXPECT_EQ(a.tactics, fresh.tactics);
  EXPECT_GT(a.median_ms, 0);
  const EvalResult wrong = w.evaluate(with("threads=1 tactic.ReLU32=planted_wrong"), lim);
  EXPECT_EQ(wrong.status, "rejected") << wrong.reason;
  EXPECT_TRUE(w.running());  // a rejection leaves the worker sound
  const EvalResult crash = w.evaluate(with("threads=1 tactic.ReLU32=planted_crash"), lim);
  EXPECT_EQ(crash.status, "crashed") << crash.reason;
  EXPECT_NE(crash.reason.find("signal"), std::string::npos) << crash.reason;
  EXPECT_FALSE(w.running());
  const EvalResult b = w.evaluate(rq, lim);  // a fresh worker
  EXPECT_EQ(b.status, "ok") << b.reason;
  const auto t0 = std::chrono::steady_clock::now();
  const EvalResult hang = w.evaluate(with("threads=1 tactic.ReLU32=planted_hang"), lim);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(hang.status, "timeout") << hang.reason;
  EXPECT_LT(s, 10.0);
  EXPECT_FALSE(w.running());
  const EvalResult bad = w.evaluate(with("threads=1 pass.fuse_conv=sometimes"), lim);
  EXPECT_EQ(bad.status, "build_failed");
  EXPECT_NE(bad.reason.find("pass.fuse_conv"), std::string::npos) << bad.reason;
  EXPECT_FALSE(w.running());  // replaced after any failure but a rejection
  const EvalResult c = w.evaluate(rq, lim);
  EXPECT_EQ(c.status, "ok") << c.reason;
  EXPECT_EQ(c.metrics_json, fresh.metrics_json);
}

// An interrupt kills a persistent worker in the middle of a request as it kills a fresh child:
// "interrupted" (never recorded), within a second or so, and the next request gets a new worker.
TEST(Evaluator, AnInterruptStopsAPersistentWorker) {
  if (!MnistRequest::available()) GTEST_SKIP() << "no model zoo";
  MnistRequest m("tac_eval_wint_", false);
  EvalRequest& rq = m.rq;
  rq.check = false;
  rq.min_seconds = 0.05;
  EvalLimits lim;
  lim.binary = tactician_binary();
  EvalWorker w;
  ASSERT_EQ(w.evaluate(rq, lim).status, "ok");
  rq.min_seconds = 60;  // measures for a minute unless stopped
  double s = 0;
  const EvalResult cut = interrupted_midway([&] { return w.evaluate(rq, lim); }, s);
  EXPECT_EQ(cut.status, "interrupted") << cut.reason;
  EXPECT_EQ(cut.reason, "interrupted (SIGINT): the child was killed");
  EXPECT_LT(s, 5.0);
  EXPECT_FALSE(w.running());
  EXPECT_EQ(w.evaluate(rq, lim).status, "interrupted");  // not started while the interrupt stands
  clear_interrupt();
  rq.min_seconds = 0.05;
  EXPECT_EQ(w.evaluate(rq, lim).status, "ok");
}

TEST(Tune, EvaluatesRecordsAndResumes) {
  const std::string model = std::string(TAC_MODELS_DIR) + "/mnist-cntk/model.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "no model zoo";
  const fs::path dir = fs::temp_directory_path() / ("tac_tune_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  TuneOptions o;
  o.model_path = model;
  o.strategy = "fast";
  o.max_candidates = 6;
  o.budget_s = 120;
  o.threads = 1;
  o.db_path = (dir / "t.db").string();
  o.out_dir = (dir / "out").string();
  o.cheap_seconds = 0.05;
  o.careful_seconds = 0.1;
  o.final_rounds = 2;
  o.limits.binary = tactician_binary();
  o.knob_globs = {"tactic.*", "memory.*"};
  auto first = tune(o, {});
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(first->candidates, 6);
  EXPECT_EQ(first->resumed, 0);
  EXPECT_GT(first->default_ms, 0);
  EXPECT_GT(first->best_ms, 0);
  EXPECT_TRUE(fs::exists(dir / "out" / "best.plan"));
  EXPECT_TRUE(fs::exists(dir / "out" / "best.route"));
  EXPECT_TRUE(fs::exists(dir / "out" / "summary.json"));
  auto db = Database::open(o.db_path);
  ASSERT_TRUE(db.is_ok());
  auto recs = (*db)->everything();
  ASSERT_TRUE(recs.is_ok());
  EXPECT_EQ(recs->size(), 6u);
  // Successive halving: the default was re-measured on rung 1, and every later measurement
  // refers to a recorded candidate.
  auto ms = (*db)->measurements();
  ASSERT_TRUE(ms.is_ok());
  ASSERT_FALSE(ms->empty());
  EXPECT_EQ((*ms)[0].kind, "rung1");
  EXPECT_EQ((*ms)[0].candidate_id, (*recs)[0].id);
  for (const Measurement& m : *ms) {
    EXPECT_TRUE(m.kind == "rung1" || m.kind == "accept" || m.kind == "incumbent") << m.kind;
    EXPECT_GE(m.candidate_id, (*recs)[0].id);
    EXPECT_LE(m.candidate_id, recs->back().id);
  }
  // A second run resumes: the routes already evaluated are not evaluated again.
  auto second = tune(o, {});
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_EQ(second->resumed, 6);
  auto recs2 = (*db)->everything();
  ASSERT_TRUE(recs2.is_ok());
  EXPECT_EQ(recs2->size(), 6u + static_cast<size_t>(second->candidates));
  for (size_t i = 0; i < recs->size(); ++i)
    for (size_t j = recs->size(); j < recs2->size(); ++j) EXPECT_NE((*recs)[i].route, (*recs2)[j].route);
  // With fixed settings (tune --route) every candidate keeps them, the default compared against
  // is that route, and of the earlier run's routes only those with exactly that setting besides
  // tactics are points of the new search (resumed).
  int fits = 0;
  for (const CandidateRecord& rec : *recs2) {
    auto rr = builder::Route::parse(rec.route);
    ASSERT_TRUE(rr.is_ok());
    bool ok = rr->values.count("memory.planner") && rr->values.at("memory.planner") == "no_reuse";
    for (const auto& [k, v] : rr->values) ok &= k == "memory.planner" || k == "threads" || k.rfind("tactic.", 0) == 0;
    fits += ok;
  }
  TuneOptions f = o;
  f.fixed = builder::Route::parse("memory.planner=no_reuse").value();
  f.knob_globs = {"tactic.*"};
  f.max_candidates = 3;
  auto with_fixed = tune(f, {});
  ASSERT_TRUE(with_fixed.is_ok()) << with_fixed.status().to_string();
  EXPECT_EQ(with_fixed->resumed, fits);
  EXPECT_NE(with_fixed->best_route.find("memory.planner=no_reuse"), std::string::npos) << with_fixed->best_route;
  auto recs3 = (*db)->everything();
  ASSERT_TRUE(recs3.is_ok());
  for (size_t j = recs2->size(); j < recs3->size(); ++j)
    EXPECT_NE((*recs3)[j].route.find("memory.planner=no_reuse"), std::string::npos) << (*recs3)[j].route;
  f.fixed = builder::Route::parse("memory.planner=nosuch").value();
  auto bad = tune(f, {});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().to_string().find("memory.planner"), std::string::npos) << bad.status().to_string();
  // A budget shorter than evaluating the default route is an error saying so.
  o.budget_s = 0.01;
  o.db_path = (dir / "t2.db").string();
  auto tiny = tune(o, {});
  ASSERT_FALSE(tiny.is_ok());
  EXPECT_NE(tiny.status().to_string().find("too small"), std::string::npos) << tiny.status().to_string();
  EXPECT_NE(tiny.status().to_string().find("reference outputs took"), std::string::npos) << tiny.status().to_string();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tac::tuner
