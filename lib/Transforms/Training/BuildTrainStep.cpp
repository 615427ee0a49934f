//===- BuildTrainStep.cpp - A forward program into one training step ------===//
//
// Rewrites @main into
//   @main(params..., optimizer_state..., batch..., lr, step)
//       -> (params'..., optimizer_state'..., loss, grad_norm)
// with gradients from reverse-mode autodiff and the optimizer update in
// cleave ops. See Passes.td for the attributes the plan builder reads.
// TrainStepBuilder runs the steps in order; the larger self-contained ones
// live in their own files (TrainStep.h names them).
//
//===----------------------------------------------------------------------===//

#include "Optimizers.h"
#include "TrainStep.h"
#include "TrainableParameters.h"

#include "Cleave/IR/CleaveOps.h"
#include "cleave/Transforms/Autodiff.h"
#include "cleave/Transforms/Training/Passes.h"

#include "llvm/Support/Regex.h"

#define DEBUG_TYPE "cleave-build-train-step"

namespace cleave {
#define GEN_PASS_DEF_BUILDTRAINSTEPPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

namespace {

struct BuildTrainStepPass
    : public ::cleave::impl::BuildTrainStepPassBase<BuildTrainStepPass> {
  using Base::Base;
  void runOnOperation() override;
  friend class TrainStepBuilder;
};

} // namespace

//===----------------------------------------------------------------------===//
// The step builder
//===----------------------------------------------------------------------===//

namespace {

/// Builds one module's training step from the pass's options: one method
/// per step, which build() runs in order; each reads what the steps before
/// it left in the members and writes its own. A failing step has emitted
/// its error.
class TrainStepBuilder {
public:
  TrainStepBuilder(const BuildTrainStepPass &options, ModuleOp module)
      : o(options), module(module), b(module.getContext()),
        loc(module.getLoc()) {}

  /// Replaces @main by its training step.
  LogicalResult build();

private:
  //--- Options and state (before the step exists) ---------------------===//
  LogicalResult checkForward();
  LogicalResult parseOptions();
  LogicalResult selectParameters();
  LogicalResult parseScalingAndSync();

  //--- The step's body --------------------------------------------------===//
  LogicalResult buildBody();
  LogicalResult addArguments();
  LogicalResult checkBatch();
  LogicalResult prepareForward();
  LogicalResult buildPipelined();
  LogicalResult buildMicrobatch(int64_t k);
  /// Adds each biased router's load (of `metrics`) to biasLoads at its
  /// bias's buffer.
  void addBiasLoads(Emitter &e, const ExpertMetrics &metrics);
  /// The expert biases' new values, into bufferValues: each moved by its
  /// rate times sign(mean load - load) over the step's rows.
  LogicalResult updateExpertBiases();
  void keyRandomStreams();
  void tagGradients();
  LogicalResult reduceGradients();
  void updateParameters();
  void finishBody();

  //--- The signature ----------------------------------------------------===//
  void replaceMain();

  bool isBatch(Value v) const {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getRank() > 0 && t.getDimSize(0) == rows;
  }
  Operation *lastOp() const { return body->empty() ? nullptr : &body->back(); }
  /// The ops of the body after `last` (all of them when null).
  SmallVector<Operation *> opsAfter(Operation *last) const;

  const BuildTrainStepPass &o;
  /// Whether --moe-aux-loss or --moe-z-loss asks for router losses.
  bool routerLossCoefficients() const {
    return double(o.moeAuxLoss) != 0 || double(o.moeZLoss) != 0;
  }
  ModuleOp module;
  func::FuncOp oldMain, newMain;
  Block *body = nullptr;
  OpBuilder b;
  Location loc;

  // Parsed options.
  llvm::Regex noDecayRe;
  SmallVector<Slot> slots;
  LossScaling scaling;
  ::cleave::SyncMode syncMode;

  // Parameters and buffers, and the step's arguments.
  ::cleave::training::TrainingState state;
  SmallVector<Value> paramArgs, slotArgs, bufferArgs, dataArgs;
  Value scaleLog2Arg, goodStepsArg, target, lr, step;
  std::optional<LossSpec> spec;
  SmallVector<std::string> extraNames;

