//===- EmulateLaunches.cpp - Run gpu.launch bodies as CPU loops -----------===//
//
// `cleave-cuda-emulate-launches` turns every gpu.launch that the CUDA kernel
// pipeline builds (before outlining) into loops on the host, so the CPU
// backend can run exactly the index arithmetic, strides, vector accesses,
// barriers and block reductions the GPU would, and tests can compare the
// results with the ordinary CPU lowering. It is a test of the CUDA mapping,
// not a way to run programs fast.
//
// The launch body is split at its top-level gpu.barrier and gpu.all_reduce
// ops into phases. Each block runs its phases one after another, each phase
// for every thread in turn, which is one valid schedule of a block that
// synchronizes at those points. Values a thread carries from one phase to a
// later one live in a per-thread buffer; a gpu.all_reduce combines its
// threads' operands in thread order once all of them have run the phase
// before it, and its result is the same for every thread.
//
// Only launches with x-dimension grids and blocks (as Cleave builds them)
// and with barriers and all-reduces at the top level of the body are
// accepted; anything else is an error.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CUDA/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

#include "llvm/ADT/MapVector.h"

#define DEBUG_TYPE "cleave-cuda-emulate-launches"

namespace cleave {
#define GEN_PASS_DEF_EMULATELAUNCHESPASS
#include "cleave/Target/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// Whether `op` ends a phase of a launch body.
bool isPhaseBoundary(Operation *op) {
  return isa<gpu::BarrierOp, gpu::AllReduceOp>(op);
}

struct EmulateLaunchesPass
    : ::cleave::impl::EmulateLaunchesPassBase<EmulateLaunchesPass> {

  LogicalResult emulate(gpu::LaunchOp launch);

  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> launches;
    getOperation().walk([&](gpu::LaunchOp l) { launches.push_back(l); });
    for (gpu::LaunchOp launch : launches)
      if (failed(emulate(launch)))
        return signalPassFailure();
  }
};

