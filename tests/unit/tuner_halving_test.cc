// The successive-halving promotion rule (tuner/halving.h) on hand-made rungs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tuner/halving.h"

namespace tac::tuner {
namespace {

TEST(Halving, PromotesTheTopThirdOnlyWhenWithinNoiseOfTheIncumbent) {
  // Candidate 0 is the incumbent (10 ms, also measured on rung 1). Eight challengers on rung 0.
  std::vector<std::vector<double>> s = {{10, 10}, {10.1}, {12}, {13}, {10.15}, {14}, {15}, {16}, {17}};
  // 9 scores on rung 0: top 3 = {10, 10.1, 10.15}; 10.1 is the fastest challenger within 2%.
  auto up = next_promotion(s, 0, 3, 2, 0.02);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->first, 1u);
  EXPECT_EQ(up->second, 1);
  s[1].push_back(10.05);  // measured on rung 1
  up = next_promotion(s, 0, 3, 2, 0.02);
  ASSERT_TRUE(up);
  // Rung 1 holds 2 scores (incumbent, candidate 1): floor(2/3) = 0, nobody is in its top, and
  // 10.05 is not clearly faster than 10: the next promotion is candidate 4 from rung 0.
  EXPECT_EQ(up->first, 4u);
  EXPECT_EQ(up->second, 1);
  s[4].push_back(10.3);
  // Nothing else on rung 0 is in the top third and within the noise.
  EXPECT_FALSE(next_promotion(s, 0, 3, 2, 0.02));
}

TEST(Halving, ClearlyFasterCandidatesGoStraightUpHighestRungFirst) {
  std::vector<std::vector<double>> s = {{10, 10}, {8}};
  auto up = next_promotion(s, 0, 3, 2, 0.02);  // only 2 scores on rung 0, but 8 < 10 * 0.98
  ASSERT_TRUE(up);
  EXPECT_EQ(*up, std::make_pair(size_t{1}, 1));
  s[1].push_back(8.2);
  s.push_back({7});
  up = next_promotion(s, 0, 3, 2, 0.02);  // candidate 1 on rung 1 goes to acceptance before 2 moves up
  ASSERT_TRUE(up);
  EXPECT_EQ(*up, std::make_pair(size_t{1}, 2));
  s[1].push_back(8.1);  // accepted or not, it has reached the top rung: never promoted again
  up = next_promotion(s, 0, 3, 2, 0.02);
  ASSERT_TRUE(up);
  EXPECT_EQ(*up, std::make_pair(size_t{2}, 1));
}

TEST(Halving, NeverPromotesSlowFailedOrTheIncumbent) {
  std::vector<std::vector<double>> s = {{10, 10}, {INFINITY}, {20}, {30}, {40}, {50}, {60}};
  EXPECT_FALSE(next_promotion(s, 0, 3, 2, 0.02));
  // A failed rung-1 re-measurement (+inf) stops the candidate there.
  s = {{10, 10}, {9, INFINITY}};
  EXPECT_FALSE(next_promotion(s, 0, 3, 2, 0.02));
  EXPECT_FALSE(next_promotion({}, 0, 3, 2, 0.02));
}

TEST(Halving, PairedNoiseIsTheConfidenceHalfWidthOfTheRounds) {
  EXPECT_DOUBLE_EQ(paired_noise({1.2, 1.2, 1.2, 1.2}), 0.0);  // rounds that agree: no noise
  EXPECT_DOUBLE_EQ(paired_noise({1.3}), 1.0);                 // one round: no estimate
  // log ratios +-0.05 around 0.1: sd 0.0577, t(3) 2.353, half-width 0.0679 -> exp - 1 = 0.0703
  EXPECT_NEAR(paired_noise({std::exp(0.05), std::exp(0.15), std::exp(0.05), std::exp(0.15)}), 0.0703, 1e-3);
  // wider rounds, wider noise
  EXPECT_GT(paired_noise({1.01, 1.5, 1.02, 1.6}), paired_noise({1.1, 1.2, 1.1, 1.2}));
}

TEST(Halving, ChallengerWinsOnlyWhenEveryRoundAgreesBeyondTheNoise) {
  // 1.74x faster in every round, rounds consistent: wins (the case a per-run cv of 2.4 refused)
  const std::vector<double> clear = {1.70, 1.78, 1.72, 1.76};
  std::vector<double> sorted = clear;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_TRUE(challenger_wins(sorted.front(), 1.74, paired_noise(clear)));
  // one round slower: the sign test fails whatever the median says
  EXPECT_FALSE(challenger_wins(0.99, 1.3, paired_noise({0.99, 1.3, 1.3, 1.4})));
  // faster in every round but by less than the 1% floor
  EXPECT_FALSE(challenger_wins(1.002, 1.006, paired_noise({1.002, 1.006, 1.006, 1.008})));
  // faster in every round but the rounds disagree wildly: the median's lead is inside the noise
  const std::vector<double> wild = {1.01, 1.04, 1.05, 2.5};
  EXPECT_FALSE(challenger_wins(1.01, 1.045, paired_noise(wild)));
}

}  // namespace
}  // namespace tac::tuner
