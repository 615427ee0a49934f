//===- PartitionOpModels.cpp - The cleave ops' PartitionOpInterface -------===//
//
// The cleave ops whose per-rank form is not the generic path's, as external
// models of PartitionOpInterface: partial sums carried through adds,
// reshapes and transposes toward their completion, gradient roundings that
// round each rank's addend, pipeline messages scattered over their group,
// splat constants and iotas built at the local shape (`partition`); and a
// log_softmax split along its rows, a gather from a table split along its
// gathered axis, grouped matmuls with their experts split, slices and
// grouped convolutions (`buildLocalOp`).
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "mlir/IR/DialectRegistry.h"

#define DEBUG_TYPE "cleave-partition"

#include "cleave/Transforms/Sharding/PartitionOpInterface.cpp.inc"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::partition;
using namespace ::cleave::sharding;

//===----------------------------------------------------------------------===//
// Partial sums
//===----------------------------------------------------------------------===//

/// A transpose or reshape of a partial gradient on its way to its rounding
/// moves each rank's addend as it is, so that the sum is completed after
/// the rounding, in the low type, into the gradient's layout (e.g. a
/// reduce_scatter over dp for ZeRO-2). False, changing nothing, otherwise
/// (a split reshape, or a 0-d result, is completed first).
static bool partitionPartialToRounding(Partitioner &p, OpBuilder &b,
                                       Operation *op) {
  const Partitioner::Local &in = p.getLocal(op->getOperand(0));
  Value r = op->getResult(0);
  if (in.partial.empty() || !leadsToGradientRounding(r))
    return false;
  auto type = cast<RankedTensorType>(r.getType());
  DimAxes dims(type.getRank());
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    for (auto [d, perm] : llvm::enumerate(transpose.getPermutation()))
      dims[d] = in.dims[perm];
  } else if (llvm::any_of(in.dims, [](const Axes &a) { return !a.empty(); })) {
    dims.clear();
  }
  if (dims.empty())
    return false;
  Type localType = p.localType(type, dims);
  Value v = cloneOnLocalShapes(b, op, in.value, localType)->getResult(0);
  p.setLocal(
      r, {v, dims, in.partial, axesOf(getSharding(r), type.getRank()), in.why});
  return true;
}

/// A reshape or transpose of a partial sum on its way to an add moves each
/// rank's addend. Resharding addends is linear too, but not over the sum's
/// own axes (each rank would keep a different block of its addend), so a
/// result split over them completes the sum first. None: not such an op.
static std::optional<LogicalResult>
partitionPartialToAdd(Partitioner &p, OpBuilder &b, Operation *op) {
  Value operand = op->getOperand(0), r = op->getResult(0);
  if (p.getLocal(operand).partial.empty() || !Partitioner::canDefer(r) ||
      splitsOver(targetOf(r), p.getLocal(operand).partial))
    return std::nullopt;
  Partitioner::Local saved = p.getLocal(operand);
  p.getLocal(operand).partial.clear();
  LogicalResult result = p.partitionOp(b, op);
  p.setLocal(operand, saved);
  if (failed(result))
    return failure();
  Partitioner::Local &out = p.getLocal(r);
  out.partial = saved.partial;
  out.target = out.dims;
  out.why = saved.why;
  return success();
}

