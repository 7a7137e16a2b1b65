// The distributed tuner's pieces that need no MPI (tuner/dispatch.h): the wire format of
// EvalRequest/EvalResult/EvalJob, and the dispatch bookkeeping (who runs what until when).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tuner/dispatch.h"
#include "tuner/halving.h"

namespace tac::tuner {
namespace {

// Awkward text: the separators of the format, newlines, NUL bytes, non-ASCII, empty.
std::string awkward(std::mt19937& rng) {
  static const std::string alphabet = std::string("ab =\n1 7\t\"\\,:;") + std::string(1, '\0') + "\xc3\xa9";
  std::string s;
  const size_t n = rng() % 24;
  for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

double any_double(std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1e3, 1e3);
  return u(rng) * std::pow(10.0, static_cast<int>(rng() % 21) - 10);
}

TEST(Dispatch, RequestRoundTripIsExact) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    EvalRequest r;
    r.model_path = awkward(rng);
    r.data_dir = awkward(rng);
    r.route = "tactic.conv_1=winograd_f4 " + awkward(rng);
    r.tolerance = awkward(rng);
    for (size_t k = rng() % 3; k > 0; --k) r.dims.push_back(awkward(rng));
    r.min_seconds = any_double(rng);
    r.min_runs = static_cast<int>(rng() % 1000) - 5;
    r.save_plan = awkward(rng);
    r.check = rng() & 1;
    r.measure = rng() & 1;
    r.planted_faults = rng() & 1;
    r.profile = rng() & 1;
    r.calibration_dir = awkward(rng);
    r.calibration_cache = awkward(rng);
    r.backend = trial % 2 ? "cuda" : "cpu";
    if (trial % 3) r.compare_route = "memory.inplace=off " + awkward(rng);
    r.compare_rounds = static_cast<int>(rng() % 9);
    auto back = decode_request(encode_request(r));
    ASSERT_TRUE(back) << back.status().to_string();
    EXPECT_EQ(back->model_path, r.model_path);
    EXPECT_EQ(back->data_dir, r.data_dir);
    EXPECT_EQ(back->route, r.route);
    EXPECT_EQ(back->tolerance, r.tolerance);
    EXPECT_EQ(back->dims, r.dims);
    EXPECT_EQ(back->min_seconds, r.min_seconds);  // bit-exact: 17 significant digits
    EXPECT_EQ(back->min_runs, r.min_runs);
    EXPECT_EQ(back->save_plan, r.save_plan);
    EXPECT_EQ(back->check, r.check);
    EXPECT_EQ(back->measure, r.measure);
    EXPECT_EQ(back->planted_faults, r.planted_faults);
    EXPECT_EQ(back->profile, r.profile);
    EXPECT_EQ(back->calibration_dir, r.calibration_dir);
    EXPECT_EQ(back->calibration_cache, r.calibration_cache);
    EXPECT_EQ(back->backend, r.backend);
    EXPECT_EQ(back->compare_route, r.compare_route);
    EXPECT_EQ(back->compare_rounds, r.compare_rounds);
  }
}

EvalResult random_result(std::mt19937& rng) {
  static const char* statuses[] = {"ok", "rejected", "build_failed", "run_failed", "crashed", "timeout"};
  EvalResult r;
  r.status = statuses[rng() % 6];
  r.reason = awkward(rng);
  r.build_ms = any_double(rng);
  r.metrics_json = "[{\"linf\": " + std::to_string(any_double(rng)) + "}]";
  r.median_ms = any_double(rng);
  r.p10_ms = any_double(rng);
  r.p90_ms = any_double(rng);
  r.cv = any_double(rng);
  r.runs = static_cast<int>(rng() % 5000);
  r.wall_s = any_double(rng);
  r.compare_median_ms = any_double(rng);
  r.paired_ratio = any_double(rng);
  r.paired_low = any_double(rng);
  r.paired_high = any_double(rng);
  for (size_t k = rng() % 4; k > 0; --k) r.node_ms[awkward(rng)] = any_double(rng);
  for (size_t k = rng() % 4; k > 0; --k) r.tactics[awkward(rng)] = awkward(rng);
  for (size_t k = rng() % 3; k > 0; --k) {
    auto& list = r.costs[awkward(rng)];
    for (size_t j = rng() % 4; j > 0; --j) list.emplace_back(awkward(rng), any_double(rng));
  }
  return r;
}

