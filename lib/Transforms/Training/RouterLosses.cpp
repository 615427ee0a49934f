//===- RouterLosses.cpp - A mixture of experts' router losses -------------===//
//
// --moe-aux-loss and --moe-z-loss: the losses that keep a mixture of
// experts' routing balanced (Switch Transformer / GShard) and its router
// logits small (ST-MoE), added to each microbatch's loss. A router is a
// top-k over the softmax of tokens x experts scores whose indices (through
// whatever integer ops compute the ids) reach a cleave.grouped_matmul:
//
//   aux = coef * E * sum_e f_e * P_e
//         f_e = (tokens routed to e, over the k choices) / (T * k)
//         P_e = mean over the T tokens of the router probability of e
//   z   = coef * mean over tokens of logsumexp_e(logits)^2
//
// f_e comes from the indices (no gradient); P_e and the logits carry the
// gradient into the router. Megatron-Core's switch load-balancing loss and
// z-loss are these formulas.
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

#include "cleave/Analysis/ExpertWeights.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

BlockArgument train_step::expertBiasOf(TopKOp topk) {
  auto add = topk.getOperand().getDefiningOp<BinaryOp>();
  if (!add || add.getKind() != BinaryKind::add)
    return {};
  auto bias = add.getRhs().getDefiningOp<BroadcastInDimOp>();
  return bias ? dyn_cast<BlockArgument>(bias.getOperand()) : BlockArgument();
}

SmallVector<RoutingTopK>
train_step::findRoutingTopKs(ArrayRef<Operation *> ops) {
  // The rows' ids: a grouped matmul's, or the slots of the capacity form
  // (--cleave-expert-capacity), which scatters the rows to their slots in
  // a G x E*C x K buffer.
  llvm::SetVector<Operation *> topks;
  llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> capacityOf;
  for (Operation *op : ops) {
    if (auto grouped = dyn_cast<GroupedMatmulOp>(op)) {
      ::cleave::topKsFeeding(grouped.getGroupIds(), topks);
      continue;
    }
    auto scatter = dyn_cast<ScatterOp>(op);
    if (!scatter || !isa<FloatType>(getElementTypeOrSelf(scatter.getType())))
      continue;
    llvm::SetVector<Operation *> feeding;
    ::cleave::topKsFeeding(scatter.getIndices(), feeding);
    auto buffer = cast<RankedTensorType>(scatter.getType());
    for (Operation *topk : feeding) {
      topks.insert(topk);
      int64_t experts = cast<RankedTensorType>(topk->getOperand(0).getType())
                            .getDimSize(cast<TopKOp>(topk).getDimension());
      if (buffer.getRank() == 3 && experts > 0 &&
          buffer.getDimSize(1) % experts == 0)
        capacityOf[topk] = {buffer.getDimSize(0),
                            buffer.getDimSize(1) / experts};
    }
  }
  SmallVector<RoutingTopK> found;
  for (Operation *op : topks) {
    RoutingTopK r{cast<TopKOp>(op)};
    if (auto it = capacityOf.find(op); it != capacityOf.end())
      std::tie(r.groups, r.capacity) = it->second;
    found.push_back(r);
  }
  return found;
}

FailureOr<SmallVector<Router>>
train_step::findRouters(ArrayRef<RoutingTopK> routingTopKs) {
  SmallVector<Router> routers;
  for (RoutingTopK routing : routingTopKs) {
    TopKOp topk = routing.topk;
    // Through --cleave-expert-bias's scores + bias.
    Value scores = topk.getOperand();
    if (expertBiasOf(topk)) {
      scores = scores.getDefiningOp<BinaryOp>().getLhs();
      if (auto convert = scores.getDefiningOp<ConvertOp>())
        scores = convert.getOperand();
    }
    auto probs = scores.getDefiningOp<SoftmaxOp>();
    auto type = cast<RankedTensorType>(topk.getOperand().getType());
    if (!probs || type.getRank() != 2 || topk.getDimension() != 1 ||
        probs.getDimension() != 1)
      return topk.emitOpError()
             << "routes a mixture of experts' rows but is not a top-k over "
                "a softmax of tokens x experts scores: --moe-aux-loss and "
                "--moe-z-loss take softmax routers only";
    routers.push_back({probs, topk});
  }
  return routers;
}

