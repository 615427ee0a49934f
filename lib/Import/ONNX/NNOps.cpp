//===- NNOps.cpp - Softmax, normalizations, convolution and pooling ------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

LogicalResult requireFloat(NodeContext &ctx, Value v) {
  if (isa<FloatType>(elemOf(v)))
    return success();
  ctx.error() << "needs a floating-point input, got " << v.getType();
  return failure();
}

//===----------------------------------------------------------------------===//
// Softmax family
//===----------------------------------------------------------------------===//

LogicalResult convertSoftmax(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x || failed(requireFloat(ctx, x)))
    return failure();
  bool legacy = ctx.opset < 13;
  auto axis = ctx.axisAttr(x, legacy ? 1 : -1);
  if (failed(axis))
    return failure();
  auto shape = shapeOf(x);
  Value in = x;
  int64_t dim = *axis;
  if (legacy) { // coerce to 2-D [prod(:axis), prod(axis:)]
    in = ctx.reshape(
        x, {product(shape.take_front(dim)), product(shape.drop_front(dim))});
    dim = 1;
  }
  StringRef op = ctx.opType();
  Value r;
  if (op == "Softmax")
    r = SoftmaxOp::create(ctx.b, ctx.loc, in.getType(), in,
                          static_cast<uint64_t>(dim));
  else if (op == "LogSoftmax")
    r = LogSoftmaxOp::create(ctx.b, ctx.loc, in.getType(), in,
                             static_cast<uint64_t>(dim));
  else { // Hardmax: one-hot of the first maximum
    auto is = shapeOf(in);
    if (is[dim] == 0)
      return ctx.finish(x);
    SmallVector<int64_t> red;
    for (int64_t d = 0; d < (int64_t)is.size(); ++d)
      if (d != dim)
        red.push_back(is[d]);
    Type i64 = ctx.b.getI64Type();
    Value arg = ArgReduceOp::create(
        ctx.b, ctx.loc, RankedTensorType::get(red, i64), ReduceKind::max, in,
        static_cast<uint64_t>(dim), false);
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < (int64_t)is.size(); ++d)
      if (d != dim)
        dims.push_back(d);
    auto it = RankedTensorType::get(is, i64);
    Value argB = BroadcastInDimOp::create(ctx.b, ctx.loc, it, arg, dims);
    Value iota = IotaOp::create(ctx.b, ctx.loc, it, static_cast<uint64_t>(dim));
    r = ctx.convert(ctx.compare(CompareKind::eq, argB, iota), elemOf(x));
  }
  return ctx.finish(ctx.reshape(r, shape));
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// A normalization node's input, its normalized dimensions `[axis, rank)`
/// and its scale broadcast to their shape: what LayerNormalization and
/// RMSNormalization share.
struct NormalizationInputs {
  Value x, scale;
  int64_t axis;
  double epsilon;
};

FailureOr<NormalizationInputs> normalizationInputs(NodeContext &ctx) {
  Value x = ctx.input(0), scale = ctx.input(1);
  if (!x || !scale || failed(requireFloat(ctx, x)))
    return failure();
  auto axis = ctx.normAxis(ctx.attrInt("axis", -1), rankOf(x));
  if (failed(axis))
    return failure();
  auto normShape = shapeOf(x).drop_front(*axis);
  auto fits = broadcastShapes(normShape, shapeOf(scale));
  if (!fits || ArrayRef<int64_t>(*fits) != normShape ||
      elemOf(scale) != elemOf(x)) {
    ctx.error() << "scale " << scale.getType()
                << " does not broadcast to the normalized shape of "
                << x.getType();
    return failure();
  }
  return NormalizationInputs{x, ctx.broadcastTo(scale, normShape), *axis,
                             ctx.attrFloat("epsilon", 1e-5)};
}

