//===- VJPRulesElementwise.cpp - VJP rules of the elementwise ops ---------===//
//
// Rules for constant, iota, compare and arg_reduce (no gradient), unary,
// binary, select and convert. Each returns one cotangent per operand, null
// where the operand is not differentiable (integer and bool operands).
//
// Domains, and what a rule gives outside them (PyTorch's autograd values,
// checked by test/Transforms/Autodiff/gradcheck-edges.mlir):
//   log, reciprocal, div by 0   inf (g / 0)
//   sqrt, rsqrt at 0            inf
//   asin, acos, atanh at +-1    inf; acosh at 1: inf
//   abs at 0                    0 (sign(0))
//   floor, ceil, round, sign    0 everywhere
//   pow                         d/dx = 0 where y = 0, else y x^(y-1) (a real
//                               power: finite for negative x and integer y);
//                               d/dy = 0 where x = 0 and y >= 0, else
//                               r log(x) (NaN for negative x, as in PyTorch)
//   max, min                    ties split the cotangent evenly
//   select                      the unselected branch gets 0 (0 * inf in a
//                               later rule is NaN, as in PyTorch's where)
//
//===----------------------------------------------------------------------===//

#include "VJPHelpers.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::autodiff {

//===----------------------------------------------------------------------===//
// No gradient
//===----------------------------------------------------------------------===//

