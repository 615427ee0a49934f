//===- Partition.cpp - Global program to per-rank program ------------------===//
//
// Rewrites a program whose values all carry shardings (after
// --cleave-propagate-sharding) into the program every rank runs: local
// shapes, and the collectives the shardings imply. Each op is partitioned on
// its own through its sharding rule:
//
//   1. Factor axes: either results first (a factor in a result takes the
//      result's axes, a factor only operands have takes the axes of the
//      largest operand that splits it) or operands first (the largest
//      operands' axes, then the results'), whichever moves fewer bytes.
//      Need-replication factors take none; an axis splits one factor.
//   2. Each operand is resharded to what the factor axes give its
//      dimensions: all_gather where it has axes the op does not split it
//      over, all_slice where it lacks some (a local copy, no traffic).
//   3. The op runs on local shapes.
//   4. Reduction factors split over axes leave partial results: an
//      all_reduce of the factor's kind over those axes completes them, or
//      a reduce_scatter when the result is to be split over those axes.
//   5. The result is resharded to its propagated sharding.
//
// Every value then has its propagated sharding, which is what the next op
// and the function's results expect. Each collective records why it exists
// in `cleave.phase` (the plan's command source and --explain-sharding).
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Sharding/FactorSharding.h"
#include "cleave/Transforms/Sharding/Passes.h"
#include "cleave/Transforms/Training/Recompute.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <optional>

namespace cleave {
#define GEN_PASS_DEF_PARTITIONPASS
#include "cleave/Transforms/Sharding/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;
using namespace ::cleave::sharding;

namespace {

using DimAxes = SmallVector<Axes>;

static DimAxes axesOf(TensorShardingAttr s, int64_t rank) {
  DimAxes dims(rank);
  if (s)
    for (auto [d, dim] : llvm::enumerate(s.getDims()))
      if (d < (size_t)rank)
        dims[d].assign(dim.getAxes().begin(), dim.getAxes().end());
  return dims;
}

/// The length of the longest common prefix of two axis lists.
static size_t commonPrefix(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  return n;
}

static std::string dimsToString(ArrayRef<Axes> dims) {
  std::string s = "[";
  for (auto [d, axes] : llvm::enumerate(dims)) {
    s += d ? ", {" : "{";
    for (auto [i, a] : llvm::enumerate(axes))
      s += (i ? ", \"" : "\"") + a.getValue().str() + "\"";
    s += "}";
  }
  return s + "]";
}

class Partitioner {
public:
  Partitioner(MeshOp mesh, ArrayRef<std::string> interleaved)
      : mesh(mesh), axes(mesh), interleaved(interleaved) {}

  LogicalResult run(func::FuncOp func);

private:
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

  Operation *tag(Operation *op, const Twine &why) {
    op->setAttr("cleave.phase", StringAttr::get(op->getContext(), why));
    if (conflicts)
      op->setAttr(kConflictsAttrName, conflicts);
    return op;
  }

  /// The local value of `global` resharded from `from` to `to`.
  Value reshard(OpBuilder &b, Location loc, Value local,
                RankedTensorType globalType, ArrayRef<Axes> from,
                ArrayRef<Axes> to, StringRef why);

  LogicalResult partitionOp(OpBuilder &b, Operation *op);

  /// Completes the partial results of an op whose reduction is split
  /// (`partial` axes, `kind`): a reduce_scatter where the target splits a
  /// dimension over exactly those axes, else an all_reduce; then reshards
  /// to `target`.
  Value complete(OpBuilder &b, Location loc, Value local,
                 RankedTensorType type, DimAxes produced, ArrayRef<StringAttr> partial,
                 CollectiveReduceKind kind, ArrayRef<Axes> target,
                 StringRef opName);
  /// Completes `v`'s local value if it is a deferred partial sum, before
  /// the op `b` inserts at reads it.
  void completeDeferred(OpBuilder &b, Value v);
  /// Runs an add or subtract of deferred partial sums (same axes, same
  /// layout) on the addends: the result is a partial sum too. Returns
  /// false, changing nothing, if `op` is not such an op.
  bool partitionLinear(OpBuilder &b, Operation *op);
  /// `v` on the first rank of the `over` axes, zero on the others: a whole
  /// value as one addend of a sum over those axes.
  Value keepOnFirstRank(OpBuilder &b, Location loc, Value v,
                        ArrayRef<StringAttr> over);
  /// True if partial sums of `r` can wait: every reader, through reshapes
  /// and transposes, adds or subtracts (x·dW_q + x·dW_k + x·dW_v in
  /// backward) or rounds a gradient to bf16/f16, so the sum is completed
  /// once.
  static bool canDefer(Value r);
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
  /// `produced` with the dimensions the result goes split along over
  /// other axes than `partial` already split (a local slice): partial sums
  /// are sliced before they are reduced, and the reduction sends only this
  /// rank's part.
  static DimAxes slicedBeforeReduction(ArrayRef<Axes> produced,
                                       ArrayRef<Axes> target,
                                       ArrayRef<StringAttr> partial);
  /// The dimension a reduce_scatter over `partial` can split when going
  /// from `produced` to `target`: the only dimension that changes, gaining
  /// exactly `partial`.
  static std::optional<int64_t> scatterDim(ArrayRef<Axes> produced,
                                           ArrayRef<Axes> target,
                                           ArrayRef<StringAttr> partial);
  /// A pipeline message replicated over other mesh axes than pp (tp): each
  /// rank of such a group sends its slice and the receivers all-gather
  /// them (Megatron's scatter/gather of pipeline messages: 1/n of the bytes
  /// between nodes, the gather inside one). The message's local value in
  /// its result's layout, or none where it stays whole (small, or no
  /// dimension divides).
  std::optional<Value> scatterTransfer(OpBuilder &b,
                                       PipelineTransferOp transfer);
  /// This rank's first index along a dimension of `size` elements split
  /// over `over`: a 0-d tensor of `elementType` (an int or float type).
  Value rankOffset(OpBuilder &b, Location loc, Type elementType, int64_t size,
                   ArrayRef<StringAttr> over, const Twine &why);
  /// log_softmax split along its rows: each rank normalizes its part with
  /// the row maximum and sum of exponentials all-reduced over `over`.
  Value buildSplitLogSoftmax(OpBuilder &b, LogSoftmaxOp op, Value x,
                             ArrayRef<StringAttr> over);
  Value buildGatherWithOffsets(OpBuilder &b, GatherOp op, Value table,
                               Value indices, ArrayRef<StringAttr> vocabAxes,
                               Type resultType);