/// The k choices of each of `ids`' T rows (T x k) as a T x k x E one-hot,
/// in f32.
static Value oneHot(Emitter &e, Value ids, int64_t experts) {
  auto idsType = Emitter::typeOf(ids);
  auto choiceType = RankedTensorType::get(
      {idsType.getDimSize(0), idsType.getDimSize(1), experts},
      e.b.getI64Type());
  Value expert = IotaOp::create(e.b, e.loc, choiceType, 2);
  Value chosen = BroadcastInDimOp::create(
      e.b, e.loc, choiceType.clone(idsType.getElementType()), ids,
      ArrayRef<int64_t>{0, 1});
  chosen = e.convert(chosen, e.b.getI64Type());
  return e.convert(CompareOp::create(e.b, e.loc,
                                     choiceType.clone(e.b.getI1Type()),
                                     CompareKind::eq, expert, chosen),
                   e.b.getF32Type());
}

ExpertMetrics train_step::expertMetrics(Emitter &e,
                                        ArrayRef<RoutingTopK> routingTopKs) {
  ExpertMetrics metrics;
  Type f32 = e.b.getF32Type();
  for (RoutingTopK routing : routingTopKs) {
    TopKOp topk = routing.topk;
    Value ids = topk.getIndices();
    auto scores = cast<RankedTensorType>(topk.getOperand().getType());
    if (scores.getRank() != 2 || topk.getDimension() != 1)
      continue;
    int64_t tokens = scores.getDimSize(0), experts = scores.getDimSize(1);
    int64_t k = Emitter::typeOf(ids).getDimSize(1);
    Value choices = oneHot(e, ids, experts);
    metrics.routers.push_back(topk);
    metrics.loads.push_back(
        ReduceOp::create(e.b, e.loc, RankedTensorType::get({experts}, f32),
                         ReduceKind::sum, choices, ArrayRef<int64_t>{0, 1}));
    if (routing.capacity == 0 || (tokens * k) % routing.groups != 0)
      continue;
    // Each group's rows (token-major, then choice) per expert, past the
    // capacity: the rows the capacity form drops.
    int64_t g = routing.groups, rowsPerGroup = tokens * k / g;
    Value grouped = ReshapeOp::create(
        e.b, e.loc, RankedTensorType::get({g, rowsPerGroup, experts}, f32),
        choices);
    Value counts =
        ReduceOp::create(e.b, e.loc, RankedTensorType::get({g, experts}, f32),
                         ReduceKind::sum, grouped, ArrayRef<int64_t>{1});
    Value over = e.binary(
        BinaryKind::max,
        e.sub(counts, e.splat(f32, {g, experts}, double(routing.capacity))),
        e.splat(f32, {g, experts}, 0.0));
    Value dropped = e.sumAll(over);
    metrics.dropped =
        metrics.dropped ? e.add(metrics.dropped, dropped) : dropped;
  }
  return metrics;
}

Value train_step::routerLosses(Emitter &e, ArrayRef<Router> routers,
                               double auxCoef, double zCoef) {
  Type f32 = e.b.getF32Type();
  Value total;
  auto accumulate = [&](Value term) {
    total = total ? e.add(total, term) : term;
  };
  for (Router r : routers) {
    Value probs = e.convert(r.probs.getResult(), f32);
    auto type = Emitter::typeOf(probs);
    int64_t tokens = type.getDimSize(0), experts = type.getDimSize(1);
    if (auxCoef != 0) {
      // f_e: one-hot of each choice, summed over tokens and choices.
      Value ids = r.topk.getIndices();
      int64_t k = Emitter::typeOf(ids).getDimSize(1);
      Value onehot = oneHot(e, ids, experts);
      auto perExpert = RankedTensorType::get({experts}, f32);
      Value f = e.scale(ReduceOp::create(e.b, e.loc, perExpert, ReduceKind::sum,
                                         onehot, ArrayRef<int64_t>{0, 1}),
                        1.0 / double(tokens * k));
      Value p = e.scale(ReduceOp::create(e.b, e.loc, perExpert, ReduceKind::sum,
                                         probs, ArrayRef<int64_t>{0}),
                        1.0 / double(tokens));
      accumulate(e.scale(e.sumAll(e.mul(f, p)), auxCoef * double(experts)));
    }
    if (zCoef != 0) {
      Value logits = e.convert(r.probs.getOperand(), f32);
      auto rowType = RankedTensorType::get({tokens}, f32);
      Value max = ReduceOp::create(e.b, e.loc, rowType, ReduceKind::max, logits,
                                   ArrayRef<int64_t>{1});
      Value maxB =
          BroadcastInDimOp::create(e.b, e.loc, type, max, ArrayRef<int64_t>{0});
      Value sum = ReduceOp::create(e.b, e.loc, rowType, ReduceKind::sum,
                                   e.unary(UnaryKind::exp, e.sub(logits, maxB)),
                                   ArrayRef<int64_t>{1});
      Value lse = e.add(e.unary(UnaryKind::log, sum), max);
      accumulate(e.scale(e.sumAll(e.mul(lse, lse)), zCoef / double(tokens)));
    }
  }
  return total;
}
