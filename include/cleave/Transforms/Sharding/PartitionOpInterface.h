//===- PartitionOpInterface.h - Per-op SPMD partitioning --------*- C++ -*-===//
//
// The interface through which --cleave-partition rewrites each op into its
// per-rank form (PartitionOpInterface.td), the layout an op computes on that
// its methods receive, the generic path they default to, and the
// registration of the cleave ops' models.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_SHARDING_PARTITIONOPINTERFACE_H
#define CLEAVE_TRANSFORMS_SHARDING_PARTITIONOPINTERFACE_H

#include "cleave/Transforms/Sharding/FactorSharding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::cleave::partition {

class Partitioner;

/// The axes each dimension of one tensor is split over.
using DimAxes = SmallVector<::cleave::sharding::Axes>;

/// The layout the partitioner chose for one op on the generic path.
struct LocalLayout {
  /// The op's sharding rule.
  const ShardingRule &rule;
  /// The mesh axes each factor of the rule is split over.
  ArrayRef<::cleave::sharding::Axes> factorAxes;
  /// The layout of each result as the local op produces it.
  ArrayRef<DimAxes> produced;
  /// The axes of the split reductions: the results are this rank's addends
  /// of sums over them (empty: the results are whole).
  ArrayRef<StringAttr> partial;
};

/// The default of PartitionOpInterface::partition, and how ops without the
/// interface are partitioned: deferred partial sums among the operands are
/// completed, then the op is partitioned through its sharding rule.
LogicalResult partitionByRule(Partitioner &p, OpBuilder &b, Operation *op);

/// The default of PartitionOpInterface::buildLocalOp: `op` with `operands`
/// and `resultTypes`, keeping its attributes but its sharding and
/// sharding conflicts.
Operation *cloneOnLocalShapes(OpBuilder &b, Operation *op, ValueRange operands,
                              TypeRange resultTypes);

/// Attaches PartitionOpInterface to the cleave ops whose partitioning
/// differs from the generic path (PartitionOpModels.cpp).
void registerPartitionExternalModels(DialectRegistry &registry);

} // namespace mlir::cleave::partition

#include "cleave/Transforms/Sharding/PartitionOpInterface.h.inc"

#endif // CLEAVE_TRANSFORMS_SHARDING_PARTITIONOPINTERFACE_H
