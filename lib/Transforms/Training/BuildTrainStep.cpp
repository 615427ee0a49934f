//===- BuildTrainStep.cpp - A forward program into one training step -------===//
//
// Rewrites @main into
//   @main(params..., optimizer_state..., batch..., lr, step)
//       -> (params'..., optimizer_state'..., loss, grad_norm)
// with gradients from reverse-mode autodiff and the optimizer update in
// cleave ops. See Passes.td for the attributes the plan builder reads.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Training/LocalSGD.h"
#include "cleave/Transforms/Training/Passes.h"
#include "cleave/Transforms/Training/Pipeline.h"
#include "cleave/Transforms/Training/Recompute.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"
#include "cleave/Transforms/Autodiff.h"

#include "TrainableParameters.h"

#include "cleave/Transforms/Sharding/Passes.h"
#include "cleave/Pipeline/Schedule.h"
#include "Layers.h"

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

namespace {

//===----------------------------------------------------------------------===//
// Building cleave ops
//===----------------------------------------------------------------------===//

/// Small helpers that emit cleave ops at one place.
struct Emitter {
  OpBuilder &b;
  Location loc;

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  Value splat(Type elem, ArrayRef<int64_t> shape, double value) {
    auto type = RankedTensorType::get(shape, elem);
    Attribute scalar = isa<FloatType>(elem)
                           ? Attribute(b.getFloatAttr(elem, value))
                           : Attribute(b.getIntegerAttr(elem, (int64_t)value));
    return ConstantOp::create(b, loc, type,
                              DenseElementsAttr::get(type, scalar));
  }
  Value scalar(Type elem, double value) { return splat(elem, {}, value); }
  /// Broadcasts a 0-d tensor to `shape`.
  Value broadcast(Value v, ArrayRef<int64_t> shape) {
    auto t = typeOf(v);
    if (t.getShape() == shape)
      return v;
    return BroadcastInDimOp::create(
        b, loc, RankedTensorType::get(shape, t.getElementType()), v,
        ArrayRef<int64_t>{});
  }
  Value convert(Value v, Type elem) {
    auto t = typeOf(v);
    if (t.getElementType() == elem)
      return v;
    return ConvertOp::create(b, loc, t.clone(elem), v);
  }
  Value binary(BinaryKind kind, Value lhs, Value rhs) {
    return BinaryOp::create(b, loc, lhs.getType(), kind, lhs, rhs);
  }
  Value unary(UnaryKind kind, Value v) {
    return UnaryOp::create(b, loc, v.getType(), kind, v);
  }
  Value add(Value x, Value y) { return binary(BinaryKind::add, x, y); }
  Value sub(Value x, Value y) { return binary(BinaryKind::sub, x, y); }
  Value mul(Value x, Value y) { return binary(BinaryKind::mul, x, y); }
  Value div(Value x, Value y) { return binary(BinaryKind::div, x, y); }
  /// `s * x` for a 0-d `s` of x's element type.
  Value scale(Value x, Value s) { return mul(x, broadcast(s, typeOf(x).getShape())); }
  /// `c * x` for a compile-time constant c.
  Value scale(Value x, double c) {
    auto t = typeOf(x);
    return mul(x, splat(t.getElementType(), t.getShape(), c));
  }
  /// Sum of all elements, as a 0-d tensor.
  Value sumAll(Value v) {
    auto t = typeOf(v);
    if (t.getRank() == 0)
      return v;
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < t.getRank(); ++d)
      dims.push_back(d);
    return ReduceOp::create(b, loc, RankedTensorType::get({}, t.getElementType()),
                            ReduceKind::sum, v, dims);
  }
};

/// The loss a training step minimizes (see resolveLoss).
struct LossSpec {
  enum Kind { Scalar, Mse, CrossEntropy } kind = Scalar;
  unsigned output = 0;        ///< Index of the forward output it reads.
  RankedTensorType targetType; ///< The added data input; null for Scalar.
  std::string targetName;
  int64_t ignoreIndex = -100;
};

/// One state slot an optimizer keeps per parameter.
struct Slot {
  StringRef name;
};

