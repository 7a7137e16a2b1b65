#include "builder/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace tac::builder {

const char* planner_name(PlannerStrategy s) {
  switch (s) {
    case PlannerStrategy::greedy_by_size: return "greedy_by_size";
    case PlannerStrategy::greedy_by_order: return "greedy_by_order";
    case PlannerStrategy::no_reuse: return "no_reuse";
  }
  return "?";
}

Result<PlannerStrategy> planner_from_name(const std::string& name) {
  for (PlannerStrategy s : {PlannerStrategy::greedy_by_size, PlannerStrategy::greedy_by_order, PlannerStrategy::no_reuse})
    if (name == planner_name(s)) return s;
  return invalid_argument("unknown memory planner '" + name + "'");
}

namespace {
int64_t align_up(int64_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }
bool lifetimes_overlap(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}
}  // namespace

MemoryPlan plan_memory(const std::vector<BufferLifetime>& buffers, PlannerStrategy strategy) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  if (strategy == PlannerStrategy::no_reuse) {
    for (size_t i = 0; i < buffers.size(); ++i) {
      plan.offsets[i] = plan.arena_bytes;
      plan.arena_bytes += align_up(buffers[i].bytes);
    }
    return plan;
  }
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (strategy == PlannerStrategy::greedy_by_size)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  else
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return buffers[a].first_step < buffers[b].first_step; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    const int64_t size = align_up(buffers[i].bytes);
    // Ranges taken by placed buffers that are live at the same time, sorted by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (lifetimes_overlap(buffers[i], buffers[j])) busy.emplace_back(plan.offsets[j], plan.offsets[j] + align_up(buffers[j].bytes));
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + size <= lo) break;  // fits in the gap before this range
      offset = std::max(offset, hi);
    }
    plan.offsets[i] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(i);
  }
  return plan;
}

bool memory_plan_is_valid(const std::vector<BufferLifetime>& buffers, const MemoryPlan& plan) {
  if (plan.offsets.size() != buffers.size()) return false;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (plan.offsets[i] % kAlignment != 0 || plan.offsets[i] < 0 || plan.offsets[i] + buffers[i].bytes > plan.arena_bytes)
      return false;
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (!lifetimes_overlap(buffers[i], buffers[j]) || buffers[i].bytes == 0 || buffers[j].bytes == 0) continue;
      if (plan.offsets[i] < plan.offsets[j] + buffers[j].bytes && plan.offsets[j] < plan.offsets[i] + buffers[i].bytes)
        return false;
    }
  }
  return true;
}

}  // namespace tac::builder