LogicalResult convertLayerNorm(NodeContext &ctx) {
  auto in = normalizationInputs(ctx);
  if (failed(in))
    return failure();
  Value x = in->x, scale = in->scale;
  int64_t rank = rankOf(x), axis = in->axis;
  double eps = in->epsilon;
  auto normShape = shapeOf(x).drop_front(axis);
  Value bias;
  if (ctx.hasInput(2)) {
    bias = ctx.input(2);
    if (!bias)
      return failure();
    auto f = broadcastShapes(normShape, shapeOf(bias));
    if (!f || ArrayRef<int64_t>(*f) != normShape || elemOf(bias) != elemOf(x)) {
      ctx.error() << "bias does not broadcast to the normalized shape";
      return failure();
    }
    bias = ctx.broadcastTo(bias, normShape);
  } else {
    bias = ctx.splat(elemOf(x), normShape, 0);
  }
  ctx.setOutput(0,
                LayerNormOp::create(ctx.b, ctx.loc, x.getType(), x, scale, bias,
                                    static_cast<uint64_t>(axis), APFloat(eps))
                    .getResult());
  if (ctx.hasOutput(1) || ctx.hasOutput(2)) {
    SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(axis, rank));
    Value n = ctx.splat(elemOf(x), {}, product(normShape));
    Value mean = ctx.binary(BinaryKind::div,
                            ctx.reduce(ReduceKind::sum, x, dims, true), n);
    Value diff = ctx.binary(BinaryKind::sub, x, mean);
    Value var = ctx.binary(BinaryKind::div,
                           ctx.reduce(ReduceKind::sum,
                                      ctx.binary(BinaryKind::mul, diff, diff),
                                      dims, true),
                           n);
    Value inv =
        ctx.unary(UnaryKind::rsqrt, ctx.binary(BinaryKind::add, var,
                                               ctx.splat(elemOf(x), {}, eps)));
    ctx.setOutput(1, mean);
    ctx.setOutput(2, inv);
  }
  return success();
}

/// RMSNormalization (opset 23). The statistic is computed in f32 for bf16
/// and f16 inputs whatever stash_type says (stash_type 1, f32, is the
/// default and what the op does).
LogicalResult convertRmsNorm(NodeContext &ctx) {
  auto in = normalizationInputs(ctx);
  if (failed(in))
    return failure();
  return ctx.finish(
      RmsNormOp::create(ctx.b, ctx.loc, in->x.getType(), in->x, in->scale,
                        static_cast<uint64_t>(in->axis), APFloat(in->epsilon))
          .getResult());
}

LogicalResult convertBatchNorm(NodeContext &ctx) {
  Value x = ctx.input(0), scale = ctx.input(1), b = ctx.input(2),
        mean = ctx.input(3), var = ctx.input(4);
  if (!x || !scale || !b || !mean || !var || failed(requireFloat(ctx, x)))
    return failure();
  if (ctx.attrInt("training_mode", 0) != 0 || ctx.hasOutput(1) ||
      ctx.hasOutput(2)) {
    ctx.error() << "training mode (batch statistics outputs) is not supported; "
                   "BatchNormalization is imported for inference";
    return failure();
  }
  if (rankOf(x) < 2) {
    ctx.error() << "input must have rank >= 2";
    return failure();
  }
  int64_t c = shapeOf(x)[1];
  for (Value p : {scale, b, mean, var})
    if (shapeOf(p) != ArrayRef<int64_t>{c} || elemOf(p) != elemOf(x)) {
      ctx.error() << "parameters must be [" << c << "] of the input's type";
      return failure();
    }
  double eps = ctx.attrFloat("epsilon", 1e-5);
  Value inv =
      ctx.unary(UnaryKind::rsqrt, ctx.binary(BinaryKind::add, var,
                                             ctx.splat(elemOf(x), {}, eps)));
  Value mul = ctx.binary(BinaryKind::mul, scale, inv);
  auto shape = shapeOf(x);
  Value y = ctx.binary(BinaryKind::sub, x, channelBroadcast(ctx, mean, shape));
  y = ctx.binary(BinaryKind::mul, y, channelBroadcast(ctx, mul, shape));
  y = ctx.binary(BinaryKind::add, y, channelBroadcast(ctx, b, shape));
  return ctx.finish(y);
}

