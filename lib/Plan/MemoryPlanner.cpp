//===- MemoryPlanner.cpp - Static buffer offsets from liveness ------------===//

#include "cleave/Plan/MemoryPlanner.h"

#include <algorithm>
#include <numeric>

using namespace cleave;

static uint64_t alignTo(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

MemoryPlan cleave::planMemory(const std::vector<BufferInterval> &buffers,
                              uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].size != buffers[b].size)
      return buffers[a].size > buffers[b].size;
    return buffers[a].firstUse < buffers[b].firstUse;
  });

  struct Placed {
    uint64_t begin, end;
    int64_t firstUse, lastUse;
  };
  std::vector<Placed> placed;
  for (size_t idx : order) {
    const BufferInterval &buf = buffers[idx];
    uint64_t size = alignTo(std::max<uint64_t>(buf.size, 1), alignment);
    plan.naiveBytes += size;
    // Collect the memory ranges of placed buffers alive at the same time,
    // sorted by start, and take the first gap that fits.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const Placed &p : placed)
      if (p.firstUse <= buf.lastUse && buf.firstUse <= p.lastUse)
        busy.push_back({p.begin, p.end});
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (auto [begin, end] : busy) {
      if (offset + size <= begin)
        break;
      offset = std::max(offset, end);
    }
    plan.offsets[idx] = offset;
    placed.push_back({offset, offset + size, buf.firstUse, buf.lastUse});
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
  }
  return plan;
}
