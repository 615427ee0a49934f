//===- Autodiff.h - Reverse-mode automatic differentiation ------*- C++ -*-===//
//
// Gradients of a scalar loss built from the VJP rules of the cleave ops
// (VJPOpInterface, attached as external models by registerVJPExternalModels).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_AUTODIFF_H
#define CLEAVE_TRANSFORMS_AUTODIFF_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/SmallVector.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace cleave {

/// Attaches VJPOpInterface to the cleave ops that have a VJP rule.
void registerVJPExternalModels(mlir::DialectRegistry &registry);

/// Emits at the builder's insertion point the reverse-mode gradient of the
/// scalar (0-d float tensor) `loss` with respect to each of `wrt` (values of
/// the same block, float tensors). Returns one gradient per `wrt` value
/// (a zero tensor when `loss` does not depend on it). `seed` is the cotangent
/// of the loss (default: 1). Emits diagnostics and fails on ops without a
/// rule. With a non-empty `tag`, every op it creates carries the unit
/// attribute `tag` (e.g. `cleave.backward`, read by
/// --cleave-insert-recompute to tell backward ops from forward ones).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildGradients(mlir::OpBuilder &b, mlir::Value loss, mlir::ValueRange wrt,
               mlir::Value seed = {}, llvm::StringRef tag = {});

/// The vector-Jacobian product: emits the gradient with respect to each of
/// `wrt` of sum_i <outputs[i], cotangents[i]>, where each cotangent has its
/// output's type (the gradient a later pipeline stage sends back for the
/// activations this one produced). The scalar-loss form above is this with
/// one output and its seed. Outputs and `wrt` are values of one block; a
/// `wrt` value that is itself an output receives its cotangent.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
buildGradients(mlir::OpBuilder &b, mlir::ValueRange outputs,
               mlir::ValueRange cotangents, mlir::ValueRange wrt,
               llvm::StringRef tag = {});

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_AUTODIFF_H