LogicalResult convertInstanceNorm(NodeContext &ctx) {
  Value x = ctx.input(0), scale = ctx.input(1), b = ctx.input(2);
  if (!x || !scale || !b || failed(requireFloat(ctx, x)))
    return failure();
  if (rankOf(x) < 3) {
    ctx.error() << "input must have rank >= 3";
    return failure();
  }
  int64_t c = shapeOf(x)[1];
  for (Value p : {scale, b})
    if (shapeOf(p) != ArrayRef<int64_t>{c} || elemOf(p) != elemOf(x)) {
      ctx.error() << "scale and B must be [" << c << "] of the input's type";
      return failure();
    }
  double eps = ctx.attrFloat("epsilon", 1e-5);
  auto spatial = shapeOf(x).drop_front(2);
  Value ones = ctx.splat(elemOf(x), spatial, 1);
  Value zeros = ctx.splat(elemOf(x), spatial, 0);
  Value y = LayerNormOp::create(ctx.b, ctx.loc, x.getType(), x, ones, zeros, 2,
                                APFloat(eps));
  auto shape = shapeOf(x);
  y = ctx.binary(BinaryKind::mul, y, channelBroadcast(ctx, scale, shape));
  y = ctx.binary(BinaryKind::add, y, channelBroadcast(ctx, b, shape));
  return ctx.finish(y);
}

/// GroupNormalization (opset 21; opset 18's per-group scale and bias too):
/// a layer_norm over each group's channels and positions (x viewed as
/// N x G x (C/G * spatial)), then the per-channel scale and bias.
LogicalResult convertGroupNorm(NodeContext &ctx) {
  Value x = ctx.input(0), scale = ctx.input(1), b = ctx.input(2);
  if (!x || !scale || !b || failed(requireFloat(ctx, x)))
    return failure();
  if (rankOf(x) < 2) {
    ctx.error() << "input must have rank >= 2 (N x C x ...), got "
                << x.getType();
    return failure();
  }
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t c = shape[1], groups = ctx.attrInt("num_groups", 0);
  if (groups <= 0 || c % groups != 0) {
    ctx.error() << "num_groups " << groups << " must divide the " << c
                << " channels";
    return failure();
  }
  for (Value p : {scale, b})
    if (rankOf(p) != 1 || (shapeOf(p)[0] != c && shapeOf(p)[0] != groups) ||
        elemOf(p) != elemOf(x)) {
      ctx.error() << "scale and bias must be [" << c << "] (per channel) or ["
                  << groups << "] (per group, opset 18) of the input's type, "
                  << "got " << scale.getType() << " and " << b.getType();
      return failure();
    }
  // Opset 18's per-group parameters, repeated over each group's channels.
  auto perChannel = [&](Value p) {
    if (shapeOf(p)[0] == c)
      return p;
    Value g = ctx.reshape(p, {groups, 1});
    return ctx.reshape(ctx.broadcastTo(g, {groups, c / groups}), {c});
  };
  int64_t perGroup = product(shape) / std::max<int64_t>(shape[0] * groups, 1);
  Value grouped = ctx.reshape(x, {shape[0], groups, perGroup});
  Value ones = ctx.splat(elemOf(x), {perGroup}, 1);
  Value zeros = ctx.splat(elemOf(x), {perGroup}, 0);
  Value y =
      LayerNormOp::create(ctx.b, ctx.loc, grouped.getType(), grouped, ones,
                          zeros, 2, APFloat(ctx.attrFloat("epsilon", 1e-5)));
  y = ctx.reshape(y, shape);
  y = ctx.binary(BinaryKind::mul, y,
                 channelBroadcast(ctx, perChannel(scale), shape));
  y = ctx.binary(BinaryKind::add, y,
                 channelBroadcast(ctx, perChannel(b), shape));
  return ctx.finish(y);
}

//===----------------------------------------------------------------------===//
// Windows: convolution and pooling
//===----------------------------------------------------------------------===//

