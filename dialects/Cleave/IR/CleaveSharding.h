//===- CleaveSharding.h - Sharding attributes and helpers -------*- C++ -*-===//

#ifndef CLEAVE_IR_CLEAVESHARDING_H
#define CLEAVE_IR_CLEAVESHARDING_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/Value.h"

#include "Cleave/IR/CleaveDialect.h"

#define GET_ATTRDEF_CLASSES
#include "Cleave/IR/CleaveAttrs.h.inc"

namespace mlir::cleave {

class MeshOp;

/// The attribute name of shardings: a TensorShardingAttr on a function
/// argument or result, an ArrayAttr with one per result on an op.
inline constexpr llvm::StringLiteral kShardingAttrName = attr::kSharding;
/// On an op whose result the partitioner reshards once for all its users,
/// to the layout this attribute names (a TensorShardingAttr), before the
/// first user: ZeRO-1/2's low-precision parameter copies, gathered once
/// per step and kept, where ZeRO-3 gathers at each use.
inline constexpr llvm::StringLiteral kReshardOnceAttr = attr::kReshardOnce;
/// The conflicts propagation settled on an op's factors (an array of
/// strings), which the partitioner cites in the collectives they cause.
inline constexpr llvm::StringLiteral kConflictsAttrName =
    attr::kShardingConflicts;

/// The sharding of `value` (a function argument or an op result), or null.
TensorShardingAttr getSharding(Value value);
/// Records `sharding` for `value`; a null sharding removes it.
void setSharding(Value value, TensorShardingAttr sharding);
/// The sharding of result `index` of a function, or null.
TensorShardingAttr getResultSharding(Operation *func, unsigned index);

/// Checks a sharding against a tensor type and its mesh: one entry per
/// dimension, axes of the mesh, each axis used once, and each dimension
/// divisible by the product of its axes' sizes. `what` names the tensor in
/// the error (for example "argument 'x'").
LogicalResult verifySharding(TensorShardingAttr sharding, Type type,
                             MeshOp mesh,
                             function_ref<InFlightDiagnostic()> emitError,
                             StringRef what);

/// Whether the ranks along mesh axis `name` hold the same parameters and
/// see different data: dp, and cp (which splits each sequence). ZeRO
/// splits the training states over these axes, and its report counts the
/// replicas along them.
inline bool isReplicaAxis(StringRef name) {
  return name == "dp" || name == "cp";
}

/// The axes ZeRO splits the training states over, in the order the
/// gradients' partial sums come (`ranksOf`: an axis's ranks, 0 where the
/// mesh lacks it): dp where the mesh has it, then ep of more than one rank
/// with dp (its ranks hold the same dense parameters; a tensor ep splits
/// already, the experts, takes the others), then cp of more than one rank.
inline SmallVector<StringRef>
getZeroAxes(function_ref<int64_t(StringRef)> ranksOf) {
  SmallVector<StringRef> axes;
  bool dp = ranksOf("dp") > 0;
  if (dp)
    axes.push_back("dp");
  if (dp && ranksOf("ep") > 1)
    axes.push_back("ep");
  if (ranksOf("cp") > 1)
    axes.push_back("cp");
  return axes;
}

/// The number of ranks the axes split a dimension into.
int64_t getAxesSize(MeshOp mesh, ArrayRef<StringAttr> axes);
/// The shape each rank holds of a tensor of `globalShape`.
SmallVector<int64_t> getLocalShape(TensorShardingAttr sharding,
                                   ArrayRef<int64_t> globalShape, MeshOp mesh);

/// Looks up the mesh a sharding names from `from` (any op in the module).
MeshOp lookupMesh(Operation *from, FlatSymbolRefAttr name);

} // namespace mlir::cleave

#endif // CLEAVE_IR_CLEAVESHARDING_H
