//===- Passes.h - Cleave autodiff passes ------------------------*- C++ -*-===//

#ifndef CLEAVE_TRANSFORMS_AUTODIFF_PASSES_H
#define CLEAVE_TRANSFORMS_AUTODIFF_PASSES_H

#include "Cleave/IR/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Transforms/Autodiff/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Transforms/Autodiff/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_AUTODIFF_PASSES_H
