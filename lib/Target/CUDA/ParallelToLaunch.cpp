//===- ParallelToLaunch.cpp - Top-level parallel loops as gpu.launch ------===//
//
// `--cleave-cuda-parallel-to-launch`: every top-level scf.parallel of a
// kernel function (static bounds) becomes a gpu.launch over the linearized
// iteration space, `block-size` threads per block, a bounds guard and
// delinearized indices; elementwise loops run V consecutive innermost
// iterations per thread and move each operand with one 16-byte
// vector.load/store (see getVectorWidth in LaunchUtils.cpp). Any other run
// of top-level compute becomes a one-thread launch.
//
//===----------------------------------------------------------------------===//

#include "LaunchUtils.h"
#include "cleave/Target/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#define DEBUG_TYPE "cleave-cuda-parallel-to-launch"

namespace cleave {
#define GEN_PASS_DEF_PARALLELTOLAUNCHPASS
#include "cleave/Target/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Ops that may stay in the host function: they allocate or describe
/// buffers, or are constants the launches capture.
bool isHostOp(Operation *op) {
  return isa<memref::AllocOp, memref::DeallocOp, func::ReturnOp, gpu::LaunchOp>(
             op) ||
         op->hasTrait<OpTrait::ConstantLike>() ||
         isa<ViewLikeOpInterface, memref::CollapseShapeOp,
             memref::ExpandShapeOp, memref::CastOp>(op);
}

struct ParallelToLaunchPass
    : ::cleave::impl::ParallelToLaunchPassBase<ParallelToLaunchPass> {
  using ParallelToLaunchPassBase::ParallelToLaunchPassBase;

  gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, int64_t grid,
                             int64_t block) {
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value g = arith::ConstantIndexOp::create(b, loc, grid);
    Value t = arith::ConstantIndexOp::create(b, loc, block);
    auto launch = gpu::LaunchOp::create(b, loc, g, one, one, t, one, one);
    OpBuilder inner(&launch.getBody().front(), launch.getBody().front().end());
    gpu::TerminatorOp::create(inner, loc);
    return launch;
  }

  LogicalResult convertParallel(scf::ParallelOp loop) {
    SmallVector<int64_t> lbs, extents, steps;
    if (failed(::cleave::getStaticLoopSpace(loop, lbs, extents, steps)))
      return loop.emitError("cuda: parallel loop bounds must be constant");
    int64_t total = 1;
    for (int64_t n : extents)
      total *= n;
    if (!loop.getInitVals().empty())
      return loop.emitError("cuda: parallel loops with reductions are not "
                            "supported");
    if (total == 0) {
      loop.erase();
      return success();
    }
    // Each thread runs `width` consecutive iterations of the innermost
    // dimension (width = 1: one iteration per thread). The threads cover
    // the iteration space with the innermost extent divided by `width`.
    int64_t last = extents.size() - 1;
    int64_t width =
        ::cleave::getVectorWidth(loop, lbs[last], extents[last], steps[last]);
    SmallVector<int64_t> threadExtents(extents);
    threadExtents[last] /= width;
    int64_t threads = total / width;
    int64_t block = std::min<int64_t>(blockSize, threads);
    int64_t grid = (threads + block - 1) / block;
    if (grid > (int64_t(1) << 31) - 1)
      return loop.emitError("cuda: iteration space too large for one grid");
    Location loc = loop.getLoc();
    OpBuilder b(loop);
    gpu::LaunchOp launch = createLaunch(b, loc, grid, block);
    b.setInsertionPointToStart(&launch.getBody().front());
    Value bid = launch.getBlockIds().x, tid = launch.getThreadIds().x;
    Value linear = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, bid,
                              arith::ConstantIndexOp::create(b, loc, block)),
        tid);
    if (threads % block != 0) {
      Value inBounds = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ult, linear,
          arith::ConstantIndexOp::create(b, loc, threads));
      auto guard = scf::IfOp::create(b, loc, inBounds, /*withElse=*/false);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
    }
    // The thread's (first) iteration: delinearize `linear` over
    // threadExtents; the innermost index then counts groups of `width`.
    SmallVector<int64_t> threadSteps(steps);
    threadSteps[last] *= width;
    SmallVector<Value> ivs = ::cleave::delinearizeIndex(
        b, loc, linear, lbs, threadExtents, threadSteps);
    // Copy k runs iteration ivs[last] + k (getVectorWidth requires lower
    // bound 0 and step 1 when width > 1). As the vector accesses are the
    // only uses of the variable, the `+ k` indices end up unused and folded.
    (void)::cleave::cloneVectorizedBody(b, loc, loop, ivs, width, IRMapping());
    loop.erase();
    ::cleave::sinkViewsIntoLaunch(launch);
    return success();
  }

  /// Moves a run of top-level compute ops into a one-thread launch.
  LogicalResult wrapSerial(ArrayRef<Operation *> ops) {
    Location loc = ops.front()->getLoc();
    llvm::SmallPtrSet<Operation *, 8> inRun(ops.begin(), ops.end());
    for (Operation *op : ops)
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers())
          if (!inRun.contains(user))
            return op->emitError("cuda: a value computed on the device is "
                                 "used on the host");
    OpBuilder b(ops.front());
    gpu::LaunchOp launch = createLaunch(b, loc, 1, 1);
    Operation *terminator = launch.getBody().front().getTerminator();
    for (Operation *op : ops)
      op->moveBefore(terminator);
    ::cleave::sinkViewsIntoLaunch(launch);
    return success();
  }

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      SmallVector<Operation *> ops;
      for (Operation &op : func.getBody().front())
        ops.push_back(&op);
      SmallVector<Operation *> run;
      auto flush = [&]() -> LogicalResult {
        if (run.empty())
          return success();
        LogicalResult r = wrapSerial(run);
        run.clear();
        return r;
      };
      for (Operation *op : ops) {
        if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
          if (failed(flush()) || failed(convertParallel(loop)))
            return signalPassFailure();
          continue;
        }
        if (isHostOp(op)) {
          // Constants and views used only by the serial run go with it;
          // launches made earlier (row kernels) end the run, which must
          // stay in order with them.
          if (!run.empty() && !isa<memref::AllocOp, memref::DeallocOp,
                                   func::ReturnOp, gpu::LaunchOp>(op))
            continue;
          if (failed(flush()))
            return signalPassFailure();
          continue;
        }
        run.push_back(op);
      }
      if (failed(flush()))
        return signalPassFailure();
      // Views only the launches used are now dead on the host.
      SmallVector<Operation *> dead;
      for (Operation &op : llvm::reverse(func.getBody().front()))
        if (::cleave::isViewOp(&op) && op.use_empty())
          dead.push_back(&op);
      for (Operation *op : dead)
        if (op->use_empty())
          op->erase();
    }
  }
};

} // namespace
