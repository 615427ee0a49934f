//===- Passes.h - Kernel passes both targets share --------------*- C++ -*-===//

#ifndef CLEAVE_TARGET_COMMON_PASSES_H
#define CLEAVE_TARGET_COMMON_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Target/Common/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Target/Common/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TARGET_COMMON_PASSES_H
