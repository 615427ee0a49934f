//===- TrainingTags.h - Backward, gradient and recompute tags ---*- C++ -*-===//
//
// Names of the attributes --cleave-build-train-step (mark-backward,
// mark-gradients) and --cleave-insert-recompute put on ops, and the
// statistics the latter leaves on the module for the driver. Sharding, the
// plan builder and the pipelines read them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ANALYSIS_TRAININGTAGS_H
#define CLEAVE_ANALYSIS_TRAININGTAGS_H

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace cleave {

/// Unit attribute on the ops autodiff built (the backward pass).
inline constexpr llvm::StringLiteral kBackwardAttr = "cleave.backward";
/// On the op that computes a parameter's gradient: the parameter's name.
inline constexpr llvm::StringLiteral kGradientOfAttr = "cleave.gradient_of";
/// Unit attribute on the forward ops --cleave-insert-recompute cloned.
inline constexpr llvm::StringLiteral kRecomputeAttr = "cleave.recompute";
/// Dictionary attribute on the module with the pass's statistics.
inline constexpr llvm::StringLiteral kRecomputeStatsAttr =
    "cleave.recompute_stats";

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
