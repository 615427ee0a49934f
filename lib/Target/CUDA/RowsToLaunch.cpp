//===- RowsToLaunch.cpp - Row kernels as one thread block per row --------===//
//
// `cleave-cuda-rows-to-launch` maps the `cleave.row_kernel` loops that
// --cleave-row-kernels builds to gpu.launch, one block per row:
//
//   row = delinearize(blockIdx.x)
//   for each phase (inner scf.parallel) of the row body, in order:
//     elementwise:  for (i = tid; i < n; i += blockDim) body(i)
//     reduction:    acc = neutral
//                   for (i = tid; i < n; i += blockDim) acc = comb(acc, x(i))
//                   r = gpu.all_reduce acc uniform { comb }
//     gpu.barrier
//   row-level stores (out[row] = comb(out[row], r)) run on thread 0,
//   followed by a barrier.
//
// Barriers and all-reduces sit at the top level of the kernel body, so every
// thread of the block reaches them. __syncthreads orders the global-memory
// writes of one phase before the reads of the next within the block, and
// rows never touch each other's elements (checked by --cleave-row-kernels),
// so blocks need no synchronization between them.
//
//===----------------------------------------------------------------------===//

#include "LaunchUtils.h"
#include "cleave/Target/CUDA/Passes.h"
#include "cleave/Target/Common/Passes.h"

#include "Cleave/IR/CleaveMetadata.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#define DEBUG_TYPE "cleave-cuda-rows-to-launch"

namespace cleave {
#define GEN_PASS_DEF_ROWSTOLAUNCHPASS
#include "cleave/Target/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

using ::cleave::delinearizeIndex;
using ::cleave::getStaticLoopSpace;

int64_t product(ArrayRef<int64_t> values) {
  int64_t p = 1;
  for (int64_t v : values)
    p *= v;
  return p;
}

/// Clones the single combining region of an scf.reduce as `comb(lhs, rhs)`.
Value cloneCombiner(OpBuilder &b, Region &region, Value lhs, Value rhs) {
  Block &block = region.front();
  IRMapping map;
  map.map(block.getArgument(0), lhs);
  map.map(block.getArgument(1), rhs);
  for (Operation &op : block.without_terminator())
    b.clone(op, map);
  auto ret = cast<scf::ReduceReturnOp>(block.getTerminator());
  return map.lookupOrDefault(ret.getResult());
}

/// The block-wide reduction of each thread's `partial` with the combiner of
/// `region` (an scf.reduce region), as a uniform gpu.all_reduce. Shuffles
/// move 32-bit words, so integers narrower than 32 bits are reduced as i32
/// (sign-extended for signed min/max, zero-extended otherwise, which leaves
/// the low bits of sums, products and bitwise ops unchanged) and truncated.
FailureOr<Value> blockAllReduce(OpBuilder &b, Location loc, Value partial,
                                Region &region) {
  Type type = partial.getType();
  auto intType = dyn_cast<IntegerType>(type);
  bool widen = intType && intType.getWidth() < 32;
  Value value = partial;
  Operation *combiner = nullptr;
  if (widen) {
    Block &block = region.front();
    if (!llvm::hasSingleElement(block.without_terminator()))
      return failure();
    combiner = &block.front();
    Type i32 = b.getI32Type();
    value = isa<arith::MaxSIOp, arith::MinSIOp>(combiner)
                ? arith::ExtSIOp::create(b, loc, i32, partial).getResult()
                : arith::ExtUIOp::create(b, loc, i32, partial).getResult();
  }
  auto all =
      gpu::AllReduceOp::create(b, loc, value, gpu::AllReduceOperationAttr(),
                               /*uniform=*/true);
  Type wide = value.getType();
  Block *comb = b.createBlock(&all.getBody(), {}, {wide, wide}, {loc, loc});
  OpBuilder cb = OpBuilder::atBlockEnd(comb);
  Value r;
  if (widen) {
    OperationState state(loc, combiner->getName());
    state.addOperands({comb->getArgument(0), comb->getArgument(1)});
    state.addTypes(wide);
    state.addAttributes(combiner->getAttrs());
    r = cb.create(state)->getResult(0);
  } else {
    r = cloneCombiner(cb, region, comb->getArgument(0), comb->getArgument(1));
  }
  gpu::YieldOp::create(cb, loc, r);
  b.setInsertionPointAfter(all);
  if (!widen)
    return all.getResult();
  return arith::TruncIOp::create(b, loc, type, all.getResult()).getResult();
}

struct RowsToLaunchPass
    : ::cleave::impl::RowsToLaunchPassBase<RowsToLaunchPass> {
  using RowsToLaunchPassBase::RowsToLaunchPassBase;

  LogicalResult convert(scf::ParallelOp rows);

  void runOnOperation() override {
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (loop->hasAttr(mlir::cleave::attr::kRowKernel))
        loops.push_back(loop);
    });
    for (scf::ParallelOp loop : loops)
      if (failed(convert(loop)))
        return signalPassFailure();
  }
};

