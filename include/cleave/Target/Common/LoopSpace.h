//===- LoopSpace.h - Static iteration spaces of scf.parallel ----*- C++ -*-===//
//
// The constant bounds of a kernel's parallel loops, which the CPU target's
// thread split (`--cleave-cpu-parallel-loops`) and the CUDA target's launch
// mapping both size their work by.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_COMMON_LOOPSPACE_H
#define CLEAVE_TARGET_COMMON_LOOPSPACE_H

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace cleave {

/// Constant lower bounds, extents (trip counts) and steps of `loop`;
/// failure when a bound is not constant or a step not positive.
mlir::LogicalResult getStaticLoopSpace(mlir::scf::ParallelOp loop,
                                       llvm::SmallVectorImpl<int64_t> &lbs,
                                       llvm::SmallVectorImpl<int64_t> &extents,
                                       llvm::SmallVectorImpl<int64_t> &steps);

} // namespace cleave

#endif // CLEAVE_TARGET_COMMON_LOOPSPACE_H
