//===- PlanBuilder.h - From a cleave program to an executable plan -*- C++ -*-//
//
// Turns `func.func @main` of the cleave dialect into a plan: the ops are
// grouped into fused kernels and library GEMMs, the kernels are outlined into
// a kernel module, every tensor that crosses a command boundary gets a buffer
// at a static arena offset, and the commands, tables and constants are
// collected into a cleave::plan::Plan.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLAN_PLANBUILDER_H
#define CLEAVE_PLAN_PLANBUILDER_H

#include "cleave/PlanFormat.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

#include <functional>
#include <string>

namespace cleave {

struct PlanBuildOptions {
  /// Lower f32/f64 contractions to library GEMM commands (BLAS on CPU).
  bool useLibraryGemm = true;
  /// Let library GEMMs absorb a following bias add and tanh-form GELU
  /// (Gemm command epilogues; see plan::GemmEpilogue).
  bool useGemmEpilogues = true;
  /// Splat constants, and dense constants with at most this many elements,
  /// are inlined into the
  /// kernels that use them instead of getting an arena buffer.
  int64_t inlineConstantLimit = 16;
  /// Name recorded in the plan's metadata.
  std::string modelName;
  /// Absolute path of the source model, recorded so that trained weights
  /// can be written back into it (cleave-run --export-onnx).
  std::string sourceModel;
  /// For training steps (@main with `cleave.state` arguments, see
  /// --cleave-build-train-step): the optimizer name and learning-rate
  /// schedule to record. The builder fills in the input/output indices.
  plan::TrainingInfo training;
};

/// The program cut into commands, before kernel code generation.
struct PartitionedProgram {
  /// One func.func per kernel, in cleave ops (see compileCPUKernels).
  mlir::OwningOpRef<mlir::ModuleOp> kernels;
  /// Everything of the plan but the kernel object.
  plan::Plan plan;
};

/// Partitions `module`'s @main (already canonicalized, contractions in GEMM
/// form) into kernels and GEMMs and plans its memory.
///
/// Arguments marked `cleave.state` become state tensors that persist across
/// runs: parameters start from `cleave.initial_value`, optimizer state from
/// zeros (init commands). A result marked `cleave.updates = i` is copied back
/// into state argument i's buffer after all other commands.
mlir::FailureOr<PartitionedProgram>
partitionProgram(mlir::ModuleOp module, const PlanBuildOptions &options);

} // namespace cleave

#endif // CLEAVE_PLAN_PLANBUILDER_H