LogicalResult RowsToLaunchPass::convert(scf::ParallelOp rows) {
  Location loc = rows.getLoc();
  SmallVector<int64_t> rowLbs, rowExtents, rowSteps;
  if (failed(getStaticLoopSpace(rows, rowLbs, rowExtents, rowSteps)) ||
      !rows.getInitVals().empty())
    return rows.emitError("cuda: row loop must have constant bounds and no "
                          "reductions");
  int64_t numRows = product(rowExtents);
  if (numRows == 0) {
    rows.erase();
    return success();
  }
  if (numRows > (int64_t(1) << 31) - 1)
    return rows.emitError("cuda: too many rows for one grid");

  // Each phase: its iteration space, and how many consecutive innermost
  // iterations a thread runs per step (16-byte vector accesses where the
  // layout allows, as for elementwise launches).
  struct Phase {
    SmallVector<int64_t> lbs, extents, steps;
    int64_t width = 1;
  };
  DenseMap<Operation *, Phase> phases;
  // Block size: enough threads for the widest phase, a multiple of a warp.
  int64_t widest = 1;
  for (Operation &op : rows.getBody()->without_terminator()) {
    auto loop = dyn_cast<scf::ParallelOp>(&op);
    if (!loop)
      continue;
    Phase &phase = phases[loop];
    if (failed(getStaticLoopSpace(loop, phase.lbs, phase.extents, phase.steps)))
      return loop.emitError("cuda: row phase must have constant bounds");
    if (loop.getInitVals().size() > 1)
      return loop.emitError("cuda: row phase with several reductions");
    int64_t last = phase.extents.size() - 1;
    phase.width = ::cleave::getVectorWidth(
        loop, phase.lbs[last], phase.extents[last], phase.steps[last]);
    // Vector steps only pay when every thread gets whole vectors to move.
    if (product(phase.extents) / phase.width < 32)
      phase.width = 1;
    phase.extents[last] /= phase.width;
    phase.steps[last] *= phase.width;
    widest = std::max(widest, product(phase.extents));
  }
  int64_t block = std::min<int64_t>(maxBlockSize, (widest + 31) / 32 * 32);

  OpBuilder b(rows);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto launch = gpu::LaunchOp::create(
      b, loc, arith::ConstantIndexOp::create(b, loc, numRows), one, one,
      arith::ConstantIndexOp::create(b, loc, block), one, one);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value tid = launch.getThreadIds().x;
  Value blockDim = arith::ConstantIndexOp::create(b, loc, block);
  Value isFirst =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid,
                            arith::ConstantIndexOp::create(b, loc, 0));

  IRMapping map;
  map.map(rows.getInductionVars(),
          delinearizeIndex(b, loc, launch.getBlockIds().x, rowLbs, rowExtents,
                           rowSteps));

  Block *body = rows.getBody();
  for (Operation &op : body->without_terminator()) {
    if (auto phase = dyn_cast<scf::ParallelOp>(&op)) {
      const Phase &space = phases[phase];
      Value total =
          arith::ConstantIndexOp::create(b, loc, product(space.extents));
      bool reduces = !phase.getInitVals().empty();
      auto reduceOp = cast<scf::ReduceOp>(phase.getBody()->getTerminator());
      SmallVector<Value> inits;
      if (reduces)
        inits.push_back(map.lookupOrDefault(phase.getInitVals()[0]));
      auto strided = scf::ForOp::create(
          b, loc, tid, total, blockDim, inits,
          [&](OpBuilder &fb, Location floc, Value i, ValueRange acc) {
            // Iterations ivs .. ivs + (width - 1) in the innermost dimension.
            SmallVector<Value> ivs = delinearizeIndex(
                fb, floc, i, space.lbs, space.extents, space.steps);
            SmallVector<IRMapping> copies = ::cleave::cloneVectorizedBody(
                fb, floc, phase, ivs, space.width, map);
            SmallVector<Value> yielded;
            if (reduces) {
              Value accumulated = acc[0];
              for (IRMapping &copy : copies)
                accumulated = cloneCombiner(
                    fb, reduceOp.getReductions()[0], accumulated,
                    copy.lookupOrDefault(reduceOp.getOperands()[0]));
              yielded.push_back(accumulated);
            }
            scf::YieldOp::create(fb, floc, yielded);
          });
      if (reduces) {
        FailureOr<Value> r = blockAllReduce(b, loc, strided.getResult(0),
                                            reduceOp.getReductions()[0]);
        if (failed(r))
          return phase.emitError("cuda: unsupported reduction combiner");
        map.map(phase.getResult(0), *r);
        continue; // reduction phases only read; all_reduce synchronizes
      }
      gpu::BarrierOp::create(b, loc);
      continue;
    }
    if (isa<memref::StoreOp>(&op)) {
      auto guard = scf::IfOp::create(b, loc, isFirst, /*withElse=*/false);
      OpBuilder gb = guard.getThenBodyBuilder();
      gb.clone(op, map);
      // One barrier after a run of row-level stores.
      if (!isa<memref::StoreOp>(op.getNextNode()))
        gpu::BarrierOp::create(b, loc);
      continue;
    }
    if (op.getNumRegions() != 0 || !isPure(&op)) {
      if (!isa<memref::LoadOp>(&op))
        return op.emitError("cuda: unexpected op in a row kernel body");
    }
    b.clone(op, map);
  }
  gpu::TerminatorOp::create(b, loc);
  rows.erase();
  ::cleave::sinkViewsIntoLaunch(launch);
  return success();
}

} // namespace