SmallVector<Slot> slotsOf(StringRef optimizer) {
  if (optimizer == "momentum" || optimizer == "nesterov")
    return {{"momentum"}};
  if (optimizer == "adam" || optimizer == "adamw")
    return {{"adam_m"}, {"adam_v"}};
  return {};
}

/// The step being built, as the pipelined microbatch loop sees it.
struct PipelineStep {
  OpBuilder &b;
  Block *body;
  /// The forward program at one microbatch's shapes.
  func::FuncOp forward;
  const LossSpec &spec;
  /// The step's data arguments (whole batch), in the forward's order.
  ArrayRef<Value> dataArgs;
  /// Labels or targets (whole batch), or null.
  Value target;
  /// The whole batch's loss denominator (microbatches), or null.
  Value denominator;
  /// The loss's cotangent (loss scaling), or null for 1.
  Value seed;
  /// Initializer name -> parameter argument.
  const llvm::StringMap<Value> &stateValues;
  ArrayRef<Value> paramArgs;
  int64_t microbatches;
  std::function<bool(Value)> isBatch;
  StringRef backwardTag;
};

/// What the loop leaves for the rest of the step.
struct PipelineResult {
  /// Per parameter: its gradient over all microbatches (a pipeline_sum when
  /// several ranks read it), and the ranks that read it.
  SmallVector<Value> grads;
  SmallVector<SmallVector<int64_t>> readers;
  /// The sum of the microbatches' losses, made on the last stage's rank.
  Value loss;
  /// Loss ops, which stay f32 under mixed precision.
  SmallVector<Operation *> lossOps;
  int64_t ranks = 1;
};

struct BuildTrainStepPass
    : public ::cleave::impl::BuildTrainStepPassBase<BuildTrainStepPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  /// Parses --loss against the forward program: which output, which
  /// kind, and the data input it adds (labels, targets).
  FailureOr<LossSpec> resolveLoss(func::FuncOp oldMain);
  /// The loss of `outputs` against `target` (null for the model's own
  /// scalar loss). With `denominator` set (microbatches; not for a scalar
  /// loss), the sum over this microbatch is divided by it instead of by its
  /// own count.
  Value buildLoss(Emitter &e, const LossSpec &spec, ArrayRef<Value> outputs,
                  Value target, Value denominator = {});
  /// What the loss of the whole batch divides by: the labels not ignored
  /// (cross-entropy) or the elements (mse), so that microbatch losses add
  /// up to it.
  Value lossDenominator(Emitter &e, const LossSpec &spec, Value target);
  /// The microbatch loop of a pipelined step (pipeline-ranks > 1).
  FailureOr<PipelineResult> emitPipeline(PipelineStep &step);
  /// Returns (new parameter, new slots...).
  SmallVector<Value> update(Emitter &e, Value param, Value grad,
                            ArrayRef<Value> slots, Value lr, Value step,
                            double decay);
};

} // namespace

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

/// The index of the forward output named `name` (the `cleave.name` result
/// attribute).
static std::optional<unsigned> findOutput(func::FuncOp main, StringRef name) {
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    if (auto attr = main.getResultAttrOfType<StringAttr>(i, "cleave.name"))
      if (attr.getValue() == name)
        return i;
  return std::nullopt;
}

