//===- Autodiff.cpp - Reverse-mode automatic differentiation --------------===//
//
// buildGradients: walks the ops between the wrt values and the loss in
// reverse program order, calls each op's VJPOpInterface rule and sums the
// cotangents of values used more than once with `cleave.binary add`.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Autodiff.h"

#include "VJPHelpers.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "cleave-autodiff"

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::Emitter;
using ::cleave::autodiff::isFloatTensor;

/// Checks the loss and seed of the scalar form of buildGradients (the
/// vector-Jacobian form checks the rest).
static LogicalResult verifyGradientRequest(Value loss, Value seed) {
  auto lossType = dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || lossType.getRank() != 0 ||
      !isa<FloatType>(lossType.getElementType()))
    return emitError(loss.getLoc())
           << "cannot differentiate: the loss must be a 0-d float tensor, got "
           << loss.getType();
  if (seed && seed.getType() != loss.getType())
    return emitError(seed.getLoc())
           << "the seed's type " << seed.getType()
           << " differs from the loss's type " << loss.getType();
  return success();
}

/// Checks the arguments of the vector-Jacobian form of buildGradients.
static LogicalResult verifyCotangents(ValueRange outputs, ValueRange cotangents,
                                      ValueRange wrt) {
  if (outputs.empty())
    return emitError(UnknownLoc::get(wrt.empty() ? nullptr
                                                 : wrt.front().getContext()))
           << "cannot differentiate: no outputs";
  if (outputs.size() != cotangents.size())
    return emitError(outputs.front().getLoc())
           << "cannot differentiate: " << outputs.size() << " outputs but "
           << cotangents.size() << " cotangents";
  Block *block = outputs.front().getParentBlock();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(outputs, cotangents))) {
    auto [out, c] = pair;
    if (!isFloatTensor(out))
      return emitError(out.getLoc())
             << "cannot differentiate output #" << i << " of type "
             << out.getType() << ": not a float tensor";
    if (c.getType() != out.getType())
      return emitError(c.getLoc())
             << "the cotangent of output #" << i << " has type " << c.getType()
             << ", not the output's " << out.getType();
    if (out.getParentBlock() != block)
      return emitError(out.getLoc())
             << "cannot differentiate: output #" << i
             << " is not in the block of the first output";
  }
  for (auto [i, w] : llvm::enumerate(wrt)) {
    if (!isFloatTensor(w))
      return emitError(w.getLoc())
             << "cannot differentiate with respect to value #" << i
             << " of type " << w.getType() << ": not a float tensor";
    if (w.getParentBlock() != block)
      return emitError(w.getLoc())
             << "cannot differentiate with respect to value #" << i
             << ": it is not in the block of the "
             << (outputs.size() == 1 ? "loss" : "outputs");
  }
  return success();
}

namespace {
/// Tags every op inserted through a builder with a unit attribute, then
/// forwards the notification to the builder's own listener.
struct TagListener : public OpBuilder::Listener {
  TagListener(StringAttr tag, OpBuilder::Listener *next)
      : tag(tag), next(next) {}
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint previous) override {
    op->setAttr(tag, UnitAttr::get(op->getContext()));
    if (next)
      next->notifyOperationInserted(op, previous);
  }
  void notifyBlockInserted(Block *block, Region *previous,
                           Region::iterator previousIt) override {
    if (next)
      next->notifyBlockInserted(block, previous, previousIt);
  }
  StringAttr tag;
  OpBuilder::Listener *next;
};
} // namespace

static FailureOr<SmallVector<Value>> buildGradientsImpl(OpBuilder &b,
                                                        ValueRange outputs,
                                                        ValueRange cotangents,
                                                        ValueRange wrt);

