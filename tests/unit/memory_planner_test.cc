#include <gtest/gtest.h>

#include <random>

#include "builder/memory_planner.h"

namespace tac::builder {
namespace {

TEST(MemoryPlanner, ReusesMemoryOfDeadBuffers) {
  // A chain: each buffer dies when the next is made, so two slots suffice.
  std::vector<BufferLifetime> chain;
  for (int i = 0; i < 10; ++i) chain.push_back({1000, i, i + 1});
  for (PlannerStrategy s : {PlannerStrategy::greedy_by_size, PlannerStrategy::greedy_by_order}) {
    MemoryPlan p = plan_memory(chain, s);
    EXPECT_TRUE(memory_plan_is_valid(chain, p)) << planner_name(s);
    EXPECT_EQ(p.arena_bytes, 2 * 1024) << planner_name(s);
  }
  MemoryPlan none = plan_memory(chain, PlannerStrategy::no_reuse);
  EXPECT_TRUE(memory_plan_is_valid(chain, none));
  EXPECT_EQ(none.arena_bytes, 10 * 1024);
}

TEST(MemoryPlanner, RandomLifetimesAreAlwaysValid) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLifetime> bufs;
    int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      int a = static_cast<int>(rng() % 30), len = static_cast<int>(rng() % 10);
      bufs.push_back({static_cast<int64_t>(rng() % 5000), a, a + len});
    }
    int64_t total = 0, peak = 0;
    for (int step = 0; step < 40; ++step) {
      int64_t live = 0;
      for (const auto& b : bufs)
        if (b.first_step <= step && step <= b.last_step) live += (b.bytes + 63) / 64 * 64;
      peak = std::max(peak, live);
    }
    for (const auto& b : bufs) total += (b.bytes + 63) / 64 * 64;
    for (PlannerStrategy s : {PlannerStrategy::greedy_by_size, PlannerStrategy::greedy_by_order, PlannerStrategy::no_reuse}) {
      MemoryPlan p = plan_memory(bufs, s);
      ASSERT_TRUE(memory_plan_is_valid(bufs, p)) << planner_name(s) << " trial " << trial;
      EXPECT_GE(p.arena_bytes, peak);  // no plan beats the peak of live bytes
      EXPECT_LE(p.arena_bytes, total);
    }
  }
}

TEST(MemoryPlanner, ValidityCheckCatchesOverlap) {
  std::vector<BufferLifetime> bufs = {{128, 0, 2}, {128, 1, 3}};
  MemoryPlan bad;
  bad.offsets = {0, 64};
  bad.arena_bytes = 256;
  EXPECT_FALSE(memory_plan_is_valid(bufs, bad));
  bad.offsets = {0, 128};
  EXPECT_TRUE(memory_plan_is_valid(bufs, bad));
}

}  // namespace
}  // namespace tac::builder
