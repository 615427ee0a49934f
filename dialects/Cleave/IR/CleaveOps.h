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

namespace mlir::cleave {
/// Counter-based random bits (splitmix64's mixing function): `mix64` of a
/// 64-bit value, on the host and as ops on a ui64 tensor.
uint64_t mix64(uint64_t z);
Value buildMix64(OpBuilder &b, Location loc, Value z);
/// The key of random stream `salt` at training step `step`, on the host
/// and from an f32 step scalar (tensor<f32>) as a tensor<ui64>.
uint64_t stepKeyValue(uint64_t step, uint64_t salt);
Value buildStepKey(OpBuilder &b, Location loc, Value step, uint64_t salt);
/// 64 random bits per element of `shape` (tensor<...xui64>): mix64 of the
/// element's linear index (built from iotas, so a partitioned program's
/// shards draw the bits of their own elements) times the golden ratio
/// plus `key` (a tensor<ui64>).
Value buildRandomBits(OpBuilder &b, Location loc, Value key,
                      ArrayRef<int64_t> shape);
} // namespace mlir::cleave

#endif // CLEAVE_IR_CLEAVEOPS_H
