//===- TrainStep.h - The parts of a training step ---------------*- C++ -*-===//
//
// Private to --cleave-build-train-step: the loss it minimizes
// (TrainLoss.cpp), and the microbatch loop of a pipelined step with the
// forward program at one microbatch's shapes (MicrobatchLoop.cpp). The pass
// itself is BuildTrainStep.cpp; the optimizers are Optimizers.h.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINSTEP_H
#define CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINSTEP_H

#include "Emitter.h"

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

} // namespace mlir::cleave::train_step

#endif // CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINSTEP_H