void expect_same(const EvalResult& a, const EvalResult& b) {
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.build_ms, b.build_ms);
  EXPECT_EQ(a.metrics_json, b.metrics_json);
  EXPECT_EQ(a.median_ms, b.median_ms);
  EXPECT_EQ(a.p10_ms, b.p10_ms);
  EXPECT_EQ(a.p90_ms, b.p90_ms);
  EXPECT_EQ(a.cv, b.cv);
  EXPECT_EQ(a.runs, b.runs);
  EXPECT_EQ(a.wall_s, b.wall_s);
  EXPECT_EQ(a.compare_median_ms, b.compare_median_ms);
  EXPECT_EQ(a.paired_ratio, b.paired_ratio);
  EXPECT_EQ(a.paired_low, b.paired_low);
  EXPECT_EQ(a.paired_high, b.paired_high);
  EXPECT_EQ(a.node_ms, b.node_ms);
  EXPECT_EQ(a.tactics, b.tactics);
  EXPECT_EQ(a.costs, b.costs);
}

TEST(Dispatch, ResultAndJobRoundTripsAreExact) {
  std::mt19937 rng(11);
  std::vector<EvalResult> results;
  for (int trial = 0; trial < 30; ++trial) {
    EvalResult r = random_result(rng);
    auto back = decode_result(encode_result(r));
    ASSERT_TRUE(back) << back.status().to_string();
    expect_same(*back, r);
    results.push_back(r);
  }
  auto many = decode_results(encode_results(results));
  ASSERT_TRUE(many);
  ASSERT_EQ(many->size(), results.size());
  for (size_t i = 0; i < results.size(); ++i) expect_same((*many)[i], results[i]);

  EvalJob job;
  job.limits.timeout_s = 12.5;
  job.limits.memory_bytes = int64_t{3} << 33;
  job.limits.binary = "/opt/x y/tactician";
  job.limits.persistent = false;  // not the default
  for (int k = 0; k < 4; ++k) {
    EvalRequest rq;
    rq.route = "memory.planner=no_reuse threads=" + std::to_string(k);
    rq.check = k % 2 == 0;
    job.requests.push_back(rq);
  }
  auto j = decode_job(encode_job(job));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->limits.timeout_s, 12.5);
  EXPECT_EQ(j->limits.memory_bytes, job.limits.memory_bytes);
  EXPECT_EQ(j->limits.binary, job.limits.binary);
  EXPECT_FALSE(j->limits.persistent);
  ASSERT_EQ(j->requests.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(j->requests[static_cast<size_t>(k)].route, job.requests[static_cast<size_t>(k)].route);
    EXPECT_EQ(j->requests[static_cast<size_t>(k)].check, k % 2 == 0);
  }
}

TEST(Dispatch, MalformedTextIsAnErrorNotACrash) {
  EvalResult r;
  r.status = "ok";
  r.reason = "fine";
  const std::string good = encode_result(r);
  for (size_t cut = 1; cut < good.size(); cut += 3)  // every truncation fails cleanly or parses a prefix
    (void)decode_result(good.substr(0, cut));
  EXPECT_FALSE(decode_result("status 99\nok\n"));
  EXPECT_FALSE(decode_result("status x\nok\n"));
  EXPECT_FALSE(decode_result("nospace"));
  EXPECT_FALSE(decode_result("status 2\nokX"));
  EXPECT_FALSE(decode_request("colour 3\nred\n"));  // unknown fields are refused, not ignored
  EXPECT_FALSE(decode_results("result 3\nabc\n"));
}

TEST(Dispatch, NextJobGoesToTheRankThatReportedFirst) {
  DispatchQueue q({1, 2, 3});
  EXPECT_EQ(q.live(), 3u);
  EXPECT_EQ(q.idle(), 3u);
  EXPECT_EQ(q.assign(10, 100.0), 1);
  EXPECT_EQ(q.assign(11, 100.0), 2);
  EXPECT_EQ(q.assign(12, 100.0), 3);
  EXPECT_FALSE(q.assign(13, 100.0));  // all busy
  EXPECT_EQ(q.busy(), 3u);
  // Rank 3 reports first, then rank 1: they get the next jobs in that order.
  EXPECT_EQ(q.complete(3), std::optional<uint64_t>(12));
  EXPECT_EQ(q.complete(1), std::optional<uint64_t>(10));
  EXPECT_EQ(q.assign(13, 100.0), 3);
  EXPECT_EQ(q.assign(14, 100.0), 1);
  EXPECT_FALSE(q.complete(3 + 10));  // not an evaluator
  EXPECT_EQ(q.complete(2), std::optional<uint64_t>(11));
  EXPECT_FALSE(q.complete(2));  // a second answer from an idle rank is stray
}

