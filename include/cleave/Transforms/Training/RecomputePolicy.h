//===- RecomputePolicy.h - Recomputation policies ---------------*- C++ -*-===//
//
// --recompute's values (none, selective, full, budget:<bytes>), parsed in
// one place for --cleave-insert-recompute and for the driver, which checks
// them before it reads a model.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_TRAINING_RECOMPUTEPOLICY_H
#define CLEAVE_TRANSFORMS_TRAINING_RECOMPUTEPOLICY_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace cleave {

struct RecomputePolicy {
  enum Kind { None, Selective, Full, Budget };
  Kind kind = None;
  /// Budget: the bytes of saved activations to keep.
  int64_t budgetBytes = 0;
};

/// Parses a policy: none (or empty), selective, full or budget:<bytes>
/// (`<n>[k|m|g][i][b]`, k = 1024, at most 2^63 - 1 bytes). Returns the
/// problem with a bad one, else "".
std::string parseRecomputePolicy(llvm::StringRef spec, RecomputePolicy &out);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_TRAINING_RECOMPUTEPOLICY_H
