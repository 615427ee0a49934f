//===- Elementwise.cpp - Lower cleave elementwise ops to linalg.generic ---===//
//
// constant, iota, unary, binary, compare, select and convert. Every
// elementwise op becomes one `linalg.generic` with identity maps so that
// chains fuse; f16/bf16 math is done in f32 inside the body.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::lowering;

namespace {

//===----------------------------------------------------------------------===//
// Scalar bodies
//===----------------------------------------------------------------------===//

/// Float unary function in the compute type; null for kinds that do not
/// apply to floats.
static Value buildFloatUnary(OpBuilder &b, Location loc, UnaryKind kind,
                             Value x) {
  Type type = x.getType();
  switch (kind) {
  case UnaryKind::neg:
    return arith::NegFOp::create(b, loc, x);
  case UnaryKind::abs:
    return math::AbsFOp::create(b, loc, x);
  case UnaryKind::exp:
    return math::ExpOp::create(b, loc, x);
  case UnaryKind::log:
    return math::LogOp::create(b, loc, x);
  case UnaryKind::sqrt:
    return math::SqrtOp::create(b, loc, x);
  case UnaryKind::rsqrt:
    return math::RsqrtOp::create(b, loc, x);
  case UnaryKind::tanh:
    return math::TanhOp::create(b, loc, x);
  case UnaryKind::sigmoid: {
    Value one = createScalar(b, loc, type, 1.0);
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(b, loc, one,
                                 arith::AddFOp::create(b, loc, one, e));
  }
  case UnaryKind::silu: { // x * sigmoid(x) = x / (1 + exp(-x))
    Value one = createScalar(b, loc, type, 1.0);
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(b, loc, x,
                                 arith::AddFOp::create(b, loc, one, e));
  }
  case UnaryKind::erf:
    return math::ErfOp::create(b, loc, x);
  case UnaryKind::sin:
    return math::SinOp::create(b, loc, x);
  case UnaryKind::cos:
    return math::CosOp::create(b, loc, x);
  case UnaryKind::tan:
    return math::TanOp::create(b, loc, x);
  case UnaryKind::asin:
    return math::AsinOp::create(b, loc, x);
  case UnaryKind::acos:
    return math::AcosOp::create(b, loc, x);
  case UnaryKind::atan:
    return math::AtanOp::create(b, loc, x);
  case UnaryKind::sinh:
    return math::SinhOp::create(b, loc, x);
  case UnaryKind::cosh:
    return math::CoshOp::create(b, loc, x);
  case UnaryKind::asinh:
    return math::AsinhOp::create(b, loc, x);
  case UnaryKind::acosh:
    return math::AcoshOp::create(b, loc, x);
  case UnaryKind::atanh:
    return math::AtanhOp::create(b, loc, x);
  case UnaryKind::floor:
    return math::FloorOp::create(b, loc, x);
  case UnaryKind::ceil:
    return math::CeilOp::create(b, loc, x);
  case UnaryKind::round:
    return math::RoundEvenOp::create(b, loc, x);
  case UnaryKind::sign: {
    // Keeps zeros and NaN as they are.
    Value zero = createScalar(b, loc, type, 0.0);
    Value one = createScalar(b, loc, type, 1.0);
    Value minusOne = createScalar(b, loc, type, -1.0);
    Value gt =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, zero);
    Value lt =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero);
    Value neg = arith::SelectOp::create(b, loc, lt, minusOne, x);
    return arith::SelectOp::create(b, loc, gt, one, neg);
  }
  case UnaryKind::reciprocal:
    return arith::DivFOp::create(b, loc, createScalar(b, loc, type, 1.0), x);
  case UnaryKind::lnot:
    return nullptr;
  }
  return nullptr;
}

