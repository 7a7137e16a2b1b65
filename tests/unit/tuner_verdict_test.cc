// The tuner's word (issue 29): the verdict says what the final comparison decided, and timings
// that drifted or varied too much to trust are flagged with how to get trustworthy ones.
#include <gtest/gtest.h>

#include "tuner/tune.h"

namespace tac::tuner {
namespace {

TuneSummary final_comparison(double default_ms, double best_ms, double low, double high) {
  TuneSummary s;
  s.default_ms = default_ms;
  s.best_ms = best_ms;
  s.speedup = default_ms / best_ms;
  s.speedup_low = low;
  s.speedup_high = high;
  s.best_route = "tactic.conv_1=onednn threads=2";
  return s;
}

TEST(TunerVerdict, AWinnerIsNamedWithItsPairedSpeedup) {
  TuneSummary s = final_comparison(3.0, 2.0, 1.45, 1.52);
  describe_outcome(s, 3.1, 0.02, /*same=*/false, /*unconfirmed=*/0, 3);
  EXPECT_NE(s.verdict.find("kept tactic.conv_1=onednn threads=2: 1.500x the default's speed over 3 interleaved A/B rounds"),
            std::string::npos) << s.verdict;
  EXPECT_TRUE(s.warnings.empty());
}

TEST(TunerVerdict, AnOverturnedWinnerIsSaidSo) {
  TuneSummary s = final_comparison(3.0, 3.0, 1, 1);
  describe_outcome(s, 3.0, 0.02, false, 0.925, 3);
  EXPECT_NE(s.verdict.find("kept the default route: the search's best did not beat it in the final comparison (0.925x"),
            std::string::npos) << s.verdict;
}

TEST(TunerVerdict, TheDefaultKept) {
  TuneSummary s = final_comparison(3.0, 3.0, 1, 1);
  describe_outcome(s, 3.0, 0.02, true, 0, 3);
  EXPECT_NE(s.verdict.find("kept the default route (3.000 ms)"), std::string::npos) << s.verdict;
  EXPECT_TRUE(s.warnings.empty());
}

// A default first measured at 201 ms and finally at 3 ms: a loaded machine. Said, with the remedy.
TEST(TunerVerdict, DriftNoiseAndSpreadAreWarnedAbout) {
  TuneSummary s = final_comparison(3.0, 2.0, 1.1, 2.0);
  describe_outcome(s, 201.0, 0.6, false, 0, 3);
  ASSERT_EQ(s.warnings.size(), 3u);
  EXPECT_NE(s.warnings[0].find("timings are unreliable: the default route measured 201.000 ms at the start and 3.000 ms"),
            std::string::npos) << s.warnings[0];
  EXPECT_NE(s.warnings[0].find("idle machine"), std::string::npos);
  EXPECT_NE(s.warnings[1].find("vary by 60%"), std::string::npos) << s.warnings[1];
  EXPECT_NE(s.warnings[2].find("from 1.100x to 2.000x"), std::string::npos) << s.warnings[2];
  EXPECT_NE(s.to_json().find("\"warnings\":[\"timings are unreliable"), std::string::npos) << s.to_json();
  // Within the thresholds: no warning.
  TuneSummary quiet = final_comparison(3.0, 2.0, 1.4, 1.6);
  describe_outcome(quiet, 4.0, 0.2, false, 0, 3);
  EXPECT_TRUE(quiet.warnings.empty());
}

}  // namespace
}  // namespace tac::tuner