  MeshOp mesh;
  MeshAxes axes;
  /// Axes whose ranks hold interleaved elements (PartitionPass option).
  ArrayRef<std::string> interleaved;
  DenseMap<Value, Local> locals;
  /// Per set of mesh axes: a scalar, true on the first rank of the axes.
  DenseMap<Attribute, Value> firstRankFlags;
  /// The conflicts propagation settled on the op being partitioned: the
  /// collectives it causes carry them.
  ArrayAttr conflicts;
};

Value Partitioner::reshard(OpBuilder &b, Location loc, Value local,
                           RankedTensorType globalType, ArrayRef<Axes> from,
                           ArrayRef<Axes> to, StringRef why) {
  StringRef meshName = mesh.getSymName();
  DimAxes current(from.begin(), from.end());
  // Gathers first, so that an axis moving between dimensions is free before
  // a slice takes it.
  for (int64_t d = 0, e = current.size(); d < e; ++d) {
    if (isPrefix(current[d], to[d]))
      continue;
    // Keep the common prefix, gather the rest.
    size_t keep = commonPrefix(current[d], to[d]);
    ArrayRef<StringAttr> gathered = ArrayRef(current[d]).drop_front(keep);
    current[d].resize(keep);
    auto type = localType(globalType, current);
    local = tag(AllGatherOp::create(b, loc, type, local, meshName,
                                    axesAttr(gathered), d),
                "all_gather " + axesToString(gathered) + " on dimension " +
                    Twine(d) + ": " + why)
                ->getResult(0);
  }
  for (int64_t d = 0, e = current.size(); d < e; ++d) {
    if (current[d].size() == to[d].size())
      continue;
    ArrayRef<StringAttr> sliced = ArrayRef(to[d]).drop_front(current[d].size());
    current[d] = to[d];
    auto type = localType(globalType, current);
    local = tag(AllSliceOp::create(b, loc, type, local, meshName,
                                   axesAttr(sliced), d),
                "all_slice " + axesToString(sliced) + " on dimension " +
                    Twine(d) + ": " + why)
                ->getResult(0);
  }
  return local;
}

std::optional<Value>
Partitioner::scatterTransfer(OpBuilder &b, PipelineTransferOp transfer) {
  // Below this many bytes per rank a message is latency, not bandwidth.
  constexpr int64_t kScatterMinBytes = 1 << 16;
  Value global = transfer.getOperand();
  auto type = dyn_cast<RankedTensorType>(global.getType());
  if (!type || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  Local &in = locals[global];
  Axes free;
  for (auto [i, attr] : llvm::enumerate(mesh.getAxisNames())) {
    auto name = cast<StringAttr>(attr);
    if (mesh.getShape()[i] > 1 && name.getValue() != "pp" &&
        llvm::none_of(in.dims, [&](const Axes &a) {
          return llvm::is_contained(a, name);
        }))
      free.push_back(name);
  }
  RankedTensorType local = localType(type, in.dims);
  int64_t bytes = local.getNumElements() *
                  std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  if (free.empty() || bytes < kScatterMinBytes)
    return std::nullopt;
  // The largest local dimension the group divides.
  int64_t parts = axes.size(free), dim = -1;
  for (int64_t d = 0; d < local.getRank(); ++d)
    if (local.getDimSize(d) % parts == 0 &&
        (dim < 0 || local.getDimSize(d) > local.getDimSize(dim)))
      dim = d;
  if (dim < 0)
    return std::nullopt;
  DimAxes split = in.dims;
  llvm::append_range(split[dim], free);
  Location loc = transfer.getLoc();
  Value sliced = reshard(b, loc, in.value, type, in.dims, split,
                         "each rank of the group sends its slice of a "
                         "pipeline message");
  auto moved = PipelineTransferOp::create(b, loc, sliced.getType(), sliced,
                                          transfer.getFromAttr(),
                                          transfer.getToAttr());
  for (NamedAttribute attr : transfer->getDiscardableAttrs())
    if (attr.getName() != kShardingAttrName &&
        attr.getName() != kConflictsAttrName)
      moved->setAttr(attr.getName(), attr.getValue());
  return reshard(b, loc, moved.getResult(), type, split,
                 axesOf(getSharding(transfer.getResult()), type.getRank()),
                 "the slices of a pipeline message, gathered after it");
}

Value Partitioner::rankOffset(OpBuilder &b, Location loc, Type elementType,
                              int64_t size, ArrayRef<StringAttr> over,
                              const Twine &why) {
  int64_t parts = axes.size(over);
  int64_t local = size / parts;
  // This rank's element of [0, local, 2 * local, ...].
  auto startsType = RankedTensorType::get({parts}, elementType);
  SmallVector<Attribute> starts;
  for (int64_t i = 0; i < parts; ++i)
    starts.push_back(
        isa<FloatType>(elementType)
            ? Attribute(b.getFloatAttr(elementType, double(i * local)))
            : Attribute(b.getIntegerAttr(elementType, i * local)));
  Value all = ConstantOp::create(b, loc, startsType,
                                 DenseElementsAttr::get(startsType, starts));
  Value mine = tag(AllSliceOp::create(b, loc,
                                      RankedTensorType::get({1}, elementType),
                                      all, mesh.getSymName(), axesAttr(over),
                                      0),
                   why)
                   ->getResult(0);
  return ReshapeOp::create(b, loc, RankedTensorType::get({}, elementType),
                           mine);
}

Value Partitioner::buildSplitLogSoftmax(OpBuilder &b, LogSoftmaxOp op,
                                        Value x, ArrayRef<StringAttr> over) {
  Location loc = op.getLoc();
  auto type = cast<RankedTensorType>(x.getType());
  int64_t dim = op.getDimension();
  SmallVector<int64_t> rowShape, keep;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d != dim) {
      rowShape.push_back(type.getDimSize(d));
      keep.push_back(d);
    }
  auto rowType = RankedTensorType::get(rowShape, type.getElementType());
  std::string across = axesToString(over);
  auto allReduce = [&](Value v, CollectiveReduceKind kind, StringRef what) {
    return tag(AllReduceOp::create(b, loc, rowType, kind, v,
                                   mesh.getSymName(), axesAttr(over)),
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
  Value sum = allReduce(ReduceOp::create(b, loc, rowType, ReduceKind::sum, exp,
                                         ArrayRef<int64_t>{dim}),
                        CollectiveReduceKind::sum, "sum of exponentials");
  Value logSum = UnaryOp::create(b, loc, UnaryKind::log, sum);
  return BinaryOp::create(b, loc, BinaryKind::sub, shifted, rows(logSum));
}

/// A gather from a table split along its gathered axis: every rank looks up
/// the rows it holds (indices shifted by its first row) and reads zero for
/// the others; the caller sums the partial results.
Value Partitioner::buildGatherWithOffsets(OpBuilder &b, GatherOp op,
                                          Value table, Value indices,
                                          ArrayRef<StringAttr> vocabAxes,
                                          Type resultType) {
  Location loc = op.getLoc();
  auto idxType = cast<RankedTensorType>(indices.getType());
  Type et = idxType.getElementType();
  int64_t axis = op.getAxis();
  int64_t rows = op.getOperand().getType().getDimSize(axis);
  int64_t parts = axes.size(vocabAxes);
  int64_t localRows = rows / parts;
  auto scalar = [&](int64_t v) -> Value {
    auto t = RankedTensorType::get({}, et);
    auto c = ConstantOp::create(
        b, loc, t, DenseElementsAttr::get(t, b.getIntegerAttr(et, v)));
    return BroadcastInDimOp::create(b, loc, idxType, c,
                                    b.getDenseI64ArrayAttr({}));
  };
  Value first = rankOffset(b, loc, et, rows, vocabAxes,
                           "the first row of this rank's slice of the table "
                           "of " +
                               op->getName().getStringRef());
  Value offset =
      idxType.getRank() == 0
          ? first
          : Value(BroadcastInDimOp::create(b, loc, idxType, first,
                                           b.getDenseI64ArrayAttr({})));
  auto boolType = RankedTensorType::get(idxType.getShape(), b.getI1Type());
  // Negative indices count from the end of the whole table.
  Value zero = scalar(0), count = scalar(rows), local = scalar(localRows);
  Value negative =
      CompareOp::create(b, loc, boolType, CompareKind::lt, indices, zero);
  Value wrapped = BinaryOp::create(b, loc, BinaryKind::add, indices, count);
  Value global = SelectOp::create(b, loc, negative, wrapped, indices);
  Value shifted = BinaryOp::create(b, loc, BinaryKind::sub, global, offset);
  // Rows other ranks hold become `localRows`, which reads zero.
  Value below =
      CompareOp::create(b, loc, boolType, CompareKind::lt, shifted, zero);
  Value above =
      CompareOp::create(b, loc, boolType, CompareKind::ge, shifted, local);
  Value outside = BinaryOp::create(b, loc, BinaryKind::lor, below, above);
  Value mapped = SelectOp::create(b, loc, outside, local, shifted);
  return GatherOp::create(b, loc, resultType, table, mapped, op.getAxisAttr());
}

SmallVector<Axes> Partitioner::assignFactors(Operation *op,
                                             const ShardingRule &rule,
                                             bool resultsFirst) {
  SmallVector<Axes> factorAxes(rule.getNumFactors());
  SmallVector<bool> decided(rule.getNumFactors(), false);
  SmallVector<int64_t> order;
  auto take = [&](const TensorFactors &t, ArrayRef<Axes> dims, bool decides) {
    for (auto [d, factors] : llvm::enumerate(t)) {
      SmallVector<Axes> split = splitDimAxes(dims[d], factors, rule, axes);
      for (auto [i, f] : llvm::enumerate(factors)) {
        if (decided[f])
          continue;
        if (rule.getFactor(f).kind == FactorKind::NeedReplication) {
          decided[f] = true;
          continue;
        }
        if (decides || !split[i].empty()) {
          factorAxes[f] = split[i];
          decided[f] = true;
          order.push_back(f);
        }
      }
    }
  };
  auto takeResults = [&]() {
    for (auto [i, r] : llvm::enumerate(op->getResults()))
      if (auto type = dyn_cast<RankedTensorType>(r.getType()))
        take(rule.getResult(i), axesOf(getSharding(r), type.getRank()),
             /*decides=*/true);
  };
  if (resultsFirst)
    takeResults();
  SmallVector<unsigned> byBytes =
      llvm::to_vector(llvm::seq<unsigned>(0, op->getNumOperands()));
  llvm::stable_sort(byBytes, [&](unsigned a, unsigned c) {
    return mlir::cleave::detail::getSizeInBytes(op->getOperand(a).getType()) >
           mlir::cleave::detail::getSizeInBytes(op->getOperand(c).getType());
  });
  for (unsigned i : byBytes)
    if (isa<RankedTensorType>(op->getOperand(i).getType()))
      take(rule.getOperand(i), locals[op->getOperand(i)].dims, false);
  if (!resultsFirst)
    takeResults();
  // An axis splits one factor: the factor decided first keeps it.
  keepEachAxisOnce(factorAxes, order);
  // A dimension made of several factors is split as blocks only if each
  // factor before a split one is split whole; otherwise the minor factors'
  // axes cannot be expressed there, and no tensor may use them (a reshape's
  // two sides must agree on every factor).
  for (bool changed = true; changed;) {
    changed = false;
    for (int64_t t = 0; t < rule.getNumTensors(); ++t)
      for (const auto &dim : rule.getTensor(t)) {
        bool blocked = false;
        for (int64_t f : dim) {
          if (blocked && !factorAxes[f].empty()) {
            factorAxes[f].clear();
            changed = true;
          }
          if (axes.size(factorAxes[f]) != rule.getFactor(f).size)
            blocked = true;
        }
      }
  }
  return factorAxes;
}

int64_t Partitioner::reshardBytes(RankedTensorType type, ArrayRef<Axes> from,
                                  ArrayRef<Axes> to) {
  int64_t bytes = 0;
  DimAxes current(from.begin(), from.end());
  for (int64_t d = 0, e = current.size(); d < e; ++d) {
    if (isPrefix(current[d], to[d]))
      continue;
    size_t keep = commonPrefix(current[d], to[d]);
    int64_t g = axes.size(ArrayRef(current[d]).drop_front(keep));
    current[d].resize(keep);
    bytes += mlir::cleave::detail::getSizeInBytes(localType(type, current)) *
             (g - 1) / g;
  }
  return bytes;
}

DimAxes Partitioner::slicedBeforeReduction(ArrayRef<Axes> produced,
                                           ArrayRef<Axes> target,
                                           ArrayRef<StringAttr> partial) {
  DimAxes sliced(produced.begin(), produced.end());
  for (int64_t d = 0, e = produced.size(); d < e; ++d) {
    if (!isPrefix(produced[d], target[d]))
      continue;
    ArrayRef<StringAttr> extra =
        ArrayRef(target[d]).drop_front(produced[d].size());
    if (llvm::none_of(extra, [&](StringAttr a) {
          return llvm::is_contained(partial, a);
        }))
      sliced[d] = target[d];
  }
  return sliced;
}

std::optional<int64_t>
Partitioner::scatterDim(ArrayRef<Axes> produced, ArrayRef<Axes> target,
                        ArrayRef<StringAttr> partial) {
  std::optional<int64_t> dim;
  for (int64_t d = 0, e = produced.size(); d < e; ++d) {
    if (produced[d] == target[d])
      continue;
    if (dim || !isPrefix(produced[d], target[d]) ||
        !llvm::equal(ArrayRef(target[d]).drop_front(produced[d].size()),
                     partial))
      return std::nullopt;
    dim = d;
  }
  return dim;
}

/// A rounding to bf16/f16 that a partial sum is completed after, in the
/// low type, each rank rounding its addend: a gradient's
/// (--low-precision-gradients), or a mixed-precision contraction's f32
/// result rounded to the activations' type (a row-parallel matmul's
/// output, the q, k and v projections' input gradients: reduced once, in
/// bf16, as Megatron reduces them).
static bool isGradientRounding(Operation *op) {
  auto convert = dyn_cast<ConvertOp>(op);
  if (!convert)
    return false;
  if (op->hasAttr(::cleave::kGradientOfAttr))
    return true;
  Type from = getElementTypeOrSelf(convert.getOperand().getType());
  Type to = getElementTypeOrSelf(convert.getResult().getType());
  return from.isF32() && (to.isBF16() || to.isF16());
}

/// Whether `op` is an add or subtract (linear in each operand).
static bool isAddOrSub(Operation *op) {
  auto binary = dyn_cast<BinaryOp>(op);
  return binary && (binary.getKind() == BinaryKind::add ||
                    binary.getKind() == BinaryKind::sub);
}

/// The gradient rounding `v` reaches through single-use reshapes,
/// transposes and adds (a tied weight's contributions), or null.
static Operation *gradientRoundingOf(Value v) {
  while (v.hasOneUse() &&
         (isa<ReshapeOp, TransposeOp>(*v.getUsers().begin()) ||
          isAddOrSub(*v.getUsers().begin())))
    v = v.getUsers().begin()->getResult(0);
  if (v.hasOneUse() && isGradientRounding(*v.getUsers().begin()))
    return *v.getUsers().begin();
  return nullptr;
}
static bool leadsToGradientRounding(Value v) {
  return gradientRoundingOf(v) != nullptr;
}

SmallVector<Axes> Partitioner::gatherReductions(Operation *op,
                                                const ShardingRule &rule,
                                                ArrayRef<Axes> factorAxes) {
  llvm::SmallDenseSet<StringAttr> resultAxes;
  for (Value r : op->getResults())
    if (auto type = dyn_cast<RankedTensorType>(r.getType()))
      for (const Axes &dim : axesOf(getSharding(r), type.getRank()))
        resultAxes.insert(dim.begin(), dim.end());
  SmallVector<Axes> out(factorAxes.begin(), factorAxes.end());
  for (int64_t f = 0; f < rule.getNumFactors(); ++f)
    if (rule.getFactor(f).kind == FactorKind::Reduction)
      while (!out[f].empty() && resultAxes.contains(out[f].back()))
        out[f].pop_back();
  return out;
}

int64_t Partitioner::estimateBytes(Operation *op, const ShardingRule &rule,
                                   ArrayRef<Axes> factorAxes) {
  int64_t bytes = 0;
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (auto type = dyn_cast<RankedTensorType>(v.getType()))
      bytes += reshardBytes(type, locals[v].dims,
                            projectToTensor(rule, i, factorAxes, axes));
  Axes partial;
  for (int64_t f = 0; f < rule.getNumFactors(); ++f)
    if (rule.getFactor(f).kind == FactorKind::Reduction)
      llvm::append_range(partial, factorAxes[f]);
  int64_t g = axes.size(partial);
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    auto type = dyn_cast<RankedTensorType>(r.getType());
    if (!type)
      continue;
    DimAxes produced = projectToTensor(
        rule, rule.getOperandMappings().size() + i, factorAxes, axes);
    DimAxes target = axesOf(getSharding(r), type.getRank());
    if (g > 1)
      produced = slicedBeforeReduction(produced, target, partial);
    int64_t local =
        mlir::cleave::detail::getSizeInBytes(localType(type, produced));
    // A partial gradient rounded to bf16/f16 before its reduction (through
    // reshapes and transposes) is reduced in the low type.
    if (Operation *rounding = gradientRoundingOf(r))
      local = local *
              getElementTypeOrSelf(rounding->getResult(0))
                  .getIntOrFloatBitWidth() /
              type.getElementType().getIntOrFloatBitWidth();
    if (g > 1) {
      if (std::optional<int64_t> d = scatterDim(produced, target, partial)) {
        bytes += local * (g - 1) / g;
        produced[*d] = target[*d];
      } else {
        bytes += 2 * local * (g - 1) / g;
      }
    }
    bytes += reshardBytes(type, produced, target);
  }
  return bytes;
}

Value Partitioner::complete(OpBuilder &b, Location loc, Value v,
                            RankedTensorType type, DimAxes produced,
                            ArrayRef<StringAttr> partial,
                            CollectiveReduceKind kind, ArrayRef<Axes> target,
                            StringRef opName) {
  if (DimAxes sliced = slicedBeforeReduction(produced, target, partial);
      sliced != produced) {
    v = reshard(b, loc, v, type, produced, sliced,
                ("the result of " + opName + " is " + dimsToString(target) +
                 ", sliced before its reduction")
                    .str());
    produced = sliced;
  }
  if (std::optional<int64_t> d = scatterDim(produced, target, partial)) {
    // Partial sums the result wants split over the same axes: one
    // reduce_scatter instead of an all_reduce and a slice.
    produced[*d] = target[*d];
    v = tag(ReduceScatterOp::create(b, loc, localType(type, produced), kind,
                                    v, mesh.getSymName(), axesAttr(partial),
                                    *d),
            "reduce_scatter " + axesToString(partial) + " on dimension " +
                Twine(*d) + ": partial results of " + opName +
                " (its reduction is split), kept split")
            ->getResult(0);
  } else {
    v = tag(AllReduceOp::create(b, loc, v.getType(), kind, v,
                                mesh.getSymName(), axesAttr(partial)),
            "all_reduce " + axesToString(partial) + ": partial results of " +
                opName + " (its reduction is split)")
            ->getResult(0);
  }
  return reshard(b, loc, v, type, produced, target,
                 ("the result of " + opName + " is " + dimsToString(target))
                     .str());
}

/// True if any dimension of `dims` is split over one of `over`.
static bool splitsOver(ArrayRef<Axes> dims, ArrayRef<StringAttr> over) {
  return llvm::any_of(dims, [&](const Axes &a) {
    return llvm::any_of(
        a, [&](StringAttr axis) { return llvm::is_contained(over, axis); });
  });
}

bool Partitioner::canDefer(Value r) {
  return !r.use_empty() && llvm::all_of(r.getUsers(), [](Operation *user) {
    if (isa<ReshapeOp, TransposeOp>(user))
      return canDefer(user->getResult(0));
    return isGradientRounding(user) || isAddOrSub(user);
  });
}

void Partitioner::completeDeferred(OpBuilder &b, Value v) {
  Local &in = locals[v];
  if (in.partial.empty())
    return;
  Local done = in;
  done.value = complete(b, v.getLoc(), in.value,
                        cast<RankedTensorType>(v.getType()), in.dims,
                        in.partial, CollectiveReduceKind::sum, in.target,
                        in.why);
  done.dims = in.target;
  done.partial.clear();
  locals[v] = std::move(done);
}

std::optional<Value> Partitioner::spreadBlocks(OpBuilder &b, Location loc,
                                               Value v,
                                               RankedTensorType globalType,
                                               ArrayRef<Axes> from,
                                               ArrayRef<Axes> to,
                                               ArrayRef<StringAttr> over) {
  // `from` must be `to` with some of `over`'s axes added to one dimension.
  std::optional<int64_t> dim;
  Axes extra;
  for (auto [d, pair] : llvm::enumerate(llvm::zip_equal(from, to))) {
    const auto &[f, t] = pair;
    if (f == t)
      continue;
    if (dim || f.size() <= t.size() ||
        !std::equal(t.begin(), t.end(), f.begin()))
      return std::nullopt;
    dim = d;
    extra.assign(f.begin() + t.size(), f.end());
  }
  if (!dim || llvm::any_of(extra, [&](StringAttr a) {
        return !llvm::is_contained(over, a);
      }))
    return std::nullopt;
  auto local = cast<RankedTensorType>(v.getType());
  int64_t parts = axes.size(extra);
  Value zero = ConstantOp::create(
      b, loc, local,
      SplatElementsAttr::get(local, b.getZeroAttr(local.getElementType())));
  auto flagsType = RankedTensorType::get({parts}, b.getI1Type());
  SmallVector<Value> blocks;
  for (int64_t j = 0; j < parts; ++j) {
    SmallVector<bool> oneHot(parts, false);
    oneHot[j] = true;
    Value flags = ConstantOp::create(b, loc, flagsType,
                                     DenseElementsAttr::get(flagsType, oneHot));
    Value mine =
        tag(AllSliceOp::create(b, loc,
                               RankedTensorType::get({1}, b.getI1Type()),
                               flags, mesh.getSymName(), axesAttr(extra), 0),
            "whether this rank holds block " + std::to_string(j) +
                " of an addend split over " + axesToString(extra))
            ->getResult(0);
    Value isMine = ReshapeOp::create(
        b, loc, RankedTensorType::get({}, b.getI1Type()), mine);
    Value cond = BroadcastInDimOp::create(
        b, loc, RankedTensorType::get(local.getShape(), b.getI1Type()), isMine,
        b.getDenseI64ArrayAttr({}));
    blocks.push_back(SelectOp::create(b, loc, cond, v, zero));
  }
  Value spread = ConcatOp::create(b, loc, localType(globalType, to), blocks,
                                  *dim);
  // Axes of the sum the value was not split over: the first rank of them
  // holds it.
  Axes rest;
  for (StringAttr a : over)
    if (!llvm::is_contained(extra, a))
      rest.push_back(a);
  return rest.empty() ? spread : keepOnFirstRank(b, loc, spread, rest);
}

Value Partitioner::keepOnFirstRank(OpBuilder &b, Location loc, Value v,
                                   ArrayRef<StringAttr> over) {
  auto type = cast<RankedTensorType>(v.getType());
  // Whether this rank is the first of the axes: one flag per axis set, at
  // the top of the function.
  Value &isFirst = firstRankFlags[axesAttr(over)];
  if (!isFirst) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(b.getInsertionBlock());
    int64_t parts = axes.size(over);
    SmallVector<bool> first(parts, false);
    first[0] = true;
    auto allType = RankedTensorType::get({parts}, b.getI1Type());
    Value all = ConstantOp::create(b, loc, allType,
                                   DenseElementsAttr::get(allType, first));
    Value mine =
        tag(AllSliceOp::create(b, loc,
                               RankedTensorType::get({1}, b.getI1Type()), all,
                               mesh.getSymName(), axesAttr(over), 0),
            "whether this rank holds the whole addend of sums over " +
                axesToString(over))
            ->getResult(0);
    isFirst = ReshapeOp::create(b, loc, RankedTensorType::get({}, b.getI1Type()),
                                mine);
  }
  Value cond = BroadcastInDimOp::create(
      b, loc, RankedTensorType::get(type.getShape(), b.getI1Type()), isFirst,
      b.getDenseI64ArrayAttr({}));
  Value zero = ConstantOp::create(
      b, loc, type,
      SplatElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
  return SelectOp::create(b, loc, cond, v, zero);
}

bool Partitioner::partitionLinear(OpBuilder &b, Operation *op) {
  auto binary = dyn_cast<BinaryOp>(op);
  if (!binary || (binary.getKind() != BinaryKind::add &&
                  binary.getKind() != BinaryKind::sub))
    return false;
  Value r = binary.getResult();
  auto type = dyn_cast<RankedTensorType>(r.getType());
  if (!type)
    return false;
  Local lhs = locals[binary.getLhs()], rhs = locals[binary.getRhs()];
  if (lhs.partial.empty() && rhs.partial.empty())
    return false;
  if (lhs.partial.empty() || rhs.partial.empty()) {
    // A whole value plus a partial sum, on the way to more adds (the
    // residual stream's gradient plus x·dW_q + x·dW_k + x·dW_v): the first
    // rank of the sum's axes holds the whole value as its addend, the
    // others zero, so the sum is still completed once.
    if (!canDefer(r))
      return false;
    Local &whole = lhs.partial.empty() ? lhs : rhs;
    const Local &part = lhs.partial.empty() ? rhs : lhs;
    if (splitsOver(part.dims, part.partial))
      return false;
    Value operand = lhs.partial.empty() ? binary.getLhs() : binary.getRhs();
    if (splitsOver(whole.dims, part.partial)) {
      // A value split over the sum's own axes joining a sum on its way to
      // a gradient's rounding (a tied embedding's lookup contribution,
      // split like the gradient, plus its logits contribution): each rank
      // places its block in a zero addend, so the sum is still completed
      // once, after the rounding, in the low type.
      if (!leadsToGradientRounding(r))
        return false;
      std::optional<Value> spread =
          spreadBlocks(b, op->getLoc(), whole.value,
                       cast<RankedTensorType>(operand.getType()), whole.dims,
                       part.dims, part.partial);
      if (!spread)
        return false;
      whole = {*spread, part.dims, part.partial, part.target, part.why};
    }
    if (whole.partial.empty()) {
      Value v = reshard(b, op->getLoc(), whole.value,
                        cast<RankedTensorType>(operand.getType()), whole.dims,
                        part.dims,
                        "an addend of a sum over " +
                            axesToString(part.partial) + " is needed as " +
                            dimsToString(part.dims));
      whole = {keepOnFirstRank(b, op->getLoc(), v, part.partial), part.dims,
               part.partial, part.target, part.why};
    }
  }
  if (lhs.partial != rhs.partial || lhs.dims != rhs.dims)
    return false;
  // (a0 + a1) ± (b0 + b1) = (a0 ± b0) + (a1 ± b1): each rank combines its
  // addends; the sum is completed once, after the last add.
  Value v = BinaryOp::create(b, op->getLoc(), binary.getKind(), lhs.value,
                             rhs.value);
  // The sum of a tied weight's contributions is its gradient.
  if (Attribute of = op->getAttr(::cleave::kGradientOfAttr))
    v.getDefiningOp()->setAttr(::cleave::kGradientOfAttr, of);
  DimAxes target = axesOf(getSharding(r), type.getRank());
  // The ops whose reductions the sum completes, each named once.
  SmallVector<StringRef> names;
  for (const std::string *why : {&lhs.why, &rhs.why}) {
    SmallVector<StringRef> parts;
    StringRef(*why).split(parts, " and ", -1, /*KeepEmpty=*/false);
    for (StringRef name : parts)
      if (!llvm::is_contained(names, name))
        names.push_back(name);
  }
  locals[r] = {v, lhs.dims, lhs.partial, target, llvm::join(names, " and ")};
  if (!canDefer(r))
    completeDeferred(b, r);
  return true;
}

LogicalResult Partitioner::partitionOp(OpBuilder &b, Operation *op) {
  if (op->getNumRegions() != 0)
    return op->emitError() << "cannot be partitioned: ops with regions are "
                              "not supported by the SPMD partitioner";
  Location loc = op->getLoc();
  StringRef opName = op->getName().getStringRef();
  conflicts = op->getAttrOfType<ArrayAttr>(kConflictsAttrName);
  for (Value v : op->getOperands())
    if (!locals.count(v))
      return op->emitError() << "operand has no partitioned value";
  if (partitionLinear(b, op))
    return success();
  // A transpose or reshape of a partial gradient on its way to its rounding
  // (below) moves each rank's addend as it is, so that the sum is
  // completed after the rounding, in the low type, into the gradient's
  // layout (e.g. a reduce_scatter over dp for ZeRO-2).
  if (isa<ReshapeOp, TransposeOp>(op) &&
      !locals[op->getOperand(0)].partial.empty() &&
      leadsToGradientRounding(op->getResult(0))) {
    const Local &in = locals[op->getOperand(0)];
    Value r = op->getResult(0);
    auto type = cast<RankedTensorType>(r.getType());
    DimAxes dims(type.getRank());
    if (auto transpose = dyn_cast<TransposeOp>(op)) {
      for (auto [d, p] : llvm::enumerate(transpose.getPermutation()))
        dims[d] = in.dims[p];
    } else if (llvm::any_of(in.dims, [](const Axes &a) { return !a.empty(); })) {
      dims.clear(); // A split reshape: completed first, below.
    }
    if (!dims.empty()) {
      OperationState state(loc, op->getName());
      state.addOperands(in.value);
      state.addTypes(localType(type, dims));
      for (NamedAttribute attr : op->getAttrs())
        if (attr.getName() != kShardingAttrName &&
            attr.getName() != kConflictsAttrName)
          state.addAttribute(attr.getName(), attr.getValue());
      Value v = b.create(state)->getResult(0);
      locals[r] = {v, dims, in.partial, axesOf(getSharding(r), type.getRank()),
                   in.why};
      return success();
    }
  }
  // A gradient rounded to low precision on its way to its reduction: each
  // rank rounds its addend, and the sum is completed (all_reduce or
  // reduce_scatter, in the low type) where the rounded gradient is read.
  if (isGradientRounding(op) && !locals[op->getOperand(0)].partial.empty()) {
    const Local &in = locals[op->getOperand(0)];
    Value r = op->getResult(0);
    auto type = cast<RankedTensorType>(r.getType());
    Value v = ConvertOp::create(b, loc, localType(type, in.dims), in.value);
    v.getDefiningOp()->setAttrs(op->getDiscardableAttrDictionary());
    v.getDefiningOp()->removeAttr(kShardingAttrName);
    locals[r] = {v, in.dims, in.partial, axesOf(getSharding(r), type.getRank()),
                 in.why};
    return success();
  }
  // A reshape or transpose of a partial sum on its way to an add moves
  // each rank's addend. Resharding addends is linear too, but not over the
  // sum's own axes (each rank would keep a different block of its addend),
  // so a result split over them completes the sum first.
  if (isa<ReshapeOp, TransposeOp>(op) &&
      !locals[op->getOperand(0)].partial.empty() &&
      canDefer(op->getResult(0)) &&
      !splitsOver(axesOf(getSharding(op->getResult(0)),
                         cast<RankedTensorType>(op->getResult(0).getType())
                             .getRank()),
                  locals[op->getOperand(0)].partial)) {
    Local &in = locals[op->getOperand(0)];
    Local saved = in;
    in.partial.clear();
    LogicalResult result = partitionOp(b, op);
    locals[op->getOperand(0)] = saved;
    if (failed(result))
      return failure();
    Local &out = locals[op->getResult(0)];
    out.partial = saved.partial;
    out.target = out.dims;
    out.why = saved.why;
    return success();
  }
  for (Value v : op->getOperands())
    completeDeferred(b, v);
  if (auto transfer = dyn_cast<PipelineTransferOp>(op);
      transfer && transfer.getFrom() != transfer.getTo()) {
    if (std::optional<Value> v = scatterTransfer(b, transfer)) {
      locals[transfer.getResult()] = {
          *v, axesOf(getSharding(transfer.getResult()),
                     cast<RankedTensorType>(transfer.getType()).getRank())};
      return success();
    }
  }
  // A value resharded once for all its users (kReshardOnceAttr: ZeRO-1/2's
  // low-precision parameter copies, gathered once per step) takes the
  // layout the attribute names before its first user picks a layout of
  // its own; every later user reads that.
  for (Value v : op->getOperands()) {
    Operation *def = v.getDefiningOp();
    auto once =
        def ? def->getAttrOfType<TensorShardingAttr>(kReshardOnceAttr) : nullptr;
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!once || !type)
      continue;
    Local &in = locals[v];
    DimAxes want = axesOf(once, type.getRank());
    if (in.dims == want || !in.partial.empty())
      continue;
    Value whole = reshard(b, loc, in.value, type, in.dims, want,
                          ("gathered once per step for all users of " +
                           def->getName().getStringRef())
                              .str());
    in.value = whole;
    in.dims = want;
    in.target = want;
  }

  auto tensorType = [](Value v) {
    return dyn_cast<RankedTensorType>(v.getType());
  };
  auto targetOf = [&](Value r) {
    return axesOf(getSharding(r), tensorType(r) ? tensorType(r).getRank() : 0);
  };

  // A splat constant is the same splat on every rank, at the local shape.
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    auto type = tensorType(constant.getResult());
    if (splat && type) {
      DimAxes target = targetOf(constant.getResult());
      auto local = localType(type, target);
      Value v = ConstantOp::create(b, loc, local, splat.resizeSplat(local));
      // Discardable attributes (an initializer's name) stay.
      for (NamedAttribute attr : constant->getDiscardableAttrs())
        if (attr.getName() != kShardingAttrName)
          v.getDefiningOp()->setAttr(attr.getName(), attr.getValue());
      locals[constant.getResult()] = {v, target};
      return success();
    }
  }