  // Microbatches and the forward program each one runs.
  int64_t m = 1, rows = -1;
  OwningOpRef<ModuleOp> microbatchModule;
  func::FuncOp forward;
  /// Initializer name -> the value the forward reads for it.
  llvm::StringMap<Value> stateValues;
  Value denominator;

  // Forward and backward.
  SmallVector<Value> outputs, bufferValues;
  Value lossTotal, lossF32, seed, scale;
  SmallVector<Value> grads;
  Operation *backwardEnd = nullptr;
  std::optional<PipelineResult> pipeline;
  /// Ops kept in f32 under mixed precision (mark-fp32-ops).
  SmallVector<Operation *> fp32Ops;

  /// The experts' figures (expertMetrics), summed over the microbatches.
  SmallVector<Value> expertLoads;
  /// Per buffer that is a router's expert biases (cleave.expert_bias), its
  /// router's load summed over the microbatches; null for other buffers.
  SmallVector<Value> biasLoads;
  Value droppedRows;
  /// The names of the metric results, the last results of the step.
  SmallVector<std::string> metricNames;

  // Reduction, update and results.
  Value lossOut;
  SmallVector<Value> pendingArgs, newPending;
  ClippedGradients clipped;
  SmallVector<Value> results;
};

} // namespace

void TrainStepBuilder::addBiasLoads(Emitter &e, const ExpertMetrics &metrics) {
  biasLoads.resize(bufferArgs.size());
  for (auto [router, load] : llvm::zip(metrics.routers, metrics.loads)) {
    auto *it = llvm::find(bufferArgs, expertBiasOf(router));
    if (it == bufferArgs.end())
      continue;
    Value &total = biasLoads[it - bufferArgs.begin()];
    total = total ? e.add(total, load) : load;
  }
}

LogicalResult TrainStepBuilder::updateExpertBiases() {
  Emitter e{b, loc};
  for (auto [j, c] : llvm::enumerate(state.buffers)) {
    auto rate = c->getAttrOfType<FloatAttr>(attr::kExpertBias);
    if (!rate)
      continue;
    if (j >= biasLoads.size() || !biasLoads[j])
      return c.emitError() << "expert biases '" << initializerName(c)
                           << "' bias no router of the step (a top-k over "
                              "the scores plus them whose indices reach the "
                              "experts)";
    Value load = biasLoads[j];
    auto type = Emitter::typeOf(load);
    int64_t experts = type.getDimSize(0);
    Value mean = e.broadcast(e.scale(e.sumAll(load), 1.0 / double(experts)),
                             type.getShape());
    Value step = e.scale(e.unary(UnaryKind::sign, e.sub(mean, load)),
                         rate.getValueAsDouble());
    bufferValues[j] =
        e.add(e.convert(bufferArgs[j], type.getElementType()), step);
  }
  return success();
}

SmallVector<Operation *> TrainStepBuilder::opsAfter(Operation *last) const {
  SmallVector<Operation *> ops;
  for (Operation &op :
       llvm::make_range(last ? std::next(Block::iterator(last)) : body->begin(),
                        body->end()))
    ops.push_back(&op);
  return ops;
}

LogicalResult TrainStepBuilder::build() {
  if (failed(checkForward()) || failed(parseOptions()) ||
      failed(selectParameters()) || failed(parseScalingAndSync()))
    return failure();
  if (failed(buildBody())) {
    newMain.erase();
    return failure();
  }
  replaceMain();
  return success();
}

/// Reads @main; writes oldMain. Fails unless it is one block of ranked
/// tensors.
LogicalResult TrainStepBuilder::checkForward() {
  oldMain = module.lookupSymbol<func::FuncOp>("main");
  if (!oldMain || oldMain.getBody().getBlocks().size() != 1)
    return mlir::emitError(module.getLoc())
           << "expected a single-block func.func @main";
  for (Type t : llvm::concat<const Type>(oldMain.getArgumentTypes(),
                                         oldMain.getResultTypes()))
    if (!isa<RankedTensorType>(t))
      return oldMain.emitError()
             << "@main's arguments and results must be ranked tensors, got "
             << t;
  loc = oldMain.getLoc();
  return success();
}

/// Reads optimizer and the regex options; checks them and writes slots and
/// noDecayRe.
LogicalResult TrainStepBuilder::parseOptions() {
  StringRef optimizer = o.optimizer;
  if (optimizer != "sgd" && optimizer != "momentum" &&
      optimizer != "nesterov" && optimizer != "adam" && optimizer != "adamw")
    return mlir::emitError(module.getLoc())
           << "unknown optimizer '" << optimizer
           << "' (expected sgd, momentum, nesterov, adam, adamw)";
  slots = slotsOf(optimizer);
  noDecayRe = llvm::Regex("^(" + o.noDecay + ")$");
  return success();
}

/// Reads the trainable, frozen and untie options and @main's initializers;
/// writes state (parameters and buffers), untying initializers in @main.
LogicalResult TrainStepBuilder::selectParameters() {
  llvm::Regex trainRe("^(" + o.trainable + ")$"),
      frozenRe("^(" + o.frozen + ")$"), untieRe("^(" + o.untie + ")$");
  for (auto [flag, re] :
       {std::pair<StringRef, llvm::Regex *>{"trainable", &trainRe},
        {"frozen", &frozenRe},
        {"no-decay", &noDecayRe},
        {"untie", &untieRe}}) {
    std::string reError;
    if (!re->isValid(reError))
      return mlir::emitError(module.getLoc())
             << "invalid --" << flag << " regex: " << reError;
  }
  ::cleave::training::ParameterOptions selection{
      o.trainable.empty() ? nullptr : &trainRe, o.trainable,
      o.frozen.empty() ? nullptr : &frozenRe,
      o.untie.empty() ? nullptr : &untieRe};
  FailureOr<::cleave::training::TrainingState> selected =
      ::cleave::training::selectTrainingState(oldMain, selection);
  if (failed(selected))
    return failure();
  state = std::move(*selected);
  return success();
}

/// Reads the loss-scale and sync options; writes scaling and syncMode.
LogicalResult TrainStepBuilder::parseScalingAndSync() {
  FailureOr<LossScaling> parsed = parseLossScaling(
      module.getLoc(), o.lossScale, o.lossScaleInit, o.lossScaleWindow);
  if (failed(parsed))
    return failure();
  scaling = *parsed;
  FailureOr<::cleave::SyncMode> mode =
      parseStepSync(module.getLoc(), o.sync, o.dataParallel, o.pipelineRanks,
                    scaling.dynamic);
  if (failed(mode))
    return failure();
  syncMode = *mode;
  return success();
}

/// Creates newMain and runs the steps that fill its body; on failure the
/// caller erases newMain.
LogicalResult TrainStepBuilder::buildBody() {
  newMain =
      func::FuncOp::create(b, loc, "train_step", b.getFunctionType({}, {}));
  body = newMain.addEntryBlock();
  if (failed(addArguments()) || failed(checkBatch()) ||
      failed(prepareForward()))
    return failure();
  if (o.pipelineRanks > 1) {
    if (routerLossCoefficients())
      return emitError(loc)
             << "--moe-aux-loss and --moe-z-loss do not combine with "
                "pipeline parallelism yet (a router's loss would join the "
                "last stage's)";
    if (failed(buildPipelined()))
      return failure();
  } else {
    for (int64_t k = 0; k < m; ++k)
      if (failed(buildMicrobatch(k)))
        return failure();
    if (m > 1)
      lossF32 = Emitter{b, loc}.convert(lossTotal, b.getF32Type());
    if (failed(updateExpertBiases()))
      return failure();
  }
  keyRandomStreams();
  tagGradients();
  if (failed(reduceGradients()))
    return failure();
  updateParameters();
  finishBody();
  return success();
}

/// Reads state, slots, scaling and the loss option; writes the step's
/// arguments: params, slots, the loss scale's state, buffers, data (the
/// forward's, then the target the loss adds), lr, step. Writes spec.
LogicalResult TrainStepBuilder::addArguments() {
  for (ConstantOp p : state.params)
    paramArgs.push_back(body->addArgument(p.getType(), p.getLoc()));
  for (ConstantOp p : state.params)
    for (size_t s = 0; s < slots.size(); ++s)
      slotArgs.push_back(body->addArgument(p.getType(), p.getLoc()));
  // Dynamic loss scaling: log2 of the scale relative to loss-scale-init,
  // and the finite steps since the last overflow (f32 scalars, zeroed).
  auto scalarF32 = RankedTensorType::get({}, b.getF32Type());
  if (scaling.dynamic) {
    scaleLog2Arg = body->addArgument(scalarF32, loc);
    goodStepsArg = body->addArgument(scalarF32, loc);
  }
  for (ConstantOp c : state.buffers)
    bufferArgs.push_back(body->addArgument(c.getType(), c.getLoc()));
  for (BlockArgument arg : oldMain.getArguments())
    dataArgs.push_back(body->addArgument(arg.getType(), arg.getLoc()));
  FailureOr<LossSpec> resolved = resolveLoss(oldMain, o.loss);
  if (failed(resolved))
    return failure();
  spec = std::move(*resolved);
  // Extra data inputs (labels, targets) come after the forward's, so lr
  // and step are added last.
  if (spec->targetType) {
    extraNames.push_back(spec->targetName);
    target = body->addArgument(spec->targetType, loc);
  }
  lr = body->addArgument(scalarF32, loc);
  step = body->addArgument(scalarF32, loc);
  return success();
}

/// Reads the data arguments and the microbatches and pipeline options;
/// writes m and rows. Fails where the batch does not split or a pipeline
/// option is refused.
LogicalResult TrainStepBuilder::checkBatch() {
  m = o.microbatches;
  FailureOr<int64_t> batchRows =
      checkMicrobatches(module.getLoc(), m, oldMain, *spec, dataArgs);
  if (failed(batchRows))
    return failure();
  rows = *batchRows;
  return checkPipelineOptions(module.getLoc(), o.pipelineRanks,
                              !state.buffers.empty(), o.returnGradients,
                              o.dataParallel);
}

/// Reads @main, m and the parameter arguments; writes forward (@main, or
/// with microbatches @main at one microbatch's shapes), stateValues and
/// the loss's denominator.
LogicalResult TrainStepBuilder::prepareForward() {
  b.setInsertionPointToEnd(body);
  forward = oldMain;
  if (m > 1) {
    FailureOr<OwningOpRef<ModuleOp>> t =
        microbatchTemplate(oldMain, m, [&](Value v) { return isBatch(v); });
    if (failed(t))
      return failure();
    microbatchModule = std::move(*t);
    forward = microbatchModule->lookupSymbol<func::FuncOp>("main");
    auto outType =
        cast<RankedTensorType>(forward.getResultTypes()[spec->output]);
    if (target && isBatch(target) &&
        (outType.getRank() == 0 || outType.getDimSize(0) != rows / m))
      return mlir::emitError(module.getLoc())
             << "--microbatches=" << m << ": the loss output's dimension 0 is "
             << "not the batch's " << rows << " rows split by microbatch";
  }
  // Parameters and buffers by name: the forward reads them as constants.
  for (auto [p, arg] : llvm::zip(state.params, paramArgs))
    stateValues[initializerName(p)] = arg;
  bufferValues.assign(bufferArgs.begin(), bufferArgs.end());
  // With microbatches, each one's loss is its sum divided by the whole
  // batch's count, so the losses (and gradients) add up to the batch's.
  // Ops built from here on (loss, gradient norm, loss scaling, optimizer)
  // may be tagged for --cleave-apply-mixed-precision; the backward pass is
  // not.
  if (m > 1) {
    Operation *before = lastOp();
    Emitter e{b, loc};
    denominator = lossDenominator(e, *spec, target);
    llvm::append_range(fp32Ops, opsAfter(before));
  }
  return success();
}

/// Reads the forward program and the options of the pipeline; writes the
/// pipelined microbatch loop into the body, grads, lossF32 and pipeline.
LogicalResult TrainStepBuilder::buildPipelined() {
  Emitter e{b, loc};
  // Loss scaling: the last stage's backward starts from the scale.
  scale = buildLossScale(e, scaling, scaleLog2Arg);
  if (scale) {
    auto outType =
        cast<RankedTensorType>(forward.getResultTypes()[spec->output]);
    seed = e.convert(scale, outType.getElementType());
  }
  PipelineStep ps{b,
                  body,
                  forward,
                  *spec,
                  dataArgs,
                  target,
                  denominator,
                  seed,
                  stateValues,
                  paramArgs,
                  m,
                  [&](Value v) { return isBatch(v); },
                  o.markBackward ? StringRef(attr::kBackward) : ""};
  FailureOr<PipelineResult> result =
      emitPipeline(ps, o.pipelineRanks, o.schedule, o.stageBoundaries);
  if (failed(result))
    return failure();
  pipeline = std::move(*result);
  grads = pipeline->grads;
  lossF32 = pipeline->loss;
  llvm::append_range(fp32Ops, pipeline->lossOps);
  backwardEnd = lastOp();
  return success();
}

/// Microbatch `k` of m: its forward, its loss, its backward, and its
/// gradients added to the previous microbatches' (in this order, so that
/// only one microbatch's activations are live at a time). Reads and writes
/// grads, lossTotal, outputs and bufferValues; the first also writes
/// lossF32 (one microbatch), scale and seed.
LogicalResult TrainStepBuilder::buildMicrobatch(int64_t k) {
  Emitter e{b, loc};
  for (auto [c, v] : llvm::zip(state.buffers, bufferValues))
    stateValues[initializerName(c)] = v;
  Operation *forwardBegin = lastOp();
  outputs = emitMicrobatchForward(e, forward, dataArgs, stateValues, k, m,
                                  [&](Value v) { return isBatch(v); });
  // Running statistics carry from one microbatch to the next; expert
  // biases stay until the step's end.
  for (auto [j, r] : llvm::enumerate(state.bufferResults))
    if (r != ::cleave::training::TrainingState::kStepUpdated)
      bufferValues[j] = outputs[r];

  Operation *forwardEnd = lastOp();
  Value lossValue = buildLoss(e, *spec, outputs,
                              target && m > 1 && isBatch(target)
                                  ? microbatchOf(e, target, k, m)
                                  : target,
                              denominator);
  SmallVector<Operation *> forwardOps = opsAfter(forwardBegin);
  forwardOps.resize(llvm::find(forwardOps, forwardEnd) - forwardOps.begin() +
                    1);
  // The experts' figures for the log, summed over the microbatches (each
  // routes its own tokens; their routers come in the same order).
  SmallVector<RoutingTopK> routing = findRoutingTopKs(forwardOps);
  ExpertMetrics metrics = expertMetrics(e, routing);
  addBiasLoads(e, metrics);
  if (k == 0 || metrics.loads.size() != expertLoads.size()) {
    expertLoads = metrics.loads;
    droppedRows = metrics.dropped;
  } else {
    for (auto [total, load] : llvm::zip(expertLoads, metrics.loads))
      total = e.add(total, load);
    if (droppedRows && metrics.dropped)
      droppedRows = e.add(droppedRows, metrics.dropped);
  }
  if (routerLossCoefficients()) {
    FailureOr<SmallVector<Router>> routers = findRouters(routing);
    if (failed(routers))
      return failure();
    if (routers->empty())
      return emitError(loc)
             << "--moe-aux-loss and --moe-z-loss need a mixture of experts' "
                "router: a top-k over a softmax whose indices reach a "
                "cleave.grouped_matmul (--cleave-recognize-composites{experts} "
                "makes them from exported experts); the model has none";
    // Each microbatch routes its own tokens: their mean is the batch's.
    Value router = e.scale(
        routerLosses(e, *routers, double(o.moeAuxLoss), double(o.moeZLoss)),
        1.0 / double(m));
    lossValue =
        e.add(lossValue,
              e.convert(router, Emitter::typeOf(lossValue).getElementType()));
  }
  if (k == 0) {
    if (m == 1)
      lossF32 = e.convert(lossValue, b.getF32Type());
    // Loss scaling: the backward pass starts from the scale instead of 1.
    scale = buildLossScale(e, scaling, scaleLog2Arg);
    if (scale)
      seed = e.convert(scale, Emitter::typeOf(lossValue).getElementType());
  }
  llvm::append_range(fp32Ops, opsAfter(forwardEnd));

  FailureOr<SmallVector<Value>> gradsK = ::cleave::buildGradients(
      b, lossValue, paramArgs, seed, o.markBackward ? attr::kBackward : "");
  if (failed(gradsK))
    return failure();
  b.setInsertionPointToEnd(body);
  backwardEnd = lastOp();
  if (k == 0) {
    grads = std::move(*gradsK);
    lossTotal = lossValue;
    return success();
  }
  for (auto [g, gk] : llvm::zip(grads, *gradsK))
    g = e.add(g, gk);
  lossTotal = e.add(lossTotal, lossValue);
  llvm::append_range(fp32Ops, opsAfter(backwardEnd));
  return success();
}

/// Random streams (training-mode dropout) draw new bits each step: each
/// key is a hash of the step argument and its salt, computed where the key
/// was (every microbatch and recomputation of an op draws the same bits,
/// as its iotas give the same indices).
void TrainStepBuilder::keyRandomStreams() {
  SmallVector<RngKeyOp> keys;
  newMain.walk([&](RngKeyOp op) { keys.push_back(op); });
  for (RngKeyOp op : keys) {
    OpBuilder kb(op);
    op.replaceAllUsesWith(
        ::mlir::cleave::buildStepKey(kb, op.getLoc(), step, op.getSalt()));
    op.erase();
  }
}

/// Tags each gradient with its parameter (mark-gradients), for sharding
/// policies that lay gradients out (ZeRO-1 keeps them whole, ZeRO-2 splits
/// them) and for cleave-compile --report; the plan builder reads and
/// removes the tags.
void TrainStepBuilder::tagGradients() {
  for (auto [g, p] : llvm::zip(grads, state.params))
    if (Operation *def = o.markGradients ? g.getDefiningOp() : nullptr)
      if (auto name = getInitializerName(p))
        def->setAttr(attr::kGradientOf, name);
}

/// Reads grads and lossF32; writes lossOut (every pipeline rank reports the
/// loss made on the last stage) and, with data parallelism, the averaged
/// grads and the pending gradients of a delayed reduction.
LogicalResult TrainStepBuilder::reduceGradients() {
  lossOut = lossF32;
  if (pipeline)
    lossOut =
        PipelineSumOp::create(b, loc, lossF32.getType(), ValueRange{lossF32},
                              b.getDenseI64ArrayAttr({o.pipelineRanks - 1}));
  if (o.dataParallel <= 1)
    return success();
  ReplicaAverage r{
      b,  body, o.dataParallel, syncMode.kind, state.params, grads, lossOut,
      {}, {}};
  if (failed(averageOverReplicas(module, loc, r)))
    return failure();
  lossOut = r.loss;
  pendingArgs = std::move(r.pendingArgs);
  newPending = std::move(r.newPending);
  return success();
}

/// Reads grads, scale and the optimizer's options; writes clipped (the
/// unscaled and clipped gradients, their norm) and results: each
/// parameter's and its slots' optimizer update.
void TrainStepBuilder::updateParameters() {
  Emitter e{b, loc};
  clipped = clipGradients(e, grads, scale, o.clipGradNorm, scaling.dynamic,
                          pipeline ? &*pipeline : nullptr, body);
  SmallVector<Value> newParams, newSlots;
  OptimizerOptions optimizerOptions{o.optimizer, o.momentum, o.beta1, o.beta2,
                                    o.epsilon};
  for (auto [i, p] : llvm::enumerate(paramArgs)) {
    ArrayRef<Value> pSlots =
        ArrayRef<Value>(slotArgs).slice(i * slots.size(), slots.size());
    StringRef name = getInitializerName(state.params[i]).getValue();
    double decay = !o.noDecay.empty() && noDecayRe.match(name)
                       ? 0.0
                       : double(o.weightDecay);
    SmallVector<Value> updated = buildOptimizerUpdate(
        e, optimizerOptions, p, clipped.clipped[i], pSlots, lr, step, decay);
    if (clipped.finite) {
      // An overflowing step keeps the old parameter and state.
      SmallVector<Value> old{p};
      llvm::append_range(old, pSlots);
      for (auto [u, before] : llvm::zip(updated, old)) {
        auto t = Emitter::typeOf(before);
        Value keep = e.broadcast(clipped.finite, t.getShape());
        u = SelectOp::create(b, loc, t, keep, u, before);
      }
    }
    newParams.push_back(updated[0]);
    newSlots.append(updated.begin() + 1, updated.end());
  }
  results.assign(newParams.begin(), newParams.end());
  llvm::append_range(results, newSlots);
}

/// Reads results and the values of the steps before; writes the rest of
/// the results (loss-scale state, buffers, loss, grad_norm, loss_scale and
/// found_inf, gradients, pending gradients), tags the fp32 ops, schedules
/// the step's tail and returns.
void TrainStepBuilder::finishBody() {
  Emitter e{b, loc};
  std::optional<LossScaleUpdate> scaleUpdate;
  if (scaling.dynamic) {
    scaleUpdate =
        updateLossScale(e, scaling, clipped.finite, scaleLog2Arg, goodStepsArg);
    results.push_back(scaleUpdate->log2);
    results.push_back(scaleUpdate->goodSteps);
  }
  llvm::append_range(results, bufferValues);
  results.push_back(lossOut);
  results.push_back(clipped.norm);
  if (scaleUpdate) {
    results.push_back(scaleUpdate->scale);
    results.push_back(scaleUpdate->foundInf);
  }
  if (o.returnGradients)
    llvm::append_range(results, clipped.unscaled);
  llvm::append_range(results, newPending);
  // The metrics the training loop logs: each router's load as one
  // [routers, experts] tensor (where the routers have as many experts), and
  // the rows dropped at capacity.
  if (!expertLoads.empty() &&
      llvm::all_equal(llvm::map_range(expertLoads, [](Value v) {
        return Emitter::typeOf(v).getDimSize(0);
      }))) {
    int64_t experts = Emitter::typeOf(expertLoads.front()).getDimSize(0);
    SmallVector<Value> rowsOf;
    for (Value load : expertLoads)
      rowsOf.push_back(ReshapeOp::create(
          b, loc, RankedTensorType::get({1, experts}, b.getF32Type()), load));
    results.push_back(
        rowsOf.size() == 1
            ? rowsOf.front()
            : Value(ConcatOp::create(
                  b, loc,
                  RankedTensorType::get({int64_t(rowsOf.size()), experts},
                                        b.getF32Type()),
                  rowsOf, 0)));
    metricNames.push_back("moe.expert_load");
  }
  if (droppedRows) {
    results.push_back(droppedRows);
    metricNames.push_back("moe.dropped_rows");
  }
  if (o.markFp32Ops) {
    llvm::append_range(fp32Ops, opsAfter(backwardEnd));
    for (Operation *op : fp32Ops)
      op->setAttr(attr::kFp32, b.getUnitAttr());
  }
  // Schedule the step's tail (gradient norm, clipping, optimizer update) as
  // early as each op's operands allow: a parameter's update then follows its
  // gradient's last contribution instead of the whole backward pass, so
  // gradients and new optimizer state do not all stay live together.
  // (With clipping every update waits for the global norm, as it must.)
  if (backwardEnd)
    hoistToOperands(backwardEnd->getNextNode());
  func::ReturnOp::create(b, loc, results);
  newMain.setFunctionType(b.getFunctionType(body->getArgumentTypes(),
                                            TypeRange(ValueRange(results))));
}

/// Reads everything above; sets the attributes the plan builder reads and
/// puts the step in @main's place.
void TrainStepBuilder::replaceMain() {
  StepSignature signature{oldMain,        state.params,    state.buffers,
                          slots,          scaling.dynamic, o.returnGradients,
                          o.dataParallel, *spec,           extraNames,
                          pendingArgs,    metricNames};
  annotateStepSignature(newMain, signature);
  oldMain.erase();
  module.push_back(newMain);
  newMain.setSymName("main");
  if (m > 1)
    setMicrobatches(newMain, m);
  if (pipeline)
    newMain->setAttr(attr::kPipelineRanks,
                     b.getI64IntegerAttr(o.pipelineRanks));
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

void BuildTrainStepPass::runOnOperation() {
  if (failed(TrainStepBuilder(*this, getOperation()).build()))
    signalPassFailure();
}
