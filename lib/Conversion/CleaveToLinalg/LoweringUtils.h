//===- LoweringUtils.h - Helpers shared by the cleave lowerings -*- C++ -*-===//

#ifndef CLEAVE_LIB_CONVERSION_CLEAVETOLINALG_LOWERINGUTILS_H
#define CLEAVE_LIB_CONVERSION_CLEAVETOLINALG_LOWERINGUTILS_H

#include "Cleave/IR/CleaveOps.h"
#include "cleave/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::cleave::lowering {

/// True for `ui*` element types (after conversion they are signless).
bool isUnsignedElement(Type type);
/// True for the floats narrower than f32 (f16, bf16, the float8 and float4
/// types), which are computed in f32.
bool isNarrowFloat(Type type);
/// The type arithmetic is done in for `type`: f32 for the floats narrower
/// than f32, else itself.
Type getComputeType(Type type);
/// Element type of a (shaped) type, or the type itself.
Type getElementType(Type type);

/// `tensor.empty` of `shape` x `elementType`.
Value createEmpty(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                  Type elementType);
/// A tensor of `shape` x `elementType` filled with `value` (linalg.fill).
Value createFilled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                   Type elementType, Value value);
/// Scalar constant of `type` (int, float or index) with value `v`.
Value createScalar(OpBuilder &b, Location loc, Type type, double v);
/// Identity element of reduction `kind` on `type` (signedness `isUnsigned`).
TypedAttr getReductionIdentity(OpBuilder &b, Type type, ReduceKind kind,
                               bool isUnsigned);
/// Combines `acc` and `v` with reduction `kind`.
Value combineReduction(OpBuilder &b, Location loc, ReduceKind kind, Value acc,
                       Value v, bool isUnsigned);
/// Converts scalar `v` between element types (float ext/trunc, int
/// ext/trunc, int<->float) with ONNX Cast semantics.
Value convertScalar(OpBuilder &b, Location loc, Value v, Type dstType,
                    bool srcUnsigned, bool dstUnsigned);

/// Builds an elementwise linalg.generic over tensors of equal shape.
/// `body` gets the scalar inputs and returns the scalar result.
Value createElementwise(
    OpBuilder &b, Location loc, ValueRange inputs, ArrayRef<int64_t> shape,
    Type resultElementType,
    function_ref<Value(OpBuilder &, Location, ValueRange)> body);

/// Converts a whole tensor to `elementType` (no-op when equal).
Value convertTensor(OpBuilder &b, Location loc, Value tensor, Type elementType,
                    bool srcUnsigned = false, bool dstUnsigned = false);

/// Reduces `input` over `dims` with `kind` in its own element type, keeping
/// the other dimensions in order (the result drops `dims`).
Value createReduction(OpBuilder &b, Location loc, Value input,
                      ArrayRef<int64_t> dims, ReduceKind kind, bool isUnsigned);

/// Elementwise `f(x, r)` where `r` has `x`'s shape without `dims`
/// (broadcast back along `dims`).
Value createBroadcastBinary(
    OpBuilder &b, Location loc, Value x, Value reduced, ArrayRef<int64_t> dims,
    function_ref<Value(OpBuilder &, Location, Value, Value)> f);

SmallVector<utils::IteratorType> parallelIterators(unsigned n);

//===----------------------------------------------------------------------===//
// Pattern populators, one per op family
//===----------------------------------------------------------------------===//

void populateElementwisePatterns(const TypeConverter &converter,
                                 RewritePatternSet &patterns);
void populateDataMovementPatterns(const TypeConverter &converter,
                                  RewritePatternSet &patterns);
void populateReductionPatterns(const TypeConverter &converter,
                               RewritePatternSet &patterns);
void populateConvolutionPatterns(const TypeConverter &converter,
                                 RewritePatternSet &patterns);
void populateScatterPatterns(const TypeConverter &converter,
                             RewritePatternSet &patterns);
void populateTopKPatterns(const TypeConverter &converter,
                          RewritePatternSet &patterns);

} // namespace mlir::cleave::lowering

#endif // CLEAVE_LIB_CONVERSION_CLEAVETOLINALG_LOWERINGUTILS_H