struct Window {
  SmallVector<int64_t> kernel, strides, dilations, low, high, out;
  SmallVector<int64_t> ceilExtra; // high padding added by ceil_mode only
};

FailureOr<Window> computeWindow(NodeContext &ctx, ArrayRef<int64_t> in,
                                ArrayRef<int64_t> kernel, bool ceilMode) {
  size_t n = in.size();
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides = ctx.attrInts("strides");
  w.dilations = ctx.attrInts("dilations");
  SmallVector<int64_t> pads = ctx.attrInts("pads");
  if (w.strides.empty())
    w.strides.assign(n, 1);
  if (w.dilations.empty())
    w.dilations.assign(n, 1);
  if (pads.empty())
    pads.assign(2 * n, 0);
  if (w.kernel.size() != n || w.strides.size() != n ||
      w.dilations.size() != n || pads.size() != 2 * n) {
    ctx.error() << "kernel_shape, strides, dilations and pads must match the "
                << n << " spatial dimensions";
    return failure();
  }
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  for (size_t i = 0; i < n; ++i) {
    int64_t k = w.kernel[i], s = w.strides[i], d = w.dilations[i];
    if (k < 1 || s < 1 || d < 1 || pads[i] < 0 || pads[i + n] < 0) {
      ctx.error() << "kernel, strides and dilations must be >= 1 and pads >= 0";
      return failure();
    }
    int64_t eff = (k - 1) * d + 1, lo = pads[i], hi = pads[i + n], out;
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      out = (in[i] + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in[i]);
      lo = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      hi = total - lo;
    } else if (autoPad == "VALID") {
      lo = hi = 0;
      out = in[i] >= eff ? (in[i] - eff) / s + 1 : 0;
    } else if (autoPad == "NOTSET") {
      int64_t span = in[i] + lo + hi - eff;
      if (span < 0) {
        ctx.error() << "window (" << eff << ") is larger than padded input ("
                    << in[i] + lo + hi << ") in spatial dim " << i;
        return failure();
      }
      out = (ceilMode ? (span + s - 1) / s : span / s) + 1;
      if (ceilMode && (out - 1) * s >= in[i] + lo)
        --out; // the last window must start inside the input or left pad
    } else {
      ctx.error() << "auto_pad '" << autoPad << "' is not valid";
      return failure();
    }
    int64_t extra =
        std::max<int64_t>(0, (out - 1) * s + eff - (in[i] + lo + hi));
    w.low.push_back(lo);
    w.high.push_back(hi + extra);
    w.ceilExtra.push_back(extra);
    w.out.push_back(out);
  }
  return w;
}

SmallVector<int64_t> kernelFromAttr(NodeContext &ctx, ArrayRef<int64_t> def) {
  if (ctx.hasAttr("kernel_shape"))
    return ctx.attrInts("kernel_shape");
  return SmallVector<int64_t>(def.begin(), def.end());
}

/// The convolution of a Conv-like node (its window attributes) of `x` and
/// `w`, without bias; null after an error.
Value buildConv(NodeContext &ctx, Value x, Value w) {
  int64_t rank = rankOf(x);
  if (rank < 3 || rankOf(w) != rank || elemOf(w) != elemOf(x)) {
    ctx.error() << "needs N x C x spatial input and a filter of equal rank "
                   "and type, got "
                << x.getType() << " and " << w.getType();
    return {};
  }
  auto xs = shapeOf(x), ws = shapeOf(w);
  int64_t groups = ctx.attrInt("group", 1);
  if (groups < 1 || xs[1] % groups != 0 || ws[0] % groups != 0 ||
      ws[1] != xs[1] / groups) {
    ctx.error() << "group " << groups << " does not fit input channels "
                << xs[1] << " and filter " << w.getType();
    return {};
  }
  auto kernel = kernelFromAttr(ctx, ws.drop_front(2));
  if (ArrayRef<int64_t>(kernel) != ws.drop_front(2)) {
    ctx.error() << "kernel_shape does not match the filter";
    return {};
  }
  auto win = computeWindow(ctx, xs.drop_front(2), kernel, false);
  if (failed(win))
    return {};
  SmallVector<int64_t> shape{xs[0], ws[0]};
  shape.append(win->out);
  return ConvOp::create(ctx.b, ctx.loc, RankedTensorType::get(shape, elemOf(x)),
                        x, w, win->strides, win->low, win->high, win->dilations,
                        static_cast<uint64_t>(groups))
      .getResult();
}

