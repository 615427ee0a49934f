//===- GridSampleOps.cpp - GridSample as gathers of weighted taps ---------===//
//
// GridSample (opset 16; N-D since opset 20) samples X [N, C, S...] at the
// points a run-time grid [N, O..., d] gives in [-1, 1]. The grid is data, so
// the taps are computed with elementwise ops: each spatial coordinate is
// denormalized and moved inside by the padding mode, split into its taps
// (1 nearest, 2 linear, 4 cubic per dimension) with weights, and every
// combination of taps is one GatherElements over the flattened spatial
// dimensions, multiplied by the product of its weights and summed. The
// arithmetic follows the ONNX reference implementation step by step.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

/// Elementwise helpers over values of one shape and float type.
struct Arith {
  NodeContext &ctx;
  Value like;
  Value c(double v) { return ctx.splatLike(like, v); }
  Value add(Value a, Value b) { return ctx.binary(BinaryKind::add, a, b); }
  Value sub(Value a, Value b) { return ctx.binary(BinaryKind::sub, a, b); }
  Value mul(Value a, Value b) { return ctx.binary(BinaryKind::mul, a, b); }
  Value div(Value a, Value b) { return ctx.binary(BinaryKind::div, a, b); }
  Value floor(Value a) { return ctx.unary(UnaryKind::floor, a); }
  Value lt(Value a, Value b) { return ctx.compare(CompareKind::lt, a, b); }
  Value gt(Value a, Value b) { return ctx.compare(CompareKind::gt, a, b); }
  Value sel(Value c, Value a, Value b) { return ctx.select(c, a, b); }
  Value clamp(Value a, double lo, double hi) {
    return ctx.binary(BinaryKind::min, ctx.binary(BinaryKind::max, a, c(lo)),
                      c(hi));
  }
  /// Reflects `v` at the nearer border until it lies in [lo, hi].
  Value reflect(Value v, double lo, double hi) {
    double range = hi - lo;
    if (range <= 0)
      return c(lo);
    Value below = lt(v, c(lo)), above = gt(v, c(hi));
    Value dx = sel(below, sub(c(lo), v), sub(v, c(hi)));
    Value n = floor(div(dx, c(range)));
    Value r = sub(dx, mul(n, c(range)));
    Value odd = ctx.compare(CompareKind::ne,
                            sub(n, mul(c(2), floor(div(n, c(2))))), c(0));
    Value fromLo = add(c(lo), r), fromHi = sub(c(hi), r);
    return sel(below, sel(odd, fromHi, fromLo),
               sel(above, sel(odd, fromLo, fromHi), v));
  }
};

/// One tap of one dimension: its position (an integer-valued float) and
/// weight.
struct Tap {
  Value pos, weight;
};

