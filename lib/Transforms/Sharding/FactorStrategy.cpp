//===- FactorStrategy.cpp - Which mesh axes split each factor -------------===//
//
// The partitioner's strategy: the factor axes of an op taken from its
// results first or from its operands first, with its reductions gathered
// instead of left partial, and the bytes each layout would send (the
// planned reshards of ReshardPlan.h, priced), so that the cheapest one wins
// (PartitionByRule.cpp).
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::partition;
using namespace ::cleave::sharding;

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

FailureOr<std::optional<SmallVector<Axes>>>
Partitioner::exchangeLayout(Operation *op, const ShardingRule &rule,
                            ArrayRef<Axes> base) {
  if (exchangeAxes.empty())
    return std::optional<SmallVector<Axes>>();
  // The exchange axes that split an exchangeable factor of some operand
  // (as it arrives) or result (as it is wanted), and where each goes.
  SmallVector<std::pair<StringAttr, int64_t>> moves;
  auto scan = [&](const TensorFactors &t, ArrayRef<Axes> dims) {
    for (auto [d, factors] : llvm::enumerate(t)) {
      SmallVector<Axes> split = splitDimAxes(dims[d], factors, rule, axes);
      for (auto [i, f] : llvm::enumerate(factors)) {
        int64_t to = rule.getFactor(f).exchangeWith;
        if (to < 0)
          continue;
        for (StringAttr a : split[i])
          if (llvm::is_contained(exchangeAxes, a.getValue()) &&
              !llvm::any_of(moves, [&](auto &m) { return m.first == a; }))
            moves.emplace_back(a, to);
      }
    }
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (tensorType(v))
      scan(rule.getOperand(i), locals[v].dims);
  for (auto [i, r] : llvm::enumerate(op->getResults()))
    if (tensorType(r))
      scan(rule.getResult(i), targetOf(r));
  if (moves.empty())
    return std::optional<SmallVector<Axes>>();

  SmallVector<Axes> out(base.begin(), base.end());
  for (auto [a, to] : moves) {
    for (Axes &f : out)
      llvm::erase(f, a);
    int64_t n = axes.size(Axes{a});
    int64_t size = rule.getFactor(to).size;
    if (size % (axes.size(out[to]) * n) != 0) {
      if (!requireExchange)
        return std::optional<SmallVector<Axes>>();
      // Name a dimension that is the factor alone, for the message.
      std::string where;
      int64_t numOperands = rule.getOperandMappings().size();
      for (int64_t t = 0; t < rule.getNumTensors() && where.empty(); ++t)
        for (auto [d, dim] : llvm::enumerate(rule.getTensor(t)))
          if (dim.size() == 1 && dim.front() == to) {
            where =
                "dimension " + std::to_string(d) + " of " +
                (t < numOperands ? "operand " + std::to_string(t)
                                 : "result " + std::to_string(t - numOperands));
            break;
          }
      if (where.empty())
        where = "factor " + ShardingRule::getFactorName(to);
      return op->emitError()
             << "cannot be partitioned all-to-all over mesh axis '"
             << a.getValue() << "' (" << n << " ranks): the dimension it "
             << "would split instead, " << where << " (size " << size
             << ", split " << axes.size(out[to])
             << "-way already), does not divide over them; "
                "--context-parallel=auto gathers the sequence instead";
    }
    out[to].push_back(a);
  }
  return std::optional<SmallVector<Axes>>(std::move(out));
}

int64_t Partitioner::reshardBytes(RankedTensorType type, ArrayRef<Axes> from,
                                  ArrayRef<Axes> to) {
  return gatherBytes(type, planReshard(from, to));
}

int64_t Partitioner::gatherBytes(RankedTensorType type,
                                 ArrayRef<ReshardStep> steps) {
  int64_t bytes = 0;
  for (const ReshardStep &step : steps) {
    if (step.kind != ReshardStep::Kind::AllGather &&
        step.kind != ReshardStep::Kind::AllToAll)
      continue;
    int64_t g = axes.size(step.axes);
    bytes += mlir::cleave::detail::getSizeInBytes(localType(type, step.after)) *
             (g - 1) / g;
  }
  return bytes;
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
    if (g <= 1) {
      bytes += reshardBytes(type, produced, target);
      continue;
    }
    // What completing the partial results sends: the slices before the
    // reduction are local, the reduction sends its input's bytes.
    CompletionPlan plan = planCompletion(produced, target, partial);
    int64_t local = mlir::cleave::detail::getSizeInBytes(
        localType(type, plan.reduction.before));
    // A partial gradient rounded to bf16/f16 before its reduction (through
    // reshapes and transposes) is reduced in the low type.
    if (Operation *rounding = gradientRoundingOf(r))
      local =
          local *
          getElementTypeOrSelf(rounding->getResult(0)).getIntOrFloatBitWidth() /
          type.getElementType().getIntOrFloatBitWidth();
    if (plan.reduction.kind == ReshardStep::Kind::ReduceScatter)
      bytes += local * (g - 1) / g;
    else
      bytes += 2 * local * (g - 1) / g;
    bytes += gatherBytes(type, plan.after);
  }
  return bytes;
}
