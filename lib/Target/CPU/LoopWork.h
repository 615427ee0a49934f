//===- LoopWork.h - Saturating counts of scalar iterations ------*- C++ -*-===//
//
// Internal to lib/Target/CPU: how `--cleave-cpu-parallel-loops` and
// `--cleave-cpu-split-outer-reductions` count the work of a loop nest to
// compare it with their `min-work`.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TARGET_CPU_LOOPWORK_H
#define CLEAVE_LIB_TARGET_CPU_LOOPWORK_H

#include <algorithm>
#include <cstdint>

namespace cleave {

/// The count at which work saturates (2^60 scalar iterations).
constexpr int64_t kMaxWork = int64_t(1) << 60;

/// a * b, each taken as at least 1, saturated at kMaxWork.
inline int64_t mulSat(int64_t a, int64_t b) {
  a = std::max<int64_t>(a, 1);
  b = std::max<int64_t>(b, 1);
  return a > kMaxWork / b ? kMaxWork : a * b;
}

} // namespace cleave

#endif // CLEAVE_LIB_TARGET_CPU_LOOPWORK_H
