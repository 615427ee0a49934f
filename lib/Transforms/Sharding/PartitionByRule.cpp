//===- PartitionByRule.cpp - An op partitioned through its rule -----------===//
//
// The partitioner's generic path, which every op takes unless its
// PartitionOpInterface model does otherwise: the factor axes of the layout
// that sends the fewest bytes, the operands resharded to it, the op on local
// shapes (the model's buildLocalOp, by default a clone), and the results
// completed and resharded to their shardings. Also the dispatch of each op
// to its model.
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

Operation *partition::cloneOnLocalShapes(OpBuilder &b, Operation *op,
                                         ValueRange operands,
                                         TypeRange resultTypes) {
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(operands);
  state.addTypes(resultTypes);
  for (NamedAttribute attr : op->getAttrs())
    if (attr.getName() != kShardingAttrName &&
        attr.getName() != kConflictsAttrName)
      state.addAttribute(attr.getName(), attr.getValue());
  return b.create(state);
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

LogicalResult Partitioner::partitionOp(OpBuilder &b, Operation *op) {
  if (op->getNumRegions() != 0)
    return op->emitError() << "cannot be partitioned: ops with regions are "
                              "not supported by the SPMD partitioner";
  conflicts = op->getAttrOfType<ArrayAttr>(kConflictsAttrName);
  for (Value v : op->getOperands())
    if (!locals.count(v))
      return op->emitError() << "operand has no partitioned value";
  if (auto iface = dyn_cast<PartitionOpInterface>(op))
    return iface.partition(*this, b);
  return partitionByRule(*this, b, op);
}

void Partitioner::completeOperands(OpBuilder &b, Operation *op) {
  for (Value v : op->getOperands())
    completeDeferred(b, v);
}

LogicalResult partition::partitionByRule(Partitioner &p, OpBuilder &b,
                                         Operation *op) {
  p.completeOperands(b, op);
  return p.partitionWithRule(b, op);
}

LogicalResult Partitioner::partitionWithRule(OpBuilder &b, Operation *op) {
  reshardOnce(b, op);
  ShardingRule rule = getShardingRule(op);
  bool wholeOnly =
      rule.isReplicatedOnly() || isa<ConstantOp, IotaOp, RngKeyOp>(op) ||
      llvm::any_of(op->getResultTypes(),
                   [](Type t) { return !isa<RankedTensorType>(t); });

  SmallVector<Axes> factorAxes(rule.getNumFactors());
  if (!wholeOnly) {
    FailureOr<SmallVector<Axes>> chosen = chooseFactorAxes(op, rule);
    if (failed(chosen))
      return failure();
    factorAxes = std::move(*chosen);
  }
  return partitionWithFactors(b, op, rule, factorAxes, wholeOnly);
}

LogicalResult Partitioner::partitionWithFactors(OpBuilder &b, Operation *op,
                                                const ShardingRule &rule,
                                                ArrayRef<Axes> factorAxes,
                                                bool wholeOnly,
                                                BuildLocal build) {
  SmallVector<Value> operands =
      reshardOperands(b, op, rule, factorAxes, wholeOnly);

  // 3. The op on local shapes.
  SmallVector<DimAxes> produced;
  SmallVector<Type> resultTypes;
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    auto type = tensorType(r);
    produced.push_back(
        wholeOnly || !type
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
  SmallVector<Value> results;
  if (build) {
    FailureOr<SmallVector<Value>> built = build(operands, resultTypes);
    if (failed(built))
      return failure();
    results = std::move(*built);
  } else {
    LocalLayout layout{rule, factorAxes, produced, partial};
    auto iface = dyn_cast<PartitionOpInterface>(op);
    Operation *local =
        iface ? iface.buildLocalOp(*this, b, layout, operands, resultTypes)
              : cloneOnLocalShapes(b, op, operands, resultTypes);
    results.assign(local->result_begin(), local->result_end());
  }
  finishResults(b, op, results, produced, partial, partialKind);
  return success();
}

//===----------------------------------------------------------------------===//
// The generic path
//===----------------------------------------------------------------------===//

/// A value resharded once for all its users (kReshardOnceAttr: ZeRO-1/2's
/// low-precision parameter copies, gathered once per step) takes the
/// layout the attribute names before its first user picks a layout of
/// its own; every later user reads that.
void Partitioner::reshardOnce(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  for (Value v : op->getOperands()) {
    Operation *def = v.getDefiningOp();
    auto once = def ? def->getAttrOfType<TensorShardingAttr>(kReshardOnceAttr)
                    : nullptr;
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

FailureOr<SmallVector<Axes>>
Partitioner::chooseFactorAxes(Operation *op, const ShardingRule &rule) {
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
  // Exchanged axes (all-to-all context parallelism): the op split along
  // the factor its rule trades for one it needs whole.
  FailureOr<std::optional<SmallVector<Axes>>> exchanged =
      exchangeLayout(op, rule, layouts[0].factors);
  if (failed(exchanged))
    return failure();
  bool haveExchange = exchanged->has_value();
  if (haveExchange) {
    int64_t bytes = estimateBytes(op, rule, **exchanged);
    layouts.push_back({"all-to-all exchange", std::move(**exchanged), bytes});
  }
  const Layout *best = &layouts[0];
  for (const Layout &l : layouts)
    if (l.bytes < best->bytes)
      best = &l;
  if (haveExchange && requireExchange)
    best = &layouts.back(); // the exchange, pushed last
  LLVM_DEBUG({
    llvm::dbgs() << op->getName() << " at " << op->getLoc() << ":";
    for (const Layout &l : layouts)
      llvm::dbgs() << " " << l.name << " " << l.bytes << " bytes"
                   << (&l == best ? " (chosen)" : "") << ";";
    llvm::dbgs() << "\n";
  });
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
                              Twine(best->bytes) + " bytes; " + runnerUp->name +
                              " rejected, it would send " +
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

void Partitioner::finishResults(OpBuilder &b, Operation *op, ValueRange local,
                                ArrayRef<DimAxes> produced, const Axes &partial,
                                std::optional<ReduceKind> partialKind) {
  Location loc = op->getLoc();
  StringRef opName = op->getName().getStringRef();
  // 4. Complete partial results, or leave sums for their adds; 5. the
  // result's own sharding.
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    Value v = local[i];
    auto type = tensorType(r);
    DimAxes target = type ? targetOf(r) : DimAxes();
    if (partial.empty() || !type) {
      if (type)
        v = reshard(
            b, loc, v, type, produced[i], target,
            ("the result of " + opName + " is " + dimsToString(target)).str());
      locals[r] = {v, target};
      continue;
    }
    if (*partialKind == ReduceKind::sum && canDefer(r)) {
      locals[r] = {v, produced[i], partial, target, opName.str()};
      continue;
    }
    CollectiveReduceKind kind = CollectiveReduceKind::sum;
    switch (*partialKind) {
    case ReduceKind::sum:
      kind = CollectiveReduceKind::sum;
      break;
    case ReduceKind::prod:
      kind = CollectiveReduceKind::prod;
      break;
    case ReduceKind::max:
      kind = CollectiveReduceKind::max;
      break;
    case ReduceKind::min:
      kind = CollectiveReduceKind::min;
      break;
    }
    locals[r] = {
        complete(b, loc, v, type, produced[i], partial, kind, target, opName),
        target};
  }
}
