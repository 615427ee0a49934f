//===- ExpertWeights.cpp - The weights of a mixture's experts -------------===//
//
// forEachExpertWeight and commonExpertCount of
// cleave/Analysis/ExpertWeights.h.
//
//===----------------------------------------------------------------------===//

#include "cleave/Analysis/ExpertWeights.h"

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave {

WalkResult
forEachExpertWeight(Operation *root,
                    function_ref<WalkResult(Operation *, Value)> visit) {
  return root->walk([&](Operation *op) {
    Value w;
    if (auto grouped = dyn_cast<GroupedMatmulOp>(op))
      w = grouped.getW();
    else if (auto contract = dyn_cast<ContractOp>(op))
      for (auto [operand, batch] :
           {std::pair(contract.getLhs(), contract.getLhsBatchingDimensions()),
            std::pair(contract.getRhs(), contract.getRhsBatchingDimensions())})
        if (llvm::is_contained(batch, 0))
          w = operand;
    if (!w)
      return WalkResult::advance();
    while (auto convert = w.getDefiningOp<ConvertOp>())
      w = convert.getOperand();
    return visit(op, w);
  });
}

void topKsFeeding(Value ids, llvm::SetVector<Operation *> &found) {
  SmallVector<Value> work = {ids};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || !seen.insert(def).second)
      continue;
    if (auto topk = dyn_cast<TopKOp>(def)) {
      if (v == topk.getIndices())
        found.insert(def);
      continue;
    }
    for (Value operand : def->getOperands())
      if (isa<IntegerType>(getElementTypeOrSelf(operand.getType())))
        work.push_back(operand);
  }
}

int64_t commonExpertCount(Operation *root) {
  int64_t common = 0;
  forEachExpertWeight(root, [&](Operation *, Value w) {
    auto type = dyn_cast<RankedTensorType>(w.getType());
    if (w.getDefiningOp<ConstantOp>() && type && type.getRank() > 0 &&
        type.getDimSize(0) > 0)
      common = std::gcd(common, type.getDimSize(0));
    return WalkResult::advance();
  });
  return common;
}

} // namespace cleave
