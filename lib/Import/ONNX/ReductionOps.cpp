//===- ReductionOps.cpp - Reduce*, ArgMax/ArgMin and CumSum ---------------===//

#include "NodeContext.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

LogicalResult convertReduce(NodeContext &ctx) {
  StringRef op = ctx.opType();
  Value x = ctx.input(0);
  if (!x)
    return failure();
  // ReduceSum takes axes as an input since opset 13, the others since 18.
  int64_t inputOpset = op == "ReduceSum" ? 13 : 18;
  bool present;
  auto axes = getAxes(ctx, inputOpset, 1, present);
  if (failed(axes))
    return failure();
  bool keepDims = ctx.attrInt("keepdims", 1) != 0;
  int64_t rank = rankOf(x);
  SmallVector<int64_t> dims;
  if (axes->empty()) {
    if (ctx.attrInt("noop_with_empty_axes", 0) != 0) {
      ctx.setOutput(0, x);
      if (op == "ReduceMean" || op == "ReduceMax" || op == "ReduceMin" ||
          op == "ReduceProd" || op == "ReduceSum")
        return success();
      // The norm-like reductions still apply their elementwise part.
    } else {
      dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    }
  } else {
    auto n = ctx.normAxes(*axes, rank);
    if (failed(n))
      return failure();
    dims = *n;
  }
  bool fp = isa<FloatType>(elemOf(x));
  auto needFloat = [&]() {
    if (!fp)
      ctx.error() << "needs a floating-point input, got " << x.getType();
    return fp;
  };
  int64_t count = 1;
  for (int64_t d : dims)
    count *= shapeOf(x)[d];
  if (count == 0 && !dims.empty() && product(shapeOf(x)) == 0) {
    // A reduction over an empty set (opset 18) is its identity: 0, 1,
    // -inf or the type's least value for max, +inf or its greatest for
    // min, NaN for the mean, log(0) for the log-sums.
    double inf = std::numeric_limits<double>::infinity(), v = 0;
    auto it = dyn_cast<IntegerType>(elemOf(x));
    int64_t least = 0, greatest = 1, n = 0;
    if (it && it.getWidth() > 1) {
      unsigned w = it.getWidth();
      int64_t lowest = std::numeric_limits<int64_t>::min() >> (64 - w);
      int64_t highest = std::numeric_limits<int64_t>::max() >> (64 - w);
      least = it.isUnsigned() ? 0 : lowest;
      greatest = it.isUnsigned() ? -1 : highest; // -1: all ones, wrapped
    }
    if (op == "ReduceProd")
      v = n = 1;
    else if (op == "ReduceMax")
      v = -inf, n = least;
    else if (op == "ReduceMin")
      v = inf, n = greatest;
    else if (op == "ReduceMean")
      v = std::numeric_limits<double>::quiet_NaN();
    else if (op == "ReduceLogSum" || op == "ReduceLogSumExp")
      v = -inf;
    if (!fp &&
        (op == "ReduceLogSum" || op == "ReduceLogSumExp" || op == "ReduceL2")) {
      ctx.error() << "needs a floating-point input, got " << x.getType();
      return failure();
    }
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(dims, d))
        shape.push_back(shapeOf(x)[d]);
      else if (keepDims)
        shape.push_back(1);
    ConstTensor c;
    c.elemType = elemOf(x);
    c.shape = shape;
    c.allocate();
    for (int64_t i = 0, e = c.numel(); i < e; ++i)
      c.set(i, v, wrapInt(c.elemType, n));
    return ctx.finish(ctx.constant(c));
  }
  Value r;
  if (op == "ReduceSum") {
    r = ctx.reduce(ReduceKind::sum, x, dims, keepDims);
  } else if (op == "ReduceProd") {
    r = ctx.reduce(ReduceKind::prod, x, dims, keepDims);
  } else if (op == "ReduceMax") {
    r = ctx.reduce(ReduceKind::max, x, dims, keepDims);
  } else if (op == "ReduceMin") {
    r = ctx.reduce(ReduceKind::min, x, dims, keepDims);
  } else if (op == "ReduceMean") {
    r = ctx.reduce(ReduceKind::sum, x, dims, keepDims);
    r = ctx.binary(BinaryKind::div, r, ctx.splat(elemOf(x), {}, count));
  } else if (op == "ReduceL1") {
    r = ctx.reduce(ReduceKind::sum, ctx.unary(UnaryKind::abs, x), dims,
                   keepDims);
  } else if (op == "ReduceSumSquare") {
    r = ctx.reduce(ReduceKind::sum, ctx.binary(BinaryKind::mul, x, x), dims,
                   keepDims);
  } else if (op == "ReduceL2") {
    if (!needFloat())
      return failure();
    r = ctx.unary(UnaryKind::sqrt,
                  ctx.reduce(ReduceKind::sum, ctx.binary(BinaryKind::mul, x, x),
                             dims, keepDims));
  } else if (op == "ReduceLogSum") {
    if (!needFloat())
      return failure();
    r = ctx.unary(UnaryKind::log,
                  ctx.reduce(ReduceKind::sum, x, dims, keepDims));
  } else { // ReduceLogSumExp, stable: max + log(sum(exp(x - max)))
    if (!needFloat())
      return failure();
    if (dims.empty()) {
      r = x;
    } else {
      Value m = ctx.reduce(ReduceKind::max, x, dims, /*keepDims=*/true);
      // Guard -inf maxima (all -inf rows) so x - max stays defined.
      Value finite = ctx.compare(
          CompareKind::gt, m,
          ctx.splat(elemOf(x), {}, -std::numeric_limits<double>::infinity()));
      m = ctx.select(finite, m, ctx.splatLike(m, 0));
      Value e = ctx.unary(UnaryKind::exp, ctx.binary(BinaryKind::sub, x, m));
      Value s =
          ctx.unary(UnaryKind::log, ctx.reduce(ReduceKind::sum, e, dims, true));
      r = ctx.binary(BinaryKind::add, s, m);
      if (!keepDims) {
        SmallVector<int64_t> shape;
        for (int64_t d = 0; d < rank; ++d)
          if (!llvm::is_contained(dims, d))
            shape.push_back(shapeOf(x)[d]);
        r = ctx.reshape(r, shape);
      }
    }
  }
  return ctx.finish(r);
}

