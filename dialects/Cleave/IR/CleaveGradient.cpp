//===- CleaveGradient.cpp - The verifier of cleave.gradient ---------------===//
//
// The marker stands for buildGradients over its block, so what that needs
// is checked here: a 0-d loss, one result of each wrt value's type, and the
// loss and the wrt values in the marker's block.
//
//===----------------------------------------------------------------------===//

#include "Cleave/IR/CleaveOps.h"

using namespace mlir;
using namespace mlir::cleave;

LogicalResult GradientOp::verify() {
  auto lossType = cast<RankedTensorType>(getLoss().getType());
  if (lossType.getRank() != 0)
    return emitOpError() << "needs a 0-d loss, got " << lossType;
  if (getWrt().empty())
    return emitOpError() << "needs at least one value to differentiate "
                            "with respect to";
  if (getGradients().size() != getWrt().size())
    return emitOpError() << "has " << getGradients().size() << " results for "
                         << getWrt().size()
                         << " wrt values; it needs one per wrt value";
  Block *block = getOperation()->getBlock();
  if (getLoss().getParentBlock() != block)
    return emitOpError() << "needs its loss in its own block";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(getWrt(), getGradients()))) {
    auto [w, g] = pair;
    if (w.getParentBlock() != block)
      return emitOpError() << "needs wrt value #" << i << " in its own block";
    if (g.getType() != w.getType())
      return emitOpError() << "result #" << i << " has type " << g.getType()
                           << ", not the type " << w.getType()
                           << " of wrt value #" << i;
  }
  return success();
}
