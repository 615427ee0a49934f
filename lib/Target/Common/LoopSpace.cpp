//===- LoopSpace.cpp - Static iteration spaces of scf.parallel ------------===//
//
// getStaticLoopSpace (cleave/Target/Common/LoopSpace.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/Common/LoopSpace.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;

LogicalResult cleave::getStaticLoopSpace(scf::ParallelOp loop,
                                         SmallVectorImpl<int64_t> &lbs,
                                         SmallVectorImpl<int64_t> &extents,
                                         SmallVectorImpl<int64_t> &steps) {
  for (auto [lb, ub, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb),
                           u = getConstantIntValue(ub),
                           s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0)
      return failure();
    lbs.push_back(*l);
    extents.push_back(*u > *l ? (*u - *l + *s - 1) / *s : 0);
    steps.push_back(*s);
  }
  return success();
}
