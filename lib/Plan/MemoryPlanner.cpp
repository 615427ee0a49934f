//===- MemoryPlanner.cpp - Static buffer offsets from liveness ------------===//
//
// Offline dynamic storage allocation: each buffer is a rectangle (bytes x
// its live commands) placed in the arena without overlapping another whose
// lifetime meets its own. Greedy placement, as TFLite's and XLA's heap
// simulators do, in a few orders (largest first; largest area, bytes x
// lifetime, first; first live first) and two fits (the lowest gap, and the
// tightest gap, which keeps large gaps for large buffers); the smallest
// arena wins, the first on a tie, and the search stops at the first that
// reaches the peak of live bytes, which none can beat. No order is best on
// every program: largest-first packs layer programs tightly, while a pipeline's
// saved activations (many equal buffers with staggered lifetimes) pack better
// by area or by time.
//
//===----------------------------------------------------------------------===//

#include "cleave/Plan/MemoryPlanner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

using namespace cleave;

static uint64_t alignTo(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

namespace {

enum class Fit { Lowest, Tightest };

/// Commands per block of the index of placed buffers by time.
constexpr int64_t kBlock = 64;

/// Places the buffers in `order`, each at the gap `fit` chooses among the
/// placed buffers whose lifetimes meet its own. The placed buffers are
/// indexed by blocks of kBlock commands they live in, so that finding
/// those alive with a buffer reads its blocks, not every placed buffer.
MemoryPlan place(const std::vector<BufferInterval> &buffers,
                 const std::vector<size_t> &order, uint64_t alignment,
                 Fit fit) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  if (buffers.empty())
    return plan;
  int64_t first = buffers.front().firstUse, last = buffers.front().lastUse;
  for (const BufferInterval &b : buffers) {
    first = std::min(first, b.firstUse);
    last = std::max(last, std::max(b.firstUse, b.lastUse));
  }
  auto blockOf = [&](int64_t command) {
    return size_t((command - first) / kBlock);
  };
  std::vector<std::vector<uint32_t>> blocks(blockOf(last) + 1);
  std::vector<uint64_t> begins(buffers.size()), ends(buffers.size());
  std::vector<uint32_t> seen(buffers.size(), 0);
  uint32_t visit = 0;
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  for (size_t idx : order) {
    const BufferInterval &buf = buffers[idx];
    uint64_t size = alignTo(std::max<uint64_t>(buf.size, 1), alignment);
    plan.naiveBytes += size;
    // The memory ranges of placed buffers alive at the same time, by start.
    size_t from = blockOf(buf.firstUse),
           to = blockOf(std::max(buf.firstUse, buf.lastUse));
    busy.clear();
    ++visit;
    for (size_t k = from; k <= to; ++k)
      for (uint32_t j : blocks[k]) {
        if (seen[j] == visit)
          continue;
        seen[j] = visit;
        const BufferInterval &p = buffers[j];
        if (p.firstUse <= buf.lastUse && buf.firstUse <= p.lastUse)
          busy.push_back({begins[j], ends[j]});
      }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0, cursor = 0;
    uint64_t bestGap = std::numeric_limits<uint64_t>::max();
    bool found = false;
    for (auto [begin, end] : busy) {
      if (cursor + size <= begin) {
        uint64_t gap = begin - cursor;
        if (fit == Fit::Lowest) {
          offset = cursor;
          found = true;
          break;
        }
        if (gap < bestGap) {
          bestGap = gap;
          offset = cursor;
          found = true;
        }
      }
      cursor = std::max(cursor, end);
    }
    if (!found)
      offset = cursor; // above everything alive with it
    plan.offsets[idx] = offset;
    begins[idx] = offset;
    ends[idx] = offset + size;
    for (size_t k = from; k <= to; ++k)
      blocks[k].push_back(uint32_t(idx));
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
  }
  return plan;
}

} // namespace

/// The most aligned bytes live at once: no placement's arena is smaller.
static uint64_t peakLive(const std::vector<BufferInterval> &buffers,
                         uint64_t alignment) {
  // (command, +bytes at its first use / -bytes after its last), frees first.
  std::vector<std::pair<int64_t, int64_t>> events;
  events.reserve(2 * buffers.size());
  for (const BufferInterval &b : buffers) {
    int64_t size = int64_t(alignTo(std::max<uint64_t>(b.size, 1), alignment));
    events.push_back({b.firstUse, size});
    events.push_back({b.lastUse + 1, -size});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (auto [at, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return uint64_t(peak);
}

MemoryPlan cleave::planMemory(const std::vector<BufferInterval> &buffers,
                              uint64_t alignment) {
  const uint64_t bound = peakLive(buffers, alignment);
  std::vector<size_t> base(buffers.size());
  std::iota(base.begin(), base.end(), 0);
  auto sizeOf = [&](size_t i) { return buffers[i].size; };
  auto lifetime = [&](size_t i) {
    return uint64_t(
        std::max<int64_t>(1, buffers[i].lastUse - buffers[i].firstUse + 1));
  };
  auto bySize = [&](size_t a, size_t b) {
    if (sizeOf(a) != sizeOf(b))
      return sizeOf(a) > sizeOf(b);
    return buffers[a].firstUse < buffers[b].firstUse;
  };
  auto byArea = [&](size_t a, size_t b) {
    // Compared as long double: bytes x commands can pass 2^64.
    long double x = (long double)sizeOf(a) * lifetime(a),
                y = (long double)sizeOf(b) * lifetime(b);
    if (x != y)
      return x > y;
    return bySize(a, b);
  };
  auto byStart = [&](size_t a, size_t b) {
    if (buffers[a].firstUse != buffers[b].firstUse)
      return buffers[a].firstUse < buffers[b].firstUse;
    return sizeOf(a) > sizeOf(b);
  };
  MemoryPlan best;
  bool first = true;
  for (auto less : {std::function<bool(size_t, size_t)>(bySize),
                    std::function<bool(size_t, size_t)>(byArea),
                    std::function<bool(size_t, size_t)>(byStart)}) {
    std::vector<size_t> order = base;
    std::stable_sort(order.begin(), order.end(), less);
    for (Fit fit : {Fit::Lowest, Fit::Tightest}) {
      MemoryPlan plan = place(buffers, order, alignment, fit);
      if (first || plan.arenaBytes < best.arenaBytes)
        best = std::move(plan);
      first = false;
      // At the peak of live bytes no order can do better.
      if (best.arenaBytes <= bound)
        return best;
    }
  }
  return best;
}
