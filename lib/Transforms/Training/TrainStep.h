//===- TrainStep.h - The parts of a training step ---------------*- C++ -*-===//
//
// Private to --cleave-build-train-step, the steps it takes: the checks of
// its options (TrainStepOptions.cpp), the loss it minimizes
// (TrainLoss.cpp), the forward program of a microbatch and the microbatch
// loop of a pipelined step (MicrobatchLoop.cpp), the gradients' average
// over data-parallel replicas (GradientReduction.cpp), loss scaling and
// gradient clipping (GradientScaling.cpp), the schedule of the step's tail
// (ScheduleStepTail.cpp), and the attributes of the
// step's arguments and results (TrainStepSignature.cpp). The pass, which
// runs them in order, is BuildTrainStep.cpp; the optimizers are
// Optimizers.h.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINSTEP_H
#define CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINSTEP_H

#include "Emitter.h"
#include "Optimizers.h"

#include "cleave/Transforms/Training/LocalSGD.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <string>

namespace mlir::cleave::train_step {

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

/// The loss a training step minimizes (see resolveLoss).
struct LossSpec {
  enum Kind { Scalar, Mse, CrossEntropy } kind = Scalar;
  unsigned output = 0;         ///< Index of the forward output it reads.
  RankedTensorType targetType; ///< The added data input; null for Scalar.
  std::string targetName;
  int64_t ignoreIndex = -100;
};

/// Parses `loss` (--loss) against the forward program: which output, which
/// kind, and the data input it adds (labels, targets).
FailureOr<LossSpec> resolveLoss(func::FuncOp oldMain, StringRef loss);
/// The loss of `outputs` against `target` (null for the model's own
/// scalar loss). With `denominator` set (microbatches; not for a scalar
/// loss), the sum over this microbatch is divided by it instead of by its
/// own count.
Value buildLoss(Emitter &e, const LossSpec &spec, ArrayRef<Value> outputs,
                Value target, Value denominator = {});
/// A mixture of experts' router: the softmax of its tokens x experts scores
/// and the top-k that picks each token's experts (RouterLosses.cpp).
struct Router {
  SoftmaxOp probs;
  TopKOp topk;
};
/// A top-k that routes rows to experts, and where its rows take the
/// capacity form (--cleave-expert-capacity): its groups (batch rows) and
/// each expert's slots per group (0: dropless).
struct RoutingTopK {
  TopKOp topk;
  int64_t groups = 0, capacity = 0;
};
/// The top-ks among `ops` whose indices reach a cleave.grouped_matmul's
/// ids or the slots a scatter of the capacity form puts rows in.
SmallVector<RoutingTopK> findRoutingTopKs(ArrayRef<Operation *> ops);
/// The step's argument that biases `topk`'s pick (--cleave-expert-bias:
/// a top-k of scores plus broadcast biases), or null.
BlockArgument expertBiasOf(TopKOp topk);
/// One microbatch's expert figures for the log: each router's load (its
/// choices per expert, [E] f32; `routers[i]` is the top-k of `loads[i]`)
/// and, where rows take the capacity form, the rows past their expert's
/// capacity (0-d f32; null if none).
struct ExpertMetrics {
  SmallVector<Value> loads;
  SmallVector<TopKOp> routers;
  Value dropped;
};
ExpertMetrics expertMetrics(Emitter &e, ArrayRef<RoutingTopK> routingTopKs);
/// The routers of `routingTopKs` (one microbatch's, findRoutingTopKs): a
/// softmax and its top-k each. Fails, naming it, for a top-k that routes
/// rows but does not take a softmax of tokens x experts.
FailureOr<SmallVector<Router>> findRouters(ArrayRef<RoutingTopK> routingTopKs);
/// auxCoef times the routers' load-balancing loss (Switch/GShard) plus
/// zCoef times their z-loss, in f32; null for no routers.
Value routerLosses(Emitter &e, ArrayRef<Router> routers, double auxCoef,
                   double zCoef);
/// What the loss of the whole batch divides by: the labels not ignored
/// (cross-entropy) or the elements (mse), so that microbatch losses add
/// up to it.
Value lossDenominator(Emitter &e, const LossSpec &spec, Value target);

//===----------------------------------------------------------------------===//
// Microbatches and pipeline stages
//===----------------------------------------------------------------------===//

/// Microbatch `k` of `m` of a batch input along `dim`: rows k, k + m,
/// k + 2m, ... (viewed as [rows / m, m, ...], the slice of the second of
/// those), so that a split of the batch over dp ranks stays a split of
/// every microbatch and slicing needs no communication.
Value microbatchOf(Emitter &e, Value v, int64_t k, int64_t m, int64_t dim = 0);

/// The name of the sequential mesh axis a microbatch template is
/// partitioned over.
inline constexpr StringLiteral kMicrobatchMesh = "microbatches";

/// The initializer name of a `cleave.constant`, or "" for any other op.
inline StringRef initializerName(Operation *op) {
  auto c = dyn_cast<ConstantOp>(op);
  auto name = c ? getInitializerName(c) : nullptr;
  return name ? name.getValue() : StringRef();
}

/// Emits microbatch `k` of `m` of `forward` (m = 1: the whole program) at
/// the builder's insertion point: its arguments are `dataArgs`, a batch
/// input (`isBatch`) cut to the microbatch's rows; an initializer reads the
/// value `stateValues` holds for its name; a microbatch template's
/// `cleave.all_slice` over kMicrobatchMesh becomes the microbatch's rows.
/// Returns the forward's outputs.
SmallVector<Value>
emitMicrobatchForward(Emitter &e, func::FuncOp forward,
                      ArrayRef<Value> dataArgs,
                      const llvm::StringMap<Value> &stateValues, int64_t k,
                      int64_t m, llvm::function_ref<bool(Value)> isBatch);

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
microbatchTemplate(func::FuncOp main, int64_t m,
                   llvm::function_ref<bool(Value)> isBatch);

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

/// The microbatch loop of a pipelined step (`pipelineRanks` > 1, the
/// --schedule and --stage-boundaries options): every microbatch's forward
/// and backward steps of every stage, in the order the schedule runs them
/// (steps of different ranks by their simulated start), each op tagged with
/// its rank.
FailureOr<PipelineResult> emitPipeline(PipelineStep &ps, int64_t pipelineRanks,
                                       const std::string &schedule,
                                       StringRef stageBoundaries);

/// Tags the ops of `body` after `before` (all of them when null) with the
/// pipeline rank that runs them; transfers say it themselves.
void tagPipelineRank(Block *body, Operation *before, int64_t rank);

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

/// --loss-scale and its options.
struct LossScaling {
  bool dynamic = false;
  /// A static scale (> 0), or 0 for none.
  double staticScale = 0.0;
  /// Dynamic: the initial scale and the finite steps that double it.
  double init = 65536.0;
  int64_t window = 2000;
};

/// Parses --loss-scale (none, dynamic or a positive number) and checks the
/// dynamic scale's `init` and `window`.
FailureOr<LossScaling> parseLossScaling(Location loc, StringRef lossScale,
                                        double init, int64_t window);

/// Parses --sync for the step (the outer optimizer is local SGD's own
/// pass's) and refuses a mode other than step without data-parallel
/// replicas, with pipeline stages, or delayed with dynamic loss scaling.
FailureOr<::cleave::SyncMode> parseStepSync(Location loc, StringRef sync,
                                            int64_t dataParallel,
                                            int64_t pipelineRanks,
                                            bool dynamicScale);

/// The rows of the batch (dimension 0 of the labels or targets, else of the
/// first data input of `forward`; -1 when none has one), checking that
/// they split into `m` microbatches (1 to 4096) and that the loss is one
/// the split can add up (not the model's own scalar).
FailureOr<int64_t> checkMicrobatches(Location loc, int64_t m,
                                     func::FuncOp forward, const LossSpec &spec,
                                     ArrayRef<Value> dataArgs);

/// Refuses pipeline stages (`pipelineRanks` > 1) beyond 1024 ranks, with
/// model buffers, with --return-gradients, or with data parallelism given
/// as data-parallel instead of a mesh axis.
LogicalResult checkPipelineOptions(Location loc, int64_t pipelineRanks,
                                   bool hasBuffers, bool returnGradients,
                                   int64_t dataParallel);

//===----------------------------------------------------------------------===//
// Data-parallel replicas
//===----------------------------------------------------------------------===//

/// A step's gradients and loss, and how its data-parallel replicas agree
/// on them (see averageOverReplicas).
struct ReplicaAverage {
  OpBuilder &b;
  Block *body;
  /// The replicas (> 1) and --sync's mode.
  int64_t dataParallel;
  ::cleave::SyncMode::Kind sync;
  /// Per parameter: its initializer and its gradient (replaced in place).
  ArrayRef<ConstantOp> params;
  MutableArrayRef<Value> grads;
  /// The loss every replica reports (replaced).
  Value loss;
  /// Delayed: the pending gradient arguments and their new values.
  SmallVector<Value> pendingArgs, newPending;
};

/// Adds the module's `cleave.mesh @mesh` with the axis dp of
/// `r.dataParallel` ranks, and averages over dp (all_reduce avg) each
/// gradient and the loss: every step (--sync=step); nothing (local SGD:
/// each replica reports its own loss); or one step late (delayed: each
/// gradient becomes a pending-gradient argument appended to the body,
/// averaged by an asynchronous all-reduce started before the forward pass
/// and waited for here; the loss's all-reduce is asynchronous too). Fails,
/// with an error, where the module already has a mesh.
LogicalResult averageOverReplicas(ModuleOp module, Location loc,
                                  ReplicaAverage &r);

//===----------------------------------------------------------------------===//
// Loss scaling and gradient clipping
//===----------------------------------------------------------------------===//

/// The scale a step's backward pass starts from (an f32 scalar): the
/// static one, or dynamically `init * 2^scaleLog2`; null without scaling.
Value buildLossScale(Emitter &e, const LossScaling &scaling, Value scaleLog2);

/// The gradients between the backward pass and the optimizer.
struct ClippedGradients {
  /// Divided by the loss scale (as reported with --return-gradients).
  SmallVector<Value> unscaled;
  /// Clipped to the global norm, as the optimizer reads them.
  SmallVector<Value> clipped;
  Value sumOfSquares, norm;
  /// Dynamic loss scaling: whether every gradient is finite (i1 scalar).
  Value finite;
};

/// Unscales `grads` by `scale` (when set; in f32, each keeps its element
/// type), takes the global norm (a pipelined step adds each rank's partial
/// sum of squares, a parameter counted on the first rank that reads it),
/// checks it is finite when `checkFinite`, and with `clipNorm` > 0 scales
/// the gradients by min(1, clipNorm / (norm + 1e-6)).
ClippedGradients clipGradients(Emitter &e, ArrayRef<Value> grads, Value scale,
                               double clipNorm, bool checkFinite,
                               const PipelineResult *pipeline, Block *body);

/// Dynamic loss scaling's next state from this step's `finite`: the new
/// `log2` of the scale and `goodSteps`, the `scale` of the next step and
/// `foundInf` (1 for a skipped step).
struct LossScaleUpdate {
  Value log2, goodSteps, scale, foundInf;
};
LossScaleUpdate updateLossScale(Emitter &e, const LossScaling &scaling,
                                Value finite, Value scaleLog2, Value goodSteps);

//===----------------------------------------------------------------------===//
// The step's tail
//===----------------------------------------------------------------------===//

/// Schedules the ops from `first` to the end of its block: an op that reads
/// a value computed in the step moves right after the last such definition
/// (it runs as soon as its inputs exist); an op that reads only arguments
/// and constants (e.g. `beta1 * m`) moves right before its first user, so it
/// does not hold memory from the start of the step. The ops are pure, so
/// this keeps the program's meaning.
void hoistToOperands(Operation *first);

//===----------------------------------------------------------------------===//
// Signature
//===----------------------------------------------------------------------===//

/// The arguments and results of a built step, in their order: parameters,
/// their optimizer slots, the loss-scale state, buffers, the forward's data
/// inputs, the added data inputs (labels, targets), lr and step; results:
/// the new states, loss, grad_norm, loss_scale and found_inf, gradients,
/// the new pending gradients.
struct StepSignature {
  /// The forward program (its data arguments and outputs).
  func::FuncOp forward;
  ArrayRef<ConstantOp> params, buffers;
  ArrayRef<Slot> slots;
  bool dynamicScale = false;
  bool returnGradients = false;
  /// Data inputs are split over dp with more than one replica.
  int64_t dataParallel = 1;
  const LossSpec &spec;
  ArrayRef<std::string> extraNames;
  /// Delayed reduction: the pending gradients, arguments of the step.
  ArrayRef<Value> pendingArgs;
  /// The names of the metrics the step returns last (role metric).
  ArrayRef<std::string> metricNames;
};

/// Sets the attributes the plan builder reads on `step`'s arguments and
/// results: names, states, parameters and slots, initial values, roles,
/// data shardings over dp, valid label ranges, and which state argument
/// each result updates.
void annotateStepSignature(func::FuncOp step, const StepSignature &sig);

} // namespace mlir::cleave::train_step

#endif // CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINSTEP_H