TEST(Dispatch, ReferenceJobsRunOnTheFirstLiveRankOnly) {
  DispatchQueue q({1, 2});
  EXPECT_EQ(q.reference(), std::optional<int>(1));
  EXPECT_EQ(q.assign(1, 50.0), 1);
  EXPECT_FALSE(q.assign(2, 50.0, /*reference=*/true));  // rank 1 busy: no other rank may stand in
  EXPECT_EQ(q.assign(2, 50.0), 2);
  EXPECT_EQ(q.complete(1), std::optional<uint64_t>(1));
  EXPECT_EQ(q.assign(3, 50.0, true), 1);
}

TEST(Dispatch, RanksPastTheirDeadlineAreLostAndGetNoMoreWork) {
  DispatchQueue q({1, 2, 3});
  ASSERT_EQ(q.assign(100, 10.0), 1);
  ASSERT_EQ(q.assign(101, 20.0), 2);
  EXPECT_EQ(q.next_deadline(), std::optional<double>(10.0));
  EXPECT_TRUE(q.expire(9.9).empty());
  auto lost = q.expire(15.0);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0], std::make_pair(1, uint64_t{100}));
  EXPECT_TRUE(q.is_lost(1));
  EXPECT_EQ(q.live(), 2u);
  EXPECT_EQ(q.reference(), std::optional<int>(2));  // the reference moves to the next live rank
  EXPECT_FALSE(q.complete(1));                     // its late answer is dropped
  EXPECT_EQ(q.next_deadline(), std::optional<double>(20.0));
  // Only rank 3 is idle; rank 1 never comes back.
  EXPECT_EQ(q.assign(102, 30.0), 3);
  EXPECT_FALSE(q.assign(103, 30.0));
  EXPECT_EQ(q.complete(2), std::optional<uint64_t>(101));
  EXPECT_EQ(q.assign(103, 40.0), 2);
  // A rank that fails otherwise (a send error, no hello) is declared lost at once.
  EXPECT_EQ(q.declare_lost(3), std::optional<uint64_t>(102));
  EXPECT_FALSE(q.declare_lost(3));
  EXPECT_EQ(q.lost_ranks(), (std::vector<int>{1, 3}));
  EXPECT_EQ(q.live(), 1u);
  EXPECT_EQ(q.busy(), 1u);
}

TEST(Dispatch, DeadlineCoversEveryRequestOfTheJob) {
  EvalJob one, four;
  one.limits.timeout_s = four.limits.timeout_s = 60;
  one.requests.resize(1);
  four.requests.resize(4);
  EXPECT_GT(job_deadline_s(one), 60);
  EXPECT_GT(job_deadline_s(four), 4 * 60);
  EXPECT_LT(job_deadline_s(one), job_deadline_s(four));
}

TEST(Dispatch, LocalPoolRunsTheJobAtSubmission) {
  auto pool = local_evaluators();
  EXPECT_EQ(pool->live(), 1u);
  EXPECT_EQ(pool->idle(), 1u);
  EXPECT_FALSE(pool->next());  // nothing in flight
  EvalJob job;
  job.limits.binary = "/nonexistent/tactician";  // the child cannot exec: a crash, recorded as such
  job.limits.timeout_s = 10;
  job.requests.resize(2);
  ASSERT_TRUE(pool->submit(42, job, false).is_ok());
  EXPECT_EQ(pool->idle(), 0u);
  EXPECT_FALSE(pool->submit(43, job, false).is_ok());
  auto d = pool->next();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->ticket, 42u);
  ASSERT_EQ(d->results.size(), 2u);
  EXPECT_EQ(d->results[0].status, "crashed");
  EXPECT_EQ(pool->idle(), 1u);
}

TEST(Halving, BusyCandidatesCountInTheRankingButAreNotPromoted) {
  std::vector<std::vector<double>> s = {{10, 10}, {8}, {9}};
  auto up = next_promotion(s, 0, 3, 2, 0.02);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->first, 1u);
  up = next_promotion(s, 0, 3, 2, 0.02, {false, true, false});  // 1 is being re-measured
  ASSERT_TRUE(up);
  EXPECT_EQ(up->first, 2u);
  EXPECT_FALSE(next_promotion(s, 0, 3, 2, 0.02, {false, true, true}));
}

}  // namespace
}  // namespace tac::tuner
