//===- TrainStepSignature.cpp - A training step's argument attributes -----===//
//
// The attributes --cleave-build-train-step puts on the arguments and
// results of the step it built, which the plan builder reads: which state
// each argument is (parameter, optimizer slot, buffer), its initial value,
// the roles of data inputs and scalar outputs, and which argument each
// result updates (see annotateStepSignature in TrainStep.h).
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

/// An optimizer slot of `parameter` at argument `index`.
static void markSlot(func::FuncOp step, unsigned index, StringRef parameter,
                     StringRef slot) {
  setArgName(step, index, (parameter + "." + slot).str());
  setArgState(step, index, StateKind::optimizer_state);
  setArgParameter(step, index, parameter);
  setArgSlot(step, index, slot);
}

/// The state arguments, from the first: parameters, their slots, the loss
/// scale's, buffers. Returns the index of the first data argument.
static unsigned annotateStates(func::FuncOp step, const StepSignature &sig) {
  unsigned argIndex = 0;
  // A state initialized from an initializer: a parameter or a buffer.
  auto markInitializerState = [&](ConstantOp c, StateKind kind) {
    StringRef name = getInitializerName(c).getValue();
    setArgName(step, argIndex, name);
    setArgState(step, argIndex, kind);
    setArgParameter(step, argIndex, name);
    setArgInitialValue(step, argIndex, c.getValue());
    for (StringRef copied :
         {attr::kUntiedFrom, attr::kUntiedNode, attr::kExternalData,
          attr::kTransposedCopy, attr::kNotInSource})
      if (Attribute a = c->getAttr(copied))
        step.setArgAttr(argIndex, copied, a);
    ++argIndex;
  };
  for (ConstantOp p : sig.params)
    markInitializerState(p, StateKind::parameter);
  for (ConstantOp p : sig.params) {
    StringRef name = getInitializerName(p).getValue();
    for (const Slot &s : sig.slots)
      markSlot(step, argIndex++, name, s.name);
  }
  if (sig.dynamicScale)
    for (StringRef slot : {"loss_scale_log2", "good_steps"})
      markSlot(step, argIndex++, "__trainer__", slot);
  for (ConstantOp c : sig.buffers)
    markInitializerState(c, StateKind::buffer);
  return argIndex;
}

/// The data arguments from `argIndex`: the forward's inputs, then the
/// inputs the loss adds, then lr and step.
static void annotateData(func::FuncOp step, const StepSignature &sig,
                         unsigned argIndex) {
  func::FuncOp forward = sig.forward;
  Builder b(step.getContext());
  // Data parallel: every data input is this rank's rows of the global batch.
  auto shardData = [&](unsigned index) {
    if (sig.dataParallel <= 1)
      return;
    auto type = cast<RankedTensorType>(step.getArgument(index).getType());
    if (type.getRank() == 0)
      return;
    MLIRContext *ctx = b.getContext();
    SmallVector<DimShardingAttr> dims(
        type.getRank(), DimShardingAttr::get(ctx, {}, /*closed=*/true, -1));
    dims[0] = DimShardingAttr::get(ctx, {b.getStringAttr("dp")}, true, -1);
    step.setArgAttr(index, kShardingAttrName,
                    TensorShardingAttr::get(
                        ctx, FlatSymbolRefAttr::get(ctx, "mesh"), dims));
  };
  for (unsigned i = 0; i < forward.getNumArguments(); ++i, ++argIndex) {
    for (StringRef copied : {attr::kName, attr::kValidRange})
      if (Attribute value = forward.getArgAttr(i, copied))
        step.setArgAttr(argIndex, copied, value);
    setArgRole(step, argIndex, Role::data);
    shardData(argIndex);
  }
  for (const std::string &name : sig.extraNames) {
    setArgName(step, argIndex, name);
    // Cross-entropy labels are classes of the logits' last dimension, or
    // the ignore index (the runtime checks the data it feeds).
    if (sig.spec.kind == LossSpec::CrossEntropy) {
      auto logits =
          cast<RankedTensorType>(forward.getResultTypes()[sig.spec.output]);
      step.setArgAttr(argIndex, attr::kValidRange,
                      b.getDenseI64ArrayAttr(
                          {0, logits.getShape().back(), sig.spec.ignoreIndex}));
    }
    shardData(argIndex);
    setArgRole(step, argIndex++, Role::data);
  }
  for (Role role : {Role::lr, Role::step}) {
    setArgName(step, argIndex, stringifyRole(role));
    setArgRole(step, argIndex++, role);
  }
}

/// The results: the new states (each updating the argument of its index),
/// the scalar outputs, the gradients, the new pending gradients.
static void annotateResults(func::FuncOp step, const StepSignature &sig) {
  Builder b(step.getContext());
  unsigned numState = sig.params.size() * (1 + sig.slots.size()) +
                      (sig.dynamicScale ? 2 : 0) + sig.buffers.size();
  for (unsigned i = 0; i < numState; ++i) {
    setResultUpdates(step, i, i);
    step.setResultAttr(i, attr::kName, getArgName(step, i));
  }
  // The step's scalar outputs, each named after its role.
  SmallVector<Role> scalars = {Role::loss, Role::grad_norm};
  if (sig.dynamicScale)
    scalars.append({Role::loss_scale, Role::found_inf});
  for (auto [k, role] : llvm::enumerate(scalars)) {
    setResultName(step, numState + k, stringifyRole(role));
    setResultRole(step, numState + k, role);
  }
  if (sig.returnGradients) {
    unsigned first = numState + scalars.size();
    for (auto [i, p] : llvm::enumerate(sig.params)) {
      StringRef name = getInitializerName(p).getValue();
      setResultName(step, first + i, ("grad." + name).str());
      setResultRole(step, first + i, Role::gradient);
    }
  }

  // The pending gradients: optimizer state of each parameter (zeroed), each
  // rank's own until its all-reduce.
  unsigned firstPendingResult =
      numState + scalars.size() + (sig.returnGradients ? sig.params.size() : 0);
  for (auto [i, arg] : llvm::enumerate(sig.pendingArgs)) {
    unsigned index = cast<BlockArgument>(arg).getArgNumber();
    StringRef name = getInitializerName(sig.params[i]).getValue();
    markSlot(step, index, name, "pending_grad");
    step.setArgAttr(index, attr::kVarying, b.getStrArrayAttr({"dp"}));
    setResultUpdates(step, firstPendingResult + i, index);
    setResultName(step, firstPendingResult + i, (name + ".pending_grad").str());
  }

  // The metrics, last.
  unsigned firstMetric = step.getNumResults() - sig.metricNames.size();
  for (auto [i, name] : llvm::enumerate(sig.metricNames)) {
    setResultName(step, firstMetric + i, name);
    setResultRole(step, firstMetric + i, Role::metric);
  }
}

void train_step::annotateStepSignature(func::FuncOp step,
                                       const StepSignature &sig) {
  unsigned firstData = annotateStates(step, sig);
  annotateData(step, sig, firstData);
  annotateResults(step, sig);
}
