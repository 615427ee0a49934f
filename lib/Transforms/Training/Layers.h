//===- Layers.h - Layers of a program from its ONNX node names -*- C++ -*-===//
//
// The layer rule shared by recomputation and pipeline stage assignment
// (see --cleave-insert-recompute in Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_TRAINING_LAYERS_H
#define CLEAVE_LIB_TRANSFORMS_TRAINING_LAYERS_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <optional>

namespace cleave::training {

/// The layer prefix of an ONNX node name: up to and including the first run
/// of digits that follows a letter, `.` or `_` and is followed by `.` or
/// `/` (`h3.qkv` -> `h3`, `/model/layers.11/mlp/fc` -> `/model/layers.11`),
/// or "" when there is none.
llvm::StringRef layerPrefix(llvm::StringRef name);

/// The first NameLoc name in `loc`, if any.
std::optional<llvm::StringRef> locName(mlir::Location loc);

} // namespace cleave::training

#endif // CLEAVE_LIB_TRANSFORMS_TRAINING_LAYERS_H