VJPResult vjp(ConstantOp, OpBuilder &, ValueRange) {
  return SmallVector<Value>();
}
VJPResult vjp(IotaOp, OpBuilder &, ValueRange) { return SmallVector<Value>(); }
VJPResult vjp(RngKeyOp, OpBuilder &, ValueRange) {
  return SmallVector<Value>();
}
// A pipeline stage's backward pass ends at the values it received: their
// cotangents go back to the stage that made them through a transfer of
// their own (BuildTrainStep's pipeline loop), not through this one.
VJPResult vjp(PipelineTransferOp, OpBuilder &, ValueRange) {
  return SmallVector<Value>(1, Value());
}
VJPResult vjp(CompareOp, OpBuilder &, ValueRange) {
  return SmallVector<Value>(2, Value());
}
VJPResult vjp(ArgReduceOp, OpBuilder &, ValueRange) {
  return SmallVector<Value>(1, Value());
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// The cotangent of the operand of `y = kind(x)` for the cotangent `g`.
static Value unaryVJP(Emitter &e, UnaryKind kind, Value x, Value y, Value g) {
  auto one = [&] { return e.splatLike(x, 1.0); };
  auto square = [&](Value v) { return e.mul(v, v); };
  using K = UnaryKind;
  switch (kind) {
  case K::neg:
    return e.neg(g);
  case K::abs:
    return e.mul(g, e.unary(K::sign, x));
  case K::exp:
    return e.mul(g, y);
  case K::log:
    return e.div(g, x);
  case K::sqrt: // g / (2 sqrt(x))
    return e.div(e.scale(g, 0.5), y);
  case K::rsqrt: // -1/2 x^(-3/2) = -1/2 y^3
    return e.mul(e.scale(g, -0.5), e.mul(y, square(y)));
  case K::tanh:
    return e.mul(g, e.sub(one(), square(y)));
  case K::sigmoid:
    return e.mul(g, e.mul(y, e.sub(one(), y)));
  case K::silu: { // s (1 + x (1 - s)), s = sigmoid(x) recomputed from x
    Value s = e.unary(K::sigmoid, x);
    return e.mul(g, e.mul(s, e.add(one(), e.mul(x, e.sub(one(), s)))));
  }
  case K::erf: // 2/sqrt(pi) exp(-x^2)
    return e.mul(e.scale(g, 2.0 / std::sqrt(M_PI)),
                 e.unary(K::exp, e.neg(square(x))));
  case K::sin:
    return e.mul(g, e.unary(K::cos, x));
  case K::cos:
    return e.neg(e.mul(g, e.unary(K::sin, x)));
  case K::tan:
    return e.mul(g, e.add(one(), square(y)));
  case K::asin: // 1 / sqrt(1 - x^2)
    return e.mul(g, e.unary(K::rsqrt, e.sub(one(), square(x))));
  case K::acos:
    return e.neg(e.mul(g, e.unary(K::rsqrt, e.sub(one(), square(x)))));
  case K::atan:
    return e.div(g, e.add(one(), square(x)));
  case K::sinh:
    return e.mul(g, e.unary(K::cosh, x));
  case K::cosh:
    return e.mul(g, e.unary(K::sinh, x));
  case K::asinh:
    return e.mul(g, e.unary(K::rsqrt, e.add(square(x), one())));
  case K::acosh:
    return e.mul(g, e.unary(K::rsqrt, e.sub(square(x), one())));
  case K::atanh:
    return e.div(g, e.sub(one(), square(x)));
  case K::reciprocal: // -1/x^2 = -y^2
    return e.neg(e.mul(g, square(y)));
  case K::floor:
  case K::ceil:
  case K::round:
  case K::sign:
    return e.zerosLike(x);
  case K::lnot:
    return Value();
  }
  return Value();
}

VJPResult vjp(UnaryOp op, OpBuilder &b, ValueRange g) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  return SmallVector<Value>{
      unaryVJP(e, op.getKind(), op.getOperand(), op.getResult(), g[0])};
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

VJPResult vjp(BinaryOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getResult()))
    return SmallVector<Value>{Value(), Value()};
  Emitter e{b, op.getLoc()};
  Value x = op.getLhs(), y = op.getRhs(), r = op.getResult(), g = cotangents[0];
  using K = BinaryKind;
  switch (op.getKind()) {
  case K::add:
    return SmallVector<Value>{g, g};
  case K::sub:
    return SmallVector<Value>{g, e.neg(g)};
  case K::mul:
    return SmallVector<Value>{e.mul(g, y), e.mul(g, x)};
  case K::div: // d/dy (x / y) = -r / y
    return SmallVector<Value>{e.div(g, y), e.neg(e.div(e.mul(g, r), y))};
  case K::pow: {
    // d/dx = y x^(y-1), d/dy = r log(x), as torch.pow defines them at the
    // edges: d/dx is 0 where y = 0 (also at x = 0, where x^(y-1) is inf),
    // and d/dy is 0 where x = 0 and y >= 0 (where log(x) is -inf). x^(y-1)
    // is a real power, so a negative base with an integer-valued exponent
    // (GELU's x^3, RMSNorm's x^2) has a finite gradient; d/dy of a
    // negative base is NaN, as in PyTorch (log of a negative number).
    Value zero = e.zerosLike(g);
    Value xPowYm1 = e.binary(K::pow, x, e.sub(y, e.splatLike(y, 1.0)));
    Value dx = e.select(e.compare(CompareKind::eq, y, e.zerosLike(y)), zero,
                        e.mul(g, e.mul(y, xPowYm1)));
    Value xIsZero = e.compare(CompareKind::eq, x, e.zerosLike(x));
    Value yNonNeg = e.compare(CompareKind::ge, y, e.zerosLike(y));
    Value dy = e.select(e.binary(K::land, xIsZero, yNonNeg), zero,
                        e.mul(g, e.mul(r, e.unary(UnaryKind::log, x))));
    return SmallVector<Value>{dx, dy};
  }
  case K::max:
  case K::min: {
    // As torch.maximum / torch.minimum: the larger (smaller) operand takes
    // the cotangent and ties split it evenly. (ONNX Relu and Clip, whose
    // PyTorch gradients differ at ties, are imported as selects.)
    CompareKind wins =
        op.getKind() == K::max ? CompareKind::gt : CompareKind::lt;
    Value half = e.scale(g, 0.5), zero = e.zerosLike(g);
    Value tie = e.compare(CompareKind::eq, x, y);
    return SmallVector<Value>{
        e.select(e.compare(wins, x, y), g, e.select(tie, half, zero)),
        e.select(e.compare(wins, y, x), g, e.select(tie, half, zero))};
  }
  case K::rem:
  case K::mod: { // r = x - q y with q = trunc(x/y) (rem) or floor(x/y) (mod).
    Value q = e.div(e.sub(x, r), y);
    return SmallVector<Value>{g, e.neg(e.mul(g, q))};
  }
  case K::land:
  case K::lor:
  case K::lxor:
  case K::shl:
  case K::shr:
    break;
  }
  return SmallVector<Value>{Value(), Value()};
}

//===----------------------------------------------------------------------===//
// Select and convert
//===----------------------------------------------------------------------===//

VJPResult vjp(SelectOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getResult()))
    return SmallVector<Value>(3, Value());
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0], zero = e.zerosLike(g);
  return SmallVector<Value>{Value(), e.select(op.getCond(), g, zero),
                            e.select(op.getCond(), zero, g)};
}

VJPResult vjp(ConvertOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()) || !isFloatTensor(op.getResult()))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  Type from = Emitter::typeOf(op.getOperand()).getElementType();
  return SmallVector<Value>{e.convert(cotangents[0], from)};
}

} // namespace cleave::autodiff
