//===- ReshardCollectives.cpp - Reshards and collectives ------------------===//
//
// The partitioner's communication, emitted from the plans of ReshardPlan.h:
// a local value resharded from one layout to another (all_gather,
// all_slice), a pipeline message scattered over its group, this rank's
// offset along a split dimension, and partial sums completed (all_reduce or
// reduce_scatter), deferred through adds, spread into blocks or kept on the
// first rank.
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "cleave/Analysis/TrainingTags.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-partition"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::partition;
using namespace ::cleave::sharding;

//===----------------------------------------------------------------------===//
// Reshards
//===----------------------------------------------------------------------===//

Value Partitioner::reshard(OpBuilder &b, Location loc, Value local,
                           RankedTensorType globalType, ArrayRef<Axes> from,
                           ArrayRef<Axes> to, StringRef why) {
  return emitReshard(b, loc, local, globalType, planReshard(from, to), why);
}

Value Partitioner::emitReshard(OpBuilder &b, Location loc, Value local,
                               RankedTensorType globalType,
                               ArrayRef<ReshardStep> steps, StringRef why) {
  StringRef meshName = mesh.getSymName();
  for (const ReshardStep &step : steps) {
    auto type = localType(globalType, step.after);
    // A gather or slice of `local` along the step's dimension over its axes,
    // tagged with the step and `why`.
    auto emit = [&](auto opType, StringRef opName) {
      using OpTy = decltype(opType);
      local = tag(OpTy::create(b, loc, type, local, meshName,
                               axesAttr(step.axes), step.dim),
                  opName + " " + axesToString(step.axes) + " on dimension " +
                      Twine(step.dim) + ": " + why)
                  ->getResult(0);
    };
    switch (step.kind) {
    case ReshardStep::Kind::AllGather:
      emit(AllGatherOp(), "all_gather");
      break;
    case ReshardStep::Kind::AllSlice:
      emit(AllSliceOp(), "all_slice");
      break;
    case ReshardStep::Kind::AllToAll:
      local = tag(AllToAllOp::create(b, loc, type, local, meshName,
                                     axesAttr(step.axes), step.toDim, step.dim),
                  "all_to_all " + axesToString(step.axes) + " from dimension " +
                      Twine(step.dim) + " to " + Twine(step.toDim) + ": " + why)
                  ->getResult(0);
      break;
    case ReshardStep::Kind::ReduceScatter:
    case ReshardStep::Kind::AllReduce:
      llvm_unreachable("planReshard plans gathers, slices and all-to-alls "
                       "only");
    }
  }
  return local;
}

std::optional<Value> Partitioner::scatterTransfer(OpBuilder &b,
                                                  PipelineTransferOp transfer) {
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
  auto moved =
      PipelineTransferOp::create(b, loc, sliced.getType(), sliced,
                                 transfer.getFromAttr(), transfer.getToAttr());
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
  SmallVector<int64_t> starts;
  for (int64_t i = 0; i < parts; ++i)
    starts.push_back(i * local);
  return rankValue(b, loc, elementType, starts, over, why);
}

Value Partitioner::rankValue(OpBuilder &b, Location loc, Type elementType,
                             ArrayRef<int64_t> perRank,
                             ArrayRef<StringAttr> over, const Twine &why) {
  int64_t parts = perRank.size();
  auto allType = RankedTensorType::get({parts}, elementType);
  SmallVector<Attribute> values;
  for (int64_t v : perRank)
    values.push_back(isa<FloatType>(elementType)
                         ? Attribute(b.getFloatAttr(elementType, double(v)))
                         : Attribute(b.getIntegerAttr(elementType, v)));
  Value all = ConstantOp::create(b, loc, allType,
                                 DenseElementsAttr::get(allType, values));
  Value mine =
      tag(AllSliceOp::create(b, loc, RankedTensorType::get({1}, elementType),
                             all, mesh.getSymName(), axesAttr(over), 0),
          why)
          ->getResult(0);
  return ReshapeOp::create(b, loc, RankedTensorType::get({}, elementType),
                           mine);
}

//===----------------------------------------------------------------------===//
// Partial sums
//===----------------------------------------------------------------------===//

