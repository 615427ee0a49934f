//===- Passes.h - Passes of the CPU kernel pipeline -------------*- C++ -*-===//

#ifndef CLEAVE_TARGET_CPU_PASSES_H
#define CLEAVE_TARGET_CPU_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>
#include <memory>

namespace cleave {

/// Scalar iterations (counted through a loop nest) from which a kernel's
/// loop nest is split over the runtime's threads (the `min-work` default of
/// `--cleave-cpu-parallel-loops` and `--cleave-cpu-split-outer-reductions`).
constexpr int64_t kDefaultParallelMinWork = 16384;

#define GEN_PASS_DECL
#include "cleave/Target/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Target/CPU/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TARGET_CPU_PASSES_H
