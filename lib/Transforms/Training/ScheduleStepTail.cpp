//===- ScheduleStepTail.cpp - A training step's tail, scheduled early -----===//
//
// After the backward pass, --cleave-build-train-step moves each op of the
// step's tail (gradient norm, clipping, optimizer update) right after the
// ops it reads, so that a parameter's update follows its gradient's last
// contribution instead of the whole backward pass (see hoistToOperands in
// TrainStep.h).
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

void train_step::hoistToOperands(Operation *first) {
  if (!first)
    return;
  Block *block = first->getBlock();
  SmallVector<Operation *> ops;
  for (Operation *op = first; op; op = op->getNextNode())
    ops.push_back(op);
  auto isComputed = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && def->getBlock() == block && !isa<ConstantOp>(def);
  };
  SmallVector<Operation *> sinkable;
  llvm::SmallPtrSet<Operation *, 16> sinkSet;
  for (Operation *op : ops) {
    // A wait stays where it was put (a delayed reduction's, after the
    // backward pass that it overlaps); what reads it follows it.
    if (isa<DoneOp>(op))
      continue;
    Operation *latest = nullptr;
    for (Value v : op->getOperands()) {
      if (!isComputed(v) || sinkSet.contains(v.getDefiningOp()))
        continue;
      Operation *def = v.getDefiningOp();
      if (!latest || latest->isBeforeInBlock(def))
        latest = def;
    }
    if (latest) {
      op->moveAfter(latest);
    } else {
      sinkable.push_back(op);
      sinkSet.insert(op);
    }
  }
  for (Operation *op : llvm::reverse(sinkable)) {
    Operation *firstUser = nullptr;
    for (Operation *user : op->getUsers())
      if (user->getBlock() == block &&
          (!firstUser || user->isBeforeInBlock(firstUser)))
        firstUser = user;
    if (firstUser)
      op->moveBefore(firstUser);
  }
  // Constants are ignored above and free to move: one made after an op
  // that now reads it (the zero gradient of a parameter a microbatch's loss
  // does not reach, built late in backward) goes right before that op.
  for (Operation *op : ops)
    for (Value v : op->getOperands())
      if (auto constant = v.getDefiningOp<ConstantOp>();
          constant && constant->getBlock() == block &&
          op->isBeforeInBlock(constant))
        constant->moveBefore(op);
}
