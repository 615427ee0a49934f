//===- Passes.h - Cleave conversion passes ----------------------*- C++ -*-===//

#ifndef CLEAVE_CONVERSION_PASSES_H
#define CLEAVE_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "cleave/Conversion/Passes.h.inc"

/// Converts unsigned integer element types (and tensors of them) to
/// signless ones of the same width; every other type is kept.
class CleaveTypeConverter : public TypeConverter {
public:
  CleaveTypeConverter();
};

/// Adds the patterns that lower every cleave op to linalg/tensor/arith/math.
void populateCleaveToLinalgPatterns(const TypeConverter &typeConverter,
                                    RewritePatternSet &patterns);

/// Adds the patterns of --cleave-expand-narrow-floats that rewrite
/// `arith.extf` from and `arith.truncf` to float8, float6 and float4 types
/// into integer arith ops (arithmetic on those types must have been moved
/// to a wider type first).
void populateExpandNarrowFloatsPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "cleave/Conversion/Passes.h.inc"

} // namespace mlir::cleave

#endif // CLEAVE_CONVERSION_PASSES_H
