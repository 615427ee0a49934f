//===- ValueEquivalence.cpp - Values computed alike -----------------------===//

#include "ValueEquivalence.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/OperationSupport.h"

using namespace mlir;
using namespace mlir::cleave;

bool ValueEquivalence::same(Value a, Value b, int depth) {
  if (a == b)
    return true;
  auto ra = dyn_cast<OpResult>(a), rb = dyn_cast<OpResult>(b);
  if (depth == 0 || !ra || !rb || ra.getResultNumber() != rb.getResultNumber())
    return false;
  if (auto it = known.find({a, b}); it != known.end())
    return it->second;
  known[{a, b}] = false; // Until shown (SSA is acyclic: never read early).
  bool equal = OperationEquivalence::isEquivalentTo(
      ra.getOwner(), rb.getOwner(),
      [&](Value x, Value y) { return success(same(x, y, depth - 1)); },
      /*markEquivalent=*/nullptr,
      OperationEquivalence::Flags(
          OperationEquivalence::IgnoreLocations |
          OperationEquivalence::IgnoreDiscardableAttrs));
  known[{a, b}] = equal;
  return equal;
}
