//===- ReshardPlan.h - Reshards planned apart from their IR -----*- C++ -*-===//
//
// What the partitioner decides before it emits anything: the collectives
// that take a local value from one layout to another, and that complete a
// partial sum toward its layout. A plan is a list of steps over layouts
// (axes per dimension), with no IR: the cost model (FactorStrategy.cpp)
// prices plans to choose each op's layout, and the emitter
// (ReshardCollectives.cpp) turns the chosen plans into cleave collectives,
// so that what is priced is exactly what is emitted.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_SHARDING_RESHARDPLAN_H
#define CLEAVE_LIB_TRANSFORMS_SHARDING_RESHARDPLAN_H

#include "cleave/Transforms/Sharding/PartitionOpInterface.h"

#include <optional>

namespace mlir::cleave::partition {

/// One collective of a plan.
struct ReshardStep {
  enum class Kind {
    /// Gathers `dim` over `axes` (sends: the gathered value x (n-1)/n).
    AllGather,
    /// Keeps this rank's part of `dim` over `axes` (a local slice).
    AllSlice,
    /// Sums partial values over `axes` and keeps this rank's part of `dim`
    /// (sends: the value x (n-1)/n).
    ReduceScatter,
    /// Sums partial values over `axes` (sends: the value x 2(n-1)/n).
    AllReduce,
    /// Moves `axes` from the end of `dim` to the end of `toDim`: `dim` is
    /// gathered while `toDim` is split, in one exchange (sends: the value x
    /// (n-1)/n, a gather-then-slice's 1/n).
    AllToAll,
  };
  Kind kind;
  /// The dimension gathered, sliced or scattered; -1 for an all-reduce.
  int64_t dim;
  ::cleave::sharding::Axes axes;
  /// The layout before and after the step.
  DimAxes before, after;
  /// AllToAll: the dimension that gains `axes`.
  int64_t toDim = -1;
};

/// The steps from layout `from` to `to`: first the axes that only move,
/// from the end of one dimension to the end of another (an all-to-all
/// each), then, per dimension, a gather of the axes after the common prefix
/// of the two (so that an axis moving between dimensions is free before a
/// slice takes it), then, per dimension, a slice over the axes `to` adds.
/// Empty when they are equal.
SmallVector<ReshardStep> planReshard(ArrayRef<::cleave::sharding::Axes> from,
                                     ArrayRef<::cleave::sharding::Axes> to);

/// `produced` with the dimensions the result goes split along over other
/// axes than `partial` already split (a local slice): partial sums are
/// sliced before they are reduced, and the reduction sends only this rank's
/// part.
DimAxes slicedBeforeReduction(ArrayRef<::cleave::sharding::Axes> produced,
                              ArrayRef<::cleave::sharding::Axes> target,
                              ArrayRef<StringAttr> partial);

/// The dimension a reduce_scatter over `partial` can split when going from
/// `produced` to `target`: the only dimension that changes, gaining exactly
/// `partial`.
std::optional<int64_t> scatterDim(ArrayRef<::cleave::sharding::Axes> produced,
                                  ArrayRef<::cleave::sharding::Axes> target,
                                  ArrayRef<StringAttr> partial);

/// How a partial sum over `partial`, produced in layout `produced`, is
/// completed into layout `target`.
struct CompletionPlan {
  /// Slices to `sliced` before the reduction (slicedBeforeReduction).
  SmallVector<ReshardStep> before;
  /// The reduction: a reduce_scatter where exactly one dimension gains
  /// exactly `partial` (scatterDim), else an all-reduce.
  ReshardStep reduction;
  /// The reshard from the reduction's layout to `target`.
  SmallVector<ReshardStep> after;
};
CompletionPlan planCompletion(ArrayRef<::cleave::sharding::Axes> produced,
                              ArrayRef<::cleave::sharding::Axes> target,
                              ArrayRef<StringAttr> partial);

} // namespace mlir::cleave::partition

#endif // CLEAVE_LIB_TRANSFORMS_SHARDING_RESHARDPLAN_H
