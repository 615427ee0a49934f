//===- Partitioner.h - The SPMD partitioner ---------------------*- C++ -*-===//
//
// Private to --cleave-partition (Partition.cpp, the pass and its walk over
// a function): the Partitioner, whose reshards and collectives are
// ReshardCollectives.cpp, whose choice of factor axes is FactorStrategy.cpp,
// whose generic rewrite of an op through its sharding rule is
// PartitionByRule.cpp, and which hands each op to its PartitionOpInterface
// model (PartitionOpModels.cpp); and the helpers they share.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_SHARDING_PARTITIONER_H
#define CLEAVE_LIB_TRANSFORMS_SHARDING_PARTITIONER_H

#include "cleave/Transforms/Sharding/FactorSharding.h"
#include "cleave/Transforms/Sharding/PartitionOpInterface.h"

#include "ReshardPlan.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <optional>
#include <string>

namespace mlir::cleave::partition {

using ::cleave::sharding::Axes;
using ::cleave::sharding::MeshAxes;

/// The axes each of `rank` dimensions of sharding `s` is split over (none
/// for a null sharding).
DimAxes axesOf(TensorShardingAttr s, int64_t rank);
/// `dims` as a sharding's dimension list, for messages:
/// `[{"dp"}, {}]`.
std::string dimsToString(ArrayRef<Axes> dims);

/// A rounding to bf16/f16 that a partial sum is completed after, in the
/// low type, each rank rounding its addend: a gradient's
/// (--low-precision-gradients), or a mixed-precision contraction's f32
/// result rounded to the activations' type (a row-parallel matmul's
/// output, the q, k and v projections' input gradients: reduced once, in
/// bf16, as Megatron reduces them).
bool isGradientRounding(Operation *op);
/// Whether `op` is an add or subtract (linear in each operand).
bool isAddOrSub(Operation *op);
/// The gradient rounding `v` reaches through single-use reshapes,
/// transposes and adds (a tied weight's contributions), or null.
Operation *gradientRoundingOf(Value v);
/// Whether `v` reaches a gradient rounding (gradientRoundingOf).
bool leadsToGradientRounding(Value v);
/// The tensor type of `v`, or null.
inline RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}
/// The axes `r`'s propagated sharding splits each dimension over.
inline DimAxes targetOf(Value r) {
  return axesOf(getSharding(r), tensorType(r) ? tensorType(r).getRank() : 0);
}
/// True if any dimension of `dims` is split over one of `over`.
bool splitsOver(ArrayRef<Axes> dims, ArrayRef<StringAttr> over);

/// Attaches the ring attention models (RingAttention.cpp) of
/// cleave.attention and attention_grad.
void registerRingAttentionModels(MLIRContext *ctx);

class Partitioner {
public:
  /// What the pass's options ask of every function's partitioning.
  struct Options {
    /// Axes whose ranks hold interleaved elements of a split dimension.
    ArrayRef<std::string> interleaved;
    /// Axes a need-replication factor may exchange for the parallel factor
    /// its rule names (ShardingFactor::exchangeWith) with all_to_all.
    ArrayRef<std::string> exchangeAxes;
    /// Exchange whenever an op can, and refuse an op that cannot, instead
    /// of taking the cheapest layout.
    bool requireExchange = false;
    /// Axes over which an attention whose sequence is split runs as a
    /// ring (RingAttention.cpp): key/value blocks rotate over them.
    ArrayRef<std::string> ringAxes;
    /// Testing only: at this ring step (>= 1) the keys' positions are
    /// those of the neighbouring block, so that a parity check has
    /// something to find. -1: none.
    int64_t ringFault = -1;
  };

  Partitioner(MeshOp mesh, const Options &options)
      : mesh(mesh), axes(mesh), interleaved(options.interleaved),
        exchangeAxes(options.exchangeAxes),
        requireExchange(options.requireExchange), ringAxes(options.ringAxes),
        ringFault(options.ringFault) {}

  LogicalResult run(func::FuncOp func);

  //===--------------------------------------------------------------------===//
  // The state and services the ops' PartitionOpInterface models use
  //===--------------------------------------------------------------------===//

  /// What one global value is on this rank.
  struct Local {
    Value value;
    DimAxes dims;
    /// Non-empty: `value` is this rank's addend of a sum over these axes,
    /// still to be completed (see complete()); then `target` is the
    /// sharding to end in, and `why` names the op whose reduction it is.
    Axes partial = {};
    DimAxes target = {};
    std::string why = {};
  };

  /// The local value of `global` (an operand of the op being partitioned,
  /// or a result already partitioned).
  Local &getLocal(Value global) { return locals[global]; }
  void setLocal(Value global, Local local) {
    locals[global] = std::move(local);
  }

