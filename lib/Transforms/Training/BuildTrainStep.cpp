//===- BuildTrainStep.cpp - A forward program into one training step ------===//
//
// Rewrites @main into
//   @main(params..., optimizer_state..., batch..., lr, step)
//       -> (params'..., optimizer_state'..., loss, grad_norm)
// with gradients from reverse-mode autodiff and the optimizer update in
// cleave ops. See Passes.td for the attributes the plan builder reads.
//
//===----------------------------------------------------------------------===//

#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Transforms/Training/LocalSGD.h"
#include "cleave/Transforms/Training/Passes.h"
#include "cleave/Transforms/Training/Pipeline.h"

#include "Optimizers.h"
#include "TrainStep.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"
#include "cleave/Transforms/Autodiff.h"

#include "TrainableParameters.h"

#include "Layers.h"
#include "cleave/Schedule/Schedule.h"
#include "cleave/Transforms/Sharding/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Regex.h"

#include <limits>

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
};

} // namespace

/// Schedules the ops from `first` to the end of its block: an op that reads
/// a value computed in the step moves right after the last such definition
/// (it runs as soon as its inputs exist); an op that reads only arguments
/// and constants (e.g. `beta1 * m`) moves right before its first user, so it
/// does not hold memory from the start of the step. The ops are pure, so
/// this keeps the program's meaning.
static void hoistToOperands(Operation *first) {
  if (!first)
    return;
  Block *block = first->getBlock();
  SmallVector<Operation *> ops;
  for (Operation *op = first; op; op = op->getNextNode())
    ops.push_back(op);
  auto isComputed = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && def->getBlock() == block && !isa<ConstantOp>(def);
  };
  SmallVector<Operation *> sinkable;
  llvm::SmallPtrSet<Operation *, 16> sinkSet;
  for (Operation *op : ops) {
    // A wait stays where it was put (a delayed reduction's, after the
    // backward pass that it overlaps); what reads it follows it.
    if (isa<DoneOp>(op))
      continue;
    Operation *latest = nullptr;
    for (Value v : op->getOperands()) {
      if (!isComputed(v) || sinkSet.contains(v.getDefiningOp()))
        continue;
      Operation *def = v.getDefiningOp();
      if (!latest || latest->isBeforeInBlock(def))
        latest = def;
    }
    if (latest) {
      op->moveAfter(latest);
    } else {
      sinkable.push_back(op);
      sinkSet.insert(op);
    }
  }
  for (Operation *op : llvm::reverse(sinkable)) {
    Operation *firstUser = nullptr;
    for (Operation *user : op->getUsers())
      if (user->getBlock() == block &&
          (!firstUser || user->isBeforeInBlock(firstUser)))
        firstUser = user;
    if (firstUser)
      op->moveBefore(firstUser);
  }
  // Constants are ignored above and free to move: one made after an op
  // that now reads it (the zero gradient of a parameter a microbatch's loss
  // does not reach, built late in backward) goes right before that op.
  for (Operation *op : ops)
    for (Value v : op->getOperands())
      if (auto constant = v.getDefiningOp<ConstantOp>();
          constant && constant->getBlock() == block &&
          op->isBeforeInBlock(constant))
        constant->moveBefore(op);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

void BuildTrainStepPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto oldMain = module.lookupSymbol<func::FuncOp>("main");
  if (!oldMain || oldMain.getBody().getBlocks().size() != 1) {
    mlir::emitError(module.getLoc())
        << "expected a single-block func.func @main";
    return signalPassFailure();
  }
  for (Type t : llvm::concat<const Type>(oldMain.getArgumentTypes(),
                                         oldMain.getResultTypes()))
    if (!isa<RankedTensorType>(t)) {
      oldMain.emitError() << "@main's arguments and results must be ranked "
                             "tensors, got "
                          << t;
      return signalPassFailure();
    }
  if (optimizer != "sgd" && optimizer != "momentum" &&
      optimizer != "nesterov" && optimizer != "adam" && optimizer != "adamw") {
    mlir::emitError(module.getLoc())
        << "unknown optimizer '" << optimizer
        << "' (expected sgd, momentum, nesterov, adam, adamw)";
    return signalPassFailure();
  }
  llvm::Regex trainRe("^(" + trainable + ")$"), frozenRe("^(" + frozen + ")$"),
      noDecayRe("^(" + noDecay + ")$"), untieRe("^(" + untie + ")$");
  for (auto [flag, re] :
       {std::pair<StringRef, llvm::Regex *>{"trainable", &trainRe},
        {"frozen", &frozenRe},
        {"no-decay", &noDecayRe},
        {"untie", &untieRe}}) {
    std::string reError;
    if (!re->isValid(reError)) {
      mlir::emitError(module.getLoc())
          << "invalid --" << flag << " regex: " << reError;
      return signalPassFailure();
    }
  }

  ::cleave::training::ParameterOptions selection{
      trainable.empty() ? nullptr : &trainRe, trainable,
      frozen.empty() ? nullptr : &frozenRe, untie.empty() ? nullptr : &untieRe};
  FailureOr<::cleave::training::TrainingState> state =
      ::cleave::training::selectTrainingState(oldMain, selection);
  if (failed(state))
    return signalPassFailure();
  SmallVector<ConstantOp> &params = state->params, &buffers = state->buffers;
  SmallVector<unsigned> &bufferResults = state->bufferResults;
  SmallVector<Slot> slots = slotsOf(optimizer);
  bool dynamicScale = lossScale == "dynamic";
  double staticScale = 0.0;
  if (!dynamicScale && lossScale != "none" && !lossScale.empty()) {
    if (StringRef(lossScale).getAsDouble(staticScale) || !(staticScale > 0.0)) {
      mlir::emitError(module.getLoc())
          << "invalid loss-scale '" << lossScale
          << "' (expected none, dynamic or a positive number)";
      return signalPassFailure();
    }
  }
  if (dynamicScale && (!(lossScaleInit > 0.0) || lossScaleWindow < 1)) {
    mlir::emitError(module.getLoc())
        << "dynamic loss scaling needs loss-scale-init > 0 "
           "and loss-scale-window >= 1";
    return signalPassFailure();
  }

  ::cleave::SyncMode syncMode;
  // The outer optimizer is --cleave-build-local-sgd's; only the mode
  // matters here.
  if (std::string error =
          ::cleave::parseSyncMode(sync, /*outerOptimizer=*/"", /*outerLr=*/0.7,
                                  /*outerMomentum=*/0.9, syncMode);
      !error.empty()) {
    mlir::emitError(module.getLoc()) << error;
    return signalPassFailure();
  }
  if (syncMode.kind != ::cleave::SyncMode::Step) {
    std::string refused;
    if (dataParallel <= 1)
      refused = "it needs data-parallel replicas (--data-parallel=N, N > 1)";
    else if (pipelineRanks > 1)
      refused = "pipeline stages are not supported with it";
    else if (syncMode.kind == ::cleave::SyncMode::Delayed && dynamicScale)
      refused = "dynamic loss scaling would unscale the previous step's "
                "gradients by this step's scale";
    if (!refused.empty()) {
      mlir::emitError(module.getLoc()) << "--sync=" << sync << ": " << refused;
      return signalPassFailure();
    }
  }
  const bool localSGD = syncMode.kind == ::cleave::SyncMode::Local;
  const bool delayed = syncMode.kind == ::cleave::SyncMode::Delayed;

  // The new function's entry block: params, slots, data, lr, step. Extra
  // data inputs (labels, targets) are appended as the loss is built, so lr
  // and step are added after.
  OpBuilder b(module.getContext());
  Location loc = oldMain.getLoc();
  auto newMain =
      func::FuncOp::create(b, loc, "train_step", b.getFunctionType({}, {}));
  Block *body = newMain.addEntryBlock();
  SmallVector<Value> paramArgs, slotArgs;
  for (ConstantOp p : params)
    paramArgs.push_back(body->addArgument(p.getType(), p.getLoc()));
  for (ConstantOp p : params)
    for (size_t s = 0; s < slots.size(); ++s)
      slotArgs.push_back(body->addArgument(p.getType(), p.getLoc()));
  // Dynamic loss scaling: log2 of the scale relative to loss-scale-init,
  // and the finite steps since the last overflow (f32 scalars, zeroed).
  auto scalarF32 = RankedTensorType::get({}, b.getF32Type());
  Value scaleLog2Arg, goodStepsArg;
  if (dynamicScale) {
    scaleLog2Arg = body->addArgument(scalarF32, loc);
    goodStepsArg = body->addArgument(scalarF32, loc);
  }
  SmallVector<Value> bufferArgs;
  for (ConstantOp c : buffers)
    bufferArgs.push_back(body->addArgument(c.getType(), c.getLoc()));
  SmallVector<Value> dataArgs;
  for (BlockArgument arg : oldMain.getArguments())
    dataArgs.push_back(body->addArgument(arg.getType(), arg.getLoc()));
  FailureOr<LossSpec> spec = resolveLoss(oldMain, loss);
  if (failed(spec)) {
    newMain.erase();
    return signalPassFailure();
  }
  SmallVector<std::string> extraNames;
  Value target;
  if (spec->targetType) {
    extraNames.push_back(spec->targetName);
    target = body->addArgument(spec->targetType, loc);
  }
  Value lr = body->addArgument(scalarF32, loc);
  Value step = body->addArgument(scalarF32, loc);

  // Microbatches: the batch is dimension 0 of the labels or targets (else
  // of the first data input); data inputs with that many rows are split,
  // the others are read whole by every microbatch.
  const int64_t m = microbatches;
  int64_t rows = -1;
  std::string rowsOf;
  if (target && spec->targetType.getRank() > 0) {
    rows = spec->targetType.getDimSize(0);
    rowsOf = spec->targetName;
  } else {
    for (auto [i, arg] : llvm::enumerate(dataArgs))
      if (auto t = cast<RankedTensorType>(arg.getType()); t.getRank() > 0) {
        rows = t.getDimSize(0);
        auto name = getArgName(oldMain, i);
        rowsOf = name ? name.getValue().str() : "input " + std::to_string(i);
        break;
      }
  }
  if (m < 1 || m > 4096) {
    mlir::emitError(module.getLoc()) << "microbatches must be from 1 to 4096";
    newMain.erase();
    return signalPassFailure();
  }
  if (m > 1 && spec->kind == LossSpec::Scalar) {
    mlir::emitError(module.getLoc())
        << "--microbatches=" << m << " needs --loss: the model's own scalar "
        << "loss combines the rows of the whole batch";
    newMain.erase();
    return signalPassFailure();
  }
  if (m > 1 && (rows < 1 || rows % m != 0)) {
    auto diag = mlir::emitError(module.getLoc()) << "--microbatches=" << m;
    if (rows < 1)
      diag << ": no data input has a batch dimension to split";
    else
      diag << ": the batch of " << rows << " rows (dimension 0 of '" << rowsOf
           << "') does not divide into " << m << " microbatches";
    newMain.erase();
    return signalPassFailure();
  }
  if (pipelineRanks > 1) {
    std::string refused;
    if (pipelineRanks > 1024)
      refused = "at most 1024 pipeline ranks";
    else if (!buffers.empty())
      refused = "model buffers (BatchNorm running statistics) are not "
                "supported in pipeline stages yet";
    else if (returnGradients)
      refused = "--return-gradients is not supported with pipeline stages";
    else if (dataParallel > 1)
      refused = "give data parallelism as a mesh axis (--mesh dp=N,pp=P)";
    if (!refused.empty()) {
      mlir::emitError(module.getLoc())
          << "pipeline-ranks=" << int64_t(pipelineRanks) << ": " << refused;
      newMain.erase();
      return signalPassFailure();
    }
  }
  auto isBatch = [&](Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getRank() > 0 && t.getDimSize(0) == rows;
  };

  b.setInsertionPointToEnd(body);
  // The forward program each microbatch runs: @main itself, or with
  // microbatches @main at one microbatch's shapes.
  OwningOpRef<ModuleOp> microbatchModule;
  func::FuncOp forward = oldMain;
  if (m > 1) {
    FailureOr<OwningOpRef<ModuleOp>> t =
        microbatchTemplate(oldMain, m, [&](Value v) { return isBatch(v); });
    if (failed(t)) {
      newMain.erase();
      return signalPassFailure();
    }
    microbatchModule = std::move(*t);
    forward = microbatchModule->lookupSymbol<func::FuncOp>("main");
    auto outType =
        cast<RankedTensorType>(forward.getResultTypes()[spec->output]);
    if (target && isBatch(target) &&
        (outType.getRank() == 0 || outType.getDimSize(0) != rows / m)) {
      mlir::emitError(module.getLoc())
          << "--microbatches=" << m << ": the loss output's dimension 0 is "
          << "not the batch's " << rows << " rows split by microbatch";
      newMain.erase();
      return signalPassFailure();
    }
  }
  // Parameters and buffers by name: the forward reads them as constants.
  auto initializerName = [](Operation *op) -> StringRef {
    auto c = dyn_cast<ConstantOp>(op);
    auto name = c ? getInitializerName(c) : nullptr;
    return name ? name.getValue() : StringRef();
  };
  llvm::StringMap<Value> stateValues;
  for (auto [p, arg] : llvm::zip(params, paramArgs))
    stateValues[initializerName(p)] = arg;

  // Ops built below (loss, gradient norm, loss scaling, optimizer) may be
  // tagged for --cleave-apply-mixed-precision; the backward pass is not.
  auto opsAfter = [&](Operation *last) {
    SmallVector<Operation *> ops;
    for (Operation &op : llvm::make_range(
             last ? std::next(Block::iterator(last)) : body->begin(),
             body->end()))
      ops.push_back(&op);
    return ops;
  };
  auto lastOp = [&]() -> Operation * {
    return body->empty() ? nullptr : &body->back();
  };
  SmallVector<Operation *> fp32Ops;
  Emitter e{b, loc};
  Type f32 = b.getF32Type();
  // With microbatches, each one's loss is its sum divided by the whole
  // batch's count, so the losses (and gradients) add up to the batch's.
  Value denominator;
  if (m > 1) {
    Operation *before = lastOp();
    denominator = lossDenominator(e, *spec, target);
    llvm::append_range(fp32Ops, opsAfter(before));
  }

  // Per microbatch: forward, loss, backward, and the gradients added to the
  // previous microbatches' (in this order, so that only one microbatch's
  // activations are live at a time).
  SmallVector<Value> outputs, bufferValues(bufferArgs);
  Value lossTotal, lossF32, seed, scale;
  FailureOr<SmallVector<Value>> grads = SmallVector<Value>();
  Operation *backwardEnd = nullptr;
  std::optional<PipelineResult> pipeline;
  if (pipelineRanks > 1) {
    // Loss scaling: the last stage's backward starts from the scale.
    if (dynamicScale)
      scale =
          e.mul(e.scalar(f32, lossScaleInit),
                e.binary(BinaryKind::pow, e.scalar(f32, 2.0), scaleLog2Arg));
    else if (staticScale > 0.0)
      scale = e.scalar(f32, staticScale);
    if (scale) {
      auto outType =
          cast<RankedTensorType>(forward.getResultTypes()[spec->output]);
      seed = e.convert(scale, outType.getElementType());
    }
    PipelineStep step{b,
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
                      isBatch,
                      markBackward ? StringRef(attr::kBackward) : ""};
    FailureOr<PipelineResult> result =
        emitPipeline(step, pipelineRanks, schedule, stageBoundaries);
    if (failed(result)) {
      newMain.erase();
      return signalPassFailure();
    }
    pipeline = std::move(*result);
    grads = pipeline->grads;
    lossF32 = pipeline->loss;
    llvm::append_range(fp32Ops, pipeline->lossOps);
    backwardEnd = lastOp();
  }
  for (int64_t k = 0; k < (pipeline ? 0 : m); ++k) {
    IRMapping mapping;
    for (auto [arg, full] : llvm::zip(forward.getArguments(), dataArgs))
      mapping.map(arg, m > 1 && isBatch(full) ? microbatchOf(e, full, k, m)
                                              : Value(full));
    for (auto [c, v] : llvm::zip(buffers, bufferValues))
      stateValues[initializerName(c)] = v;
    outputs.clear();
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
      Operation *copy = b.clone(op, mapping);
      if (m > 1) {
        copy->removeAttr(kShardingAttrName);
        copy->removeAttr(kConflictsAttrName);
      }
    }
    // Running statistics carry from one microbatch to the next.
    for (auto [j, r] : llvm::enumerate(bufferResults))
      bufferValues[j] = outputs[r];

    Operation *forwardEnd = lastOp();
    Value lossValue = buildLoss(e, *spec, outputs,
                                target && m > 1 && isBatch(target)
                                    ? microbatchOf(e, target, k, m)
                                    : target,
                                denominator);
    if (k == 0) {
      if (m == 1)
        lossF32 = e.convert(lossValue, f32);
      // Loss scaling: the backward pass starts from the scale instead of 1.
      if (dynamicScale)
        scale =
            e.mul(e.scalar(f32, lossScaleInit),
                  e.binary(BinaryKind::pow, e.scalar(f32, 2.0), scaleLog2Arg));
      else if (staticScale > 0.0)
        scale = e.scalar(f32, staticScale);
      if (scale)
        seed = e.convert(scale, Emitter::typeOf(lossValue).getElementType());
    }
    llvm::append_range(fp32Ops, opsAfter(forwardEnd));

    FailureOr<SmallVector<Value>> gradsK = ::cleave::buildGradients(
        b, lossValue, paramArgs, seed, markBackward ? attr::kBackward : "");
    if (failed(gradsK)) {
      newMain.erase();
      return signalPassFailure();
    }
    b.setInsertionPointToEnd(body);
    backwardEnd = lastOp();
    if (k == 0) {
      grads = std::move(gradsK);
      lossTotal = lossValue;
      continue;
    }
    for (auto [g, gk] : llvm::zip(*grads, *gradsK))
      g = e.add(g, gk);
    lossTotal = e.add(lossTotal, lossValue);
    llvm::append_range(fp32Ops, opsAfter(backwardEnd));
  }
  if (m > 1 && !pipeline)
    lossF32 = e.convert(lossTotal, f32);
  // Random streams (training-mode dropout) draw new bits each step: each
  // key is a hash of the step argument and its salt, computed where the
  // key was (every microbatch and recomputation of an op draws the same
  // bits, as its iotas give the same indices).
  SmallVector<RngKeyOp> keys;
  newMain.walk([&](RngKeyOp op) { keys.push_back(op); });
  for (RngKeyOp op : keys) {
    OpBuilder kb(op);
    op.replaceAllUsesWith(
        ::mlir::cleave::buildStepKey(kb, op.getLoc(), step, op.getSalt()));
    op.erase();
  }

  // Tag each gradient with its parameter, for sharding policies that lay
  // gradients out (ZeRO-1 keeps them whole, ZeRO-2 splits them) and for
  // cleave-compile --report; the plan builder reads and removes the tags.
  for (auto [g, p] : llvm::zip(*grads, params))
    if (Operation *def = markGradients ? g.getDefiningOp() : nullptr)
      if (auto name = getInitializerName(p))
        def->setAttr(attr::kGradientOf, name);

  // Data parallelism: each rank holds the same parameters and 1/N of the
  // batch; the mean over the global batch is the mean of the ranks' means
  // (equal shards), so the gradients and the reported loss are averaged
  // over dp before anything reads them.
  Value lossOut = lossF32;
  // --sync=delayed: the pending gradients (states) and their new values.
  SmallVector<Value> pendingArgs, newPending;
  // Pipelines: every rank reports the loss made on the last stage.
  if (pipeline)
    lossOut =
        PipelineSumOp::create(b, loc, lossF32.getType(), ValueRange{lossF32},
                              b.getDenseI64ArrayAttr({pipelineRanks - 1}));
  if (dataParallel > 1) {
    if (!module.getOps<MeshOp>().empty()) {
      mlir::emitError(module.getLoc())
          << "data-parallel=" << dataParallel
          << " needs a module without a cleave.mesh";
      newMain.erase();
      return signalPassFailure();
    }
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    MeshOp::create(mb, loc, "mesh", mb.getStrArrayAttr({"dp"}),
                   mb.getDenseI64ArrayAttr({dataParallel}));
    auto mesh = FlatSymbolRefAttr::get(b.getContext(), "mesh");
    ArrayAttr axes = b.getStrArrayAttr({"dp"});
    auto average = [&](Value v, StringRef what) -> Value {
      OperationState state(loc, AllReduceOp::getOperationName());
      state.addOperands(v);
      state.addTypes(v.getType());
      state.addAttribute(
          "kind", CollectiveReduceKindAttr::get(b.getContext(),
                                                CollectiveReduceKind::avg));
      state.addAttribute("mesh", mesh);
      state.addAttribute("mesh_axes", axes);
      Operation *op = b.create(state);
      setPhase(op, what);
      return op->getResult(0);
    };
    if (delayed) {
      // Each step applies the previous step's gradients, averaged by an
      // all-reduce that starts before this step's forward pass and is
      // waited for after its backward pass; this step's own gradients
      // become the pending ones (zeros before step 0).
      Operation *first = &body->front();
      for (auto [g, p] : llvm::zip(*grads, params)) {
        Value pending = body->addArgument(g.getType(), p.getLoc());
        pendingArgs.push_back(pending);
        newPending.push_back(g);
        Value started;
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(first);
          started = average(pending, "delayed gradient");
        }
        started.getDefiningOp()->setAttr("async", b.getUnitAttr());
        g = DoneOp::create(b, loc, started).getResult();
      }
    }
    for (auto [g, p] : llvm::zip(*grads, params)) {
      if (localSGD || delayed)
        break;
      auto name = getInitializerName(p);
      g = average(
          g, ("gradient of " + (name ? name.getValue() : "a parameter")).str());
    }
    // Local SGD reports each replica's own loss (rank 0's is logged): the
    // step communicates nothing.
    if (!localSGD)
      lossOut = average(lossF32, "loss");
    // Delayed: the loss is reduced behind the gradients too (a blocking
    // reduction would wait on the communication stream for all of them
    // between the forward and the backward pass), waited for at the end.
    if (delayed) {
      lossOut.getDefiningOp()->setAttr("async", b.getUnitAttr());
      lossOut = DoneOp::create(b, loc, lossOut).getResult();
    }
  }

  // Unscale in f32 (the gradients keep their element type).
  SmallVector<Value> unscaled(*grads);
  if (scale) {
    Value inv = e.div(e.scalar(f32, 1.0), scale);
    for (Value &g : unscaled) {
      Type gt = Emitter::typeOf(g).getElementType();
      g = e.convert(e.scale(e.convert(g, f32), inv), gt);
    }
  }

  // Global gradient norm, and clipping to it.
  Value sumSq = e.scalar(b.getF32Type(), 0.0);
  if (pipeline) {
    // Each rank sums the squares of the gradients it makes (a parameter
    // read on several ranks counts once, on the first), and the partial
    // sums are added over the pipeline.
    SmallVector<Value> partials;
    SmallVector<int64_t> ranks;
    for (int64_t r = 0; r < pipelineRanks; ++r) {
      Operation *before = lastOp();
      Value partial = e.scalar(b.getF32Type(), 0.0);
      for (auto [g, readers] : llvm::zip(unscaled, pipeline->readers))
        if (!readers.empty() && readers.front() == r)
          partial =
              e.add(partial, e.convert(e.sumAll(e.mul(g, g)), b.getF32Type()));
      tagPipelineRank(body, before, r);
      partials.push_back(partial);
      ranks.push_back(r);
    }
    sumSq = PipelineSumOp::create(b, loc, partials.front().getType(), partials,
                                  b.getDenseI64ArrayAttr(ranks));
  }
  for (Value g : pipeline ? SmallVector<Value>() : unscaled)
    sumSq = e.add(sumSq, e.convert(e.sumAll(e.mul(g, g)), b.getF32Type()));
  Value gradNorm = e.unary(UnaryKind::sqrt, sumSq);
  // Dynamic scaling: a step is finite when the sum of squares is (NaN and
  // infinity both fail the ordered comparison).
  Value finite;
  if (dynamicScale)
    finite = CompareOp::create(
        b, loc, scalarF32.clone(b.getI1Type()), CompareKind::lt, sumSq,
        e.scalar(f32, std::numeric_limits<double>::infinity()));
  SmallVector<Value> clipped(unscaled);
  if (clipGradNorm > 0.0) {
    Value factor = e.div(e.scalar(b.getF32Type(), clipGradNorm),
                         e.add(gradNorm, e.scalar(b.getF32Type(), 1e-6)));
    factor = e.binary(BinaryKind::min, factor, e.scalar(b.getF32Type(), 1.0));
    for (Value &g : clipped)
      g = e.scale(g, e.convert(factor, Emitter::typeOf(g).getElementType()));
  }

  SmallVector<Value> newParams, newSlots;
  OptimizerOptions optimizerOptions{optimizer, momentum, beta1, beta2, epsilon};
  for (auto [i, p] : llvm::enumerate(paramArgs)) {
    ArrayRef<Value> pSlots =
        ArrayRef<Value>(slotArgs).slice(i * slots.size(), slots.size());
    StringRef name = getInitializerName(params[i]).getValue();
    double decay =
        !noDecay.empty() && noDecayRe.match(name) ? 0.0 : double(weightDecay);
    SmallVector<Value> updated = buildOptimizerUpdate(
        e, optimizerOptions, p, clipped[i], pSlots, lr, step, decay);
    if (finite) {
      // An overflowing step keeps the old parameter and state.
      SmallVector<Value> old{p};
      llvm::append_range(old, pSlots);
      for (auto [u, o] : llvm::zip(updated, old)) {
        auto t = Emitter::typeOf(o);
        Value keep = e.broadcast(finite, t.getShape());
        u = SelectOp::create(b, loc, t, keep, u, o);
      }
    }
    newParams.push_back(updated[0]);
    newSlots.append(updated.begin() + 1, updated.end());
  }
  SmallVector<Value> results(newParams);
  llvm::append_range(results, newSlots);
  Value newScale, foundInf;
  if (dynamicScale) {
    // good' = finite ? good + 1 : 0; grow = good' >= window;
    // log2' = finite ? log2 + grow : log2 - 1; good'' = grow ? 0 : good'.
    Value zero = e.scalar(f32, 0.0), one = e.scalar(f32, 1.0);
    auto select = [&](Value c, Value x, Value y) -> Value {
      return SelectOp::create(b, loc, scalarF32, c, x, y);
    };
    Value good = select(finite, e.add(goodStepsArg, one), zero);
    Value grow = CompareOp::create(b, loc, scalarF32.clone(b.getI1Type()),
                                   CompareKind::ge, good,
                                   e.scalar(f32, (double)lossScaleWindow));
    Value log2 = select(finite, e.add(scaleLog2Arg, select(grow, one, zero)),
                        e.sub(scaleLog2Arg, one));
    // Keep the scale within f32 (2^-126 .. 2^127 of loss-scale-init).
    log2 = e.binary(BinaryKind::max,
                    e.binary(BinaryKind::min, log2, e.scalar(f32, 127.0)),
                    e.scalar(f32, -126.0));
    good = select(grow, zero, good);
    results.push_back(log2);
    results.push_back(good);
    newScale = e.mul(e.scalar(f32, lossScaleInit),
                     e.binary(BinaryKind::pow, e.scalar(f32, 2.0), log2));
    foundInf = select(finite, zero, one);
  }
  for (unsigned i : bufferResults)
    results.push_back(outputs[i]);
  results.push_back(lossOut);
  results.push_back(gradNorm);
  if (dynamicScale) {
    results.push_back(newScale);
    results.push_back(foundInf);
  }
  if (returnGradients)
    llvm::append_range(results, unscaled);
  llvm::append_range(results, newPending);
  if (markFp32Ops) {
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

  // Attributes for the plan builder.
  unsigned argIndex = 0;
  // A state initialized from an initializer: a parameter or a buffer.
  auto markInitializerState = [&](ConstantOp c, StateKind kind) {
    StringRef name = getInitializerName(c).getValue();
    setArgName(newMain, argIndex, name);
    setArgState(newMain, argIndex, kind);
    setArgParameter(newMain, argIndex, name);
    setArgInitialValue(newMain, argIndex, c.getValue());
    for (StringRef copied :
         {attr::kUntiedFrom, attr::kUntiedNode, attr::kExternalData})
      if (Attribute a = c->getAttr(copied))
        newMain.setArgAttr(argIndex, copied, a);
    ++argIndex;
  };
  // An optimizer slot of `parameter`.
  auto markSlot = [&](unsigned index, StringRef parameter, StringRef slot) {
    setArgName(newMain, index, (parameter + "." + slot).str());
    setArgState(newMain, index, StateKind::optimizer_state);
    setArgParameter(newMain, index, parameter);
    setArgSlot(newMain, index, slot);
  };
  for (ConstantOp p : params)
    markInitializerState(p, StateKind::parameter);
  for (ConstantOp p : params) {
    StringRef name = getInitializerName(p).getValue();
    for (const Slot &s : slots)
      markSlot(argIndex++, name, s.name);
  }
  if (dynamicScale)
    for (StringRef slot : {"loss_scale_log2", "good_steps"})
      markSlot(argIndex++, "__trainer__", slot);
  for (ConstantOp c : buffers)
    markInitializerState(c, StateKind::buffer);
  // Data parallel: every data input is this rank's rows of the global batch.
  auto shardData = [&](unsigned index) {
    if (dataParallel <= 1)
      return;
    auto type = cast<RankedTensorType>(newMain.getArgument(index).getType());
    if (type.getRank() == 0)
      return;
    MLIRContext *ctx = b.getContext();
    SmallVector<DimShardingAttr> dims(
        type.getRank(), DimShardingAttr::get(ctx, {}, /*closed=*/true, -1));
    dims[0] = DimShardingAttr::get(ctx, {b.getStringAttr("dp")}, true, -1);
    newMain.setArgAttr(index, kShardingAttrName,
                       TensorShardingAttr::get(
                           ctx, FlatSymbolRefAttr::get(ctx, "mesh"), dims));
  };
  for (unsigned i = 0; i < oldMain.getNumArguments(); ++i, ++argIndex) {
    for (StringRef copied : {attr::kName, attr::kValidRange})
      if (Attribute value = oldMain.getArgAttr(i, copied))
        newMain.setArgAttr(argIndex, copied, value);
    setArgRole(newMain, argIndex, Role::data);
    shardData(argIndex);
  }
  for (const std::string &name : extraNames) {
    setArgName(newMain, argIndex, name);
    // Cross-entropy labels are classes of the logits' last dimension, or
    // the ignore index (the runtime checks the data it feeds).
    if (spec->kind == LossSpec::CrossEntropy) {
      auto logits =
          cast<RankedTensorType>(oldMain.getResultTypes()[spec->output]);
      newMain.setArgAttr(argIndex, attr::kValidRange,
                         b.getDenseI64ArrayAttr(
                             {0, logits.getShape().back(), spec->ignoreIndex}));
    }
    shardData(argIndex);
    setArgRole(newMain, argIndex++, Role::data);
  }
  for (Role role : {Role::lr, Role::step}) {
    setArgName(newMain, argIndex, stringifyRole(role));
    setArgRole(newMain, argIndex++, role);
  }
  unsigned numState = newParams.size() + newSlots.size() +
                      (dynamicScale ? 2 : 0) + buffers.size();
  for (unsigned i = 0; i < numState; ++i) {
    setResultUpdates(newMain, i, i);
    newMain.setResultAttr(i, attr::kName, getArgName(newMain, i));
  }
  // The step's scalar outputs, each named after its role.
  SmallVector<Role> scalars = {Role::loss, Role::grad_norm};
  if (dynamicScale)
    scalars.append({Role::loss_scale, Role::found_inf});
  for (auto [k, role] : llvm::enumerate(scalars)) {
    setResultName(newMain, numState + k, stringifyRole(role));
    setResultRole(newMain, numState + k, role);
  }
  if (returnGradients) {
    unsigned first = numState + scalars.size();
    for (auto [i, p] : llvm::enumerate(params)) {
      StringRef name = getInitializerName(p).getValue();
      setResultName(newMain, first + i, ("grad." + name).str());
      setResultRole(newMain, first + i, Role::gradient);
    }
  }

  // The pending gradients: optimizer state of each parameter (zeroed), each
  // rank's own until its all-reduce.
  unsigned firstPendingResult =
      numState + scalars.size() + (returnGradients ? params.size() : 0);
  for (auto [i, arg] : llvm::enumerate(pendingArgs)) {
    unsigned index = cast<BlockArgument>(arg).getArgNumber();
    StringRef name = getInitializerName(params[i]).getValue();
    markSlot(index, name, "pending_grad");
    newMain.setArgAttr(index, attr::kVarying, b.getStrArrayAttr({"dp"}));
    setResultUpdates(newMain, firstPendingResult + i, index);
    setResultName(newMain, firstPendingResult + i,
                  (name + ".pending_grad").str());
  }

  oldMain.erase();
  module.push_back(newMain);
  newMain.setSymName("main");
  if (m > 1)
    setMicrobatches(newMain, m);
  if (pipeline)
    newMain->setAttr(attr::kPipelineRanks, b.getI64IntegerAttr(pipelineRanks));
}