LogicalResult convertGridSample(NodeContext &ctx) {
  Value x = ctx.input(0), grid = ctx.input(1);
  if (!x || !grid)
    return failure();
  int64_t rank = rankOf(x), d = rank - 2;
  Type et = elemOf(x);
  ArrayRef<int64_t> xs = shapeOf(x), gs = shapeOf(grid);
  if (d < 1 || !isa<FloatType>(et) || !isa<FloatType>(elemOf(grid)) ||
      rankOf(grid) != rank || gs[0] != xs[0] || gs.back() != d) {
    ctx.error() << "needs a float X [N, C, S...] and a float grid [N, O..., "
                << "d] with d spatial dimensions, got " << x.getType()
                << " and " << grid.getType();
    return failure();
  }
  std::string mode = ctx.attrString("mode", "linear");
  if (mode == "bilinear")
    mode = "linear";
  if (mode == "bicubic")
    mode = "cubic";
  std::string padding = ctx.attrString("padding_mode", "zeros");
  bool align = ctx.attrInt("align_corners", 0) != 0;
  if ((mode != "linear" && mode != "nearest" && mode != "cubic") ||
      (padding != "zeros" && padding != "border" && padding != "reflection")) {
    ctx.error() << "mode '" << mode << "' or padding_mode '" << padding
                << "' is not supported";
    return failure();
  }
  if (mode == "cubic" && d != 2) {
    ctx.error() << "cubic mode needs 2 spatial dimensions, got " << d;
    return failure();
  }
  int64_t n = xs[0], channels = xs[1];
  SmallVector<int64_t> outSpatial(gs.begin() + 1, gs.end() - 1);
  int64_t q = product(outSpatial), p = product(xs.drop_front(2));
  if (n * channels * q == 0 || p == 0) {
    ctx.error() << "empty inputs are not supported";
    return failure();
  }
  // The grid as [N, Q, d] in X's type; coordinate i of spatial dim k is
  // grid[..., d - 1 - k] (the grid lists x, the last dim, first).
  Value g = ctx.reshape(ctx.convert(grid, et), {n, q, d});
  SmallVector<int64_t> flat{n, q};
  Arith a{ctx, ctx.splat(et, flat, 0)};

  SmallVector<SmallVector<Tap>> taps(d);
  for (int64_t k = 0; k < d; ++k) {
    double size = xs[2 + k];
    double lo = align ? 0.0 : -0.5, hi = align ? size - 1 : size - 0.5;
    int64_t comp = d - 1 - k;
    Value v = ctx.reshape(
        ctx.slice(g, {0, 0, comp}, {n, q, comp + 1}, {1, 1, 1}), flat);
    v = align
            ? a.mul(a.div(a.add(v, a.c(1)), a.c(2)), a.c(size - 1))
            : a.div(a.sub(a.mul(a.add(v, a.c(1)), a.c(size)), a.c(1)), a.c(2));
    if (mode == "nearest")
      v = ctx.unary(UnaryKind::round, v);
    Value outside =
        ctx.binary(BinaryKind::lor, a.lt(v, a.c(lo)), a.gt(v, a.c(hi)));
    if (padding == "border")
      v = a.sel(outside, a.clamp(v, 0, size - 1), v);
    else if (padding == "reflection")
      v = a.sel(outside, a.reflect(v, lo, hi), v);
    if (mode == "nearest") {
      // C++'s truncation toward zero.
      Value t =
          a.sel(a.lt(v, a.c(0)), ctx.unary(UnaryKind::ceil, v), a.floor(v));
      taps[k].push_back({t, a.c(1)});
      continue;
    }
    Value x0 = a.floor(v), t = a.sub(v, x0);
    if (mode == "linear") {
      taps[k].push_back({x0, a.sub(a.c(1), t)});
      taps[k].push_back({a.add(x0, a.c(1)), t});
      continue;
    }
    // Keys' cubic convolution, alpha = -0.75, at distances t+1, t, 1-t, 2-t.
    const double al = -0.75;
    auto far = [&](Value s) { // (al*s - 5al)*s + 8al)*s - 4al for 1 <= s < 2
      return a.sub(a.mul(a.add(a.mul(a.sub(a.mul(a.c(al), s), a.c(5 * al)), s),
                               a.c(8 * al)),
                         s),
                   a.c(4 * al));
    };
    auto near = [&](Value s) { // ((al+2)*s - (al+3))*s*s + 1 for s < 1
      return a.add(
          a.mul(a.mul(a.sub(a.mul(a.c(al + 2), s), a.c(al + 3)), s), s),
          a.c(1));
    };
    Value one = a.c(1);
    taps[k].push_back({a.sub(x0, one), far(a.add(t, one))});
    taps[k].push_back({x0, near(t)});
    taps[k].push_back({a.add(x0, one), near(a.sub(one, t))});
    taps[k].push_back({a.add(x0, a.c(2)), far(a.sub(a.c(2), t))});
  }

  // Every combination of taps: a gather of X [N, C, P] at the flattened
  // index, weighted.
  Value xf = ctx.reshape(x, {n, channels, p});
  Type i64 = ctx.b.getI64Type();
  SmallVector<int64_t> gathered{n, channels, q};
  Value acc;
  SmallVector<size_t> pick(d, 0);
  while (true) {
    Value index, weight;
    int64_t stride = 1;
    for (int64_t k = d - 1; k >= 0; --k) {
      double size = xs[2 + k];
      const Tap &tap = taps[k][pick[k]];
      Value pos = tap.pos, w = tap.weight;
      if (padding == "zeros") {
        Value valid = ctx.binary(
            BinaryKind::land, ctx.compare(CompareKind::ge, pos, a.c(0)),
            ctx.compare(CompareKind::le, pos, a.c(size - 1)));
        w = a.sel(valid, w, a.c(0));
        pos = a.clamp(pos, 0, size - 1);
      } else if (padding == "border") {
        pos = a.clamp(pos, 0, size - 1);
      } else {
        double lo = align ? 0.0 : -0.5, hi = align ? size - 1 : size - 0.5;
        pos = a.clamp(a.floor(ctx.binary(BinaryKind::max,
                                         a.reflect(pos, lo, hi), a.c(0))),
                      0, size - 1);
      }
      Value idx = ctx.convert(pos, i64);
      if (stride != 1)
        idx = ctx.binary(BinaryKind::mul, idx, ctx.splat(i64, flat, stride));
      index = index ? ctx.binary(BinaryKind::add, index, idx) : idx;
      weight = weight ? a.mul(weight, w) : w;
      stride *= xs[2 + k];
    }
    Value idx3 = ctx.broadcastTo(ctx.reshape(index, {n, 1, q}), gathered);
    Value w3 = ctx.broadcastTo(ctx.reshape(weight, {n, 1, q}), gathered);
    Value val = GatherElementsOp::create(ctx.b, ctx.loc,
                                         RankedTensorType::get(gathered, et),
                                         xf, idx3, static_cast<uint64_t>(2))
                    .getResult();
    Value term = a.mul(val, w3);
    acc = acc ? ctx.binary(BinaryKind::add, acc, term) : term;
    int64_t k = d - 1;
    while (k >= 0 && ++pick[k] == taps[k].size())
      pick[k--] = 0;
    if (k < 0)
      break;
  }
  if (!acc)
    return failure();
  SmallVector<int64_t> outShape{n, channels};
  outShape.append(outSpatial);
  return ctx.finish(ctx.reshape(acc, outShape));
}

} // namespace

void registerGridSampleConverters(llvm::StringMap<ConverterFn> &t) {
  t["GridSample"] = convertGridSample;
}

} // namespace cleave::onnximport