  MeshOp getMesh() const { return mesh; }
  const MeshAxes &getMeshAxes() const { return axes; }
  /// The ring axes and fault (Options).
  ArrayRef<std::string> getRingAxes() const { return ringAxes; }
  int64_t getRingFault() const { return ringFault; }
  /// The rows' log-sum-exp of a ring attention (a global cleave.attention)
  /// in its local layout, for its gradient.
  struct RingRows {
    Value lse;
    DimAxes dims;
  };
  DenseMap<Operation *, RingRows> &getRingRows() { return ringRows; }
  /// Whether ranks along `axis` hold interleaved elements of a split
  /// dimension instead of blocks (PartitionPass's interleaved-axes).
  bool isInterleaved(StringAttr axis) const {
    return llvm::is_contained(interleaved, axis.getValue());
  }

  RankedTensorType localType(RankedTensorType global, ArrayRef<Axes> dims) {
    SmallVector<int64_t> shape(global.getShape());
    for (auto [d, a] : llvm::enumerate(dims))
      shape[d] /= axes.size(a);
    return RankedTensorType::get(shape, global.getElementType());
  }

  ArrayAttr axesAttr(ArrayRef<StringAttr> list) {
    return ArrayAttr::get(mesh.getContext(),
                          SmallVector<Attribute>(list.begin(), list.end()));
  }

  /// Records why a collective exists (`cleave.phase`), with the conflicts
  /// settled on the op being partitioned.
  Operation *tag(Operation *op, const Twine &why) {
    mlir::cleave::setPhase(op, why);
    if (conflicts)
      op->setAttr(kConflictsAttrName, conflicts);
    return op;
  }

  /// Partitions one op: through its PartitionOpInterface, or by its rule.
  LogicalResult partitionOp(OpBuilder &b, Operation *op);
  /// Completes the deferred partial sums among `op`'s operands.
  void completeOperands(OpBuilder &b, Operation *op);
  /// The generic path, once the operands are complete (partitionByRule):
  /// operands made once for all users resharded, then 1. the factor axes
  /// of the layout that sends the fewest bytes; 2. the operands in the
  /// layout the op computes on; 3. the op on local shapes
  /// (PartitionOpInterface::buildLocalOp); 4. and 5. its results completed
  /// and resharded to their shardings.
  LogicalResult partitionWithRule(OpBuilder &b, Operation *op);
  /// The op's local results from its resharded operands and their local
  /// types, or failure (reported).
  using BuildLocal = llvm::function_ref<FailureOr<SmallVector<Value>>(
      ValueRange operands, TypeRange resultTypes)>;
  /// Steps 2-5 of the generic path with the factor axes given: the
  /// operands resharded to them, the local results built by `build` (by
  /// default the model's buildLocalOp, or a clone), and the results
  /// completed and resharded.
  LogicalResult partitionWithFactors(OpBuilder &b, Operation *op,
                                     const ShardingRule &rule,
                                     ArrayRef<Axes> factorAxes, bool wholeOnly,
                                     BuildLocal build = nullptr);
  /// Step 1 of the generic path: the factor axes of the layout that sends
  /// the fewest bytes (failure, reported, where an exchange must but
  /// cannot be made).
  FailureOr<SmallVector<Axes>> chooseFactorAxes(Operation *op,
                                                const ShardingRule &rule);

  /// The local value of `global` resharded from `from` to `to`.
  Value reshard(OpBuilder &b, Location loc, Value local,
                RankedTensorType globalType, ArrayRef<Axes> from,
                ArrayRef<Axes> to, StringRef why);
  /// This rank's first index along a dimension of `size` elements split
  /// over `over`: a 0-d tensor of `elementType` (an int or float type).
  Value rankOffset(OpBuilder &b, Location loc, Type elementType, int64_t size,
                   ArrayRef<StringAttr> over, const Twine &why);
  /// This rank's element of `perRank` (one value per rank of the group
  /// `over`, by group index): a 0-d tensor of `elementType`.
  Value rankValue(OpBuilder &b, Location loc, Type elementType,
                  ArrayRef<int64_t> perRank, ArrayRef<StringAttr> over,
                  const Twine &why);
  /// Completes `v`'s local value if it is a deferred partial sum, before
  /// the op `b` inserts at reads it.
  void completeDeferred(OpBuilder &b, Value v);
  /// True if partial sums of `r` can wait: every reader, through reshapes
  /// and transposes, adds or subtracts (x·dW_q + x·dW_k + x·dW_v in
  /// backward) or rounds a gradient to bf16/f16, so the sum is completed
  /// once.
  static bool canDefer(Value r);
  /// Runs an add or subtract of deferred partial sums (same axes, same
  /// layout) on the addends: the result is a partial sum too. Returns
  /// false, changing nothing, if `op` is not such an op.
  bool partitionLinear(OpBuilder &b, Operation *op);
  /// A pipeline message replicated over other mesh axes than pp (tp): each
  /// rank of such a group sends its slice and the receivers all-gather
  /// them (Megatron's scatter/gather of pipeline messages: 1/n of the bytes
  /// between nodes, the gather inside one). The message's local value in
  /// its result's layout, or none where it stays whole (small, or no
  /// dimension divides).
  std::optional<Value> scatterTransfer(OpBuilder &b,
                                       PipelineTransferOp transfer);

private:
  /// Emits the gathers, slices and all-to-alls of a planned reshard
  /// (planReshard) of a
  /// local value of `globalType`, each tagged with `why`.
  Value emitReshard(OpBuilder &b, Location loc, Value local,
                    RankedTensorType globalType, ArrayRef<ReshardStep> steps,
                    StringRef why);
  /// Reshards the operands of `op` made once for all their users
  /// (kReshardOnceAttr) to the layout the attribute names.
  void reshardOnce(OpBuilder &b, Operation *op);
  /// `base` with each exchange axis that splits an exchangeable factor of
  /// `op`'s operands or results moved to the factor it exchanges with:
  /// none when no such axis splits one, failure (reported) when one does
  /// but the other factor does not divide over it.
  FailureOr<std::optional<SmallVector<Axes>>>
  exchangeLayout(Operation *op, const ShardingRule &rule, ArrayRef<Axes> base);
  SmallVector<Value> reshardOperands(OpBuilder &b, Operation *op,
                                     const ShardingRule &rule,
                                     ArrayRef<Axes> factorAxes, bool wholeOnly);
  void finishResults(OpBuilder &b, Operation *op, ValueRange local,
                     ArrayRef<DimAxes> produced, const Axes &partial,
                     std::optional<ReduceKind> partialKind);

