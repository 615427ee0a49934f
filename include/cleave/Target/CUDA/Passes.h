//===- Passes.h - Passes of the CUDA kernel pipeline ------------*- C++ -*-===//

#ifndef CLEAVE_TARGET_CUDA_PASSES_H
#define CLEAVE_TARGET_CUDA_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Target/CUDA/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Target/CUDA/Passes.h.inc"

} // namespace cleave

#endif // CLEAVE_TARGET_CUDA_PASSES_H
