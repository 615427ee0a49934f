//===- CleaveOps.h - Cleave dialect operations ------------------*- C++ -*-===//

#ifndef CLEAVE_IR_CLEAVEOPS_H
#define CLEAVE_IR_CLEAVEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Cleave/IR/CleaveDialect.h"
#include "Cleave/IR/CleaveEnums.h.inc"
#include "Cleave/IR/ShardingRule.h"

namespace mlir::cleave::detail {
/// Number of elements of a statically shaped tensor type (1 for scalars).
int64_t getNumElements(Type type);
/// Bytes of a statically shaped tensor type (i1 counts as one byte).
int64_t getSizeInBytes(Type type);
int64_t getTotalResultElements(Operation *op);
int64_t getTotalOperandBytes(Operation *op);
int64_t getTotalResultBytes(Operation *op);
} // namespace mlir::cleave::detail

#include "Cleave/IR/CleaveInterfaces.h.inc"

#define GET_OP_CLASSES
#include "Cleave/IR/CleaveOps.h.inc"

#endif // CLEAVE_IR_CLEAVEOPS_H
