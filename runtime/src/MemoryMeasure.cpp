//===- MemoryMeasure.cpp - What a run really writes of its arena ----------===//
//
// The poison of each byte comes from a hash of its 8-byte word's index, so
// a range is filled and compared a word at a time.
//
//===----------------------------------------------------------------------===//

#include "MemoryMeasure.h"

#include <algorithm>
#include <cstring>

namespace cleave::rt {

using namespace plan;

std::vector<ByteRange> heldRanges(const Plan &plan) {
  std::vector<ByteRange> held;
  auto add = [&](uint64_t offset, uint64_t bytes) {
    uint64_t end = offset + bytes;
    if (bytes == 0 || end < offset || offset >= plan.arenaBytes)
      return;
    held.push_back({offset, std::min(end, plan.arenaBytes)});
  };
  for (const Constant &c : plan.constants)
    add(c.info.offset, c.info.byteSize());
  for (const StateTensor &s : plan.states)
    add(s.info.offset, s.info.byteSize());
  for (const TensorInfo &t : plan.inputs)
    add(t.offset, t.byteSize());
  for (const Command &c : plan.initCommands) {
    if (c.params.empty() || c.params[0] < 0)
      continue;
    uint64_t n = static_cast<uint64_t>(c.params[0]);
    if (c.kind == CommandKind::Fill && !c.buffers.empty())
      add(c.buffers[0], n);
    else if (c.kind == CommandKind::Copy && c.buffers.size() > 1)
      add(c.buffers[1], n);
    else if (c.kind == CommandKind::RandomNormal && !c.buffers.empty())
      add(c.buffers[0], n * sizeof(float));
  }
  std::sort(
      held.begin(), held.end(),
      [](const ByteRange &a, const ByteRange &b) { return a.begin < b.begin; });
  std::vector<ByteRange> merged;
  for (const ByteRange &r : held) {
    if (!merged.empty() && r.begin <= merged.back().end)
      merged.back().end = std::max(merged.back().end, r.end);
    else
      merged.push_back(r);
  }
  return merged;
}

std::vector<ByteRange> poisonRanges(const Plan &plan) {
  std::vector<ByteRange> out;
  uint64_t next = 0;
  for (const ByteRange &r : heldRanges(plan)) {
    if (r.begin > next)
      out.push_back({next, r.begin});
    next = r.end;
  }
  if (next < plan.arenaBytes)
    out.push_back({next, plan.arenaBytes});
  return out;
}

/// The poison of the 8-byte word `word` (splitmix64 of its index), each
/// byte moved into [0x01, 0xFE].
static uint64_t poisonWord(uint64_t word) {
  uint64_t z = word + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  uint64_t out = 0;
  for (int i = 0; i < 8; ++i) {
    uint64_t b = (z >> (8 * i)) & 0xFF;
    out |= (1 + b % 254) << (8 * i);
  }
  return out;
}

uint8_t poisonByte(uint64_t offset) {
  return static_cast<uint8_t>(poisonWord(offset / 8) >> (8 * (offset % 8)));
}

/// Calls fn(offset, poison bytes, count) for each run of `r` that lies in
/// one 8-byte word.
template <typename Fn> static void forEachWord(const ByteRange &r, Fn fn) {
  for (uint64_t at = r.begin; at < r.end;) {
    uint64_t word = at / 8, end = std::min(r.end, word * 8 + 8);
    uint8_t poison[8];
    uint64_t value = poisonWord(word);
    for (int i = 0; i < 8; ++i)
      poison[i] = static_cast<uint8_t>(value >> (8 * i));
    fn(at, poison + at % 8, end - at);
    at = end;
  }
}

void poisonArena(uint8_t *arena, const std::vector<ByteRange> &ranges) {
  for (const ByteRange &r : ranges)
    forEachWord(r, [&](uint64_t at, const uint8_t *poison, uint64_t n) {
      std::memcpy(arena + at, poison, n);
    });
}

void measureArena(const uint8_t *arena, const Plan &plan,
                  const std::vector<ByteRange> &ranges,
                  cleave_rt_memory_usage_t *usage) {
  uint64_t poisoned = 0, written = 0, highWater = 0;
  for (const ByteRange &r : ranges) {
    poisoned += r.end - r.begin;
    forEachWord(r, [&](uint64_t at, const uint8_t *poison, uint64_t n) {
      if (std::memcmp(arena + at, poison, n) == 0)
        return;
      for (uint64_t i = 0; i < n; ++i)
        if (arena[at + i] != poison[i]) {
          ++written;
          highWater = at + i + 1;
        }
    });
  }
  usage->arena_bytes = plan.arenaBytes;
  usage->held_bytes = plan.arenaBytes - poisoned;
  usage->written_bytes = written;
  usage->high_water_mark = highWater;
}

} // namespace cleave::rt
