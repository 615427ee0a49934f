//===- LocalSGD.h - Local SGD, DiLoCo, delayed reduction ------*- C++ -*-===//
//
// How the data-parallel replicas of a training step agree (cleave-compile
// --sync): every step (the all-reduced gradients of today's step), every H
// steps (local SGD: the step reduces nothing and a second function, @sync,
// averages the parameters or takes DiLoCo's outer step), or one step late
// (each step applies the previous step's averaged gradients).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_TRAINING_LOCALSGD_H
#define CLEAVE_TRANSFORMS_TRAINING_LOCALSGD_H

#include "Cleave/IR/CleaveMetadata.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace cleave {

/// A parsed --sync.
struct SyncMode {
  enum Kind { Step, Local, Delayed } kind = Step;
  /// Local: the steps between averagings (H).
  int64_t every = 0;
  /// Local: DiLoCo's outer Nesterov step instead of plain averaging.
  bool nesterov = false;
  double outerLr = 0.7, outerMomentum = 0.9;
};

/// Parses "step", "local:<H>" (1 <= H <= 1000000) or "delayed" and the
/// outer optimizer ("" or "nesterov"); returns an error message or "".
std::string parseSyncMode(llvm::StringRef sync, llvm::StringRef outerOptimizer,
                          double outerLr, double outerMomentum, SyncMode &out);

/// The function a local-SGD module holds beside @main, compiled into the
/// plan's entry "sync".
constexpr llvm::StringLiteral kSyncFunctionName = "sync";
/// On @main: the H of local SGD (the plan's TrainingInfo::syncEvery).
constexpr llvm::StringLiteral kSyncEveryAttrName =
    mlir::cleave::attr::kSyncEvery;
/// On a state argument: the mesh axes (names) it varies over.
constexpr llvm::StringLiteral kVaryingAttrName = mlir::cleave::attr::kVarying;

/// Local SGD over the module's mesh axis "dp" of size `dp`, for a finished
/// per-rank training step `step` (@main) that reduces nothing: marks every
/// state of the step as varying over dp (each replica trains its own),
/// with DiLoCo adds the outer optimizer's states to the step (the global
/// copy, starting from the parameters' initial values, and the momentum,
/// each split over dp along the first dimension dp divides, ZeRO-1 style;
/// whole where none does), and builds @sync: each parameter averaged over
/// dp (all_reduce avg), or DiLoCo's outer step (reduce_scatter avg of the
/// parameter, outer gradient = global copy - average, Nesterov momentum,
/// global copy updated, all_gather into the parameter).
mlir::LogicalResult buildLocalSGD(mlir::ModuleOp module,
                                  mlir::func::FuncOp step, const SyncMode &mode,
                                  int64_t dp);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_TRAINING_LOCALSGD_H
