//===- Emitter.cpp - A small emitter of cleave ops ------------------------===//
//
// The Emitter methods (Cleave/Utils/Emitter.h); each returns its operand
// unchanged where the op would do nothing (an identity transpose, a whole
// slice, a reshape to the same shape).
//
//===----------------------------------------------------------------------===//

#include "Cleave/Utils/Emitter.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave {

Value Emitter::splat(Type type, double value) {
  auto tensor = cast<RankedTensorType>(type);
  Type elem = tensor.getElementType();
  Attribute scalar =
      isa<FloatType>(elem)
          ? Attribute(FloatAttr::get(elem, value))
          : Attribute(IntegerAttr::get(elem, static_cast<int64_t>(value)));
  auto attr = DenseElementsAttr::get(tensor, scalar);
  return ConstantOp::create(b, loc, attr);
}

Value Emitter::unary(UnaryKind kind, Value x) {
  return UnaryOp::create(b, loc, kind, x);
}

Value Emitter::binary(BinaryKind kind, Value x, Value y) {
  return BinaryOp::create(b, loc, kind, x, y);
}

Value Emitter::add(Value x, Value y) { return binary(BinaryKind::add, x, y); }
Value Emitter::sub(Value x, Value y) { return binary(BinaryKind::sub, x, y); }
Value Emitter::mul(Value x, Value y) { return binary(BinaryKind::mul, x, y); }
Value Emitter::div(Value x, Value y) { return binary(BinaryKind::div, x, y); }
Value Emitter::neg(Value x) { return unary(UnaryKind::neg, x); }

Value Emitter::compare(CompareKind kind, Value x, Value y) {
  auto type = RankedTensorType::get(typeOf(x).getShape(), b.getI1Type());
  return CompareOp::create(b, loc, type, kind, x, y);
}

Value Emitter::select(Value cond, Value onTrue, Value onFalse) {
  return SelectOp::create(b, loc, onTrue.getType(), cond, onTrue, onFalse);
}

Value Emitter::convert(Value x, Type elementType) {
  if (typeOf(x).getElementType() == elementType)
    return x;
  return ConvertOp::create(b, loc, typeOf(x).clone(elementType), x);
}

Value Emitter::reshape(Value x, ArrayRef<int64_t> shape) {
  if (typeOf(x).getShape() == shape)
    return x;
  return ReshapeOp::create(b, loc, typeOf(x).clone(shape), x);
}

Value Emitter::transpose(Value x, ArrayRef<int64_t> perm) {
  bool identity = true;
  SmallVector<int64_t> shape;
  for (auto [i, p] : llvm::enumerate(perm)) {
    identity &= static_cast<int64_t>(i) == p;
    shape.push_back(typeOf(x).getDimSize(p));
  }
  if (identity)
    return x;
  return TransposeOp::create(b, loc, typeOf(x).clone(shape), x, perm);
}

Value Emitter::slice(Value x, ArrayRef<int64_t> start, ArrayRef<int64_t> limit,
                     ArrayRef<int64_t> strides) {
  SmallVector<int64_t> shape;
  bool whole = true;
  for (size_t d = 0; d < start.size(); ++d) {
    shape.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
    whole &=
        start[d] == 0 && limit[d] == typeOf(x).getDimSize(d) && strides[d] == 1;
  }
  if (whole)
    return x;
  return SliceOp::create(b, loc, typeOf(x).clone(shape), x, start, limit,
                         strides);
}

Value Emitter::padZeros(Value x, ArrayRef<int64_t> low,
                        ArrayRef<int64_t> high) {
  if (llvm::all_of(low, [](int64_t v) { return v == 0; }) &&
      llvm::all_of(high, [](int64_t v) { return v == 0; }))
    return x;
  SmallVector<int64_t> shape(typeOf(x).getShape());
  for (size_t d = 0; d < shape.size(); ++d)
    shape[d] += low[d] + high[d];
  Value zero = splat(RankedTensorType::get({}, typeOf(x).getElementType()), 0);
  return PadOp::create(b, loc, typeOf(x).clone(shape), x, zero, low, high,
                       PadMode::constant);
}

Value Emitter::concat(ValueRange xs, int64_t dim) {
  if (xs.size() == 1)
    return xs.front();
  SmallVector<int64_t> shape(typeOf(xs.front()).getShape());
  shape[dim] = 0;
  for (Value x : xs)
    shape[dim] += typeOf(x).getDimSize(dim);
  return ConcatOp::create(b, loc, typeOf(xs.front()).clone(shape), xs, dim);
}

Value Emitter::reduceSum(Value x, ArrayRef<int64_t> dims) {
  if (dims.empty())
    return x;
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < typeOf(x).getRank(); ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(typeOf(x).getDimSize(d));
  return ReduceOp::create(b, loc, typeOf(x).clone(shape), ReduceKind::sum, x,
                          dims);
}

Value Emitter::sumAll(Value x) {
  return reduceSum(x, llvm::to_vector(llvm::seq<int64_t>(typeOf(x).getRank())));
}

Value Emitter::broadcastInDim(Value x, RankedTensorType to,
                              ArrayRef<int64_t> dims) {
  if (typeOf(x) == to)
    return x;
  return BroadcastInDimOp::create(b, loc, to, x, dims);
}

Value Emitter::broadcastBack(Value reduced, RankedTensorType full,
                             ArrayRef<int64_t> reducedDims) {
  SmallVector<int64_t> kept;
  for (int64_t d = 0; d < full.getRank(); ++d)
    if (!llvm::is_contained(reducedDims, d))
      kept.push_back(d);
  return broadcastInDim(reduced, full.clone(typeOf(reduced).getElementType()),
                        kept);
}

Value Emitter::unbroadcast(Value g, RankedTensorType operandType,
                           ArrayRef<int64_t> dims) {
  RankedTensorType resultType = typeOf(g);
  SmallVector<int64_t> summed;
  for (int64_t d = 0; d < resultType.getRank(); ++d) {
    const int64_t *it = llvm::find(dims, d);
    if (it == dims.end()) {
      summed.push_back(d); // A new dimension.
      continue;
    }
    int64_t operandDim = it - dims.begin();
    if (operandType.getDimSize(operandDim) != resultType.getDimSize(d))
      summed.push_back(d); // A repeated size-1 dimension.
  }
  return reshape(reduceSum(g, summed), operandType.getShape());
}

} // namespace cleave
