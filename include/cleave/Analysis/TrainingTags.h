//===- TrainingTags.h - Backward, gradient and recompute tags ---*- C++ -*-===//
//
// The statistics --cleave-insert-recompute leaves on the module for the
// driver, and attribute stripping. The tags themselves (cleave.backward,
// cleave.gradient_of, cleave.recompute) are named in
// Cleave/IR/CleaveMetadata.h.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ANALYSIS_TRAININGTAGS_H
#define CLEAVE_ANALYSIS_TRAININGTAGS_H

#include "Cleave/IR/CleaveMetadata.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace cleave {

struct RecomputeStats {
  std::string policy;
  int64_t savedBytesBefore = 0, savedBytesAfter = 0;
  int64_t recomputeFlops = 0, extraFlops = 0, recomputedOps = 0;
};

/// Removes the discardable attribute `name` from every op of `module`, not
/// from the module itself nor from nested modules (programs of their own).
void stripAttribute(mlir::ModuleOp module, llvm::StringRef name);

/// Reads (and, with `remove`, deletes) the statistics left on `module`.
std::optional<RecomputeStats> takeRecomputeStats(mlir::ModuleOp module,
                                                 bool remove = true);

} // namespace cleave

#endif // CLEAVE_ANALYSIS_TRAININGTAGS_H
