//===- Optimizers.h - Optimizer update rules --------------------*- C++ -*-===//
//
// The update a training step applies to each parameter (SGD, momentum,
// Nesterov, Adam, AdamW), built in cleave ops, and the state slots each
// optimizer keeps. The momentum rule is its own builder, for outer
// optimizers (local SGD's Nesterov step) to share.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_TRAINING_OPTIMIZERS_H
#define CLEAVE_LIB_TRANSFORMS_TRAINING_OPTIMIZERS_H

#include "Emitter.h"

#include "llvm/ADT/SmallVector.h"

namespace mlir::cleave::train_step {

/// The optimizer and its hyperparameters (--cleave-build-train-step's
/// options of the same names).
struct OptimizerOptions {
  StringRef optimizer;
  double momentum = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

/// One state slot an optimizer keeps per parameter.
struct Slot {
  StringRef name;
};

/// The slots `optimizer` keeps per parameter, in their argument order.
SmallVector<Slot> slotsOf(StringRef optimizer);

/// One step of heavy-ball momentum in torch.optim.SGD's form: the new
/// velocity `mu * velocity + grad`, and the direction the parameter moves
/// along (the velocity, or with Nesterov `grad + mu * velocity`).
struct MomentumStep {
  Value velocity;
  Value direction;
};
MomentumStep buildMomentumStep(Emitter &e, Value velocity, Value grad,
                               double mu, bool nesterov);

/// The update of parameter `param` by `grad` at learning rate `lr` (a 0-d
/// tensor) and step `step` (0-d, counting from 0; Adam's bias correction
/// uses step + 1), with weight decay `decay` (decoupled for AdamW, added to
/// the gradient otherwise). `slots` are the parameter's optimizer state, in
/// slotsOf's order. Returns (new parameter, new slots...).
SmallVector<Value> buildOptimizerUpdate(Emitter &e,
                                        const OptimizerOptions &options,
                                        Value param, Value grad,
                                        ArrayRef<Value> slots, Value lr,
                                        Value step, double decay);

} // namespace mlir::cleave::train_step

#endif // CLEAVE_LIB_TRANSFORMS_TRAINING_OPTIMIZERS_H
