//===- Emitter.h - Emit cleave ops at one place -----------------*- C++ -*-===//
//
// The small builder the training-step rewrites share: splats, broadcasts,
// conversions and the elementwise arithmetic of losses and optimizers.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_TRAINING_EMITTER_H
#define CLEAVE_LIB_TRANSFORMS_TRAINING_EMITTER_H

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::cleave::train_step {

/// Small helpers that emit cleave ops at one place.
struct Emitter {
  OpBuilder &b;
  Location loc;

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  Value splat(Type elem, ArrayRef<int64_t> shape, double value) {
    auto type = RankedTensorType::get(shape, elem);
    Attribute scalar = isa<FloatType>(elem)
                           ? Attribute(b.getFloatAttr(elem, value))
                           : Attribute(b.getIntegerAttr(elem, (int64_t)value));
    return ConstantOp::create(b, loc, type,
                              DenseElementsAttr::get(type, scalar));
  }
  Value scalar(Type elem, double value) { return splat(elem, {}, value); }
  /// Broadcasts a 0-d tensor to `shape`.
  Value broadcast(Value v, ArrayRef<int64_t> shape) {
    auto t = typeOf(v);
    if (t.getShape() == shape)
      return v;
    return BroadcastInDimOp::create(
        b, loc, RankedTensorType::get(shape, t.getElementType()), v,
        ArrayRef<int64_t>{});
  }
  Value convert(Value v, Type elem) {
    auto t = typeOf(v);
    if (t.getElementType() == elem)
      return v;
    return ConvertOp::create(b, loc, t.clone(elem), v);
  }
  Value binary(BinaryKind kind, Value lhs, Value rhs) {
    return BinaryOp::create(b, loc, lhs.getType(), kind, lhs, rhs);
  }
  Value unary(UnaryKind kind, Value v) {
    return UnaryOp::create(b, loc, v.getType(), kind, v);
  }
  Value add(Value x, Value y) { return binary(BinaryKind::add, x, y); }
  Value sub(Value x, Value y) { return binary(BinaryKind::sub, x, y); }
  Value mul(Value x, Value y) { return binary(BinaryKind::mul, x, y); }
  Value div(Value x, Value y) { return binary(BinaryKind::div, x, y); }
  /// `s * x` for a 0-d `s` of x's element type.
  Value scale(Value x, Value s) {
    return mul(x, broadcast(s, typeOf(x).getShape()));
  }
  /// `c * x` for a compile-time constant c.
  Value scale(Value x, double c) {
    auto t = typeOf(x);
    return mul(x, splat(t.getElementType(), t.getShape(), c));
  }
  /// Sum of all elements, as a 0-d tensor.
  Value sumAll(Value v) {
    auto t = typeOf(v);
    if (t.getRank() == 0)
      return v;
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < t.getRank(); ++d)
      dims.push_back(d);
    return ReduceOp::create(b, loc,
                            RankedTensorType::get({}, t.getElementType()),
                            ReduceKind::sum, v, dims);
  }
};

} // namespace mlir::cleave::train_step

#endif // CLEAVE_LIB_TRANSFORMS_TRAINING_EMITTER_H
