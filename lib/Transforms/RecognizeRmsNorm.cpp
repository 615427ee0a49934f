//===- RecognizeRmsNorm.cpp - Spelled-out RMS norm as cleave.rms_norm -----===//
//
// Part of --cleave-recognize-composites: from each sum of squares, the mean,
// epsilon, inverse root, the product with x and the scale.
//
//===----------------------------------------------------------------------===//

#include "Recognize.h"

#include "Cleave/Utils/Emitter.h"

#include "mlir/IR/Builders.h"

#include <cmath>

using ::cleave::Emitter;

namespace cleave::recognize {

/// Equal up to the rounding of a float constant (a count or its inverse).
static bool near(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::fabs(b);
}

namespace {
/// A spelled-out RMS normalization, from its sum of squares.
struct RmsNormMatch {
  Value x, scale;
  Operation *output = nullptr;
  int64_t axis = 0;
  double epsilon = 0;
  SmallVector<Operation *> ops;
};
} // namespace

/// The single user of `v`, if it is an `Op`.
template <typename Op> static Op onlyUser(Value v) {
  if (!v.hasOneUse())
    return {};
  return dyn_cast<Op>(*v.user_begin());
}

/// `v`'s one user, a binary op of `kind` whose other operand is a splat
/// constant; sets `c` and `other` (the operand that is `v`, lhs or rhs).
static BinaryOp splatUser(Value v, BinaryKind kind, double &c, bool &vIsLhs) {
  auto user = onlyUser<BinaryOp>(v);
  if (!user || user.getKind() != kind)
    return {};
  vIsLhs = user.getLhs() == v;
  std::optional<double> s = getSplat(vIsLhs ? user.getRhs() : user.getLhs());
  if (!s)
    return {};
  c = *s;
  return user;
}

/// `v` broadcast to `shape` by its one user, with its dimensions kept in
/// order; the broadcast's result, or null.
static Value broadcastTo(Value v, ArrayRef<int64_t> shape) {
  if (typeOf(v).getShape() == shape)
    return v;
  auto b = onlyUser<BroadcastInDimOp>(v);
  if (!b || typeOf(b).getShape() != shape ||
      !llvm::equal(b.getBroadcastDimensions(),
                   llvm::seq<int64_t>(0, typeOf(v).getRank())))
    return {};
  return b.getResult();
}

/// The other operand of a mul that reads `v`, its one user.
static BinaryOp mulUser(Value v, Value &other) {
  auto mul = onlyUser<BinaryOp>(v);
  if (!mul || mul.getKind() != BinaryKind::mul)
    return {};
  other = mul.getLhs() == v ? mul.getRhs() : mul.getLhs();
  return mul;
}

static LogicalResult matchRmsNorm(ReduceOp reduce, RmsNormMatch &m) {
  if (reduce.getKind() != ReduceKind::sum)
    return failure();
  Value squares = reduce.getOperand();
  auto square = squares.getDefiningOp<BinaryOp>();
  if (!square || !squares.hasOneUse())
    return failure();
  if (square.getKind() == BinaryKind::pow) {
    std::optional<double> e = getSplat(square.getRhs());
    if (!e || *e != 2.0)
      return miss(reduce, "the sum is not of squares");
  } else if (square.getKind() != BinaryKind::mul ||
             square.getLhs() != square.getRhs()) {
    return failure();
  }
  m.x = square.getLhs();
  RankedTensorType xType = typeOf(m.x);
  if (!isa<FloatType>(xType.getElementType()))
    return failure();
  ArrayRef<int64_t> shape = xType.getShape();
  int64_t rank = xType.getRank();
  ArrayRef<int64_t> dims = reduce.getDimensions();
  if (dims.empty() || dims.back() != rank - 1 ||
      !llvm::equal(dims, llvm::seq<int64_t>(dims.front(), rank)))
    return miss(reduce, "the sum is not over the trailing dimensions");
  m.axis = dims.front();
  int64_t count = 1;
  for (int64_t d : dims)
    count *= shape[d];
  m.ops.append({reduce, square});

  // The mean, with or without the reduced dimensions kept.
  Value cur = reduce.getResult();
  if (auto keep = onlyUser<ReshapeOp>(cur)) {
    SmallVector<int64_t> kept(shape);
    for (int64_t d : dims)
      kept[d] = 1;
    if (typeOf(keep).getShape() != ArrayRef<int64_t>(kept))
      return miss(reduce, "the sum is reshaped");
    m.ops.push_back(keep);
    cur = keep.getResult();
  }
  double c;
  bool lhs;
  if (BinaryOp div = splatUser(cur, BinaryKind::div, c, lhs); div && lhs) {
    if (!near(c, static_cast<double>(count)))
      return miss(div, "the sum of squares is not divided by their count");
    cur = div.getResult();
    m.ops.push_back(div);
  } else if (BinaryOp mul = splatUser(cur, BinaryKind::mul, c, lhs)) {
    if (!near(c * static_cast<double>(count), 1.0))
      return miss(mul, "the sum of squares is not divided by their count");
    cur = mul.getResult();
    m.ops.push_back(mul);
  } else {
    return miss(reduce, "no mean of the squares");
  }
  BinaryOp addEps = splatUser(cur, BinaryKind::add, c, lhs);
  if (!addEps || !(c >= 0) || !std::isfinite(c))
    return miss(reduce, "the mean of the squares is not added to a "
                        "non-negative constant");
  m.epsilon = c;
  m.ops.push_back(addEps);
  cur = addEps.getResult();

  // x / sqrt(mean + eps): x * rsqrt, x * reciprocal(sqrt), x * (1 / sqrt) or
  // x / sqrt.
  Value normalized, inverse;
  auto unary = onlyUser<UnaryOp>(cur);
  if (unary && unary.getKind() == UnaryKind::rsqrt) {
    inverse = unary.getResult();
    m.ops.push_back(unary);
  } else if (unary && unary.getKind() == UnaryKind::sqrt) {
    m.ops.push_back(unary);
    Value root = unary.getResult();
    auto after = onlyUser<UnaryOp>(root);
    if (after && after.getKind() == UnaryKind::reciprocal) {
      inverse = after.getResult();
      m.ops.push_back(after);
    } else if (BinaryOp div = onlyUser<BinaryOp>(root);
               div && div.getKind() == BinaryKind::div &&
               div.getRhs() == root) {
      std::optional<double> one = getSplat(div.getLhs());
      if (!one || *one != 1.0)
        return miss(div, "the root is not inverted");
      inverse = div.getResult();
      m.ops.push_back(div);
    } else if (Value wide = broadcastTo(root, shape)) {
      auto div = onlyUser<BinaryOp>(wide);
      if (!div || div.getKind() != BinaryKind::div || div.getLhs() != m.x ||
          div.getRhs() != wide)
        return miss(reduce, "x is not divided by the root mean square");
      if (wide != root)
        m.ops.push_back(wide.getDefiningOp());
      m.ops.push_back(div);
      normalized = div.getResult();
    } else {
      return miss(reduce, "the root is not inverted");
    }
  } else {
    return miss(reduce, "no square root of the mean");
  }
  if (!normalized) {
    Value wide = broadcastTo(inverse, shape);
    Value other;
    BinaryOp mul = wide ? mulUser(wide, other) : BinaryOp();
    if (!mul || other != m.x)
      return miss(reduce,
                  "x is not multiplied by the inverse root mean square");
    if (wide != inverse)
      m.ops.push_back(wide.getDefiningOp());
    m.ops.push_back(mul);
    normalized = mul.getResult();
  }
  m.output = normalized.getDefiningOp();

  // The scale: a tensor of the normalized shape broadcast over the rest.
  Value wideScale;
  if (BinaryOp mul = mulUser(normalized, wideScale)) {
    ArrayRef<int64_t> normShape = shape.drop_front(m.axis);
    auto b = wideScale.getDefiningOp<BroadcastInDimOp>();
    Value scale = b ? b.getOperand() : wideScale;
    if (typeOf(scale).getShape() == normShape &&
        (!b || llvm::equal(b.getBroadcastDimensions(),
                           llvm::seq<int64_t>(m.axis, rank)))) {
      m.scale = scale;
      m.output = mul;
      m.ops.push_back(mul);
      if (b)
        m.ops.push_back(b);
    }
  }
  return success();
}

static void rewriteRmsNorm(RmsNormMatch &m) {
  OpBuilder b(m.output);
  Emitter e{b, m.output->getLoc()};
  RankedTensorType xType = typeOf(m.x);
  Value scale = m.scale;
  if (!scale)
    scale = e.splat(RankedTensorType::get(xType.getShape().drop_front(m.axis),
                                          xType.getElementType()),
                    1.0);
  auto op =
      RmsNormOp::create(b, m.output->getLoc(), xType, m.x, scale,
                        static_cast<uint64_t>(m.axis), APFloat(m.epsilon));
  m.output->getResult(0).replaceAllUsesWith(op.getResult());
  eraseDead(m.ops);
}

bool recognizeRmsNorm(ReduceOp reduce) {
  RmsNormMatch m;
  if (failed(matchRmsNorm(reduce, m)))
    return false;
  rewriteRmsNorm(m);
  return true;
}

} // namespace cleave::recognize