/// Integer unary function; null for float-only kinds.
static Value buildIntUnary(OpBuilder &b, Location loc, UnaryKind kind, Value x,
                           bool isUnsigned) {
  Type type = x.getType();
  Value zero = createScalar(b, loc, type, 0);
  switch (kind) {
  case UnaryKind::neg:
    return arith::SubIOp::create(b, loc, zero, x);
  case UnaryKind::abs:
    if (isUnsigned || type.isInteger(1))
      return x;
    return math::AbsIOp::create(b, loc, x);
  case UnaryKind::sign: {
    if (type.isInteger(1))
      return x;
    Value ne = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, x, zero);
    Value pos = arith::ExtUIOp::create(b, loc, type, ne);
    if (isUnsigned)
      return pos;
    Value lt =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, zero);
    Value minusOne = arith::ConstantOp::create(
        b, loc,
        b.getIntegerAttr(type,
                         APInt::getAllOnes(type.getIntOrFloatBitWidth())));
    return arith::SelectOp::create(b, loc, lt, minusOne, pos);
  }
  case UnaryKind::lnot: {
    Value ones = arith::ConstantOp::create(
        b, loc,
        b.getIntegerAttr(type,
                         APInt::getAllOnes(type.getIntOrFloatBitWidth())));
    return arith::XOrIOp::create(b, loc, x, ones);
  }
  default:
    return nullptr;
  }
}

/// `r = a op b` with the sign of the divisor: `r + b` when `r` is non-zero
/// and its sign differs from `b`'s.
static Value fixModSign(OpBuilder &b, Location loc, Value r, Value divisor,
                        bool isFloat) {
  Type type = r.getType();
  Value zero = createScalar(b, loc, type, 0);
  Value rNonZero, rNeg, dNeg, sum;
  if (isFloat) {
    rNonZero =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE, r, zero);
    rNeg = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, r, zero);
    dNeg =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, divisor, zero);
    sum = arith::AddFOp::create(b, loc, r, divisor);
  } else {
    rNonZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, r, zero);
    rNeg = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r, zero);
    dNeg =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, divisor, zero);
    sum = arith::AddIOp::create(b, loc, r, divisor);
  }
  Value signsDiffer = arith::XOrIOp::create(b, loc, rNeg, dNeg);
  Value fix = arith::AndIOp::create(b, loc, rNonZero, signsDiffer);
  return arith::SelectOp::create(b, loc, fix, sum, r);
}

static Value buildFloatBinary(OpBuilder &b, Location loc, BinaryKind kind,
                              Value x, Value y) {
  switch (kind) {
  case BinaryKind::add:
    return arith::AddFOp::create(b, loc, x, y);
  case BinaryKind::sub:
    return arith::SubFOp::create(b, loc, x, y);
  case BinaryKind::mul:
    return arith::MulFOp::create(b, loc, x, y);
  case BinaryKind::div:
    return arith::DivFOp::create(b, loc, x, y);
  case BinaryKind::rem:
    return arith::RemFOp::create(b, loc, x, y);
  case BinaryKind::mod:
    return fixModSign(b, loc, arith::RemFOp::create(b, loc, x, y), y,
                      /*isFloat=*/true);
  case BinaryKind::pow:
    return math::PowFOp::create(b, loc, x, y);
  case BinaryKind::max:
    return arith::MaximumFOp::create(b, loc, x, y);
  case BinaryKind::min:
    return arith::MinimumFOp::create(b, loc, x, y);
  default:
    return nullptr;
  }
}

static Value buildIntBinary(OpBuilder &b, Location loc, BinaryKind kind,
                            Value x, Value y, bool isUnsigned) {
  switch (kind) {
  case BinaryKind::add:
    return arith::AddIOp::create(b, loc, x, y);
  case BinaryKind::sub:
    return arith::SubIOp::create(b, loc, x, y);
  case BinaryKind::mul:
    return arith::MulIOp::create(b, loc, x, y);
  case BinaryKind::div:
    if (isUnsigned)
      return arith::DivUIOp::create(b, loc, x, y);
    return arith::DivSIOp::create(b, loc, x, y);
  case BinaryKind::rem:
    if (isUnsigned)
      return arith::RemUIOp::create(b, loc, x, y);
    return arith::RemSIOp::create(b, loc, x, y);
  case BinaryKind::mod:
    if (isUnsigned)
      return arith::RemUIOp::create(b, loc, x, y);
    return fixModSign(b, loc, arith::RemSIOp::create(b, loc, x, y), y,
                      /*isFloat=*/false);
  case BinaryKind::pow:
    return math::IPowIOp::create(b, loc, x, y);
  case BinaryKind::max:
    if (isUnsigned)
      return arith::MaxUIOp::create(b, loc, x, y);
    return arith::MaxSIOp::create(b, loc, x, y);
  case BinaryKind::min:
    if (isUnsigned)
      return arith::MinUIOp::create(b, loc, x, y);
    return arith::MinSIOp::create(b, loc, x, y);
  case BinaryKind::land:
    return arith::AndIOp::create(b, loc, x, y);
  case BinaryKind::lor:
    return arith::OrIOp::create(b, loc, x, y);
  case BinaryKind::lxor:
    return arith::XOrIOp::create(b, loc, x, y);
  case BinaryKind::shl:
    return arith::ShLIOp::create(b, loc, x, y);
  case BinaryKind::shr:
    if (isUnsigned)
      return arith::ShRUIOp::create(b, loc, x, y);
    return arith::ShRSIOp::create(b, loc, x, y);
  }
  return nullptr;
}

