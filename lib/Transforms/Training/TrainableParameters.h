//===- TrainableParameters.h - Which initializers a training step updates -===//
//
// The state of a training step taken from the forward program's
// initializers: the parameters it trains and the buffers it updates without
// training them (BatchNorm running statistics), chosen as PyTorch would.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINABLEPARAMETERS_H
#define CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINABLEPARAMETERS_H

#include "Cleave/IR/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Regex.h"

namespace cleave::training {

struct ParameterOptions {
  /// Initializers to train by name; null: the default set (the parameters
  /// of a PyTorch export signature, else float initializers of more than
  /// one element, never BatchNorm statistics).
  llvm::Regex *trainable = nullptr;
  llvm::StringRef trainablePattern; ///< For messages.
  /// Initializers never trained (wins over `trainable`); null: none.
  llvm::Regex *frozen = nullptr;
  /// Initializers trained as one parameter per use; null: none.
  llvm::Regex *untie = nullptr;
};

struct TrainingState {
  llvm::SmallVector<mlir::cleave::ConstantOp> params;
  /// Initializers the program updates, and the @main results that hold
  /// their new values (`cleave.updates_initializer`); kStepUpdated for a
  /// buffer the training step updates itself (a router's expert biases,
  /// `cleave.expert_bias`).
  llvm::SmallVector<mlir::cleave::ConstantOp> buffers;
  llvm::SmallVector<unsigned> bufferResults;
  static constexpr unsigned kStepUpdated = ~0u;
};

/// Unties the initializers `options.untie` names (each use gets a copy:
/// `<name>`, `<name>.untied1`, ...), then selects the parameters and buffers
/// of `main`, warning about parameters that look merged by an exporter.
/// Emits an error and fails if nothing is trainable or a buffer is updated
/// twice.
mlir::FailureOr<TrainingState>
selectTrainingState(mlir::func::FuncOp main, const ParameterOptions &options);

} // namespace cleave::training

#endif // CLEAVE_LIB_TRANSFORMS_TRAINING_TRAINABLEPARAMETERS_H
