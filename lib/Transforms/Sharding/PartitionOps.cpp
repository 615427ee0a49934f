//===- PartitionOps.cpp - Each op on its local shapes ---------------------===//
//
// The partitioner's rewrite of one op: the families it treats apart
// (partial sums moved toward their adds or roundings, pipeline messages,
// splat constants, iotas), then the generic path through the op's sharding
// rule (factor axes, operands resharded, the op on local shapes, results
// completed and resharded), with the split log_softmax and the gather
// from a vocabulary split over ranks.
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "cleave/Analysis/TrainingTags.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::partition;
using namespace ::cleave::sharding;

/// The tensor type of `v`, or null.
static RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}
/// The axes `r`'s propagated sharding splits each dimension over.
static DimAxes targetOf(Value r) {
  return axesOf(getSharding(r), tensorType(r) ? tensorType(r).getRank() : 0);
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

//===----------------------------------------------------------------------===//
// Op families
//===----------------------------------------------------------------------===//

bool Partitioner::partitionPartialToRounding(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
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
      return true;
    }
  }
  return false;
}

bool Partitioner::partitionGradientRounding(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
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
    return true;
  }
  return false;
}

std::optional<LogicalResult>
Partitioner::partitionPartialToAdd(OpBuilder &b, Operation *op) {
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
  return std::nullopt;
}

bool Partitioner::partitionTransfer(OpBuilder &b, Operation *op) {
  if (auto transfer = dyn_cast<PipelineTransferOp>(op);
      transfer && transfer.getFrom() != transfer.getTo()) {
    if (std::optional<Value> v = scatterTransfer(b, transfer)) {
      locals[transfer.getResult()] = {
          *v, axesOf(getSharding(transfer.getResult()),
                     cast<RankedTensorType>(transfer.getType()).getRank())};
      return true;
    }
  }
  return false;
}

/// A value resharded once for all its users (kReshardOnceAttr: ZeRO-1/2's
/// low-precision parameter copies, gathered once per step) takes the
/// layout the attribute names before its first user picks a layout of
/// its own; every later user reads that.
void Partitioner::reshardOnce(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
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
}

bool Partitioner::partitionSplatConstant(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
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
      return true;
    }
  }
  return false;
}

bool Partitioner::partitionIota(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  StringRef opName = op->getName().getStringRef();
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
      return true;
    }
  }
  return false;
}

//===----------------------------------------------------------------------===//
// The generic path
//===----------------------------------------------------------------------===//

SmallVector<Axes> Partitioner::chooseFactorAxes(Operation *op,
                                                const ShardingRule &rule) {
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
  SmallVector<Axes> factorAxes = best->factors;
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
  return factorAxes;
}

SmallVector<Value> Partitioner::reshardOperands(OpBuilder &b, Operation *op,
                                                const ShardingRule &rule,
                                                ArrayRef<Axes> factorAxes,
                                                bool wholeOnly) {
  Location loc = op->getLoc();
  StringRef opName = op->getName().getStringRef();
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
  return operands;
}

Operation *Partitioner::buildLocalOp(OpBuilder &b, Operation *op,
                                     const ShardingRule &rule,
                                     ArrayRef<Axes> factorAxes,
                                     ArrayRef<Value> operands,
                                     ArrayRef<Type> resultTypes,
                                     ArrayRef<DimAxes> produced,
                                     const Axes &partial) {
  Location loc = op->getLoc();
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
  return local;
}

void Partitioner::finishResults(OpBuilder &b, Operation *op, Operation *local,
                                ArrayRef<DimAxes> produced, const Axes &partial,
                                std::optional<ReduceKind> partialKind) {
  Location loc = op->getLoc();
  StringRef opName = op->getName().getStringRef();
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
}

LogicalResult Partitioner::partitionOp(OpBuilder &b, Operation *op) {
  if (op->getNumRegions() != 0)
    return op->emitError() << "cannot be partitioned: ops with regions are "
                              "not supported by the SPMD partitioner";
  conflicts = op->getAttrOfType<ArrayAttr>(kConflictsAttrName);
  for (Value v : op->getOperands())
    if (!locals.count(v))
      return op->emitError() << "operand has no partitioned value";
  if (partitionLinear(b, op))
    return success();
  if (partitionPartialToRounding(b, op) || partitionGradientRounding(b, op))
    return success();
  if (std::optional<LogicalResult> result = partitionPartialToAdd(b, op))
    return *result;
  for (Value v : op->getOperands())
    completeDeferred(b, v);
  if (partitionTransfer(b, op))
    return success();
  reshardOnce(b, op);
  if (partitionSplatConstant(b, op) || partitionIota(b, op))
    return success();

  ShardingRule rule = getShardingRule(op);
  bool wholeOnly = rule.isReplicatedOnly() ||
                   isa<ConstantOp, IotaOp, RngKeyOp>(op) ||
                   llvm::any_of(op->getResultTypes(), [](Type t) {
                     return !isa<RankedTensorType>(t);
                   });

  SmallVector<Axes> factorAxes(rule.getNumFactors());
  if (!wholeOnly)
    factorAxes = chooseFactorAxes(op, rule);
  SmallVector<Value> operands =
      reshardOperands(b, op, rule, factorAxes, wholeOnly);

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
  Operation *local = buildLocalOp(b, op, rule, factorAxes, operands,
                                  resultTypes, produced, partial);
  finishResults(b, op, local, produced, partial, partialKind);
  return success();
}