LogicalResult convertConv(NodeContext &ctx) {
  Value x = ctx.input(0), w = ctx.input(1);
  if (!x || !w || failed(requireFloat(ctx, x)))
    return failure();
  Value y = buildConv(ctx, x, w);
  if (!y)
    return failure();
  SmallVector<int64_t> shape(shapeOf(y));
  ArrayRef<int64_t> ws = shapeOf(w);
  if (ctx.hasInput(2)) {
    Value bias = ctx.input(2);
    if (!bias)
      return failure();
    if (shapeOf(bias) != ArrayRef<int64_t>{ws[0]} ||
        elemOf(bias) != elemOf(x)) {
      ctx.error() << "bias must be [" << ws[0] << "]";
      return failure();
    }
    y = ctx.binary(BinaryKind::add, y, channelBroadcast(ctx, bias, shape));
  }
  return ctx.finish(y);
}

/// `v - zero_point` in f64 for ConvInteger/QLinearConv: the zero point is
/// a scalar or, for the filter, one value per output channel.
Value centeredInt(NodeContext &ctx, Value v, int zpInput, bool perChannel) {
  Value w = ctx.convert(v, ctx.b.getF64Type());
  if (!ctx.hasInput(zpInput))
    return w;
  Value zp = ctx.input(zpInput);
  if (!zp)
    return {};
  Value z = ctx.convert(zp, ctx.b.getF64Type());
  int64_t n = product(shapeOf(z));
  if (n == 1)
    return ctx.binary(BinaryKind::sub, w, ctx.reshape(z, {}));
  if (!perChannel || n != shapeOf(v)[0]) {
    ctx.error() << "a zero point must hold one value"
                << (perChannel ? " or one per output channel" : "");
    return {};
  }
  SmallVector<int64_t> along(rankOf(v), 1);
  along[0] = n;
  return ctx.binary(BinaryKind::sub, w, ctx.reshape(z, along));
}

bool isIntStorage(Value v) {
  auto it = dyn_cast<IntegerType>(elemOf(v));
  return it && it.getWidth() == 8;
}

/// ConvInteger: the int32 convolution of the centered 8-bit inputs,
/// computed in f64 (exact).
LogicalResult convertConvInteger(NodeContext &ctx) {
  Value x = ctx.input(0), w = ctx.input(1);
  if (!x || !w)
    return failure();
  if (!isIntStorage(x) || !isIntStorage(w)) {
    ctx.error() << "needs 8-bit integer inputs";
    return failure();
  }
  Value cx = centeredInt(ctx, x, 2, false), cw = centeredInt(ctx, w, 3, true);
  if (!cx || !cw)
    return failure();
  Value y = buildConv(ctx, cx, cw);
  if (!y)
    return failure();
  return ctx.finish(ctx.convert(y, ctx.b.getIntegerType(32)));
}