FailureOr<LossSpec> BuildTrainStepPass::resolveLoss(func::FuncOp oldMain) {
  LossSpec spec;
  StringRef text = loss;
  if (text.empty()) {
    for (auto [i, t] : llvm::enumerate(oldMain.getResultTypes())) {
      auto type = cast<RankedTensorType>(t);
      if (type.getRank() == 0 && isa<FloatType>(type.getElementType())) {
        spec.output = i;
        return spec;
      }
    }
    return oldMain.emitError()
           << "the model has no scalar float output to train on; add a loss "
              "with --loss=cross_entropy:<logits>,<labels> or "
              "--loss=mse:<output>,<target>";
  }
  auto [kind, rest] = text.split(':');
  SmallVector<StringRef> parts;
  rest.split(parts, ',');
  if ((kind != "cross_entropy" && kind != "mse") || parts.size() < 2 ||
      parts.size() > (kind == "cross_entropy" ? 3u : 2u))
    return oldMain.emitError()
           << "invalid --loss '" << text
           << "': expected cross_entropy:<logits>,<labels>[,<ignore_index>] "
              "or mse:<output>,<target>";
  std::optional<unsigned> out = findOutput(oldMain, parts[0]);
  if (!out) {
    auto diag = oldMain.emitError()
                << "--loss names '" << parts[0]
                << "', which is not a model output; outputs are:";
    for (unsigned i = 0; i < oldMain.getNumResults(); ++i)
      if (auto a = oldMain.getResultAttrOfType<StringAttr>(i, "cleave.name"))
        diag << " '" << a.getValue() << "'";
    return failure();
  }
  spec.output = *out;
  auto outType = cast<RankedTensorType>(oldMain.getResultTypes()[*out]);
  if (!isa<FloatType>(outType.getElementType()))
    return oldMain.emitError() << "loss output '" << parts[0]
                               << "' must be a float tensor, got " << outType;
  spec.targetName = parts[1].str();
  if (kind == "mse") {
    spec.kind = LossSpec::Mse;
    spec.targetType = outType;
    return spec;
  }
  // Cross-entropy over the last dimension; labels index it.
  if (outType.getRank() < 1)
    return oldMain.emitError() << "cross-entropy logits '" << parts[0]
                               << "' need a class dimension";
  if (parts.size() == 3 && parts[2].getAsInteger(10, spec.ignoreIndex))
    return oldMain.emitError() << "invalid ignore index '" << parts[2] << "'";
  spec.kind = LossSpec::CrossEntropy;
  spec.targetType = RankedTensorType::get(outType.getShape().drop_back(),
                                          IntegerType::get(oldMain.getContext(), 64));
  return spec;
}

/// The weights of the labels a cross-entropy counts: 1 where the label is
/// not the ignore index, as `f`.
static Value labelWeights(Emitter &e, const LossSpec &spec, Value labels,
                          Type f) {
  auto labelType = Emitter::typeOf(labels);
  Value valid = CompareOp::create(
      e.b, e.loc, labelType.clone(e.b.getI1Type()), CompareKind::ne, labels,
      e.splat(labelType.getElementType(), labelType.getShape(),
              spec.ignoreIndex));
  return e.convert(valid, f);
}

Value BuildTrainStepPass::buildLoss(Emitter &e, const LossSpec &spec,
                                    ArrayRef<Value> outputs, Value target,
                                    Value denominator) {
  Value out = outputs[spec.output];
  auto outType = Emitter::typeOf(out);
  Type f = outType.getElementType();
  if (spec.kind == LossSpec::Scalar)
    return out;
  if (spec.kind == LossSpec::Mse) {
    Value d = e.sub(out, target);
    Value sum = e.sumAll(e.mul(d, d));
    return e.div(sum, denominator
                          ? e.convert(denominator, f)
                          : e.scalar(f, std::max<int64_t>(
                                            outType.getNumElements(), 1)));
  }
  int64_t rank = outType.getRank();
  ArrayRef<int64_t> labelShape = outType.getShape().drop_back();
  auto i64 = e.b.getI64Type();
  Value labels = target;
  Value logProbs = LogSoftmaxOp::create(e.b, e.loc, outType, out, rank - 1);
  Value classes = IotaOp::create(e.b, e.loc, outType.clone(i64), rank - 1);
  SmallVector<int64_t> keep;
  for (int64_t d = 0; d + 1 < rank; ++d)
    keep.push_back(d);
  Value labelsB = BroadcastInDimOp::create(e.b, e.loc, outType.clone(i64),
                                           labels, keep);
  auto boolType = outType.clone(e.b.getI1Type());
  Value onehot = CompareOp::create(e.b, e.loc, boolType, CompareKind::eq,
                                   classes, labelsB);
  Value picked = SelectOp::create(e.b, e.loc, outType, onehot, logProbs,
                                  e.splat(f, outType.getShape(), 0.0));
  auto rowType = RankedTensorType::get(labelShape, f);
  picked = ReduceOp::create(e.b, e.loc, rowType, ReduceKind::sum, picked,
                            ArrayRef<int64_t>{rank - 1});
  Value weight = labelWeights(e, spec, labels, f);
  Value total = e.sumAll(e.mul(picked, weight));
  Value count =
      denominator
          ? e.convert(denominator, f)
          : e.binary(BinaryKind::max, e.sumAll(weight), e.scalar(f, 1.0));
  return e.unary(UnaryKind::neg, e.div(total, count));
}

