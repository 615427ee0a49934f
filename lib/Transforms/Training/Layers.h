//===- Layers.h - Layers of a program from its ONNX node names -*- C++ -*-===//
//
// The layer rule shared by recomputation and pipeline stage assignment
// (see --cleave-insert-recompute in Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_TRAINING_LAYERS_H
#define CLEAVE_LIB_TRANSFORMS_TRAINING_LAYERS_H

#include "cleave/Analysis/LayerNames.h"

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace cleave::training {

/// The layer prefix of an ONNX node name (cleave/Analysis/LayerNames.h).
using ::cleave::layerPrefix;

/// The first NameLoc name in `loc`, if any.
std::optional<llvm::StringRef> locName(mlir::Location loc);

/// Pipeline stages of a forward program (see --cleave-assign-pipeline-stages
/// in Passes.td): the stage of every op of its block but the terminator
/// (constants and parameters: their first reader's), and the remarks that
/// describe the cut.
struct StageAssignment {
  int64_t stages = 0;
  llvm::DenseMap<mlir::Operation *, int64_t> stageOf;
  /// Per stage: forward flops (CostOpInterface).
  std::vector<int64_t> flops;
  /// "stage 0: ops 0..41, ...", then the balance.
  std::vector<std::string> remarks;
  /// Initializers read by several stages, and those stages.
  std::vector<std::pair<std::string, std::vector<int64_t>>> shared;
};

/// Cuts `function` (a single-block forward program) into `stages` stages,
/// at layer boundaries balanced by flops, or after the ONNX nodes named in
/// `boundaries` (comma-separated, one fewer than the stages). Emits an
/// error and fails when the program cannot be cut so.
mlir::FailureOr<StageAssignment>
assignPipelineStages(mlir::func::FuncOp function, int64_t stages,
                     llvm::StringRef boundaries);

} // namespace cleave::training

#endif // CLEAVE_LIB_TRANSFORMS_TRAINING_LAYERS_H