namespace cleave {
FailureOr<SmallVector<Value>> buildGradients(OpBuilder &b, Value loss,
                                             ValueRange wrt, Value seed,
                                             StringRef tag) {
  if (failed(verifyGradientRequest(loss, seed)))
    return failure();
  // The seed is the first op of the backward pass, tagged like the rest.
  OpBuilder::Listener *previous = b.getListener();
  TagListener listener(StringAttr::get(b.getContext(), tag), previous);
  if (!tag.empty())
    b.setListener(&listener);
  Value cotangent = seed;
  if (!cotangent)
    cotangent = Emitter{b, loss.getLoc()}.splatLike(loss, 1.0);
  FailureOr<SmallVector<Value>> result =
      buildGradientsImpl(b, ValueRange{loss}, ValueRange{cotangent}, wrt);
  b.setListener(previous);
  return result;
}

FailureOr<SmallVector<Value>> buildGradients(OpBuilder &b, ValueRange outputs,
                                             ValueRange cotangents,
                                             ValueRange wrt, StringRef tag) {
  if (tag.empty())
    return buildGradientsImpl(b, outputs, cotangents, wrt);
  OpBuilder::Listener *previous = b.getListener();
  TagListener listener(StringAttr::get(b.getContext(), tag), previous);
  b.setListener(&listener);
  FailureOr<SmallVector<Value>> result =
      buildGradientsImpl(b, outputs, cotangents, wrt);
  b.setListener(previous);
  return result;
}
} // namespace cleave

static FailureOr<SmallVector<Value>> buildGradientsImpl(OpBuilder &b,
                                                        ValueRange outputs,
                                                        ValueRange cotangents,
                                                        ValueRange wrt) {
  if (failed(verifyCotangents(outputs, cotangents, wrt)))
    return failure();
  Emitter e{b, outputs.front().getLoc()};
  Block *block = outputs.front().getParentBlock();
  // The last op that defines an output: the backward walk starts there.
  Operation *lastOp = nullptr;
  for (Value out : outputs)
    if (Operation *def = out.getDefiningOp())
      if (!lastOp || lastOp->isBeforeInBlock(def))
        lastOp = def;

  // Forward: the values that depend on a wrt value.
  DenseSet<Value> active(wrt.begin(), wrt.end());
  if (lastOp) {
    for (Operation &op : block->without_terminator()) {
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return active.contains(v); }))
        active.insert(op.getResults().begin(), op.getResults().end());
      if (&op == lastOp)
        break;
    }
  }

  // Backward: from the outputs, in reverse program order; only values on a
  // path from a wrt value to an output get a cotangent.
  DenseMap<Value, Value> cotangent;
  auto accumulate = [&](Value v, Value c) {
    Value &slot = cotangent[v];
    slot = slot ? e.add(slot, c) : c;
  };
  for (auto [out, c] : llvm::zip(outputs, cotangents))
    accumulate(out, c);
  for (Operation *op = lastOp; op; op = op->getPrevNode()) {
    bool hasCotangent = llvm::any_of(
        op->getResults(), [&](Value r) { return cotangent.contains(r); });
    bool dependsOnWrt = llvm::any_of(
        op->getOperands(), [&](Value v) { return active.contains(v); });
    if (!hasCotangent || !dependsOnWrt)
      continue;
    auto vjpOp = dyn_cast<VJPOpInterface>(op);
    if (!vjpOp)
      return op->emitError() << "no VJP rule for '" << op->getName() << "'";
    SmallVector<Value> resultCotangents;
    for (Value r : op->getResults()) {
      Value c = cotangent.lookup(r);
      if (!c && isFloatTensor(r))
        c = Emitter{b, op->getLoc()}.zerosLike(r);
      resultCotangents.push_back(c);
    }
    FailureOr<SmallVector<Value>> operandCotangents =
        vjpOp.buildVJP(b, resultCotangents);
    if (failed(operandCotangents))
      return failure();
    if (operandCotangents->size() != op->getNumOperands())
      return op->emitError()
             << "VJP rule of '" << op->getName() << "' returned "
             << operandCotangents->size() << " cotangents for "
             << op->getNumOperands() << " operands";
    for (auto [operand, c] : llvm::zip(op->getOperands(), *operandCotangents)) {
      if (!c || !active.contains(operand))
        continue;
      if (c.getType() != operand.getType())
        return op->emitError()
               << "VJP rule of '" << op->getName() << "' returned a cotangent "
               << "of type " << c.getType() << " for an operand of type "
               << operand.getType();
      accumulate(operand, c);
    }
  }

  SmallVector<Value> gradients;
  for (Value w : wrt) {
    Value g = cotangent.lookup(w);
    gradients.push_back(g ? g : e.zerosLike(w));
  }
  return gradients;
}