Value Partitioner::complete(OpBuilder &b, Location loc, Value v,
                            RankedTensorType type, DimAxes produced,
                            ArrayRef<StringAttr> partial,
                            CollectiveReduceKind kind, ArrayRef<Axes> target,
                            StringRef opName) {
  CompletionPlan plan = planCompletion(produced, target, partial);
  LLVM_DEBUG(
      llvm::dbgs() << "partial results of " << opName << " over "
                   << axesToString(partial) << ": " << plan.before.size()
                   << " slices, "
                   << (plan.reduction.kind == ReshardStep::Kind::ReduceScatter
                           ? "reduce_scatter"
                           : "all_reduce")
                   << ", " << plan.after.size() << " reshard steps to "
                   << dimsToString(target) << "\n");
  v = emitReshard(b, loc, v, type, plan.before,
                  ("the result of " + opName + " is " + dimsToString(target) +
                   ", sliced before its reduction")
                      .str());
  const ReshardStep &reduction = plan.reduction;
  if (reduction.kind == ReshardStep::Kind::ReduceScatter) {
    v = tag(ReduceScatterOp::create(b, loc, localType(type, reduction.after),
                                    kind, v, mesh.getSymName(),
                                    axesAttr(partial), reduction.dim),
            "reduce_scatter " + axesToString(partial) + " on dimension " +
                Twine(reduction.dim) + ": partial results of " + opName +
                " (its reduction is split), kept split")
            ->getResult(0);
  } else {
    v = tag(AllReduceOp::create(b, loc, v.getType(), kind, v, mesh.getSymName(),
                                axesAttr(partial)),
            "all_reduce " + axesToString(partial) + ": partial results of " +
                opName + " (its reduction is split)")
            ->getResult(0);
  }
  return emitReshard(
      b, loc, v, type, plan.after,
      ("the result of " + opName + " is " + dimsToString(target)).str());
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
  done.value = complete(
      b, v.getLoc(), in.value, cast<RankedTensorType>(v.getType()), in.dims,
      in.partial, CollectiveReduceKind::sum, in.target, in.why);
  done.dims = in.target;
  done.partial.clear();
  locals[v] = std::move(done);
}

std::optional<Value>
Partitioner::spreadBlocks(OpBuilder &b, Location loc, Value v,
                          RankedTensorType globalType, ArrayRef<Axes> from,
                          ArrayRef<Axes> to, ArrayRef<StringAttr> over) {
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
    Value mine = tag(AllSliceOp::create(
                         b, loc, RankedTensorType::get({1}, b.getI1Type()),
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
  Value spread =
      ConcatOp::create(b, loc, localType(globalType, to), blocks, *dim);
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
    Value mine = tag(AllSliceOp::create(
                         b, loc, RankedTensorType::get({1}, b.getI1Type()), all,
                         mesh.getSymName(), axesAttr(over), 0),
                     "whether this rank holds the whole addend of sums over " +
                         axesToString(over))
                     ->getResult(0);
    isFirst = ReshapeOp::create(b, loc,
                                RankedTensorType::get({}, b.getI1Type()), mine);
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
      Value v = reshard(
          b, op->getLoc(), whole.value,
          cast<RankedTensorType>(operand.getType()), whole.dims, part.dims,
          "an addend of a sum over " + axesToString(part.partial) +
              " is needed as " + dimsToString(part.dims));
      whole = {keepOnFirstRank(b, op->getLoc(), v, part.partial), part.dims,
               part.partial, part.target, part.why};
    }
  }
  if (lhs.partial != rhs.partial || lhs.dims != rhs.dims)
    return false;
  // (a0 + a1) ± (b0 + b1) = (a0 ± b0) + (a1 ± b1): each rank combines its
  // addends; the sum is completed once, after the last add.
  Value v =
      BinaryOp::create(b, op->getLoc(), binary.getKind(), lhs.value, rhs.value);
  // The sum of a tied weight's contributions is its gradient.
  if (Attribute of = op->getAttr(mlir::cleave::attr::kGradientOf))
    v.getDefiningOp()->setAttr(mlir::cleave::attr::kGradientOf, of);
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