  /// Completes the partial results of an op whose reduction is split
  /// (`partial` axes, `kind`): a reduce_scatter where the target splits a
  /// dimension over exactly those axes, else an all_reduce; then reshards
  /// to `target`.
  Value complete(OpBuilder &b, Location loc, Value local, RankedTensorType type,
                 DimAxes produced, ArrayRef<StringAttr> partial,
                 CollectiveReduceKind kind, ArrayRef<Axes> target,
                 StringRef opName);
  /// `v` on the first rank of the `over` axes, zero on the others: a whole
  /// value as one addend of a sum over those axes.
  Value keepOnFirstRank(OpBuilder &b, Location loc, Value v,
                        ArrayRef<StringAttr> over);
  /// A value split as `from` that is whole over `over` in `to` except for
  /// one dimension split further over some of `over`'s axes: this rank's
  /// addend of it in layout `to`, its block in place and zeros elsewhere
  /// (and zero on all but the first rank of the rest of `over`), so that
  /// the sum of the addends over `over` is the value. None when the
  /// layouts differ otherwise.
  std::optional<Value> spreadBlocks(OpBuilder &b, Location loc, Value v,
                                    RankedTensorType globalType,
                                    ArrayRef<Axes> from, ArrayRef<Axes> to,
                                    ArrayRef<StringAttr> over);

  /// Factor axes for `op`, taking the results' axes first or the
  /// operands' first (largest operand first); need-replication factors get
  /// none and an axis splits one factor.
  SmallVector<Axes> assignFactors(Operation *op, const ShardingRule &rule,
                                  bool resultsFirst);
  /// `factorAxes` without the axes at the end of each reduction factor's
  /// list that some result is split over (its target sharding): the
  /// reduced operands are then gathered over them instead of the results
  /// being partial over them.
  SmallVector<Axes> gatherReductions(Operation *op, const ShardingRule &rule,
                                     ArrayRef<Axes> factorAxes);
  /// Bytes each rank sends to run `op` with `factorAxes`: gathers of its
  /// operands, completing partial results (reduce_scatter or all_reduce),
  /// and gathers of its results to their shardings (ring estimates).
  int64_t estimateBytes(Operation *op, const ShardingRule &rule,
                        ArrayRef<Axes> factorAxes);
  /// Bytes a rank sends to reshard a tensor from `from` to `to`.
  int64_t reshardBytes(RankedTensorType type, ArrayRef<Axes> from,
                       ArrayRef<Axes> to);
  /// Bytes a rank sends for the gathers and all-to-alls among `steps`
  /// (slices are local).
  int64_t gatherBytes(RankedTensorType type, ArrayRef<ReshardStep> steps);

  MeshOp mesh;
  MeshAxes axes;
  /// Axes whose ranks hold interleaved elements (PartitionPass option).
  ArrayRef<std::string> interleaved;
  /// Axes factors may exchange, and whether they must (Options).
  ArrayRef<std::string> exchangeAxes;
  bool requireExchange;
  /// Ring attention's axes and testing fault (Options).
  ArrayRef<std::string> ringAxes;
  int64_t ringFault;
  DenseMap<Operation *, RingRows> ringRows;
  DenseMap<Value, Local> locals;
  /// Per set of mesh axes: a scalar, true on the first rank of the axes.
  DenseMap<Attribute, Value> firstRankFlags;
  /// The conflicts propagation settled on the op being partitioned: the
  /// collectives it causes carry them.
  ArrayAttr conflicts;
};

} // namespace mlir::cleave::partition

#endif // CLEAVE_LIB_TRANSFORMS_SHARDING_PARTITIONER_H
