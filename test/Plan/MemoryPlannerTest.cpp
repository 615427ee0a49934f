//===- MemoryPlannerTest.cpp - Tests of the static memory planner ---------===//

#include "cleave/Plan/MemoryPlanner.h"

#include <gtest/gtest.h>

#include <random>

using namespace cleave;

namespace {

bool overlaps(const BufferInterval &a, const BufferInterval &b) {
  return a.firstUse <= b.lastUse && b.firstUse <= a.lastUse;
}

/// Checks the planner's contract: alignment, no collision of live buffers,
/// everything inside the arena.
void checkPlan(const std::vector<BufferInterval> &bufs, const MemoryPlan &plan,
               uint64_t alignment) {
  ASSERT_EQ(plan.offsets.size(), bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % alignment, 0u);
    EXPECT_LE(plan.offsets[i] + bufs[i].size, plan.arenaBytes);
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      if (!overlaps(bufs[i], bufs[j]))
        continue;
      bool disjoint = plan.offsets[i] + bufs[i].size <= plan.offsets[j] ||
                      plan.offsets[j] + bufs[j].size <= plan.offsets[i];
      EXPECT_TRUE(disjoint) << "buffers " << i << " and " << j
                            << " are live together and overlap";
    }
  }
}

TEST(MemoryPlanner, ReusesMemoryOfDeadBuffers) {
  // A chain a -> b -> c -> d: only two buffers are ever live together.
  std::vector<BufferInterval> bufs = {
      {1024, 0, 1}, {1024, 1, 2}, {1024, 2, 3}, {1024, 3, 4}};
  MemoryPlan plan = planMemory(bufs, 64);
  checkPlan(bufs, plan, 64);
  EXPECT_EQ(plan.arenaBytes, 2048u);
  EXPECT_EQ(plan.naiveBytes, 4096u);
}

TEST(MemoryPlanner, LiveTogetherNeverShare) {
  std::vector<BufferInterval> bufs = {{100, 0, 5}, {200, 0, 5}, {300, 0, 5}};
  MemoryPlan plan = planMemory(bufs, 64);
  checkPlan(bufs, plan, 64);
  EXPECT_EQ(plan.arenaBytes, 128u + 256u + 320u);
}

TEST(MemoryPlanner, PacksWhereLargestFirstFragments) {
  // Largest first puts the 384-byte buffers at 0 and 384, the 320 at 0
  // (the first 384 is dead by then), and the 256, live with the second 384
  // and the 320, fits in no gap: 1024 bytes. First live first puts the 256
  // at 0 and the 320 above it: 768, the peak of live bytes (command 2).
  std::vector<BufferInterval> bufs = {
      {320, 4, 6}, {384, 0, 2}, {384, 2, 3}, {256, 3, 7}};
  MemoryPlan plan = planMemory(bufs, 64);
  checkPlan(bufs, plan, 64);
  EXPECT_EQ(plan.arenaBytes, 768u);
}

TEST(MemoryPlanner, ZeroSizedBuffersGetDistinctSlots) {
  std::vector<BufferInterval> bufs = {{0, 0, 1}, {0, 0, 1}};
  MemoryPlan plan = planMemory(bufs, 64);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
}

TEST(MemoryPlanner, RandomProblemsAreValidAndNoWorseThanNoReuse) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferInterval> bufs;
    int n = 1 + rng() % 40;
    for (int i = 0; i < n; ++i) {
      int64_t first = rng() % 30;
      bufs.push_back({static_cast<uint64_t>(rng() % 5000), first,
                      first + static_cast<int64_t>(rng() % 10)});
    }
    MemoryPlan plan = planMemory(bufs, 64);
    checkPlan(bufs, plan, 64);
    EXPECT_LE(plan.arenaBytes, plan.naiveBytes);
    // The peak can never be below the largest set of simultaneously live bytes.
    for (int64_t t = 0; t < 40; ++t) {
      uint64_t live = 0;
      for (const BufferInterval &b : bufs)
        if (b.firstUse <= t && t <= b.lastUse)
          live += b.size;
      EXPECT_GE(plan.arenaBytes, live);
    }
  }
}

} // namespace
