//===- Passes.h - Passes of the plan builder --------------------*- C++ -*-===//

#ifndef CLEAVE_PLAN_PASSES_H
#define CLEAVE_PLAN_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <memory>

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Plan/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Plan/Passes.h.inc"

/// --cleave-kernel-modules with `pipeline` (anchored on builtin.module)
/// itself rather than its text, whose passes must then be registered.
std::unique_ptr<mlir::Pass>
createKernelModulesPass(mlir::OpPassManager pipeline);

} // namespace cleave

#endif // CLEAVE_PLAN_PASSES_H
