//===- LoweringUtils.cpp - Helpers shared by the cleave lowerings ---------===//

#include "LoweringUtils.h"

#include "mlir/IR/AffineMap.h"

using namespace mlir;
using namespace mlir::cleave;

namespace mlir::cleave::lowering {

bool isUnsignedElement(Type type) {
  auto intType = dyn_cast<IntegerType>(getElementType(type));
  return intType && intType.isUnsigned();
}

bool isNarrowFloat(Type type) {
  auto f = dyn_cast<FloatType>(type);
  return f && f.getWidth() < 32;
}

Type getComputeType(Type type) {
  if (isNarrowFloat(type))
    return Float32Type::get(type.getContext());
  return type;
}

Type getElementType(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.getElementType();
  return type;
}

SmallVector<utils::IteratorType> parallelIterators(unsigned n) {
  return SmallVector<utils::IteratorType>(n, utils::IteratorType::parallel);
}

Value createEmpty(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                  Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

Value createFilled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                   Type elementType, Value value) {
  Value empty = createEmpty(b, loc, shape, elementType);
  return linalg::FillOp::create(b, loc, ValueRange{value}, ValueRange{empty})
      .getResult(0);
}

Value createScalar(OpBuilder &b, Location loc, Type type, double v) {
  if (auto floatType = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(floatType, v));
  if (type.isIndex())
    return arith::ConstantIndexOp::create(b, loc, static_cast<int64_t>(v));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(type, static_cast<int64_t>(v)));
}

TypedAttr getReductionIdentity(OpBuilder &b, Type type, ReduceKind kind,
                               bool isUnsigned) {
  if (auto floatType = dyn_cast<FloatType>(type)) {
    const llvm::fltSemantics &sem = floatType.getFloatSemantics();
    switch (kind) {
    case ReduceKind::sum:
      return b.getFloatAttr(floatType, 0.0);
    case ReduceKind::prod:
      return b.getFloatAttr(floatType, 1.0);
    case ReduceKind::max:
      return b.getFloatAttr(floatType, APFloat::getInf(sem, /*Negative=*/true));
    case ReduceKind::min:
      return b.getFloatAttr(floatType,
                            APFloat::getInf(sem, /*Negative=*/false));
    }
  }
  unsigned width = type.getIntOrFloatBitWidth();
  // i1 behaves as unsigned (max is `or`, min is `and`).
  bool asUnsigned = isUnsigned || width == 1;
  APInt value;
  switch (kind) {
  case ReduceKind::sum:
    value = APInt::getZero(width);
    break;
  case ReduceKind::prod:
    value = APInt(width, 1);
    break;
  case ReduceKind::max:
    value = asUnsigned ? APInt::getMinValue(width)
                       : APInt::getSignedMinValue(width);
    break;
  case ReduceKind::min:
    value = asUnsigned ? APInt::getMaxValue(width)
                       : APInt::getSignedMaxValue(width);
    break;
  }
  return b.getIntegerAttr(type, value);
}

Value combineReduction(OpBuilder &b, Location loc, ReduceKind kind, Value acc,
                       Value v, bool isUnsigned) {
  Type type = acc.getType();
  bool isFloat = isa<FloatType>(type);
  bool asUnsigned = isUnsigned || type.isInteger(1);
  switch (kind) {
  case ReduceKind::sum:
    if (isFloat)
      return arith::AddFOp::create(b, loc, acc, v);
    if (type.isInteger(1))
      return arith::OrIOp::create(b, loc, acc, v);
    return arith::AddIOp::create(b, loc, acc, v);
  case ReduceKind::prod:
    if (isFloat)
      return arith::MulFOp::create(b, loc, acc, v);
    if (type.isInteger(1))
      return arith::AndIOp::create(b, loc, acc, v);
    return arith::MulIOp::create(b, loc, acc, v);
  case ReduceKind::max:
    if (isFloat)
      return arith::MaximumFOp::create(b, loc, acc, v);
    if (asUnsigned)
      return arith::MaxUIOp::create(b, loc, acc, v);
    return arith::MaxSIOp::create(b, loc, acc, v);
  case ReduceKind::min:
    if (isFloat)
      return arith::MinimumFOp::create(b, loc, acc, v);
    if (asUnsigned)
      return arith::MinUIOp::create(b, loc, acc, v);
    return arith::MinSIOp::create(b, loc, acc, v);
  }
  return acc;
}