  // An iota split along other dimensions than its own is the same iota at
  // the local shape (a one-hot's [batch, seq, vocab] index over dp is
  // [batch/dp, seq, vocab] on each rank, not the whole then a slice).
  if (auto iota = dyn_cast<IotaOp>(op)) {
    auto type = tensorType(iota.getResult());
    DimAxes target = targetOf(iota.getResult());
    int64_t dim = iota.getDimension();
    Type et = type ? type.getElementType() : Type();
    if (type && dim >= 0 && dim < int64_t(target.size()) &&
        (target[dim].empty() || isa<IntegerType, FloatType>(et))) {
      auto local = localType(type, target);
      Value v = IotaOp::create(b, loc, local, iota.getDimensionAttr());
      bool interleave =
          !target[dim].empty() &&
          llvm::all_of(target[dim], [&](StringAttr a) {
            return llvm::is_contained(interleaved, a.getValue());
          });
      if (interleave) {
        // Interleaved parts (microbatches): n * iota + this rank's index.
        int64_t n = axes.size(target[dim]);
        Value index = rankOffset(b, loc, et, n, target[dim],
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
        Value first = rankOffset(b, loc, et, type.getDimSize(dim),
                                 target[dim],
                                 "the first index of this rank's part of " +
                                     opName);
        v = BinaryOp::create(
            b, loc, BinaryKind::add, v,
            BroadcastInDimOp::create(b, loc, local, first,
                                     b.getDenseI64ArrayAttr({})));
      }
      locals[iota.getResult()] = {v, target};
      return success();
    }
  }

  ShardingRule rule = getShardingRule(op);
  bool wholeOnly = rule.isReplicatedOnly() ||
                   isa<ConstantOp, IotaOp, RngKeyOp>(op) ||
                   llvm::any_of(op->getResultTypes(), [](Type t) {
                     return !isa<RankedTensorType>(t);
                   });

  SmallVector<Axes> factorAxes(rule.getNumFactors());
  if (!wholeOnly) {
    // 1. Factor axes, three ways: results first (operands are resharded
    //    to what the results need), operands first (results may be
    //    partial and then reduced, or resharded), or results first with
    //    the reductions gathered (below). The one that moves the fewest
    //    bytes wins; results first, then operands first, on a tie.
    struct Layout {
      const char *name;
      SmallVector<Axes> factors;
      int64_t bytes;
    };
    SmallVector<Layout, 3> layouts;
    for (bool resultsFirst : {true, false}) {
      SmallVector<Axes> f = assignFactors(op, rule, resultsFirst);
      int64_t bytes = estimateBytes(op, rule, f);
      layouts.push_back({resultsFirst ? "results first" : "operands first",
                         std::move(f), bytes});
    }
    // A reduction that would leave partial results over axes the results
    // are split over anyway can instead gather its reduced operands over
    // those axes, and reduce over the others only. A sequence-parallel
    // embedding's gradient is one: each rank's tokens scattered into the
    // whole table, summed over tp and sliced, send the table; gathering the
    // tokens sends sequence x hidden.
    SmallVector<Axes> gathered = gatherReductions(op, rule, layouts[0].factors);
    if (gathered != layouts[0].factors) {
      int64_t bytes = estimateBytes(op, rule, gathered);
      layouts.push_back({"reductions gathered", std::move(gathered), bytes});
    }
    const Layout *best = &layouts[0];
    for (const Layout &l : layouts)
      if (l.bytes < best->bytes)
        best = &l;
    factorAxes = best->factors;
    // The collectives this op causes cite the cheapest layout that lost.
    const Layout *runnerUp = nullptr;
    for (const Layout &l : layouts)
      if (&l != best && l.factors != best->factors && l.bytes != best->bytes &&
          (!runnerUp || l.bytes < runnerUp->bytes))
        runnerUp = &l;
    if (runnerUp) {
      SmallVector<Attribute> notes;
      if (conflicts)
        llvm::append_range(notes, conflicts.getValue());
      notes.push_back(StringAttr::get(
          op->getContext(), Twine("layout: ") + best->name + ", " +
                                Twine(best->bytes) + " bytes; " +
                                runnerUp->name + " rejected, it would send " +
                                Twine(runnerUp->bytes) + " bytes"));
      conflicts = ArrayAttr::get(op->getContext(), notes);
    }
  }

  // 2. Operands in the layout the op computes on. An operand that appears
  // twice in the same layout (x * x) is resharded once.
  SmallVector<Value> operands;
  SmallVector<std::tuple<Value, DimAxes, Value>> resharded;
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    Local &in = locals[v];
    auto type = tensorType(v);
    if (!type) {
      operands.push_back(in.value);
      continue;
    }
    DimAxes want = wholeOnly ? DimAxes(type.getRank())
                             : projectToTensor(rule, i, factorAxes, axes);
    Value global = v;
    auto same = llvm::find_if(resharded, [&](const auto &entry) {
      return std::get<0>(entry) == global && std::get<1>(entry) == want;
    });
    if (same != resharded.end()) {
      operands.push_back(std::get<2>(*same));
      continue;
    }
    operands.push_back(reshard(b, loc, in.value, type, in.dims, want,
                               ("operand " + Twine(i) + " of " + opName +
                                " is needed as " + dimsToString(want))
                                   .str()));
    resharded.emplace_back(v, want, operands.back());
  }

