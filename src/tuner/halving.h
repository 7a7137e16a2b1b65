// Successive halving, asynchronous (ASHA, Li et al. 2020), as the tuner's measurement schedule
// (DESIGN.md section 3 "Measurement protocol"): every candidate gets a cheap measurement (rung
// 0); the best get longer ones (rung 1, 2, ...), the last rung being the interleaved acceptance
// test against the incumbent. Promotion never waits for a rung to fill: a candidate moves up as
// soon as it ranks in the top 1/eta of the rung it is on.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

namespace tac::tuner {

// `scores[i]` holds candidate i's measured latency on each rung it reached (rung 0 first;
// +infinity when a re-measurement failed). A candidate on rung r (scores[i].size() == r + 1,
// r + 1 <= top_rung) is promotable when
//   - its rung-r score is clearly faster than the incumbent's (by more than `noise`, relative), or
//   - it ranks in the top floor(n_r / eta) of the n_r scores ever recorded on rung r and is
//     within `noise` of the incumbent's rung-r score (so measurement noise cannot bury a
//     near-winner, and candidates far slower than the incumbent are never re-measured).
// The incumbent's score on rung r is its last score at or below r. Returns the candidate to
// promote and the rung it moves to: the highest rung first, the fastest candidate on it first;
// nullopt when none qualifies. The incumbent itself is never promoted, nor a candidate whose
// `busy` flag is set (a re-measurement of it is in flight: distributed tuning); busy candidates
// still count in the rung rankings.
std::optional<std::pair<size_t, int>> next_promotion(const std::vector<std::vector<double>>& scores, size_t incumbent,
                                                     int eta, int top_rung, double noise,
                                                     const std::vector<bool>& busy = {});

// The noise of a paired comparison timed in rounds (each round: the incumbent's block median
// over the challenger's, above 1 when the challenger is faster): the relative half-width of a
// one-sided 95% confidence bound on their geometric mean (Student's t over the log ratios),
// exp(t * sd / sqrt(n)) - 1. With fewer than 2 rounds there is no estimate: 1 (100%).
double paired_noise(const std::vector<double>& ratios);

// The acceptance test (DESIGN.md section 3: a challenger wins only when its advantage exceeds
// the measured noise): faster in every round (a sign test: all 4 of 4 by chance is 1 in 16), and
// the median round ratio above 1 by more than both `noise` (paired_noise of the same rounds) and
// a 1% floor. The noise is the comparison's own, not the spread of single runs: one
// interrupted run among thousands says nothing about whether one median beats the other.
bool challenger_wins(double paired_low, double paired_ratio, double noise);

}  // namespace tac::tuner