static Value buildCompare(OpBuilder &b, Location loc, CompareKind kind, Value x,
                          Value y, bool isUnsigned) {
  if (isa<FloatType>(x.getType())) {
    arith::CmpFPredicate pred;
    switch (kind) {
    case CompareKind::eq:
      pred = arith::CmpFPredicate::OEQ;
      break;
    case CompareKind::ne:
      pred = arith::CmpFPredicate::UNE;
      break;
    case CompareKind::lt:
      pred = arith::CmpFPredicate::OLT;
      break;
    case CompareKind::le:
      pred = arith::CmpFPredicate::OLE;
      break;
    case CompareKind::gt:
      pred = arith::CmpFPredicate::OGT;
      break;
    case CompareKind::ge:
      pred = arith::CmpFPredicate::OGE;
      break;
    }
    return arith::CmpFOp::create(b, loc, pred, x, y);
  }
  bool u = isUnsigned || x.getType().isInteger(1);
  arith::CmpIPredicate pred;
  switch (kind) {
  case CompareKind::eq:
    pred = arith::CmpIPredicate::eq;
    break;
  case CompareKind::ne:
    pred = arith::CmpIPredicate::ne;
    break;
  case CompareKind::lt:
    pred = u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt;
    break;
  case CompareKind::le:
    pred = u ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle;
    break;
  case CompareKind::gt:
    pred = u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt;
    break;
  case CompareKind::ge:
    pred = u ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge;
    break;
  }
  return arith::CmpIOp::create(b, loc, pred, x, y);
}

/// Extends floats narrower than f32 to f32 for computing.
static Value widen(OpBuilder &b, Location loc, Value v) {
  if (isNarrowFloat(v.getType()))
    return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  return v;
}

/// Truncates a computed value back to `type` if it was widened.
static Value narrow(OpBuilder &b, Location loc, Value v, Type type) {
  if (v.getType() != type)
    return arith::TruncFOp::create(b, loc, type, v);
  return v;
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct ConstantLowering : OpConversionPattern<ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConstantOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    TypedAttr value = cast<TypedAttr>(op.getValue());
    if (value.getType() != type) {
      auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
      if (!dense)
        return rewriter.notifyMatchFailure(
            op, "unsigned constants must be dense elements");
      value = dense.bitcast(type.getElementType());
    }
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type, value);
    return success();
  }
};

/// A key left outside a training step (an inference program with a
/// training-mode dropout) is the key of step 0.
struct RngKeyLowering : OpConversionPattern<RngKeyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(RngKeyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, type,
        DenseElementsAttr::get(type, APInt(64, stepKeyValue(0, op.getSalt()))));
    return success();
  }
};