Value BuildTrainStepPass::lossDenominator(Emitter &e, const LossSpec &spec,
                                          Value target) {
  Type f32 = e.b.getF32Type();
  if (spec.kind == LossSpec::CrossEntropy)
    return e.binary(BinaryKind::max,
                    e.sumAll(labelWeights(e, spec, target, f32)),
                    e.scalar(f32, 1.0));
  // Mean squared error (a model's own scalar loss is refused).
  return e.scalar(f32, (double)std::max<int64_t>(
                           spec.targetType.getNumElements(), 1));
}

/// Microbatch `k` of `m` of a batch input along `dim`: rows k, k + m,
/// k + 2m, ... (viewed as [rows / m, m, ...], the slice of the second of
/// those), so that a split of the batch over dp ranks stays a split of
/// every microbatch and slicing needs no communication.
static Value microbatchOf(Emitter &e, Value v, int64_t k, int64_t m,
                          int64_t dim = 0) {
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
  Value slice = SliceOp::create(e.b, e.loc, type.clone(one), g,
                                e.b.getDenseI64ArrayAttr(start),
                                e.b.getDenseI64ArrayAttr(limit),
                                e.b.getDenseI64ArrayAttr(strides));
  shape[dim] /= m;
  return ReshapeOp::create(e.b, e.loc, type.clone(shape), slice);
}

/// The name of the sequential mesh axis a microbatch template is
/// partitioned over.
static constexpr StringLiteral kMicrobatchMesh = "microbatches";