/// QLinearConv as the reference computes it: the integer convolution of
/// the centered inputs (plus the int32 bias), times x_scale * w_scale /
/// y_scale, plus y_zero_point, saturated and rounded half to even.
LogicalResult convertQLinearConv(NodeContext &ctx) {
  Value x = ctx.input(0), sx = ctx.input(1), w = ctx.input(3),
        sw = ctx.input(4), sy = ctx.input(6);
  if (!x || !sx || !w || !sw || !sy)
    return failure();
  if (!isIntStorage(x) || !isIntStorage(w) || !isa<FloatType>(elemOf(sx)) ||
      elemOf(sw) != elemOf(sx) || elemOf(sy) != elemOf(sx) ||
      product(shapeOf(sx)) != 1 || product(shapeOf(sy)) != 1) {
    ctx.error() << "needs 8-bit integer inputs, float scales of one type and "
                   "scalar x_scale and y_scale";
    return failure();
  }
  Value cx = centeredInt(ctx, x, 2, false), cw = centeredInt(ctx, w, 5, true);
  if (!cx || !cw)
    return failure();
  Value y = buildConv(ctx, cx, cw);
  if (!y)
    return failure();
  SmallVector<int64_t> shape(shapeOf(y));
  int64_t m = shapeOf(w)[0];
  if (ctx.hasInput(8)) {
    Value bias = ctx.input(8);
    if (!bias)
      return failure();
    if (shapeOf(bias) != ArrayRef<int64_t>{m}) {
      ctx.error() << "B must be [" << m << "]";
      return failure();
    }
    y = ctx.binary(
        BinaryKind::add, y,
        channelBroadcast(ctx, ctx.convert(bias, ctx.b.getF64Type()), shape));
  }
  Value swv = sw;
  if (product(shapeOf(sw)) != 1) {
    if (product(shapeOf(sw)) != m) {
      ctx.error() << "w_scale must hold one value or one per output channel";
      return failure();
    }
    SmallVector<int64_t> along(rankOf(y), 1);
    along[1] = m;
    swv = ctx.reshape(sw, along);
  } else {
    swv = ctx.reshape(sw, {});
  }
  Value factor = ctx.binary(
      BinaryKind::div, ctx.binary(BinaryKind::mul, ctx.reshape(sx, {}), swv),
      ctx.reshape(sy, {}));
  Value r =
      ctx.binary(BinaryKind::mul, y, ctx.convert(factor, ctx.b.getF64Type()));
  Type out = elemOf(x);
  if (ctx.hasInput(7)) {
    Value zy = ctx.input(7);
    if (!zy)
      return failure();
    if (!isIntStorage(zy) || product(shapeOf(zy)) != 1) {
      ctx.error() << "y_zero_point must be one 8-bit integer";
      return failure();
    }
    out = elemOf(zy);
    r = ctx.binary(BinaryKind::add, r,
                   ctx.reshape(ctx.convert(zy, ctx.b.getF64Type()), {}));
  }
  bool isUnsigned = cast<IntegerType>(out).isUnsigned();
  r = ctx.binary(BinaryKind::max, r, ctx.splatLike(r, isUnsigned ? 0 : -128));
  r = ctx.binary(BinaryKind::min, r, ctx.splatLike(r, isUnsigned ? 255 : 127));
  return ctx.finish(ctx.convert(ctx.unary(UnaryKind::round, r), out));
}

