//===- TrainStepOptions.cpp - Checks of the training step's options -------===//
//
// --cleave-build-train-step's options checked against each other and
// against the model before the step is built: loss scaling, --sync, the
// pipeline options and the microbatch split of the batch. Each error names
// the option (see TrainStep.h).
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

FailureOr<LossScaling> train_step::parseLossScaling(Location loc,
                                                    StringRef lossScale,
                                                    double init,
                                                    int64_t window) {
  LossScaling scaling;
  scaling.dynamic = lossScale == "dynamic";
  scaling.init = init;
  scaling.window = window;
  if (!scaling.dynamic && lossScale != "none" && !lossScale.empty()) {
    if (lossScale.getAsDouble(scaling.staticScale) ||
        !(scaling.staticScale > 0.0))
      return mlir::emitError(loc)
             << "invalid loss-scale '" << lossScale
             << "' (expected none, dynamic or a positive number)";
  }
  if (scaling.dynamic && (!(scaling.init > 0.0) || scaling.window < 1))
    return mlir::emitError(loc)
           << "dynamic loss scaling needs loss-scale-init > 0 "
              "and loss-scale-window >= 1";
  return scaling;
}

FailureOr<::cleave::SyncMode>
train_step::parseStepSync(Location loc, StringRef sync, int64_t dataParallel,
                          int64_t pipelineRanks, bool dynamicScale) {
  ::cleave::SyncMode mode;
  // The outer optimizer is --cleave-build-local-sgd's; only the mode
  // matters here.
  if (std::string error =
          ::cleave::parseSyncMode(sync, /*outerOptimizer=*/"", /*outerLr=*/0.7,
                                  /*outerMomentum=*/0.9, mode);
      !error.empty())
    return mlir::emitError(loc) << error;
  if (mode.kind == ::cleave::SyncMode::Step)
    return mode;
  std::string refused;
  if (dataParallel <= 1)
    refused = "it needs data-parallel replicas (--data-parallel=N, N > 1)";
  else if (pipelineRanks > 1)
    refused = "pipeline stages are not supported with it";
  else if (mode.kind == ::cleave::SyncMode::Delayed && dynamicScale)
    refused = "dynamic loss scaling would unscale the previous step's "
              "gradients by this step's scale";
  if (!refused.empty())
    return mlir::emitError(loc) << "--sync=" << sync << ": " << refused;
  return mode;
}

FailureOr<int64_t> train_step::checkMicrobatches(Location loc, int64_t m,
                                                 func::FuncOp forward,
                                                 const LossSpec &spec,
                                                 ArrayRef<Value> dataArgs) {
  int64_t rows = -1;
  std::string rowsOf;
  if (spec.targetType && spec.targetType.getRank() > 0) {
    rows = spec.targetType.getDimSize(0);
    rowsOf = spec.targetName;
  } else {
    for (auto [i, arg] : llvm::enumerate(dataArgs))
      if (auto t = cast<RankedTensorType>(arg.getType()); t.getRank() > 0) {
        rows = t.getDimSize(0);
        auto name = getArgName(forward, i);
        rowsOf = name ? name.getValue().str() : "input " + std::to_string(i);
        break;
      }
  }
  if (m < 1 || m > 4096)
    return mlir::emitError(loc) << "microbatches must be from 1 to 4096";
  if (m > 1 && spec.kind == LossSpec::Scalar)
    return mlir::emitError(loc)
           << "--microbatches=" << m << " needs --loss: the model's own scalar "
           << "loss combines the rows of the whole batch";
  if (m > 1 && (rows < 1 || rows % m != 0)) {
    auto diag = mlir::emitError(loc) << "--microbatches=" << m;
    if (rows < 1)
      diag << ": no data input has a batch dimension to split";
    else
      diag << ": the batch of " << rows << " rows (dimension 0 of '" << rowsOf
           << "') does not divide into " << m << " microbatches";
    return failure();
  }
  return rows;
}

LogicalResult train_step::checkPipelineOptions(Location loc,
                                               int64_t pipelineRanks,
                                               bool hasBuffers,
                                               bool returnGradients,
                                               int64_t dataParallel) {
  if (pipelineRanks <= 1)
    return success();
  std::string refused;
  if (pipelineRanks > 1024)
    refused = "at most 1024 pipeline ranks";
  else if (hasBuffers)
    refused = "model buffers (BatchNorm running statistics, expert biases) "
              "are not supported in pipeline stages yet";
  else if (returnGradients)
    refused = "--return-gradients is not supported with pipeline stages";
  else if (dataParallel > 1)
    refused = "give data parallelism as a mesh axis (--mesh dp=N,pp=P)";
  if (!refused.empty())
    return mlir::emitError(loc)
           << "pipeline-ranks=" << pipelineRanks << ": " << refused;
  return success();
}