/// The forward program at one microbatch's shapes: `main` partitioned by
/// the SPMD partitioner over a mesh of `m` "ranks" that are the
/// microbatches, its batch inputs (`isBatch`) split by rows, so every op
/// gets the shapes it has on 1/m of the batch. A microbatch's own slice of
/// a whole tensor (a constant or iota with a batch dimension) is a
/// `cleave.all_slice` over that mesh, which the caller replaces per
/// microbatch. Fails, naming the op, where a microbatch would need the
/// rows of another (any other collective: batch statistics, a mean over
/// the batch).
static FailureOr<OwningOpRef<ModuleOp>>
microbatchTemplate(func::FuncOp main, int64_t m,
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
    SmallVector<DimShardingAttr> dims(
        type.getRank(), DimShardingAttr::get(ctx, {}, false, -1));
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
        << "--microbatches=" << m << ": the forward program combines the "
        << "rows of the batch here";
    if (auto why = op->getAttrOfType<StringAttr>("cleave.phase"))
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
// Optimizers
//===----------------------------------------------------------------------===//

SmallVector<Value> BuildTrainStepPass::update(Emitter &e, Value p, Value g,
                                              ArrayRef<Value> slots, Value lr,
                                              Value step, double decay) {
  auto type = Emitter::typeOf(p);
  Type f = type.getElementType();
  ArrayRef<int64_t> shape = type.getShape();
  Value lrP = e.convert(lr, f);
  bool decoupled = optimizer == "adamw";
  if (decay != 0.0 && !decoupled)
    g = e.add(g, e.scale(p, decay));
  auto decayed = [&](Value delta) {
    // p - lr * (delta + wd * p) for AdamW, p - lr * delta otherwise.
    if (decoupled && decay != 0.0)
      delta = e.add(delta, e.scale(p, decay));
    return e.sub(p, e.scale(delta, lrP));
  };
  if (optimizer == "momentum" || optimizer == "nesterov") {
    Value v = e.add(e.scale(slots[0], momentum), g);
    Value delta = optimizer == "nesterov" ? e.add(g, e.scale(v, momentum)) : v;
    return {decayed(delta), v};
  }
  if (optimizer == "adam" || optimizer == "adamw") {
    Value m = e.add(e.scale(slots[0], beta1), e.scale(g, 1.0 - beta1));
    Value v = e.add(e.scale(slots[1], beta2), e.scale(e.mul(g, g), 1.0 - beta2));
    // Bias correction with t = step + 1.
    Value t = e.convert(
        e.add(step, e.scalar(Emitter::typeOf(step).getElementType(), 1.0)), f);
    Value one = e.scalar(f, 1.0);
    Value c1 = e.sub(one, e.binary(BinaryKind::pow, e.scalar(f, beta1), t));
    Value c2 = e.sub(one, e.binary(BinaryKind::pow, e.scalar(f, beta2), t));
    Value mHat = e.div(m, e.broadcast(c1, shape));
    Value vHat = e.div(v, e.broadcast(c2, shape));
    Value denom = e.add(e.unary(UnaryKind::sqrt, vHat), e.splat(f, shape, epsilon));
    return {decayed(e.div(mHat, denom)), m, v};
  }
  return {decayed(g)};
}

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

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//

/// Tags the ops of `body` after `before` (all of them when null) with the
/// pipeline rank that runs them; transfers say it themselves.
static void tagPipelineRank(Block *body, Operation *before, int64_t rank) {
  auto attr = IntegerAttr::get(
      IntegerType::get(body->getParentOp()->getContext(), 64), rank);
  for (Operation &op : llvm::make_range(
           before ? std::next(Block::iterator(before)) : body->begin(),
           body->end()))
    if (!isa<PipelineTransferOp>(op))
      op.setAttr(::cleave::kPipelineRankAttr, attr);
}

/// Emits every microbatch's forward and backward steps of every stage, in
/// the order the schedule runs them (steps of different ranks by their
/// simulated start), each op tagged with its rank.
FailureOr<PipelineResult> BuildTrainStepPass::emitPipeline(PipelineStep &ps) {
  namespace pl = ::cleave::pipeline;
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
    auto name =
        c ? c->getAttrOfType<StringAttr>("cleave.initializer") : nullptr;
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

void BuildTrainStepPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto oldMain = module.lookupSymbol<func::FuncOp>("main");
  if (!oldMain || oldMain.getBody().getBlocks().size() != 1) {
    mlir::emitError(module.getLoc()) << "expected a single-block func.func @main";
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
  if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "nesterov" &&
      optimizer != "adam" && optimizer != "adamw") {
    mlir::emitError(module.getLoc()) << "unknown optimizer '" << optimizer
                       << "' (expected sgd, momentum, nesterov, adam, adamw)";
    return signalPassFailure();
  }
  llvm::Regex trainRe("^(" + trainable + ")$"), frozenRe("^(" + frozen + ")$"),
      noDecayRe("^(" + noDecay + ")$"), untieRe("^(" + untie + ")$");
  for (auto [flag, re] : {std::pair<StringRef, llvm::Regex *>{"trainable", &trainRe},
                          {"frozen", &frozenRe},
                          {"no-decay", &noDecayRe},
                          {"untie", &untieRe}}) {
    std::string reError;
    if (!re->isValid(reError)) {
      mlir::emitError(module.getLoc()) << "invalid --" << flag << " regex: " << reError;
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
      mlir::emitError(module.getLoc()) << "invalid loss-scale '" << lossScale
                         << "' (expected none, dynamic or a positive number)";
      return signalPassFailure();
    }
  }
  if (dynamicScale && (!(lossScaleInit > 0.0) || lossScaleWindow < 1)) {
    mlir::emitError(module.getLoc()) << "dynamic loss scaling needs loss-scale-init > 0 "
                          "and loss-scale-window >= 1";
    return signalPassFailure();
  }

  ::cleave::SyncMode syncMode;
  if (std::string error = ::cleave::parseSyncMode(
          sync, outerOptimizer, outerLr, outerMomentum, syncMode);
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
  auto newMain = func::FuncOp::create(b, loc, "train_step",
                                      b.getFunctionType({}, {}));
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
  FailureOr<LossSpec> spec = resolveLoss(oldMain);
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
        auto name = oldMain.getArgAttrOfType<StringAttr>(i, "cleave.name");
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
      diag << ": the batch of " << rows << " rows (dimension 0 of '"
           << rowsOf << "') does not divide into " << m << " microbatches";
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
    FailureOr<OwningOpRef<ModuleOp>> t = microbatchTemplate(
        oldMain, m, [&](Value v) { return isBatch(v); });
    if (failed(t)) {
      newMain.erase();
      return signalPassFailure();
    }
    microbatchModule = std::move(*t);
    forward = microbatchModule->lookupSymbol<func::FuncOp>("main");
    auto outType = cast<RankedTensorType>(forward.getResultTypes()[spec->output]);
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
    auto name = c ? c->getAttrOfType<StringAttr>("cleave.initializer") : nullptr;
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
             last ? std::next(Block::iterator(last)) : body->begin(), body->end()))
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
      scale = e.mul(e.scalar(f32, lossScaleInit),
                    e.binary(BinaryKind::pow, e.scalar(f32, 2.0), scaleLog2Arg));
    else if (staticScale > 0.0)
      scale = e.scalar(f32, staticScale);
    if (scale) {
      auto outType = cast<RankedTensorType>(
          forward.getResultTypes()[spec->output]);
      seed = e.convert(scale, outType.getElementType());
    }
    PipelineStep step{b,       body,           forward,
                      *spec,   dataArgs,       target,
                      denominator, seed,        stateValues,
                      paramArgs, m,            isBatch,
                      markBackward ? StringRef(::cleave::kBackwardAttr) : ""};
    FailureOr<PipelineResult> result = emitPipeline(step);
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
    Value lossValue = buildLoss(
        e, *spec, outputs,
        target && m > 1 && isBatch(target) ? microbatchOf(e, target, k, m)
                                           : target,
        denominator);
    if (k == 0) {
      if (m == 1)
        lossF32 = e.convert(lossValue, f32);
      // Loss scaling: the backward pass starts from the scale instead of 1.
      if (dynamicScale)
        scale = e.mul(e.scalar(f32, lossScaleInit),
                      e.binary(BinaryKind::pow, e.scalar(f32, 2.0),
                               scaleLog2Arg));
      else if (staticScale > 0.0)
        scale = e.scalar(f32, staticScale);
      if (scale)
        seed = e.convert(scale, Emitter::typeOf(lossValue).getElementType());
    }
    llvm::append_range(fp32Ops, opsAfter(forwardEnd));

    FailureOr<SmallVector<Value>> gradsK =
        ::cleave::buildGradients(b, lossValue, paramArgs, seed,
                                 markBackward ? ::cleave::kBackwardAttr : "");
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
      if (auto name = p->getAttrOfType<StringAttr>("cleave.initializer"))
        def->setAttr(::cleave::kGradientOfAttr, name);

  // Data parallelism: each rank holds the same parameters and 1/N of the
  // batch; the mean over the global batch is the mean of the ranks' means
  // (equal shards), so the gradients and the reported loss are averaged
  // over dp before anything reads them.
  Value lossOut = lossF32;
  // --sync=delayed: the pending gradients (states) and their new values.
  SmallVector<Value> pendingArgs, newPending;
  // Pipelines: every rank reports the loss made on the last stage.
  if (pipeline)
    lossOut = PipelineSumOp::create(
        b, loc, lossF32.getType(), ValueRange{lossF32},
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
      state.addAttribute("kind", CollectiveReduceKindAttr::get(
                                     b.getContext(), CollectiveReduceKind::avg));
      state.addAttribute("mesh", mesh);
      state.addAttribute("mesh_axes", axes);
      Operation *op = b.create(state);
      op->setAttr("cleave.phase", b.getStringAttr(what));
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
      auto name = p->getAttrOfType<StringAttr>("cleave.initializer");
      g = average(g, ("gradient of " + (name ? name.getValue() : "a parameter"))
                         .str());
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
          partial = e.add(partial,
                          e.convert(e.sumAll(e.mul(g, g)), b.getF32Type()));
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
  for (auto [i, p] : llvm::enumerate(paramArgs)) {
    ArrayRef<Value> pSlots =
        ArrayRef<Value>(slotArgs).slice(i * slots.size(), slots.size());
    StringRef name =
        params[i]->getAttrOfType<StringAttr>("cleave.initializer").getValue();
    double decay =
        !noDecay.empty() && noDecayRe.match(name) ? 0.0 : weightDecay.getValue();
    SmallVector<Value> updated =
        update(e, p, clipped[i], pSlots, lr, step, decay);
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
    log2 = e.binary(BinaryKind::max, e.binary(BinaryKind::min, log2,
                                              e.scalar(f32, 127.0)),
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
      op->setAttr("cleave.fp32", b.getUnitAttr());
  }
  // Schedule the step's tail (gradient norm, clipping, optimizer update) as
  // early as each op's operands allow: a parameter's update then follows its
  // gradient's last contribution instead of the whole backward pass, so
  // gradients and new optimizer state do not all stay live together.
  // (With clipping every update waits for the global norm, as it must.)
  if (backwardEnd)
    hoistToOperands(backwardEnd->getNextNode());
  func::ReturnOp::create(b, loc, results);
  newMain.setFunctionType(
      b.getFunctionType(body->getArgumentTypes(), TypeRange(ValueRange(results))));

  // Attributes for the plan builder.
  auto str = [&](StringRef s) { return b.getStringAttr(s); };
  unsigned argIndex = 0;
  // A state initialized from an initializer: a parameter or a buffer.
  auto markInitializerState = [&](ConstantOp c, StringRef kind) {
    StringRef name = c->getAttrOfType<StringAttr>("cleave.initializer").getValue();
    newMain.setArgAttr(argIndex, "cleave.name", str(name));
    newMain.setArgAttr(argIndex, "cleave.state", str(kind));
    newMain.setArgAttr(argIndex, "cleave.parameter", str(name));
    newMain.setArgAttr(argIndex, "cleave.initial_value", c.getValue());
    for (StringRef attr : {StringRef("cleave.untied_from"),
                           StringRef("cleave.untied_node"),
                           StringRef(kExternalDataAttrName)})
      if (Attribute a = c->getAttr(attr))
        newMain.setArgAttr(argIndex, attr, a);
    ++argIndex;
  };
  for (ConstantOp p : params)
    markInitializerState(p, "parameter");
  for (ConstantOp p : params) {
    StringRef name = p->getAttrOfType<StringAttr>("cleave.initializer").getValue();
    for (const Slot &s : slots) {
      newMain.setArgAttr(argIndex, "cleave.name", str((name + "." + s.name).str()));
      newMain.setArgAttr(argIndex, "cleave.state", str("optimizer_state"));
      newMain.setArgAttr(argIndex, "cleave.parameter", str(name));
      newMain.setArgAttr(argIndex, "cleave.slot", str(s.name));
      ++argIndex;
    }
  }
  if (dynamicScale) {
    for (StringRef slot : {"loss_scale_log2", "good_steps"}) {
      newMain.setArgAttr(argIndex, "cleave.name",
                         str(("__trainer__." + slot).str()));
      newMain.setArgAttr(argIndex, "cleave.state", str("optimizer_state"));
      newMain.setArgAttr(argIndex, "cleave.parameter", str("__trainer__"));
      newMain.setArgAttr(argIndex, "cleave.slot", str(slot));
      ++argIndex;
    }
  }
  for (ConstantOp c : buffers)
    markInitializerState(c, "buffer");
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
    for (StringRef attr : {"cleave.name", "cleave.valid_range"})
      if (Attribute value = oldMain.getArgAttr(i, attr))
        newMain.setArgAttr(argIndex, attr, value);
    newMain.setArgAttr(argIndex, "cleave.role", str("data"));
    shardData(argIndex);
  }
  for (const std::string &name : extraNames) {
    newMain.setArgAttr(argIndex, "cleave.name", str(name));
    // Cross-entropy labels are classes of the logits' last dimension, or
    // the ignore index (the runtime checks the data it feeds).
    if (spec->kind == LossSpec::CrossEntropy) {
      auto logits = cast<RankedTensorType>(
          oldMain.getResultTypes()[spec->output]);
      newMain.setArgAttr(argIndex, "cleave.valid_range",
                         b.getDenseI64ArrayAttr(
                             {0, logits.getShape().back(), spec->ignoreIndex}));
    }
    shardData(argIndex);
    newMain.setArgAttr(argIndex++, "cleave.role", str("data"));
  }
  newMain.setArgAttr(argIndex, "cleave.name", str("lr"));
  newMain.setArgAttr(argIndex++, "cleave.role", str("lr"));
  newMain.setArgAttr(argIndex, "cleave.name", str("step"));
  newMain.setArgAttr(argIndex++, "cleave.role", str("step"));
  unsigned numState = newParams.size() + newSlots.size() +
                      (dynamicScale ? 2 : 0) + buffers.size();
  for (unsigned i = 0; i < numState; ++i) {
    newMain.setResultAttr(i, "cleave.updates", b.getI64IntegerAttr(i));
    newMain.setResultAttr(i, "cleave.name",
                          newMain.getArgAttrOfType<StringAttr>(i, "cleave.name"));
  }
  newMain.setResultAttr(numState, "cleave.name", str("loss"));
  newMain.setResultAttr(numState, "cleave.role", str("loss"));
  newMain.setResultAttr(numState + 1, "cleave.name", str("grad_norm"));
  newMain.setResultAttr(numState + 1, "cleave.role", str("grad_norm"));
  if (dynamicScale) {
    newMain.setResultAttr(numState + 2, "cleave.name", str("loss_scale"));
    newMain.setResultAttr(numState + 2, "cleave.role", str("loss_scale"));
    newMain.setResultAttr(numState + 3, "cleave.name", str("found_inf"));
    newMain.setResultAttr(numState + 3, "cleave.role", str("found_inf"));
  }
  if (returnGradients) {
    unsigned first = numState + (dynamicScale ? 4 : 2);
    for (auto [i, p] : llvm::enumerate(params)) {
      StringRef name =
          p->getAttrOfType<StringAttr>("cleave.initializer").getValue();
      newMain.setResultAttr(first + i, "cleave.name",
                            str(("grad." + name).str()));
      newMain.setResultAttr(first + i, "cleave.role", str("gradient"));
    }
  }

  // The pending gradients: optimizer state of each parameter (zeroed), each
  // rank's own until its all-reduce.
  unsigned firstPendingResult =
      numState + (dynamicScale ? 4 : 2) + (returnGradients ? params.size() : 0);
  for (auto [i, arg] : llvm::enumerate(pendingArgs)) {
    unsigned index = cast<BlockArgument>(arg).getArgNumber();
    StringRef name =
        params[i]->getAttrOfType<StringAttr>("cleave.initializer").getValue();
    newMain.setArgAttr(index, "cleave.name",
                       str((name + ".pending_grad").str()));
    newMain.setArgAttr(index, "cleave.state", str("optimizer_state"));
    newMain.setArgAttr(index, "cleave.parameter", str(name));
    newMain.setArgAttr(index, "cleave.slot", str("pending_grad"));
    newMain.setArgAttr(index, ::cleave::kVaryingAttrName,
                       b.getStrArrayAttr({"dp"}));
    newMain.setResultAttr(firstPendingResult + i, "cleave.updates",
                          b.getI64IntegerAttr(index));
    newMain.setResultAttr(firstPendingResult + i, "cleave.name",
                          str((name + ".pending_grad").str()));
  }

  oldMain.erase();
  module.push_back(newMain);
  newMain.setSymName("main");
  if (localSGD &&
      failed(::cleave::buildLocalSGD(module, newMain, syncMode, dataParallel)))
    return signalPassFailure();
  if (m > 1)
    newMain->setAttr("cleave.microbatches", b.getI64IntegerAttr(m));
  if (pipeline)
    newMain->setAttr(::cleave::kPipelineRanksAttr,
                     b.getI64IntegerAttr(pipelineRanks));
}
