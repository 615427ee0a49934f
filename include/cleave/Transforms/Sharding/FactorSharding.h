//===- FactorSharding.h - Shardings seen through sharding rules -*- C++ -*-===//
//
// The bridge between tensor shardings (axes per dimension) and an op's
// sharding rule (factors): a dimension that maps to several factors gives
// its axes to them major first, and a factor's axes become the axes of
// every dimension it appears in. Propagation and partitioning both work on
// factor shardings.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_SHARDING_FACTORSHARDING_H
#define CLEAVE_TRANSFORMS_SHARDING_FACTORSHARDING_H

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveSharding.h"
#include "Cleave/IR/ShardingRule.h"

#include "llvm/ADT/SmallVector.h"

namespace cleave::sharding {

using Axes = llvm::SmallVector<mlir::StringAttr, 2>;

/// Axis sizes of one mesh by name.
class MeshAxes {
public:
  explicit MeshAxes(mlir::cleave::MeshOp mesh) : mesh(mesh) {}
  mlir::cleave::MeshOp getMesh() const { return mesh; }
  int64_t size(mlir::StringAttr axis) const;
  int64_t size(llvm::ArrayRef<mlir::StringAttr> axes) const;

private:
  mutable mlir::cleave::MeshOp mesh;
};

/// Gives the axes of one tensor dimension to its factors (major first):
/// each factor takes axes while their product divides its size, and the
/// next factor gets axes only once the previous one is fully split. Axes
/// that fit nowhere are dropped. Returns one entry per factor of the
/// dimension.
llvm::SmallVector<Axes> splitDimAxes(llvm::ArrayRef<mlir::StringAttr> axes,
                                     llvm::ArrayRef<int64_t> factors,
                                     const mlir::cleave::ShardingRule &rule,
                                     const MeshAxes &mesh);

/// The axes of a dimension made of `factors`, given each factor's axes
/// (`factorAxes[f]`): concatenated major first, stopping after a factor
/// that is not fully split (its minor factors cannot be split as blocks).
Axes joinDimAxes(llvm::ArrayRef<int64_t> factors,
                 llvm::ArrayRef<Axes> factorAxes,
                 const mlir::cleave::ShardingRule &rule, const MeshAxes &mesh);

/// The sharding every dimension of tensor `t` of an op (operands then
/// results) gets from factor shardings.
llvm::SmallVector<Axes> projectToTensor(const mlir::cleave::ShardingRule &rule,
                                        int64_t t,
                                        llvm::ArrayRef<Axes> factorAxes,
                                        const MeshAxes &mesh);

/// An axis splits at most one factor: visiting factors in `order`, each
/// keeps its axes up to the first one an earlier factor already took.
void keepEachAxisOnce(llvm::MutableArrayRef<Axes> factorAxes,
                      llvm::ArrayRef<int64_t> order);

/// Text of an axis list: `["dp", "tp"]`.
std::string axesToString(llvm::ArrayRef<mlir::StringAttr> axes);

/// True when `prefix` is a prefix of `axes`.
bool isPrefix(llvm::ArrayRef<mlir::StringAttr> prefix,
              llvm::ArrayRef<mlir::StringAttr> axes);

} // namespace cleave::sharding

#endif // CLEAVE_TRANSFORMS_SHARDING_FACTORSHARDING_H
