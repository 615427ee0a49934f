//===- MemoryMeasure.h - What a run really writes of its arena --*- C++ -*-===//
//
// cleave_rt_executor_measure_memory: before a measured run every arena byte
// that must survive between runs (constants, states, inputs, what the init
// commands set up) is left alone and every other byte gets a poison value
// that depends on its offset; after the run the bytes that no longer hold
// their poison are the ones the run wrote.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_MEMORYMEASURE_H
#define CLEAVE_RUNTIME_MEMORYMEASURE_H

#include "cleave/PlanFormat.h"
#include "cleave_rt.h"

#include <cstdint>
#include <vector>

namespace cleave::rt {

/// Bytes [begin, end) of an arena.
struct ByteRange {
  uint64_t begin = 0, end = 0;
};

/// The arena bytes of `plan` that hold something a run may read without
/// writing it first: constants, states, inputs, and the destinations of
/// Fill, Copy and RandomNormal init commands. Sorted, merged, clipped to
/// [0, arenaBytes).
std::vector<ByteRange> heldRanges(const plan::Plan &plan);

/// The complement of heldRanges in [0, arenaBytes): the bytes a measured
/// run starts with poison in.
std::vector<ByteRange> poisonRanges(const plan::Plan &plan);

/// The poison value of the arena byte at `offset`: a hash of the offset
/// (so poison copied to another place is seen as written), never 0x00 or
/// 0xFF (so zeros and all-ones written over it are seen).
uint8_t poisonByte(uint64_t offset);

/// Writes every byte of `ranges` of `arena` with its poison value.
void poisonArena(uint8_t *arena, const std::vector<ByteRange> &ranges);

/// Compares `ranges` of `arena` with their poison values after a run:
/// written_bytes counts the bytes that differ, high_water_mark is one past
/// the highest of them (0 if none). Sets every field of *usage from the
/// plan and the ranges.
void measureArena(const uint8_t *arena, const plan::Plan &plan,
                  const std::vector<ByteRange> &ranges,
                  cleave_rt_memory_usage_t *usage);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_MEMORYMEASURE_H