Value convertScalar(OpBuilder &b, Location loc, Value v, Type dstType,
                    bool srcUnsigned, bool dstUnsigned) {
  Type srcType = v.getType();
  if (srcType == dstType)
    return v;
  Type f32 = b.getF32Type();
  if (srcType.isIndex()) {
    v = arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
    return convertScalar(b, loc, v, dstType, /*srcUnsigned=*/false,
                         dstUnsigned);
  }
  if (dstType.isIndex()) {
    if (srcUnsigned)
      return arith::IndexCastUIOp::create(b, loc, dstType, v);
    return arith::IndexCastOp::create(b, loc, dstType, v);
  }
  if (auto srcFloat = dyn_cast<FloatType>(srcType)) {
    if (auto dstFloat = dyn_cast<FloatType>(dstType)) {
      unsigned sw = srcFloat.getWidth(), dw = dstFloat.getWidth();
      if (sw < dw)
        return arith::ExtFOp::create(b, loc, dstType, v);
      if (sw > dw)
        return arith::TruncFOp::create(b, loc, dstType, v);
      // Same width, different format (f16 <-> bf16, two float8 types):
      // through f32.
      Value wide = arith::ExtFOp::create(b, loc, f32, v);
      return arith::TruncFOp::create(b, loc, dstType, wide);
    }
    if (dstType.isInteger(1)) {
      Value zero = createScalar(b, loc, srcType, 0.0);
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v, zero);
    }
    if (isNarrowFloat(srcType))
      v = arith::ExtFOp::create(b, loc, f32, v);
    if (dstType.getIntOrFloatBitWidth() < 8) {
      // int4/int2 and their unsigned forms wrap like a C cast of the
      // truncated value (ONNX's reference, ml_dtypes): through i64.
      v = arith::FPToSIOp::create(b, loc, b.getI64Type(), v);
      return arith::TruncIOp::create(b, loc, dstType, v);
    }
    if (dstUnsigned)
      return arith::FPToUIOp::create(b, loc, dstType, v);
    return arith::FPToSIOp::create(b, loc, dstType, v);
  }
  // Integer source.
  if (dstType.isInteger(1)) {
    Value zero = createScalar(b, loc, srcType, 0.0);
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v, zero);
  }
  bool srcIsUnsigned = srcUnsigned || srcType.isInteger(1);
  if (isa<FloatType>(dstType)) {
    Type target = isNarrowFloat(dstType) ? f32 : dstType;
    Value f = srcIsUnsigned ? Value(arith::UIToFPOp::create(b, loc, target, v))
                            : Value(arith::SIToFPOp::create(b, loc, target, v));
    if (target != dstType)
      f = arith::TruncFOp::create(b, loc, dstType, f);
    return f;
  }
  unsigned sw = srcType.getIntOrFloatBitWidth();
  unsigned dw = dstType.getIntOrFloatBitWidth();
  if (sw < dw) {
    if (srcIsUnsigned)
      return arith::ExtUIOp::create(b, loc, dstType, v);
    return arith::ExtSIOp::create(b, loc, dstType, v);
  }
  if (sw > dw)
    return arith::TruncIOp::create(b, loc, dstType, v);
  return v;
}

Value createElementwise(
    OpBuilder &b, Location loc, ValueRange inputs, ArrayRef<int64_t> shape,
    Type resultElementType,
    function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  unsigned rank = shape.size();
  Value init = createEmpty(b, loc, shape, resultElementType);
  SmallVector<AffineMap> maps(inputs.size() + 1,
                              b.getMultiDimIdentityMap(rank));
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
      parallelIterators(rank),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value r = body(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, r);
      });
  return generic.getResult(0);
}

Value convertTensor(OpBuilder &b, Location loc, Value tensor, Type elementType,
                    bool srcUnsigned, bool dstUnsigned) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (type.getElementType() == elementType)
    return tensor;
  return createElementwise(b, loc, tensor, type.getShape(), elementType,
                           [&](OpBuilder &nb, Location nloc, ValueRange args) {
                             return convertScalar(nb, nloc, args[0],
                                                  elementType, srcUnsigned,
                                                  dstUnsigned);
                           });
}

/// Map from the full loop space of `rank` dims to the dims not in `dims`.
static AffineMap getDroppedDimsMap(OpBuilder &b, unsigned rank,
                                   ArrayRef<int64_t> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, static_cast<int64_t>(d)))
      exprs.push_back(b.getAffineDimExpr(d));
  return AffineMap::get(rank, 0, exprs, b.getContext());
}

static SmallVector<int64_t> getDroppedShape(ArrayRef<int64_t> shape,
                                            ArrayRef<int64_t> dims) {
  SmallVector<int64_t> result;
  for (auto [d, size] : llvm::enumerate(shape))
    if (!llvm::is_contained(dims, static_cast<int64_t>(d)))
      result.push_back(size);
  return result;
}

Value createReduction(OpBuilder &b, Location loc, Value input,
                      ArrayRef<int64_t> dims, ReduceKind kind,
                      bool isUnsigned) {
  auto type = cast<RankedTensorType>(input.getType());
  unsigned rank = type.getRank();
  Type elementType = type.getElementType();
  Value identity = arith::ConstantOp::create(
      b, loc, getReductionIdentity(b, elementType, kind, isUnsigned));
  SmallVector<int64_t> outShape = getDroppedShape(type.getShape(), dims);
  Value init = createFilled(b, loc, outShape, elementType, identity);
  SmallVector<utils::IteratorType> iterators = parallelIterators(rank);
  for (int64_t d : dims)
    iterators[d] = utils::IteratorType::reduction;
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank),
                                 getDroppedDimsMap(b, rank, dims)};
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, ValueRange{input}, ValueRange{init},
      maps, iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value r =
            combineReduction(nb, nloc, kind, args[1], args[0], isUnsigned);
        linalg::YieldOp::create(nb, nloc, r);
      });
  return generic.getResult(0);
}

Value createBroadcastBinary(
    OpBuilder &b, Location loc, Value x, Value reduced, ArrayRef<int64_t> dims,
    function_ref<Value(OpBuilder &, Location, Value, Value)> f) {
  auto type = cast<RankedTensorType>(x.getType());
  unsigned rank = type.getRank();
  Value init = createEmpty(b, loc, type.getShape(), type.getElementType());
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank),
                                 getDroppedDimsMap(b, rank, dims),
                                 b.getMultiDimIdentityMap(rank)};
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, ValueRange{x, reduced},
      ValueRange{init}, maps, parallelIterators(rank),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, f(nb, nloc, args[0], args[1]));
      });
  return generic.getResult(0);
}

} // namespace mlir::cleave::lowering
