//===- MemoryPlanner.h - Static buffer offsets from liveness ----*- C++ -*-===//
//
// Assigns every buffer of a plan a byte offset in one arena so that buffers
// whose lifetimes overlap never overlap in memory. The arena size is the
// plan's exact peak memory.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLAN_MEMORYPLANNER_H
#define CLEAVE_PLAN_MEMORYPLANNER_H

#include <cstdint>
#include <vector>

namespace cleave {

/// A buffer live over the commands [firstUse, lastUse] (inclusive).
struct BufferInterval {
  uint64_t size = 0;
  int64_t firstUse = 0;
  int64_t lastUse = 0;
};

struct MemoryPlan {
  std::vector<uint64_t> offsets; ///< One per interval, aligned.
  uint64_t arenaBytes = 0;       ///< Peak: the end of the highest buffer.
  uint64_t naiveBytes = 0;       ///< Sum of all sizes (no reuse), for reports.
};

/// Greedy placement: buffers are placed one by one at an aligned offset
/// that does not collide with an already placed buffer whose lifetime
/// overlaps, in three orders (largest first, largest bytes x lifetime
/// first, first live first) with two fits (lowest gap, tightest gap); the
/// smallest arena is kept (largest first at the lowest gap on a tie).
/// Deterministic for equal inputs.
MemoryPlan planMemory(const std::vector<BufferInterval> &buffers,
                      uint64_t alignment = 64);

} // namespace cleave

#endif // CLEAVE_PLAN_MEMORYPLANNER_H
