//===- ValueEquivalence.h - Values computed alike -----------------*- C++ -*-===//
//
// Whether two values compute the same thing: the same value, or results of
// the same index of ops alike (locations and metadata aside) whose operands
// compute the same values. Exporters compute an index chain once per use (a
// mixture of experts' ids, once per gathered weight), and the partitioner
// shifts ids for each op apart; passes that must know two such chains agree
// ask this instead of running CSE over the whole function.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_UTILS_VALUEEQUIVALENCE_H
#define CLEAVE_UTILS_VALUEEQUIVALENCE_H

#include "mlir/IR/Value.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir::cleave {

/// Answers "do these compute the same value?", caching what it has shown.
class ValueEquivalence {
public:
  /// Looks at most `depth` ops up each side.
  bool same(Value a, Value b, int depth = 64);

private:
  llvm::DenseMap<std::pair<Value, Value>, bool> known;
};

} // namespace mlir::cleave

#endif // CLEAVE_UTILS_VALUEEQUIVALENCE_H
