// End-to-end latency of an engine (DESIGN.md section 3 measurement protocol): warm-up, then runs
// until both a minimum count and a minimum time are reached, rotating among input sets.
#pragma once

#include <vector>

#include "runtime/engine.h"

namespace tac::runtime {

struct Latency {
  double median_ms = 0, p10_ms = 0, p90_ms = 0, mean_ms = 0, cv = 0;
  int runs = 0;
  std::vector<double> times_ms;  // every timed run in order (run i used input set i % sets), warm-up excluded
};

// Fails when a run fails. A very slow engine stops after 20x min_seconds + 60 s with what it has.
//
// CPU plans: the wall time of Engine::run (inputs read in place, outputs copied out).
// CUDA plans: device time between CUDA events recorded around Engine::launch (the steps, or the
// replay of their CUDA graph), each run's input set uploaded before the first event and the
// outputs left on the device: what the GPU spends on the engine, without the host copies. With
// `l2_flush`, a pass over twice the L2 size runs before the first event (cold L2); else the
// runs follow each other with what the last one left in L2 (warm).
Result<Latency> measure(Engine& e, const std::vector<std::vector<Tensor>>& input_sets, int min_runs, double min_seconds,
                        int warmup, bool l2_flush = false);

// Several engines timed in one process, paired: `rounds` rounds, in each every engine gets one
// block (measure() with 2 warm-up runs, `block_runs` and `block_seconds`), the order rotating by
// one per round, so a slow spell of a shared machine falls on all alike. Returns the blocks'
// latencies [engine][round]; on a failure, `failed` (if given) is set to the failing engine's index.
Result<std::vector<std::vector<Latency>>> measure_interleaved(const std::vector<Engine*>& engines,
                                                              const std::vector<std::vector<Tensor>>& input_sets,
                                                              int rounds, int block_runs, double block_seconds,
                                                              bool l2_flush = false, size_t* failed = nullptr);

// The median (the mean of the two middle values for an even count; 0 for none).
double median(std::vector<double> v);

}  // namespace tac::runtime
