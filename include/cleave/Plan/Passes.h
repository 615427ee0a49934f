//===- Passes.h - Passes of the plan builder --------------------*- C++ -*-===//

#ifndef CLEAVE_PLAN_PASSES_H
#define CLEAVE_PLAN_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>
#include <memory>

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Plan/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Plan/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_PLAN_PASSES_H
