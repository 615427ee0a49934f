//===- CUDAPasses.h - Passes of the CUDA kernel pipeline --------*- C++ -*-===//
//
// Internal to lib/Target/CUDA: the passes buildCUDAKernelPipeline adds and
// the helpers they share.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TARGET_CUDA_CUDAPASSES_H
#define CLEAVE_LIB_TARGET_CUDA_CUDAPASSES_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace cleave {

/// Constant lower bounds, extents (trip counts) and steps of `loop`;
/// failure when a bound is not constant or a step not positive.
mlir::LogicalResult getStaticLoopSpace(mlir::scf::ParallelOp loop,
                                       llvm::SmallVectorImpl<int64_t> &lbs,
                                       llvm::SmallVectorImpl<int64_t> &extents,
                                       llvm::SmallVectorImpl<int64_t> &steps);

/// The induction variables (lb + i * step per dimension) of iteration
/// `linear` of a row-major iteration space of `extents`.
llvm::SmallVector<mlir::Value>
delinearizeIndex(mlir::OpBuilder &b, mlir::Location loc, mlir::Value linear,
                 llvm::ArrayRef<int64_t> lbs, llvm::ArrayRef<int64_t> extents,
                 llvm::ArrayRef<int64_t> steps);

/// How many consecutive innermost iterations of `loop` one thread can run
/// with 16-byte vector accesses (1: not vectorizable; see CUDAPipeline.cpp).
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

/// Clones into `launch` the view ops (subview, reshape, cast) and constants
/// defined outside it that it uses, so kernels take whole buffers.
void sinkViewsIntoLaunch(mlir::gpu::LaunchOp launch);

/// `cleave-cuda-rows-to-launch`: maps every `cleave.row_kernel` scf.parallel
/// (from --cleave-row-kernels) to a gpu.launch with one block per row; the
/// block's threads stride over each op's columns, reductions end in a
/// gpu.all_reduce, and phases are separated by barriers. Blocks have the
/// smallest multiple of 32 threads covering the widest phase, at most
/// `maxBlockSize`.
std::unique_ptr<mlir::Pass> createRowsToLaunchPass(int64_t maxBlockSize = 512);

/// `cleave-cuda-lower-all-reduce`: lowers gpu.all_reduce in gpu.funcs to
/// warp shuffles and a shared-memory exchange (upstream's rewrite).
std::unique_ptr<mlir::Pass> createLowerAllReducePass();

/// `cleave-cuda-sink-into-launches`: sinkViewsIntoLaunch on every launch.
std::unique_ptr<mlir::Pass> createSinkIntoLaunchesPass();

/// `cleave-cuda-emulate-launches`: runs gpu.launch bodies as host loops over
/// blocks, phases (split at barriers and all-reduces) and threads, so that
/// the CPU backend can check the launch mapping (EmulateLaunches.cpp).
std::unique_ptr<mlir::Pass> createEmulateLaunchesPass();
void registerEmulateLaunchesPass();

void registerRowReductionPasses();

} // namespace cleave

#endif // CLEAVE_LIB_TARGET_CUDA_CUDAPASSES_H
