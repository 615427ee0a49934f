//===- Passes.h - Cleave transformation passes ------------------*- C++ -*-===//

#ifndef CLEAVE_TRANSFORMS_PASSES_H
#define CLEAVE_TRANSFORMS_PASSES_H

#include "Cleave/IR/CleaveDialect.h"
#include "Cleave/IR/CleaveOps.h"
#include "cleave/Transforms/PassOptionTypes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Transforms/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_PASSES_H