LogicalResult convertPool(NodeContext &ctx) {
  StringRef op = ctx.opType();
  Value x = ctx.input(0);
  if (!x)
    return failure();
  int64_t rank = rankOf(x);
  if (rank < 3) {
    ctx.error() << "input must be N x C x spatial";
    return failure();
  }
  auto xs = shapeOf(x);
  if (op == "MaxPool" && ctx.hasOutput(1)) {
    ctx.error() << "the Indices output is not supported";
    return failure();
  }
  if (!ctx.hasAttr("kernel_shape")) {
    ctx.error() << "needs kernel_shape";
    return failure();
  }
  if (op != "MaxPool" && failed(requireFloat(ctx, x)))
    return failure();
  auto win = computeWindow(ctx, xs.drop_front(2), ctx.attrInts("kernel_shape"),
                           ctx.attrInt("ceil_mode", 0) != 0);
  if (failed(win))
    return failure();
  auto full = [&](ArrayRef<int64_t> v, int64_t fill) {
    SmallVector<int64_t> r{fill, fill};
    r.append(v.begin(), v.end());
    return r;
  };
  SmallVector<int64_t> shape = full(win->out, 0);
  shape[0] = xs[0];
  shape[1] = xs[1];
  auto type = RankedTensorType::get(shape, elemOf(x));
  Value in = x;
  double p = 1;
  if (op == "LpPool") {
    p = ctx.attrInt("p", 2);
    in = ctx.binary(BinaryKind::pow, ctx.unary(UnaryKind::abs, x),
                    ctx.splat(elemOf(x), {}, p));
  }
  Value y = ReduceWindowOp::create(
      ctx.b, ctx.loc, type, op == "MaxPool" ? ReduceKind::max : ReduceKind::sum,
      in, full(win->kernel, 1), full(win->strides, 1), full(win->low, 0),
      full(win->high, 0), full(win->dilations, 1));
  if (op == "LpPool")
    return ctx.finish(
        ctx.binary(BinaryKind::pow, y, ctx.splat(elemOf(x), {}, 1.0 / p)));
  if (op == "MaxPool")
    return ctx.finish(y);
  // AveragePool: divide by the number of counted elements per window, a
  // constant since shapes are static. Padding counts only with
  // count_include_pad, and ceil_mode's extra padding never does.
  bool includePad = ctx.attrInt("count_include_pad", 0) != 0;
  size_t n = win->out.size();
  SmallVector<SmallVector<double>> perDim(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t in = xs[i + 2];
    int64_t lb = includePad ? -win->low[i] : 0;
    int64_t ub = includePad ? in + win->high[i] - win->ceilExtra[i] : in;
    for (int64_t o = 0; o < win->out[i]; ++o) {
      int64_t cnt = 0;
      for (int64_t k = 0; k < win->kernel[i]; ++k) {
        int64_t pos = o * win->strides[i] - win->low[i] + k * win->dilations[i];
        cnt += pos >= lb && pos < ub;
      }
      perDim[i].push_back(std::max<int64_t>(cnt, 1));
    }
  }
  SmallVector<double> counts;
  int64_t total = product(win->out);
  for (int64_t idx = 0; idx < total; ++idx) {
    int64_t rem = idx;
    double c = 1;
    for (int64_t i = n - 1; i >= 0; --i) {
      c *= perDim[i][rem % win->out[i]];
      rem /= win->out[i];
    }
    counts.push_back(c);
  }
  ConstTensor ct;
  ct.elemType = elemOf(x);
  ct.shape = win->out;
  ct.floats.assign(counts.begin(), counts.end());
  return ctx.finish(ctx.binary(BinaryKind::div, y, ctx.constant(ct)));
}

LogicalResult convertGlobalPool(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  if (rankOf(x) < 3) {
    ctx.error() << "input must be N x C x spatial";
    return failure();
  }
  SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(2, rankOf(x)));
  if (ctx.opType() == "GlobalMaxPool")
    return ctx.finish(ctx.reduce(ReduceKind::max, x, dims, true));
  if (failed(requireFloat(ctx, x)))
    return failure();
  Value s = ctx.reduce(ReduceKind::sum, x, dims, true);
  return ctx.finish(
      ctx.binary(BinaryKind::div, s,
                 ctx.splat(elemOf(x), {}, product(shapeOf(x).drop_front(2)))));
}

} // namespace

void registerNNConverters(llvm::StringMap<ConverterFn> &t) {
  t["Softmax"] = convertSoftmax;
  t["LogSoftmax"] = convertSoftmax;
  t["Hardmax"] = convertSoftmax;
  t["LayerNormalization"] = convertLayerNorm;
  t["RMSNormalization"] = convertRmsNorm;
  t["BatchNormalization"] = convertBatchNorm;
  t["InstanceNormalization"] = convertInstanceNorm;
  t["GroupNormalization"] = convertGroupNorm;
  t["Conv"] = convertConv;
  t["ConvInteger"] = convertConvInteger;
  t["QLinearConv"] = convertQLinearConv;
  t["MaxPool"] = convertPool;
  t["AveragePool"] = convertPool;
  t["LpPool"] = convertPool;
  t["GlobalAveragePool"] = convertGlobalPool;
  t["GlobalMaxPool"] = convertGlobalPool;
}

} // namespace cleave::onnximport
