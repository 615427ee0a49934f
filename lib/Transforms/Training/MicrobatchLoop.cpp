//===- MicrobatchLoop.cpp - Microbatches of a training step ---------------===//
//
// --microbatches and --pipeline-ranks: the forward program at one
// microbatch's shapes (partitioned over a mesh of microbatches), a
// microbatch's rows of a batch input, and the microbatch loop of a
// pipelined step, emitted in the order its schedule runs the steps.
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveSharding.h"
#include "Layers.h"
#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Schedule/Schedule.h"
#include "cleave/Transforms/Autodiff.h"
#include "cleave/Transforms/Sharding/Passes.h"
#include "cleave/Transforms/Training/Pipeline.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

//===----------------------------------------------------------------------===//
// Microbatches
//===----------------------------------------------------------------------===//

/// Microbatch `k` of `m` of a batch input along `dim`: rows k, k + m,
/// k + 2m, ... (viewed as [rows / m, m, ...], the slice of the second of
/// those), so that a split of the batch over dp ranks stays a split of
/// every microbatch and slicing needs no communication.
Value train_step::microbatchOf(Emitter &e, Value v, int64_t k, int64_t m,
                               int64_t dim) {
  auto type = Emitter::typeOf(v);
  SmallVector<int64_t> shape(type.getShape());
  SmallVector<int64_t> grouped(shape.begin(), shape.begin() + dim);
  grouped.push_back(shape[dim] / m);
  grouped.push_back(m);
  grouped.append(shape.begin() + dim + 1, shape.end());
  Value g = ReshapeOp::create(e.b, e.loc, type.clone(grouped), v);
  SmallVector<int64_t> start(grouped.size(), 0), limit(grouped),
      strides(grouped.size(), 1);
  start[dim + 1] = k;
  limit[dim + 1] = k + 1;
  SmallVector<int64_t> one(grouped);
  one[dim + 1] = 1;
  Value slice = SliceOp::create(
      e.b, e.loc, type.clone(one), g, e.b.getDenseI64ArrayAttr(start),
      e.b.getDenseI64ArrayAttr(limit), e.b.getDenseI64ArrayAttr(strides));
  shape[dim] /= m;
  return ReshapeOp::create(e.b, e.loc, type.clone(shape), slice);
}

SmallVector<Value> train_step::emitMicrobatchForward(
    Emitter &e, func::FuncOp forward, ArrayRef<Value> dataArgs,
    const llvm::StringMap<Value> &stateValues, int64_t k, int64_t m,
    llvm::function_ref<bool(Value)> isBatch) {
  IRMapping mapping;
  for (auto [arg, full] : llvm::zip(forward.getArguments(), dataArgs))
    mapping.map(arg, m > 1 && isBatch(full) ? microbatchOf(e, full, k, m)
                                            : Value(full));
  SmallVector<Value> outputs;
  for (Operation &op : forward.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        outputs.push_back(mapping.lookup(v));
      continue;
    }
    if (StringRef name = initializerName(&op); !name.empty())
      if (Value v = stateValues.lookup(name)) {
        mapping.map(op.getResult(0), v);
        continue;
      }
    // This microbatch's rows of a whole tensor (a constant or iota with
    // a batch dimension), in the same row order as the inputs.
    if (auto slice = dyn_cast<AllSliceOp>(op);
        slice && slice.getMesh() == kMicrobatchMesh) {
      mapping.map(slice.getResult(),
                  microbatchOf(e, mapping.lookup(slice.getOperand()), k, m,
                               slice.getDim()));
      continue;
    }
    Operation *copy = e.b.clone(op, mapping);
    if (m > 1) {
      copy->removeAttr(kShardingAttrName);
      copy->removeAttr(kConflictsAttrName);
    }
  }
  return outputs;
}

