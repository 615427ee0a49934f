//===- Passes.h - Cleave sharding passes ------------------------*- C++ -*-===//

#ifndef CLEAVE_TRANSFORMS_SHARDING_PASSES_H
#define CLEAVE_TRANSFORMS_SHARDING_PASSES_H

#include "Cleave/IR/CleaveDialect.h"

#include "cleave/Transforms/PassOptionTypes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Transforms/Sharding/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Transforms/Sharding/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_SHARDING_PASSES_H