LogicalResult convertArgReduce(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto axis = ctx.axisAttr(x, 0);
  if (failed(axis))
    return failure();
  int64_t rank = rankOf(x);
  bool keepDims = ctx.attrInt("keepdims", 1) != 0;
  bool last = ctx.attrInt("select_last_index", 0) != 0;
  if (shapeOf(x)[*axis] == 0) {
    ctx.error() << "cannot take the arg-max/min of an empty axis";
    return failure();
  }
  SmallVector<int64_t> shape, kept;
  for (int64_t d = 0; d < rank; ++d) {
    kept.push_back(d == *axis ? 1 : shapeOf(x)[d]);
    if (d != *axis)
      shape.push_back(shapeOf(x)[d]);
  }
  auto kind = ctx.opType() == "ArgMax" ? ReduceKind::max : ReduceKind::min;
  Value r =
      ArgReduceOp::create(ctx.b, ctx.loc,
                          RankedTensorType::get(shape, ctx.b.getI64Type()),
                          kind, x, static_cast<uint64_t>(*axis), last)
          .getResult();
  return ctx.finish(keepDims ? ctx.reshape(r, kept) : r);
}

/// The axis of a CumSum or CumProd: input 1, one value, normalized
/// against `x`'s rank (at least 1). Fails without a word when `x` is null
/// (its absence is reported).
static FailureOr<int64_t> scanAxis(NodeContext &ctx, Value x) {
  if (!x)
    return failure();
  auto axisVals = ctx.constInts(1, "axis");
  if (failed(axisVals))
    return failure();
  if (axisVals->size() != 1 || rankOf(x) == 0) {
    ctx.error() << "axis must hold one value and the input have rank >= 1";
    return failure();
  }
  return ctx.normAxis((*axisVals)[0], rankOf(x));
}

LogicalResult convertCumSum(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto axis = scanAxis(ctx, x);
  if (failed(axis))
    return failure();
  return ctx.finish(CumSumOp::create(ctx.b, ctx.loc, x.getType(), x,
                                     static_cast<uint64_t>(*axis),
                                     ctx.attrInt("exclusive", 0) != 0,
                                     ctx.attrInt("reverse", 0) != 0)
                        .getResult());
}

/// CumProd (opset 26) as a log-depth scan: ceil(log2 n) products of the
/// running result with itself shifted by 1, 2, 4, ... along the axis (the
/// vacated places hold 1).
LogicalResult convertCumProd(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto axis = scanAxis(ctx, x);
  if (failed(axis))
    return failure();
  bool reverse = ctx.attrInt("reverse", 0) != 0;
  int64_t rank = rankOf(x), n = shapeOf(x)[*axis];
  // `v` moved by k places along the scan direction, 1s where it came from.
  auto shift = [&](Value v, int64_t k) -> Value {
    SmallVector<int64_t> start(rank, 0), limit(shapeOf(v)), strides(rank, 1);
    SmallVector<int64_t> low(rank, 0), high(rank, 0);
    if (reverse) {
      start[*axis] = k;
      high[*axis] = k;
    } else {
      limit[*axis] = n - k;
      low[*axis] = k;
    }
    Value part = ctx.slice(v, start, limit, strides);
    return PadOp::create(ctx.b, ctx.loc, v.getType(), part,
                         ctx.splat(elemOf(v), {}, 1), low, high,
                         PadMode::constant)
        .getResult();
  };
  if (n == 0)
    return ctx.finish(x);
  Value y = ctx.attrInt("exclusive", 0) != 0 ? shift(x, 1) : x;
  for (int64_t k = 1; k < n; k *= 2)
    y = ctx.binary(BinaryKind::mul, y, shift(y, k));
  return ctx.finish(y);
}

} // namespace

void registerReductionConverters(llvm::StringMap<ConverterFn> &t) {
  for (StringRef op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                       "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                       "ReduceLogSumExp", "ReduceSumSquare"})
    t[op] = convertReduce;
  t["ArgMax"] = convertArgReduce;
  t["ArgMin"] = convertArgReduce;
  t["CumSum"] = convertCumSum;
  t["CumProd"] = convertCumProd;
}

} // namespace cleave::onnximport