LogicalResult EmulateLaunchesPass::emulate(gpu::LaunchOp launch) {
  Location loc = launch.getLoc();
  auto constant = [](Value v) { return getConstantIntValue(v); };
  std::optional<int64_t> grid = constant(launch.getGridSizeX()),
                         block = constant(launch.getBlockSizeX());
  for (Value v : {launch.getGridSizeY(), launch.getGridSizeZ(),
                  launch.getBlockSizeY(), launch.getBlockSizeZ()})
    if (constant(v) != 1)
      return launch.emitError("emulation: only x-dimension launches");
  if (!grid || !block)
    return launch.emitError("emulation: launch sizes must be constant");
  if (launch.getBody().getBlocks().size() != 1)
    return launch.emitError("emulation: multi-block launch body");
  Block &body = launch.getBody().front();

  // Phases: runs of ops between boundaries (a boundary is its own entry).
  SmallVector<SmallVector<Operation *>> phases(1);
  DenseMap<Operation *, int64_t> phaseOf;
  for (Operation &op : body.without_terminator()) {
    if (isPhaseBoundary(&op)) {
      phaseOf[&op] = phases.size(); // the boundary after the current phase
      phases.push_back({&op});
      phases.emplace_back();
      continue;
    }
    WalkResult nested = op.walk([&](Operation *inner) {
      return inner != &op && isPhaseBoundary(inner) ? WalkResult::interrupt()
                                                    : WalkResult::advance();
    });
    if (nested.wasInterrupted())
      return op.emitError("emulation: barrier or all_reduce below the top "
                          "level of a launch");
    phaseOf[&op] = phases.size() - 1;
    phases.back().push_back(&op);
  }

  // Values a thread carries into a later phase (or into an all_reduce).
  SetVector<Value> carried;
  for (Operation &op : body.without_terminator()) {
    if (isa<gpu::BarrierOp>(op))
      continue;
    for (Value result : op.getResults())
      for (Operation *user : result.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (top && phaseOf.lookup(top) != phaseOf.lookup(&op))
          carried.insert(result);
      }
  }

  OpBuilder b(launch);
  auto index = [&](OpBuilder &ib, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(ib, loc, v);
  };
  Value zero = index(b, 0), one = index(b, 1);
  // In the order of `carried`: the loads and frees it makes are emitted in
  // this order, so the code does not depend on where values are allocated.
  llvm::MapVector<Value, Value> slots;
  for (Value v : carried) {
    if (isa<gpu::AllReduceOp>(v.getDefiningOp()))
      continue; // uniform: one SSA value per block
    slots[v] =
        memref::AllocOp::create(b, loc, MemRefType::get({*block}, v.getType()));
  }

  IRMapping outer;
  outer.map(launch.getGridSizeX(), index(b, *grid));
  outer.map(launch.getBlockSizeX(), index(b, *block));
  for (Value v : {launch.getGridSizeY(), launch.getGridSizeZ(),
                  launch.getBlockSizeY(), launch.getBlockSizeZ()})
    outer.map(v, one);
  outer.map(launch.getBlockIds().y, zero);
  outer.map(launch.getBlockIds().z, zero);
  outer.map(launch.getThreadIds().y, zero);
  outer.map(launch.getThreadIds().z, zero);
  gpu::KernelDim3 gridArgs = launch.getGridSize(),
                  blockArgs = launch.getBlockSize();
  outer.map(gridArgs.x, index(b, *grid));
  outer.map(gridArgs.y, one);
  outer.map(gridArgs.z, one);
  outer.map(blockArgs.x, index(b, *block));
  outer.map(blockArgs.y, one);
  outer.map(blockArgs.z, one);

  LogicalResult result = success();
  scf::ForOp::create(
      b, loc, zero, index(b, *grid), one, ValueRange{},
      [&](OpBuilder &bb, Location, Value bid, ValueRange) {
        IRMapping blockMap = outer;
        blockMap.map(launch.getBlockIds().x, bid);
        for (SmallVector<Operation *> &phase : phases) {
          if (phase.empty())
            continue;
          if (auto reduce = dyn_cast<gpu::AllReduceOp>(phase.front())) {
            // Combine the threads' operands in thread order.
            if (reduce.getBody().empty()) {
              result = reduce.emitError("emulation: all_reduce needs a body");
              return;
            }
            Value slot = slots.lookup(reduce.getValue());
            if (!slot) {
              result = reduce.emitError(
                  "emulation: all_reduce of a value not computed in the "
                  "launch body");
              return;
            }
            Value first = memref::LoadOp::create(bb, loc, slot, zero);
            auto fold = scf::ForOp::create(
                bb, loc, one, index(bb, *block), one, ValueRange{first},
                [&](OpBuilder &fb, Location, Value t, ValueRange acc) {
                  Block &comb = reduce.getBody().front();
                  IRMapping cmap;
                  cmap.map(comb.getArgument(0), acc[0]);
                  cmap.map(comb.getArgument(1),
                           memref::LoadOp::create(fb, loc, slot, t));
                  for (Operation &op : comb.without_terminator())
                    fb.clone(op, cmap);
                  Value r = cmap.lookupOrDefault(
                      cast<gpu::YieldOp>(comb.getTerminator()).getValues()[0]);
                  scf::YieldOp::create(fb, loc, r);
                });
            blockMap.map(reduce.getResult(), fold.getResult(0));
            continue;
          }
          if (isa<gpu::BarrierOp>(phase.front()))
            continue;
          scf::ForOp::create(
              bb, loc, zero, index(bb, *block), one, ValueRange{},
              [&](OpBuilder &tb, Location, Value tid, ValueRange) {
                IRMapping map = blockMap;
                map.map(launch.getThreadIds().x, tid);
                // Values this thread carried in from earlier phases.
                for (auto [value, slot] : slots)
                  if (phaseOf.lookup(
                          body.findAncestorOpInBlock(*value.getDefiningOp())) <
                      phaseOf.lookup(phase.front()))
                    map.map(value, memref::LoadOp::create(tb, loc, slot, tid));
                for (Operation *op : phase) {
                  tb.clone(*op, map);
                  for (Value r : op->getResults())
                    if (Value slot = slots.lookup(r))
                      memref::StoreOp::create(tb, loc, map.lookup(r), slot,
                                              tid);
                }
                scf::YieldOp::create(tb, loc);
              });
        }
        scf::YieldOp::create(bb, loc);
      });
  if (failed(result))
    return failure();
  for (auto [value, slot] : slots)
    memref::DeallocOp::create(b, loc, slot);
  launch.erase();
  return success();
}

} // namespace