struct IotaLowering : OpConversionPattern<IotaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(IotaOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    bool isUnsigned = isUnsignedElement(op.getType());
    Location loc = op.getLoc();
    int64_t dim = op.getDimension();
    Value result = createElementwise(
        rewriter, loc, {}, type.getShape(), type.getElementType(),
        [&](OpBuilder &b, Location l, ValueRange) {
          Value idx = linalg::IndexOp::create(b, l, dim);
          return convertScalar(b, l, idx, type.getElementType(),
                               /*srcUnsigned=*/false, isUnsigned);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

using ScalarBuilder = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// The generic of a unary or binary op over `operands` of type `type`: its
/// body is `buildFloat` on the operands widened to the compute type, or
/// `buildInt` on the integer operands, narrowed back to the element type.
/// Null when the builder has no op for the kind and element type.
static Value createArithmetic(OpBuilder &builder, Location loc,
                              ValueRange operands, RankedTensorType type,
                              ScalarBuilder buildFloat,
                              ScalarBuilder buildInt) {
  Type elementType = type.getElementType();
  bool failed = false;
  Value result = createElementwise(
      builder, loc, operands, type.getShape(), elementType,
      [&](OpBuilder &b, Location l, ValueRange args) -> Value {
        Value r;
        if (isa<FloatType>(elementType)) {
          SmallVector<Value> wide;
          for (Value arg : args)
            wide.push_back(widen(b, l, arg));
          r = buildFloat(b, l, wide);
        } else {
          r = buildInt(b, l, args);
        }
        if (!r) {
          failed = true;
          return args[0];
        }
        return narrow(b, l, r, elementType);
      });
  return failed ? Value() : result;
}

struct UnaryLowering : OpConversionPattern<UnaryOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(UnaryOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    bool isUnsigned = isUnsignedElement(op.getType());
    Value result = createArithmetic(
        rewriter, op.getLoc(), adaptor.getOperand(),
        cast<RankedTensorType>(adaptor.getOperand().getType()),
        [&](OpBuilder &b, Location l, ValueRange x) {
          return buildFloatUnary(b, l, op.getKind(), x[0]);
        },
        [&](OpBuilder &b, Location l, ValueRange x) {
          return buildIntUnary(b, l, op.getKind(), x[0], isUnsigned);
        });
    if (!result)
      return rewriter.notifyMatchFailure(op, "unary kind not valid for type");
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct BinaryLowering : OpConversionPattern<BinaryOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BinaryOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    bool isUnsigned = isUnsignedElement(op.getType());
    Value result = createArithmetic(
        rewriter, op.getLoc(), {adaptor.getLhs(), adaptor.getRhs()},
        cast<RankedTensorType>(adaptor.getLhs().getType()),
        [&](OpBuilder &b, Location l, ValueRange xy) {
          return buildFloatBinary(b, l, op.getKind(), xy[0], xy[1]);
        },
        [&](OpBuilder &b, Location l, ValueRange xy) {
          return buildIntBinary(b, l, op.getKind(), xy[0], xy[1], isUnsigned);
        });
    if (!result)
      return rewriter.notifyMatchFailure(op, "binary kind not valid for type");
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct CompareLowering : OpConversionPattern<CompareOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CompareOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(adaptor.getLhs().getType());
    bool isUnsigned = isUnsignedElement(op.getLhs().getType());
    Value result = createElementwise(
        rewriter, op.getLoc(), {adaptor.getLhs(), adaptor.getRhs()},
        type.getShape(), rewriter.getI1Type(),
        [&](OpBuilder &b, Location l, ValueRange args) {
          return buildCompare(b, l, op.getKind(), widen(b, l, args[0]),
                              widen(b, l, args[1]), isUnsigned);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct SelectLowering : OpConversionPattern<SelectOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SelectOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(adaptor.getOnTrue().getType());
    Value result = createElementwise(
        rewriter, op.getLoc(),
        {adaptor.getCond(), adaptor.getOnTrue(), adaptor.getOnFalse()},
        type.getShape(), type.getElementType(),
        [&](OpBuilder &b, Location l, ValueRange args) {
          return arith::SelectOp::create(b, l, args[0], args[1], args[2]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ConvertLowering : OpConversionPattern<ConvertOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConvertOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Value result = convertTensor(rewriter, op.getLoc(), adaptor.getOperand(),
                                 type.getElementType(),
                                 isUnsignedElement(op.getOperand().getType()),
                                 isUnsignedElement(op.getType()));
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct BitcastLowering : OpConversionPattern<BitcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BitcastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Type to = type.getElementType();
    Value result = createElementwise(
        rewriter, op.getLoc(), adaptor.getOperand(), type.getShape(), to,
        [&](OpBuilder &b, Location l, ValueRange args) -> Value {
          Value v = args[0];
          Type from = v.getType();
          if (from == to)
            return v;
          // i1 is a byte holding 0 or 1.
          if (from.isInteger(1))
            return arith::ExtUIOp::create(b, l, to, v);
          if (to.isInteger(1)) {
            if (!from.isInteger(8))
              v = arith::BitcastOp::create(b, l, b.getI8Type(), v);
            return arith::CmpIOp::create(
                b, l, arith::CmpIPredicate::ne, v,
                arith::ConstantOp::create(b, l, b.getI8IntegerAttr(0)));
          }
          return arith::BitcastOp::create(b, l, to, v);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::cleave::lowering::populateElementwisePatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<ConstantLowering, RngKeyLowering, IotaLowering, UnaryLowering,
               BinaryLowering, CompareLowering, SelectLowering, ConvertLowering,
               BitcastLowering>(converter, patterns.getContext());
}
