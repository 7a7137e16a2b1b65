// End-to-end latency of an engine (DESIGN.md section 3 measurement protocol): warm-up, then runs
// until both a minimum count and a minimum time are reached, rotating among input sets.
#pragma once

#include <vector>

#include "runtime/engine.h"

namespace tac::runtime {

struct Latency {
  double median_ms = 0, p10_ms = 0, p90_ms = 0, mean_ms = 0, cv = 0;
  int runs = 0;
};

// Fails when a run fails. A very slow engine stops after 20x min_seconds + 60 s with what it has.
Result<Latency> measure(Engine& e, const std::vector<std::vector<Tensor>>& input_sets, int min_runs, double min_seconds,
                        int warmup);

}  // namespace tac::runtime
