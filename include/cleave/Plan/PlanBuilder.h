//===- PlanBuilder.h - From a cleave program to an executable plan -*- C++ -*-//
//
// Turns `func.func @main` of the cleave dialect into a plan in two steps.
// outlineKernels (--cleave-outline-kernels, the kernels phase) groups the
// ops into fused kernels and library GEMMs and outlines the kernels into a
// nested `module @kernels`, tagging each kernel op with its group. buildPlan
// reads that grouping: every tensor that crosses a command boundary gets a
// buffer at a static arena offset, and the commands, tables and constants
// are collected into a cleave::plan::Plan.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLAN_PLANBUILDER_H
#define CLEAVE_PLAN_PLANBUILDER_H

#include "cleave/Plan/StepReport.h"
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
  /// (Gemm command epilogues; see plan::GemmEpilogue), and the rounding of
  /// a mixed-precision product back to its operands' type.
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
  /// Initial parameter values that are still the bytes of the model's
  /// external data (kExternalDataAttrName) are referenced by the plan, not
  /// copied into it (cleave-compile --embed-weights turns this off).
  bool referenceExternalData = true;
  /// The runtime draws the trainable f32 weight matrices
  /// (cleave-compile --init-parameters, initParametersRandomly): their
  /// initial values are not serialized. Without it, a parameter whose
  /// model declared it without data (ImportOptions::absentWeights) is
  /// refused.
  bool drawWeightMatrices = false;
  /// Fill BuiltPlan::memoryReport (cleave-compile
  /// --print-memory-plan).
  bool reportMemory = false;
  /// Fill BuiltPlan::stepReport (cleave-compile --report).
  bool report = false;
};

/// The symbol of the kernel module outlineKernels nests in a program module.
inline constexpr llvm::StringLiteral kKernelModuleName = "kernels";

/// The program cut into commands, before kernel code generation.
struct BuiltPlan {
  /// One func.func per kernel, in cleave ops (see compileCPUKernels): the
  /// `module @kernels` of outlineKernels, without its name.
  mlir::OwningOpRef<mlir::ModuleOp> kernels;
  /// Everything of the plan but the kernel object.
  plan::Plan plan;
  /// With PlanBuildOptions::reportMemory: one line per node ("node N: ...")
  /// and per buffer ("buffer B: offset O bytes S live [first, last]: what"),
  /// live ranges in node indices.
  std::string memoryReport;
  /// With PlanBuildOptions::report: memory by class, the peak, and the
  /// collectives (arenaBytes, peakWhere and mesh filled in).
  StepReport stepReport;
};

/// --cleave-outline-kernels: groups `module`'s @main (already
/// canonicalized, contractions in GEMM form) into kernels, GEMMs, attention
/// and communication commands, outlines each kernel group into a function of
/// a new `module @kernels` (kKernelModuleName) at the end of `module`, and
/// tags each op of a kernel group with its kernel (cleave.kernel) and group
/// (cleave.kernel_group). Only `options`' grouping choices (library GEMMs,
/// epilogues, inlined constants) matter. `entry` names the function planned
/// instead of @main (local SGD's `module @sync` holds @sync, renamed @main
/// when it is planned). Fails when `module` already has a `@kernels` symbol
/// or the function cannot be planned.
mlir::LogicalResult outlineKernels(mlir::ModuleOp module,
                                   const PlanBuildOptions &options,
                                   llvm::StringRef entry = "main");

/// Plans `module`'s @main with the grouping outlineKernels recorded (it runs
/// outlineKernels first when `module` has no kernel module) and takes the
/// kernel module out of `module` into BuiltPlan::kernels.
///
/// Arguments marked `cleave.state` become state tensors that persist across
/// runs: parameters start from `cleave.initial_value`, optimizer state from
/// zeros (init commands). A result marked `cleave.updates = i` is copied back
/// into state argument i's buffer after all other commands.
mlir::FailureOr<BuiltPlan> buildPlan(mlir::ModuleOp module,
                                     const PlanBuildOptions &options);

/// Makes every f32 trainable parameter of rank >= 2 (weight matrices,
/// embeddings) start from N(0, stddev^2) values generated by the runtime
/// (RandomNormal init commands, seeded from `seed` and the parameter's name,
/// so every mesh and pipeline stage draws the same values) and drops their
/// initializers from the plan's constants. Biases and norm
/// parameters keep the model's values. Returns how many were changed.
int64_t initParametersRandomly(plan::Plan &plan, double stddev, uint64_t seed);

} // namespace cleave

#endif // CLEAVE_PLAN_PLANBUILDER_H