namespace {

/// Reshapes and transposes: a partial sum moves through them toward its
/// gradient rounding or its add.
template <typename OpT>
struct MovePartialModel
    : PartitionOpInterface::ExternalModel<MovePartialModel<OpT>, OpT> {
  LogicalResult partition(Operation *op, Partitioner &p, OpBuilder &b) const {
    if (partitionPartialToRounding(p, b, op))
      return success();
    if (std::optional<LogicalResult> result = partitionPartialToAdd(p, b, op))
      return *result;
    return partitionByRule(p, b, op);
  }
};

/// Adds and subtracts combine the addends of partial sums.
struct BinaryModel
    : PartitionOpInterface::ExternalModel<BinaryModel, BinaryOp> {
  LogicalResult partition(Operation *op, Partitioner &p, OpBuilder &b) const {
    if (p.partitionLinear(b, op))
      return success();
    return partitionByRule(p, b, op);
  }
};

/// A gradient rounded to low precision on its way to its reduction: each
/// rank rounds its addend, and the sum is completed (all_reduce or
/// reduce_scatter, in the low type) where the rounded gradient is read.
struct ConvertModel
    : PartitionOpInterface::ExternalModel<ConvertModel, ConvertOp> {
  LogicalResult partition(Operation *op, Partitioner &p, OpBuilder &b) const {
    const Partitioner::Local &in = p.getLocal(op->getOperand(0));
    if (!isGradientRounding(op) || in.partial.empty())
      return partitionByRule(p, b, op);
    Value r = op->getResult(0);
    auto type = cast<RankedTensorType>(r.getType());
    Value v = ConvertOp::create(b, op->getLoc(), p.localType(type, in.dims),
                                in.value);
    v.getDefiningOp()->setAttrs(op->getDiscardableAttrDictionary());
    v.getDefiningOp()->removeAttr(kShardingAttrName);
    p.setLocal(r, {v, in.dims, in.partial,
                   axesOf(getSharding(r), type.getRank()), in.why});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Values every rank makes on its own
//===----------------------------------------------------------------------===//

/// A pipeline message between stages, scattered over the rest of its group
/// where that pays (Partitioner::scatterTransfer).
struct TransferModel
    : PartitionOpInterface::ExternalModel<TransferModel, PipelineTransferOp> {
  LogicalResult partition(Operation *op, Partitioner &p, OpBuilder &b) const {
    auto transfer = cast<PipelineTransferOp>(op);
    p.completeOperands(b, op);
    if (transfer.getFrom() != transfer.getTo())
      if (std::optional<Value> v = p.scatterTransfer(b, transfer)) {
        p.setLocal(transfer.getResult(), {*v, targetOf(transfer.getResult())});
        return success();
      }
    return partitionByRule(p, b, op);
  }
};

/// A splat constant is the same splat on every rank, at the local shape.
struct ConstantModel
    : PartitionOpInterface::ExternalModel<ConstantModel, ConstantOp> {
  LogicalResult partition(Operation *op, Partitioner &p, OpBuilder &b) const {
    auto constant = cast<ConstantOp>(op);
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    auto type = tensorType(constant.getResult());
    if (!splat || !type)
      return partitionByRule(p, b, op);
    DimAxes target = targetOf(constant.getResult());
    auto local = p.localType(type, target);
    Value v =
        ConstantOp::create(b, op->getLoc(), local, splat.resizeSplat(local));
    // Discardable attributes (an initializer's name) stay.
    for (NamedAttribute attr : constant->getDiscardableAttrs())
      if (attr.getName() != kShardingAttrName)
        v.getDefiningOp()->setAttr(attr.getName(), attr.getValue());
    p.setLocal(constant.getResult(), {v, target});
    return success();
  }
};

/// An iota split along other dimensions than its own is the same iota at
/// the local shape (a one-hot's [batch, seq, vocab] index over dp is
/// [batch/dp, seq, vocab] on each rank, not the whole then a slice); split
/// along its own, it is shifted by this rank's first index, or, over
/// interleaved axes, scaled and shifted by this rank's index.
struct IotaModel : PartitionOpInterface::ExternalModel<IotaModel, IotaOp> {
  LogicalResult partition(Operation *op, Partitioner &p, OpBuilder &b) const {
    auto iota = cast<IotaOp>(op);
    Location loc = op->getLoc();
    StringRef opName = op->getName().getStringRef();
    auto type = tensorType(iota.getResult());
    DimAxes target = targetOf(iota.getResult());
    int64_t dim = iota.getDimension();
    Type et = type ? type.getElementType() : Type();
    if (!type || dim < 0 || dim >= int64_t(target.size()) ||
        (!target[dim].empty() && !isa<IntegerType, FloatType>(et)))
      return partitionByRule(p, b, op);
    auto local = p.localType(type, target);
    Value v = IotaOp::create(b, loc, local, iota.getDimensionAttr());
    bool interleave =
        !target[dim].empty() && llvm::all_of(target[dim], [&](StringAttr a) {
          return p.isInterleaved(a);
        });
    if (interleave) {
      // Interleaved parts (microbatches): n * iota + this rank's index.
      int64_t n = p.getMeshAxes().size(target[dim]);
      Value index = p.rankOffset(b, loc, et, n, target[dim],
                                 "this rank's index, interleaving " + opName);
      Value scale = ConstantOp::create(
          b, loc, local,
          isa<FloatType>(et)
              ? DenseElementsAttr::get(local, b.getFloatAttr(et, double(n)))
              : DenseElementsAttr::get(local, b.getIntegerAttr(et, n)));
      v = BinaryOp::create(
          b, loc, BinaryKind::add,
          BinaryOp::create(b, loc, BinaryKind::mul, v, scale),
          BroadcastInDimOp::create(b, loc, local, index,
                                   b.getDenseI64ArrayAttr({})));
    } else if (!target[dim].empty()) {
      // Split along its own dimension (the one-hot of a vocabulary-
      // parallel cross-entropy): shifted by this rank's first index.
      Value first =
          p.rankOffset(b, loc, et, type.getDimSize(dim), target[dim],
                       "the first index of this rank's part of " + opName);
      v = BinaryOp::create(
          b, loc, BinaryKind::add, v,
          BroadcastInDimOp::create(b, loc, local, first,
                                   b.getDenseI64ArrayAttr({})));
    }
    p.setLocal(iota.getResult(), {v, target});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Local ops that differ from a clone
//===----------------------------------------------------------------------===//

/// log_softmax split along its rows: each rank normalizes its part with the
/// row maximum and sum of exponentials all-reduced over the row's axes.
struct LogSoftmaxModel
    : PartitionOpInterface::ExternalModel<LogSoftmaxModel, LogSoftmaxOp> {
  Operation *buildLocalOp(Operation *op, Partitioner &p, OpBuilder &b,
                          const LocalLayout &layout, ValueRange operands,
                          TypeRange resultTypes) const {
    auto logSoftmax = cast<LogSoftmaxOp>(op);
    Axes over;
    for (int64_t f : layout.rule.getOperand(0)[logSoftmax.getDimension()])
      llvm::append_range(over, layout.factorAxes[f]);
    if (over.empty())
      return cloneOnLocalShapes(b, op, operands, resultTypes);
    Location loc = op->getLoc();
    Value x = operands[0];
    auto type = cast<RankedTensorType>(x.getType());
    int64_t dim = logSoftmax.getDimension();
    SmallVector<int64_t> rowShape, keep;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != dim) {
        rowShape.push_back(type.getDimSize(d));
        keep.push_back(d);
      }
    auto rowType = RankedTensorType::get(rowShape, type.getElementType());
    std::string across = axesToString(over);
    auto allReduce = [&](Value v, CollectiveReduceKind kind, StringRef what) {
      return p
          .tag(AllReduceOp::create(b, loc, rowType, kind, v,
                                   p.getMesh().getSymName(), p.axesAttr(over)),
               "all_reduce " + across + ": the row " + what +
                   " of a log_softmax split along its rows")
          ->getResult(0);
    };
    auto rows = [&](Value v) {
      return BroadcastInDimOp::create(b, loc, type, v,
                                      b.getDenseI64ArrayAttr(keep));
    };
    // max over the whole row, then x - max; the sum of exponentials of the
    // whole row; x - max - log(sum).
    Value max = allReduce(ReduceOp::create(b, loc, rowType, ReduceKind::max, x,
                                           ArrayRef<int64_t>{dim}),
                          CollectiveReduceKind::max, "maximum");
    Value shifted = BinaryOp::create(b, loc, BinaryKind::sub, x, rows(max));
    Value exp = UnaryOp::create(b, loc, UnaryKind::exp, shifted);
    Value sum = allReduce(ReduceOp::create(b, loc, rowType, ReduceKind::sum,
                                           exp, ArrayRef<int64_t>{dim}),
                          CollectiveReduceKind::sum, "sum of exponentials");
    Value logSum = UnaryOp::create(b, loc, UnaryKind::log, sum);
    return BinaryOp::create(b, loc, BinaryKind::sub, shifted, rows(logSum));
  }
};

/// This rank's indices into its slice of a table of `size` rows split over
/// `over`: negative indices count from the end of the whole table, and the
/// rows other ranks hold map to the local row count, which reads zero (an
/// index out of range does, in the ops that take these).
static Value localIndices(Partitioner &p, OpBuilder &b, Location loc,
                          Value indices, int64_t size,
                          ArrayRef<StringAttr> over, const Twine &why) {
  auto idxType = cast<RankedTensorType>(indices.getType());
  Type et = idxType.getElementType();
  int64_t localRows = size / p.getMeshAxes().size(over);
  auto scalar = [&](int64_t v) -> Value {
    auto t = RankedTensorType::get({}, et);
    auto c = ConstantOp::create(
        b, loc, t, DenseElementsAttr::get(t, b.getIntegerAttr(et, v)));
    return BroadcastInDimOp::create(b, loc, idxType, c,
                                    b.getDenseI64ArrayAttr({}));
  };
  Value first = p.rankOffset(b, loc, et, size, over, why);
  Value offset = idxType.getRank() == 0
                     ? first
                     : Value(BroadcastInDimOp::create(
                           b, loc, idxType, first, b.getDenseI64ArrayAttr({})));
  auto boolType = RankedTensorType::get(idxType.getShape(), b.getI1Type());
  Value zero = scalar(0), count = scalar(size), local = scalar(localRows);
  Value negative =
      CompareOp::create(b, loc, boolType, CompareKind::lt, indices, zero);
  Value wrapped = BinaryOp::create(b, loc, BinaryKind::add, indices, count);
  Value global = SelectOp::create(b, loc, negative, wrapped, indices);
  Value shifted = BinaryOp::create(b, loc, BinaryKind::sub, global, offset);
  Value below =
      CompareOp::create(b, loc, boolType, CompareKind::lt, shifted, zero);
  Value above =
      CompareOp::create(b, loc, boolType, CompareKind::ge, shifted, local);
  Value outside = BinaryOp::create(b, loc, BinaryKind::lor, below, above);
  return SelectOp::create(b, loc, outside, local, shifted);
}

/// A gather from a table split along its gathered axis (its reduction is
/// split): every rank looks up the rows it holds (indices shifted by its
/// first row) and reads zero for the others; the partitioner sums the
/// partial results.
struct GatherModel
    : PartitionOpInterface::ExternalModel<GatherModel, GatherOp> {
  Operation *buildLocalOp(Operation *op, Partitioner &p, OpBuilder &b,
                          const LocalLayout &layout, ValueRange operands,
                          TypeRange resultTypes) const {
    if (layout.partial.empty())
      return cloneOnLocalShapes(b, op, operands, resultTypes);
    auto gather = cast<GatherOp>(op);
    int64_t rows = gather.getOperand().getType().getDimSize(gather.getAxis());
    Value mapped =
        localIndices(p, b, op->getLoc(), operands[1], rows, layout.partial,
                     "the first row of this rank's slice of the table of " +
                         op->getName().getStringRef());
    return GatherOp::create(b, op->getLoc(), resultTypes[0], operands[0],
                            mapped, gather.getAxisAttr());
  }
};

/// Grouped matmuls with their experts split (expert parallelism): each
/// rank multiplies the rows routed to the experts it holds, their ids
/// shifted by its first expert, and the rows routed elsewhere read zero (in
/// the forward, whose results are then partial sums over the experts'
/// axes) or add nothing (in the weight gradient, whose experts are its
/// own). Factor 1 of both rules is the experts.
template <typename OpT>
struct GroupedMatmulModel
    : PartitionOpInterface::ExternalModel<GroupedMatmulModel<OpT>, OpT> {
  Operation *buildLocalOp(Operation *op, Partitioner &p, OpBuilder &b,
                          const LocalLayout &layout, ValueRange operands,
                          TypeRange resultTypes) const {
    ArrayRef<StringAttr> over = layout.factorAxes[1];
    if (over.empty())
      return cloneOnLocalShapes(b, op, operands, resultTypes);
    auto grouped = cast<OpT>(op);
    Value weights;
    if constexpr (std::is_same_v<OpT, GroupedMatmulOp>)
      weights = grouped.getW();
    else
      weights = grouped.getResult();
    int64_t experts = cast<RankedTensorType>(weights.getType()).getDimSize(0);
    SmallVector<Value> locals(operands);
    locals[2] = localIndices(p, b, op->getLoc(), operands[2], experts, over,
                             "the first expert of this rank's slice of the "
                             "experts of " +
                                 op->getName().getStringRef());
    Operation *local = cloneOnLocalShapes(b, op, locals, resultTypes);
    // For --cleave-elide-expert-sums.
    local->setAttr(attr::kExpertsOver, p.axesAttr(over));
    return local;
  }
};

/// A slice's split dimensions are whole ones (their factor is shared), so
/// their limit is the local size.
struct SliceModel : PartitionOpInterface::ExternalModel<SliceModel, SliceOp> {
  Operation *buildLocalOp(Operation *op, Partitioner &p, OpBuilder &b,
                          const LocalLayout &layout, ValueRange operands,
                          TypeRange resultTypes) const {
    auto slice =
        cast<SliceOp>(cloneOnLocalShapes(b, op, operands, resultTypes));
    SmallVector<int64_t> limits(slice.getLimitIndices());
    for (auto [d, a] : llvm::enumerate(layout.produced[0]))
      if (!a.empty())
        limits[d] = resultTypes.empty()
                        ? limits[d]
                        : cast<RankedTensorType>(resultTypes[0]).getDimSize(d);
    slice.setLimitIndices(limits);
    return slice;
  }
};

/// A grouped convolution: factor 1 is the group factor, and each rank
/// convolves its groups.
struct ConvModel : PartitionOpInterface::ExternalModel<ConvModel, ConvOp> {
  Operation *buildLocalOp(Operation *op, Partitioner &p, OpBuilder &b,
                          const LocalLayout &layout, ValueRange operands,
                          TypeRange resultTypes) const {
    auto conv = cast<ConvOp>(cloneOnLocalShapes(b, op, operands, resultTypes));
    if (conv.getGroups() > 1)
      conv.setGroups(conv.getGroups() /
                     p.getMeshAxes().size(layout.factorAxes[1]));
    return conv;
  }
};

} // namespace

void partition::registerPartitionExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, CleaveDialect *) {
    ReshapeOp::attachInterface<MovePartialModel<ReshapeOp>>(*ctx);
    TransposeOp::attachInterface<MovePartialModel<TransposeOp>>(*ctx);
    BinaryOp::attachInterface<BinaryModel>(*ctx);
    ConvertOp::attachInterface<ConvertModel>(*ctx);
    PipelineTransferOp::attachInterface<TransferModel>(*ctx);
    ConstantOp::attachInterface<ConstantModel>(*ctx);
    IotaOp::attachInterface<IotaModel>(*ctx);
    LogSoftmaxOp::attachInterface<LogSoftmaxModel>(*ctx);
    GatherOp::attachInterface<GatherModel>(*ctx);
    GroupedMatmulOp::attachInterface<GroupedMatmulModel<GroupedMatmulOp>>(*ctx);
    GroupedMatmulWeightGradOp::attachInterface<
        GroupedMatmulModel<GroupedMatmulWeightGradOp>>(*ctx);
    SliceOp::attachInterface<SliceModel>(*ctx);
    ConvOp::attachInterface<ConvModel>(*ctx);
    registerRingAttentionModels(ctx);
  });
}
