//===- Probes.h - Forward activations as extra outputs ----------*- C++ -*-===//

#ifndef CLEAVE_TRANSFORMS_TRAINING_PROBES_H
#define CLEAVE_TRANSFORMS_TRAINING_PROBES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace cleave {

/// Returns from `main` (a training step whose backward ops carry
/// `cleave.backward`) the output of every ONNX node whose name matches the
/// whole regular expression `pattern`: the last forward op located at that
/// node with one float tensor result. The outputs are named
/// `probe.<NNNN>.<node>` in program order and have `cleave.role = "probe"`,
/// so that a run's last step writes them (`cleave-run --output-dir`).
/// Returns the number of probes, or failure for a bad expression.
mlir::FailureOr<unsigned> addActivationProbes(mlir::func::FuncOp main,
                                              llvm::StringRef pattern);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_TRAINING_PROBES_H
