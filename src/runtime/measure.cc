#include "runtime/measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>

namespace tac::runtime {

Result<Latency> measure(Engine& e, const std::vector<std::vector<Tensor>>& sets, int min_runs,
                        double min_seconds, int warmup, bool l2_flush) {
  for (int i = 0; i < warmup; ++i) {
    auto r = e.run(sets[static_cast<size_t>(i) % sets.size()]);
    if (!r) return r.status();
  }
  // Device-side timing (events around launch) where the plan runs on the device alone; a CUDA plan
  // with dynamic steps (on the host) is timed as a whole run, copies included.
  const bool device = e.plan().backend == kernels::Backend::cuda && !e.dynamic();
  std::optional<cuda::EventTimer> timer;
  if (device) {
    TAC_ASSIGN_OR_RETURN(timer, cuda::EventTimer::create());
  }
  std::vector<double> ms;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0;; ++i) {
    const std::vector<Tensor>& in = sets[i % sets.size()];
    if (device) {
      TAC_RETURN_IF_ERROR(e.upload_inputs(in));
      if (l2_flush) TAC_RETURN_IF_ERROR(cuda::flush_l2());
      TAC_RETURN_IF_ERROR(timer->start());
      TAC_RETURN_IF_ERROR(e.launch());
      TAC_ASSIGN_OR_RETURN(double t, timer->stop_ms());
      ms.push_back(t);
    } else {
      auto t0 = std::chrono::steady_clock::now();
      auto r = e.run(in);
      auto t1 = std::chrono::steady_clock::now();
      if (!r) return r.status();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    auto t1 = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(t1 - start).count();
    if (static_cast<int>(ms.size()) >= min_runs && elapsed >= min_seconds) break;
    if (elapsed > 20 * min_seconds + 60) break;  // a very slow engine: stop with what we have
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) { return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5)]; };
  Latency l;
  l.runs = static_cast<int>(ms.size());
  l.median_ms = pct(0.5);
  l.p10_ms = pct(0.1);
  l.p90_ms = pct(0.9);
  double sum = 0, sq = 0;
  for (double v : ms) sum += v;
  l.mean_ms = sum / static_cast<double>(ms.size());
  for (double v : ms) sq += (v - l.mean_ms) * (v - l.mean_ms);
  l.cv = ms.size() > 1 ? std::sqrt(sq / static_cast<double>(ms.size() - 1)) / l.mean_ms : 0.0;
  l.times_ms = std::move(ms);
  return l;
}

Result<std::vector<std::vector<Latency>>> measure_interleaved(const std::vector<Engine*>& engines,
                                                              const std::vector<std::vector<Tensor>>& sets, int rounds,
                                                              int block_runs, double block_seconds, bool l2_flush,
                                                              size_t* failed) {
  const size_t n = engines.size();
  std::vector<std::vector<Latency>> blocks(n);
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (k + static_cast<size_t>(r)) % n;  // rotate who goes first
      auto lat = measure(*engines[i], sets, block_runs, block_seconds, /*warmup=*/2, l2_flush);
      if (!lat) {
        if (failed) *failed = i;
        return lat.status();
      }
      blocks[i].push_back(*lat);
    }
  return blocks;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace tac::runtime
