//===- ShardingRule.h - Factor-based sharding rules of ops ------*- C++ -*-===//
//
// How an op's operand and result dimensions relate, as factors: the loops of
// the op's iteration space. Each tensor dimension maps to an ordered list of
// factors (major to minor; more than one where a reshape merges dimensions,
// none for a size-1 dimension that is broadcast). A factor is
//   - parallel: every rank computes its slice of the factor on its own;
//   - a reduction: the op combines over it (contracting dimensions, reduced
//     dimensions), so sharding it leaves partial results that a collective
//     must combine with the factor's reduce kind;
//   - need-replication: the op reads across the whole factor in a way that
//     sharding cannot split (a softmax row, a slice's start, a top-k row), so
//     a tensor sharded along it must be gathered first.
//
// The same rule drives propagation and partitioning, and, for ops whose
// dimensions each map to at most one factor, gives the indexing maps and
// iterator types of the op's linalg lowering (`getIndexingMap`), so that
// lowering and partitioning share one description of every op.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_SHARDINGRULE_H
#define CLEAVE_IR_SHARDINGRULE_H

#include "mlir/IR/AffineMap.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir {
class Operation;
namespace utils {
enum class IteratorType : uint32_t;
} // namespace utils
} // namespace mlir

namespace mlir::cleave {

enum class ReduceKind : uint32_t;

enum class FactorKind { Parallel, Reduction, NeedReplication };

struct ShardingFactor {
  int64_t size = 1;
  FactorKind kind = FactorKind::Parallel;
  /// For reductions: how partial results combine (sum for contractions).
  ReduceKind reduceKind{};
  /// For need-replication factors: a parallel factor the op may be split
  /// along instead, the tensors exchanging the axes of this one for that
  /// one with all_to_all (an attention's sequence for its heads: all-to-all
  /// context parallelism). -1 for none.
  int64_t exchangeWith = -1;
};

/// One tensor's dimensions, each a list of factor indices (major first).
using TensorFactors = SmallVector<SmallVector<int64_t, 1>>;

class ShardingRule {
public:
  /// A rule with one tensor mapping per operand and result, all dimensions
  /// still without factors.
  static ShardingRule forOp(Operation *op);
  /// An op that cannot be partitioned along any dimension: every tensor
  /// stays whole on every rank. `reason` says why.
  static ShardingRule replicatedOnly(Operation *op, StringRef reason);

  int64_t addFactor(int64_t size, FactorKind kind = FactorKind::Parallel);
  int64_t addReduction(int64_t size, ReduceKind kind);
  /// Lets need-replication factor `factor` exchange its axes for parallel
  /// factor `with` (ShardingFactor::exchangeWith).
  void setExchange(int64_t factor, int64_t with);
  /// Maps dimension `dim` of operand (or result) `index` to `factor`,
  /// appended as the dimension's most minor factor so far.
  void mapOperand(unsigned index, int64_t dim, int64_t factor);
  void mapResult(unsigned index, int64_t dim, int64_t factor);
  /// Adds one parallel factor per dimension of operand `index` and maps
  /// the same dimensions of every result of equal rank to it (elementwise
  /// ops), returning the factors in dimension order.
  SmallVector<int64_t> addIdentity(ArrayRef<int64_t> shape);

  ArrayRef<ShardingFactor> getFactors() const { return factors; }
  const ShardingFactor &getFactor(int64_t f) const { return factors[f]; }
  int64_t getNumFactors() const { return factors.size(); }
  ArrayRef<TensorFactors> getOperandMappings() const { return operands; }
  ArrayRef<TensorFactors> getResultMappings() const { return results; }
  const TensorFactors &getOperand(unsigned i) const { return operands[i]; }
  const TensorFactors &getResult(unsigned i) const { return results[i]; }
  /// Operands then results.
  int64_t getNumTensors() const { return operands.size() + results.size(); }
  const TensorFactors &getTensor(int64_t t) const {
    return t < (int64_t)operands.size() ? operands[t]
                                        : results[t - operands.size()];
  }

  bool isReplicatedOnly() const { return !replicatedReason.empty(); }
  StringRef getReplicatedReason() const { return replicatedReason; }

  /// True when every dimension of every tensor maps to at most one factor
  /// and every factor of size > 1 appears in some dimension.
  bool hasSimpleIndexing() const;
  /// The indexing map of tensor `t` (operands then results) over the
  /// factors as loops, in factor order; dimensions without a factor index
  /// 0. Needs hasSimpleIndexing().
  AffineMap getIndexingMap(MLIRContext *ctx, int64_t t) const;
  SmallVector<AffineMap> getIndexingMaps(MLIRContext *ctx) const;
  /// Reductions are `reduction`, the rest `parallel`.
  SmallVector<utils::IteratorType> getIteratorTypes() const;

  /// The name factor `f` prints as: i, j, ..., z, then z_1, z_2, ...
  static std::string getFactorName(int64_t f);

  /// Shardy-like text: `([i, k], [k, j]) -> ([i, j]) {i=8, j=32, k=16}
  /// reduction={k}`; a dimension of several factors prints them together
  /// (`ij`), one of none prints `_`.
  void print(raw_ostream &os) const;
  std::string str() const;

  /// Checks the rule against the op's types: a mapping per tensor and
  /// dimension, and dimension sizes equal to their factors' products (a
  /// dimension without factors has size 1, or belongs to a broadcast
  /// operand). Returns the first problem, or an empty string.
  std::string check(Operation *op) const;

private:
  SmallVector<ShardingFactor> factors;
  SmallVector<TensorFactors> operands, results;
  std::string replicatedReason;
};

/// The rule of a cleave op, or of a replicated-only placeholder for any
/// other op.
ShardingRule getShardingRule(Operation *op);

/// Factors of a reshape from `from` to `to` (row-major): dimensions are cut
/// into common factors where one size divides the other. Returns false when
/// the shapes do not decompose that way (then the reshape needs a gather).
bool getReshapeFactors(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                       ShardingRule &rule);

} // namespace mlir::cleave

#endif // CLEAVE_IR_SHARDINGRULE_H
