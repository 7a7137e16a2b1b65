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

}  // namespace tac::tuner