  // 3. The op on local shapes.
  SmallVector<DimAxes> produced;
  SmallVector<Type> resultTypes;
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    auto type = tensorType(r);
    produced.push_back(wholeOnly || !type
                           ? DimAxes(type ? type.getRank() : 0)
                           : projectToTensor(rule, rule.getOperandMappings().size() + i,
                                             factorAxes, axes));
    resultTypes.push_back(type ? localType(type, produced.back())
                               : r.getType());
  }
  // Reduction factors split over axes leave partial results.
  Axes partial;
  std::optional<ReduceKind> partialKind;
  for (int64_t f = 0; f < rule.getNumFactors(); ++f) {
    if (factorAxes[f].empty() ||
        rule.getFactor(f).kind != FactorKind::Reduction)
      continue;
    if (partialKind && *partialKind != rule.getFactor(f).reduceKind)
      return op->emitError() << "cannot be partitioned: it reduces over "
                                "split factors with different kinds";
    partialKind = rule.getFactor(f).reduceKind;
    llvm::append_range(partial, factorAxes[f]);
  }

  Operation *local = nullptr;
  auto logSoftmax = dyn_cast<LogSoftmaxOp>(op);
  Axes rowAxes;
  if (logSoftmax)
    for (int64_t f : rule.getOperand(0)[logSoftmax.getDimension()])
      llvm::append_range(rowAxes, factorAxes[f]);
  if (logSoftmax && !rowAxes.empty()) {
    local = buildSplitLogSoftmax(b, logSoftmax, operands[0], rowAxes)
                .getDefiningOp();
  } else if (auto gather = dyn_cast<GatherOp>(op);
             gather && !partial.empty()) {
    Value v = buildGatherWithOffsets(b, gather, operands[0], operands[1],
                                     partial, resultTypes[0]);
    local = v.getDefiningOp();
  } else {
    OperationState state(loc, op->getName());
    state.addOperands(operands);
    state.addTypes(resultTypes);
    for (NamedAttribute attr : op->getAttrs())
      if (attr.getName() != kShardingAttrName &&
          attr.getName() != kConflictsAttrName)
        state.addAttribute(attr.getName(), attr.getValue());
    local = b.create(state);
    if (auto slice = dyn_cast<SliceOp>(local)) {
      // Split dimensions are whole ones (their factor is shared), so their
      // limit is the local size.
      SmallVector<int64_t> limits(slice.getLimitIndices());
      for (auto [d, a] : llvm::enumerate(produced[0]))
        if (!a.empty())
          limits[d] = resultTypes.empty()
                          ? limits[d]
                          : cast<RankedTensorType>(resultTypes[0]).getDimSize(d);
      slice.setLimitIndices(limits);
    }
    if (auto conv = dyn_cast<ConvOp>(local); conv && conv.getGroups() > 1) {
      // Factor 1 is the group factor: each rank convolves its groups.
      int64_t groups = conv.getGroups() / axes.size(factorAxes[1]);
      conv.setGroups(groups);
    }
  }

