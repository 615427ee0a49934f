//===- LaunchUtils.h - Helpers of the CUDA launch mapping -------*- C++ -*-===//
//
// Internal to lib/Target/CUDA: what the passes that build gpu.launch ops
// share (LaunchUtils.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TARGET_CUDA_LAUNCHUTILS_H
#define CLEAVE_LIB_TARGET_CUDA_LAUNCHUTILS_H

#include "cleave/Target/Common/LoopSpace.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace cleave {

/// The induction variables (lb + i * step per dimension) of iteration
/// `linear` of a row-major iteration space of `extents`.
llvm::SmallVector<mlir::Value>
delinearizeIndex(mlir::OpBuilder &b, mlir::Location loc, mlir::Value linear,
                 llvm::ArrayRef<int64_t> lbs, llvm::ArrayRef<int64_t> extents,
                 llvm::ArrayRef<int64_t> steps);

/// How many consecutive innermost iterations of `loop` one thread can run
/// with 16-byte vector accesses (1: not vectorizable; see LaunchUtils.cpp).
int64_t getVectorWidth(mlir::scf::ParallelOp loop, int64_t innerLb,
                       int64_t innerExtent, int64_t innerStep);

/// Clones `loop`'s body (without its terminator) at `b` for the `width`
/// iterations ivs, ivs + (0,..,1), ..., (innermost + width - 1), starting
/// from `base`; loads and stores indexed by the innermost variable become
/// one vector access when width > 1. Returns each copy's mapping.
llvm::SmallVector<mlir::IRMapping>
cloneVectorizedBody(mlir::OpBuilder &b, mlir::Location loc,
                    mlir::scf::ParallelOp loop, llvm::ArrayRef<mlir::Value> ivs,
                    int64_t width, const mlir::IRMapping &base);

/// Whether `op` is a view of a buffer (subview, reshape, cast; not an
/// allocation), which kernels compute themselves.
bool isViewOp(mlir::Operation *op);

/// Clones into the start of `launch` the view ops (subview, reshape, cast)
/// and constants defined outside it that it uses, so kernels take whole
/// buffers.
void sinkViewsIntoLaunch(mlir::gpu::LaunchOp launch);

} // namespace cleave

#endif // CLEAVE_LIB_TARGET_CUDA_LAUNCHUTILS_H
