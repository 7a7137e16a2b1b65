// The memory planner: places buffers with known lifetimes in one arena (DESIGN.md section 3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tactician/status.h"

namespace tac::builder {

// One buffer: its size and the steps between which it must stay intact (inclusive).
struct BufferLifetime {
  int64_t bytes = 0;
  int first_step = 0;
  int last_step = 0;
};

enum class PlannerStrategy { greedy_by_size, greedy_by_order, no_reuse };
const char* planner_name(PlannerStrategy s);
Result<PlannerStrategy> planner_from_name(const std::string& name);

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per buffer, multiples of kAlignment
  int64_t arena_bytes = 0;
};

inline constexpr int64_t kAlignment = 64;

// Places every buffer so that two buffers whose lifetimes overlap never overlap in memory.
//   greedy_by_size:  largest first, each at the lowest offset that fits (best for peak memory)
//   greedy_by_order: in order of first use, first fit
//   no_reuse:        every buffer its own range (the baseline; simplest, largest)
MemoryPlan plan_memory(const std::vector<BufferLifetime>& buffers, PlannerStrategy strategy);

// True when the plan is valid: aligned, inside the arena, and no two live buffers overlap.
bool memory_plan_is_valid(const std::vector<BufferLifetime>& buffers, const MemoryPlan& plan);

}  // namespace tac::builder