  // 4. Complete partial results, or leave sums for their adds; 5. the
  // result's own sharding.
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    Value v = local->getResult(i);
    auto type = tensorType(r);
    DimAxes target = type ? targetOf(r) : DimAxes();
    if (partial.empty() || !type) {
      if (type)
        v = reshard(b, loc, v, type, produced[i], target,
                    ("the result of " + opName + " is " +
                     dimsToString(target))
                        .str());
      locals[r] = {v, target};
      continue;
    }
    if (*partialKind == ReduceKind::sum && canDefer(r)) {
      locals[r] = {v, produced[i], partial, target, opName.str()};
      continue;
    }
    CollectiveReduceKind kind = CollectiveReduceKind::sum;
    switch (*partialKind) {
    case ReduceKind::sum: kind = CollectiveReduceKind::sum; break;
    case ReduceKind::prod: kind = CollectiveReduceKind::prod; break;
    case ReduceKind::max: kind = CollectiveReduceKind::max; break;
    case ReduceKind::min: kind = CollectiveReduceKind::min; break;
    }
    locals[r] = {complete(b, loc, v, type, produced[i], partial, kind, target,
                          opName),
                 target};
  }
  return success();
}

LogicalResult Partitioner::run(func::FuncOp func) {
  // The local arguments are new block arguments, so that the global ones
  // keep their types (the rules read them) until the old ops are gone.
  Block &body = func.getBody().front();
  unsigned numArgs = body.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i) {
    BlockArgument arg = body.getArgument(i);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    DimAxes dims = type ? axesOf(getSharding(arg), type.getRank()) : DimAxes();
    Value local = body.addArgument(type ? localType(type, dims) : arg.getType(),
                                   arg.getLoc());
    locals[arg] = {local, dims};
  }
  SmallVector<Operation *> old;
  for (Operation &op : body.without_terminator())
    old.push_back(&op);
  OpBuilder b(func.getContext());
  for (Operation *op : old) {
    b.setInsertionPoint(op);
    if (failed(partitionOp(b, op)))
      return failure();
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  b.setInsertionPoint(ret);
  conflicts = nullptr;
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    completeDeferred(b, v);
    Local &in = locals[v];
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type) {
      results.push_back(in.value);
      resultTypes.push_back(in.value.getType());
      continue;
    }
    DimAxes want = axesOf(getResultSharding(func, i), type.getRank());
    Value out = reshard(b, ret.getLoc(), in.value, type, in.dims, want,
                        ("function result " + Twine(i) + " is " +
                         dimsToString(want))
                            .str());
    results.push_back(out);
    resultTypes.push_back(out.getType());
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  for (Operation *op : llvm::reverse(old)) {
    op->dropAllUses();
    op->erase();
  }
  body.eraseArguments(0, numArgs);
  func.setFunctionType(FunctionType::get(
      func.getContext(), body.getArgumentTypes(), resultTypes));
  return success();
}

struct PartitionPass : ::cleave::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.empty())
      return;
    if (meshes.size() != 1) {
      meshes[1].emitError() << "the SPMD partitioner works over one mesh";
      return signalPassFailure();
    }
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      Partitioner p(meshes.front(), interleavedAxes);
      if (failed(p.run(func)))
        return signalPassFailure();
    }
  }
};

} // namespace