/// The forward program at one microbatch's shapes: `main` partitioned by
/// the SPMD partitioner over a mesh of `m` "ranks" that are the
/// microbatches, its batch inputs (`isBatch`) split by rows, so every op
/// gets the shapes it has on 1/m of the batch. A microbatch's own slice of
/// a whole tensor (a constant or iota with a batch dimension) is a
/// `cleave.all_slice` over that mesh, which the caller replaces per
/// microbatch. Fails, naming the op, where a microbatch would need the
/// rows of another (any other collective: batch statistics, a mean over
/// the batch).
FailureOr<OwningOpRef<ModuleOp>>
train_step::microbatchTemplate(func::FuncOp main, int64_t m,
                               llvm::function_ref<bool(Value)> isBatch) {
  MLIRContext *ctx = main.getContext();
  Location loc = main.getLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b = OpBuilder::atBlockBegin(module->getBody());
  MeshOp::create(b, loc, kMicrobatchMesh, b.getStrArrayAttr({"mb"}),
                 b.getDenseI64ArrayAttr({m}));
  auto fn = cast<func::FuncOp>(b.clone(*main.getOperation()));
  auto meshRef = FlatSymbolRefAttr::get(ctx, kMicrobatchMesh);
  for (BlockArgument arg : fn.getArguments()) {
    if (!isBatch(arg))
      continue;
    auto type = cast<RankedTensorType>(arg.getType());
    SmallVector<DimShardingAttr> dims(type.getRank(),
                                      DimShardingAttr::get(ctx, {}, false, -1));
    dims[0] = DimShardingAttr::get(ctx, {b.getStringAttr("mb")}, true, 0);
    setSharding(arg, TensorShardingAttr::get(ctx, meshRef, dims));
  }
  PassManager pm(ctx);
  pm.addPass(::cleave::createPropagateShardingPass());
  ::cleave::PartitionPassOptions partition;
  partition.interleavedAxes = {"mb"};
  pm.addPass(::cleave::createPartitionPass(partition));
  if (failed(pm.run(*module)))
    return failure();
  WalkResult walk = fn.walk([&](Operation *op) {
    if (!isa<CollectiveOpInterface>(op) || isa<AllSliceOp>(op))
      return WalkResult::advance();
    InFlightDiagnostic diag = mlir::emitError(op->getLoc())
                              << "--microbatches=" << m
                              << ": the forward program combines the "
                              << "rows of the batch here";
    if (auto why = getPhase(op))
      diag << " (" << why.getValue() << ")";
    diag << "; each microbatch would need the others' rows (batch "
            "statistics, a mean over the batch): train it without "
            "--microbatches";
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return failure();
  return module;
}

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//

/// Tags the ops of `body` after `before` (all of them when null) with the
/// pipeline rank that runs them; transfers say it themselves.
void train_step::tagPipelineRank(Block *body, Operation *before, int64_t rank) {
  auto tag = IntegerAttr::get(
      IntegerType::get(body->getParentOp()->getContext(), 64), rank);
  for (Operation &op : llvm::make_range(
           before ? std::next(Block::iterator(before)) : body->begin(),
           body->end()))
    if (!isa<PipelineTransferOp>(op))
      op.setAttr(attr::kPipelineRank, tag);
}

/// Emits every microbatch's forward and backward steps of every stage, in
/// the order the schedule runs them (steps of different ranks by their
/// simulated start), each op tagged with its rank.
FailureOr<PipelineResult> train_step::emitPipeline(PipelineStep &ps,
                                                   int64_t pipelineRanks,
                                                   const std::string &schedule,
                                                   StringRef stageBoundaries) {
  namespace pl = ::cleave::schedule;
  OpBuilder &b = ps.b;
  Location loc = ps.forward.getLoc();
  Emitter e{b, loc};
  const int64_t p = pipelineRanks, m = ps.microbatches;
  pl::ScheduleOptions options;
  if (std::string error = pl::parseScheduleKind(schedule, options);
      !error.empty()) {
    mlir::emitError(loc) << "--schedule: " << error;
    return failure();
  }
  options.ranks = p;
  options.microbatches = m;
  const int64_t v = options.chunks, numStages = p * v;
  auto rankOf = [&](int64_t stage) { return stage % p; };

  FailureOr<::cleave::training::StageAssignment> assignment =
      ::cleave::training::assignPipelineStages(ps.forward, numStages,
                                               stageBoundaries);
  if (failed(assignment))
    return failure();
  for (const std::string &remark : assignment->remarks)
    mlir::emitRemark(loc) << remark;
  // Trained parameters read on several stages (constants are copied).
  for (const auto &[name, readers] : assignment->shared)
    if (ps.stateValues.count(name)) {
      SmallVector<int64_t> ranks;
      for (int64_t r : readers)
        ranks.push_back(rankOf(r));
      llvm::sort(ranks);
      ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
      InFlightDiagnostic remark = mlir::emitRemark(loc)
                                  << "tied parameter " << name << " on stages";
      for (int64_t r : readers)
        remark << " " << r;
      remark << ": its gradient is the sum of the stages' (pipeline ranks";
      for (int64_t r : ranks)
        remark << " " << r;
      remark << ")";
    }
  std::string error;
  std::vector<std::vector<pl::Step>> order = pl::buildSchedule(options, error);
  if (!error.empty()) {
    mlir::emitError(loc) << "--schedule: " << error;
    return failure();
  }
  // Steps of a stage take time in proportion to its flops.
  pl::StepCosts costs;
  {
    double total = 0;
    for (int64_t f : assignment->flops)
      total += double(f);
    for (int64_t f : assignment->flops)
      costs.stageWeight.push_back(
          total > 0 ? std::max(1e-3, double(f) * numStages / total) : 1.0);
  }
  pl::Simulation sim = pl::simulate(order, options, costs, error);
  if (!error.empty()) {
    mlir::emitError(loc) << "--schedule: " << error;
    return failure();
  }
  std::vector<pl::TimedStep> steps = sim.steps;
  std::stable_sort(steps.begin(), steps.end(),
                   [](const pl::TimedStep &x, const pl::TimedStep &y) {
                     return x.start != y.start ? x.start < y.start
                                               : x.rank < y.rank;
                   });

  // The forward program by stage.
  Block &fwd = ps.forward.getBody().front();
  auto ret = cast<func::ReturnOp>(fwd.getTerminator());
  auto stageOf = [&](Operation *op) { return assignment->stageOf.lookup(op); };
  // Every op on exactly one stage, every stage with ops, stages in program
  // order: nothing dropped, nothing run twice.
  SmallVector<SmallVector<Operation *>> stageOps(numStages);
  int64_t last = 0;
  for (Operation &op : fwd.without_terminator()) {
    if (isa<ConstantOp>(op))
      continue;
    auto it = assignment->stageOf.find(&op);
    if (it == assignment->stageOf.end() || it->second < last ||
        it->second >= numStages) {
      op.emitError() << "is not in exactly one pipeline stage in order";
      return failure();
    }
    last = it->second;
    stageOps[last].push_back(&op);
  }
  for (auto [s, ops] : llvm::enumerate(stageOps))
    if (ops.empty()) {
      mlir::emitError(loc) << "pipeline stage " << s << " has no ops";
      return failure();
    }
  Value lossOutput = ret.getOperand(ps.spec.output);
  int64_t lossStage = numStages - 1;
  if (Operation *def = lossOutput.getDefiningOp();
      !def || isa<ConstantOp>(def) || stageOf(def) != lossStage) {
    mlir::emitError(loc) << "the loss output is not made on the last "
                            "pipeline stage";
    return failure();
  }
  // Values read by later stages: the stages that read each.
  llvm::MapVector<Value, SmallVector<int64_t>> consumers;
  SmallVector<SmallVector<Value>> cutValues(numStages);
  for (int64_t s = 0; s < numStages; ++s)
    for (Operation *op : stageOps[s])
      for (Value r : op->getResults()) {
        SmallVector<int64_t> readers;
        for (Operation *user : r.getUsers()) {
          int64_t c =
              user == ret ? (r == lossOutput ? lossStage : s) : stageOf(user);
          if (c != s && !isa<ConstantOp>(user))
            readers.push_back(c);
        }
        llvm::sort(readers);
        readers.erase(std::unique(readers.begin(), readers.end()),
                      readers.end());
        if (!readers.empty()) {
          consumers[r] = readers;
          cutValues[s].push_back(r);
        }
      }
  // The parameters each stage reads, in first-use order.
  DenseMap<Value, int64_t> paramIndex;
  for (auto [i, a] : llvm::enumerate(ps.paramArgs))
    paramIndex[a] = i;
  auto paramOf = [&](Value x) -> Value {
    auto c = x.getDefiningOp<ConstantOp>();
    auto name = c ? getInitializerName(c) : nullptr;
    return name ? ps.stateValues.lookup(name.getValue()) : Value();
  };
  SmallVector<SmallVector<int64_t>> stageParams(numStages);
  for (int64_t s = 0; s < numStages; ++s) {
    llvm::SmallDenseSet<int64_t> seen;
    for (Operation *op : stageOps[s])
      for (Value x : op->getOperands())
        if (Value a = paramOf(x))
          if (seen.insert(paramIndex.lookup(a)).second)
            stageParams[s].push_back(paramIndex.lookup(a));
  }

  // Per microbatch: the forward values made so far (on their own stage's
  // rank), each stage's copies of what it reads from other stages, and the
  // cotangents sent back for each cut value.
  struct Microbatch {
    IRMapping values;
    DenseMap<std::pair<Value, int64_t>, Value> copies;
    SmallVector<SmallVector<std::pair<Value, Value>>> inputs;
    DenseMap<Value, SmallVector<Value>> cotangents;
    DenseMap<std::pair<unsigned, int64_t>, Value> data;
    Value loss;
  };
  std::vector<Microbatch> mbs(m);
  for (Microbatch &mb : mbs)
    mb.inputs.resize(numStages);
  DenseMap<std::pair<Operation *, int64_t>, Value> constants;
  SmallVector<DenseMap<int64_t, Value>> acc(ps.paramArgs.size());
  PipelineResult result;
  result.ranks = p;

  auto resolve = [&](Value x, int64_t s, int64_t k) -> Value {
    Microbatch &mb = mbs[k];
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      Value full = ps.dataArgs[arg.getArgNumber()];
      if (m == 1 || !ps.isBatch(full))
        return full;
      Value &slice = mb.data[{arg.getArgNumber(), rankOf(s)}];
      if (!slice)
        slice = microbatchOf(e, full, k, m);
      return slice;
    }
    if (Value a = paramOf(x))
      return a;
    Operation *def = x.getDefiningOp();
    if (isa<ConstantOp>(def)) {
      Value &c = constants[{def, rankOf(s)}];
      if (!c)
        c = b.clone(*def)->getResult(0);
      return c;
    }
    if (stageOf(def) == s)
      return mb.values.lookup(x);
    return mb.copies.lookup({x, s});
  };

  auto forwardStep = [&](int64_t s, int64_t k) -> LogicalResult {
    Microbatch &mb = mbs[k];
    for (Operation *op : stageOps[s]) {
      if (auto slice = dyn_cast<AllSliceOp>(op);
          slice && slice.getMesh() == kMicrobatchMesh) {
        mb.values.map(slice.getResult(),
                      microbatchOf(e, resolve(slice.getOperand(), s, k), k, m,
                                   slice.getDim()));
        continue;
      }
      IRMapping operands;
      for (Value x : op->getOperands())
        operands.map(x, resolve(x, s, k));
      Operation *copy = b.clone(*op, operands);
      copy->removeAttr(kShardingAttrName);
      copy->removeAttr(kConflictsAttrName);
      for (auto [r, c] : llvm::zip(op->getResults(), copy->getResults()))
        mb.values.map(r, c);
    }
    // Send on what later stages read (to each stage its own copy, so each
    // stage's backward pass stops at its inputs).
    for (Value r : cutValues[s])
      for (int64_t c : consumers[r]) {
        Value copy = PipelineTransferOp::create(b, loc, mb.values.lookup(r),
                                                rankOf(s), rankOf(c));
        mb.copies[{r, c}] = copy;
        mb.inputs[c].push_back({r, copy});
      }
    if (s == lossStage) {
      Operation *before = &ps.body->back();
      SmallVector<Value> outs(ret.getNumOperands());
      outs[ps.spec.output] = resolve(lossOutput, s, k);
      Value target = ps.target;
      if (target && m > 1 && ps.isBatch(target))
        target = microbatchOf(e, target, k, m);
      mb.loss = buildLoss(e, ps.spec, outs, target, ps.denominator);
      for (Operation &op :
           llvm::make_range(std::next(Block::iterator(before)), ps.body->end()))
        result.lossOps.push_back(&op);
    }
    return success();
  };

  auto backwardStep = [&](int64_t s, int64_t k, bool inputs,
                          bool weights) -> LogicalResult {
    Microbatch &mb = mbs[k];
    SmallVector<Value> outputs, cotangents;
    if (s != lossStage) {
      for (Value r : cutValues[s]) {
        auto it = mb.cotangents.find(r);
        if (it == mb.cotangents.end() || it->second.empty())
          continue;
        Value sum = it->second.front();
        for (Value c : ArrayRef<Value>(it->second).drop_front())
          sum = e.add(sum, c);
        outputs.push_back(mb.values.lookup(r));
        cotangents.push_back(sum);
      }
      if (outputs.empty())
        return success();
    }
    SmallVector<Value> wrt;
    SmallVector<std::pair<Value, Value>> received;
    if (inputs)
      for (auto [x, copy] : mb.inputs[s])
        if (isa<FloatType>(Emitter::typeOf(copy).getElementType())) {
          received.push_back({x, copy});
          wrt.push_back(copy);
        }
    if (weights)
      for (int64_t i : stageParams[s])
        wrt.push_back(ps.paramArgs[i]);
    if (wrt.empty())
      return success();
    FailureOr<SmallVector<Value>> grads =
        s == lossStage
            ? ::cleave::buildGradients(b, mb.loss, wrt, ps.seed, ps.backwardTag)
            : ::cleave::buildGradients(b, outputs, cotangents, wrt,
                                       ps.backwardTag);
    if (failed(grads))
      return failure();
    for (auto [i, xr] : llvm::enumerate(received)) {
      Value g = (*grads)[i];
      int64_t from = stageOf(xr.first.getDefiningOp());
      if (rankOf(from) != rankOf(s))
        g = PipelineTransferOp::create(b, loc, g, rankOf(s), rankOf(from));
      mb.cotangents[xr.first].push_back(g);
    }
    if (weights)
      for (auto [j, i] : llvm::enumerate(stageParams[s])) {
        Value g = (*grads)[received.size() + j];
        Value &slot = acc[i][rankOf(s)];
        slot = slot ? e.add(slot, g) : g;
      }
    return success();
  };

  for (const pl::TimedStep &t : steps) {
    Operation *before = ps.body->empty() ? nullptr : &ps.body->back();
    int64_t s = t.step.stage, k = t.step.microbatch;
    std::string name = pl::stepName(t.step, options);
    PipelineMarkerOp::create(b, loc, name, /*begin=*/true);
    LogicalResult done = success();
    switch (t.step.kind) {
    case pl::StepKind::Forward:
      done = forwardStep(s, k);
      break;
    case pl::StepKind::Backward:
      done = backwardStep(s, k, true, true);
      break;
    case pl::StepKind::BackwardInput:
      done = backwardStep(s, k, true, false);
      break;
    case pl::StepKind::BackwardWeight:
      done = backwardStep(s, k, false, true);
      break;
    }
    if (failed(done))
      return failure();
    PipelineMarkerOp::create(b, loc, name, /*begin=*/false);
    tagPipelineRank(ps.body, before, t.rank);
  }

  // The microbatches' losses, on the last stage's rank.
  Operation *before = &ps.body->back();
  Value loss = mbs[0].loss;
  for (int64_t k = 1; k < m; ++k)
    loss = e.add(loss, mbs[k].loss);
  result.loss = e.convert(loss, b.getF32Type());
  for (Operation &op :
       llvm::make_range(std::next(Block::iterator(before)), ps.body->end()))
    result.lossOps.push_back(&op);
  tagPipelineRank(ps.body, before, rankOf(lossStage));

  // Each parameter's gradient: the sum of its readers' (rank order).
  for (auto [i, a] : llvm::enumerate(ps.paramArgs)) {
    SmallVector<int64_t> ranks;
    SmallVector<Value> parts;
    for (int64_t r = 0; r < p; ++r)
      if (Value g = acc[i].lookup(r)) {
        ranks.push_back(r);
        parts.push_back(g);
      }
    result.readers.push_back(ranks);
    if (parts.empty()) {
      auto t = Emitter::typeOf(a);
      result.grads.push_back(e.splat(t.getElementType(), t.getShape(), 0.0));
    } else if (parts.size() == 1)
      result.grads.push_back(parts.front());
    else
      result.grads.push_back(
          PipelineSumOp::create(b, loc, parts.front().getType(), parts,
                                b.getDenseI64ArrayAttr(ranks)));
  }
  return result;
}
