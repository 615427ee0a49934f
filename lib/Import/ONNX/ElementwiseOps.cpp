//===- ElementwiseOps.cpp - Elementwise ONNX ops and activations ---------===//

#include "NodeContext.h"

#include "llvm/Support/xxhash.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

bool isFloatValue(Value v) { return isa<FloatType>(elemOf(v)); }

LogicalResult requireFloat(NodeContext &ctx, Value v) {
  if (isFloatValue(v))
    return success();
  ctx.error() << "needs a floating-point input, got " << v.getType();
  return failure();
}

//===----------------------------------------------------------------------===//
// Direct unary and binary ops
//===----------------------------------------------------------------------===//

std::optional<UnaryKind> unaryKindFor(StringRef op) {
  return llvm::StringSwitch<std::optional<UnaryKind>>(op)
      .Case("Neg", UnaryKind::neg)
      .Case("Abs", UnaryKind::abs)
      .Case("Exp", UnaryKind::exp)
      .Case("Log", UnaryKind::log)
      .Case("Sqrt", UnaryKind::sqrt)
      .Case("Reciprocal", UnaryKind::reciprocal)
      .Case("Tanh", UnaryKind::tanh)
      .Case("Sigmoid", UnaryKind::sigmoid)
      .Case("Erf", UnaryKind::erf)
      .Case("Sin", UnaryKind::sin)
      .Case("Cos", UnaryKind::cos)
      .Case("Tan", UnaryKind::tan)
      .Case("Asin", UnaryKind::asin)
      .Case("Acos", UnaryKind::acos)
      .Case("Atan", UnaryKind::atan)
      .Case("Sinh", UnaryKind::sinh)
      .Case("Cosh", UnaryKind::cosh)
      .Case("Asinh", UnaryKind::asinh)
      .Case("Acosh", UnaryKind::acosh)
      .Case("Atanh", UnaryKind::atanh)
      .Case("Floor", UnaryKind::floor)
      .Case("Ceil", UnaryKind::ceil)
      .Case("Round", UnaryKind::round)
      .Case("Sign", UnaryKind::sign)
      .Case("Not", UnaryKind::lnot)
      .Case("BitwiseNot", UnaryKind::lnot)
      .Default(std::nullopt);
}

LogicalResult convertUnary(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  UnaryKind kind = *unaryKindFor(ctx.opType());
  bool anyType = kind == UnaryKind::neg || kind == UnaryKind::abs ||
                 kind == UnaryKind::sign || kind == UnaryKind::lnot;
  if (!anyType && failed(requireFloat(ctx, x)))
    return failure();
  if (kind == UnaryKind::lnot && isFloatValue(x)) {
    ctx.error() << "needs a bool or integer input, got " << elemOf(x);
    return failure();
  }
  if ((kind == UnaryKind::floor || kind == UnaryKind::ceil ||
       kind == UnaryKind::round) &&
      !isFloatValue(x))
    return ctx.finish(x);
  return ctx.finish(ctx.unary(kind, x));
}

LogicalResult convertBinary(NodeContext &ctx) {
  StringRef op = ctx.opType();
  Value a = ctx.input(0), b = ctx.input(1);
  if (!a || !b)
    return failure();
  BinaryKind kind = llvm::StringSwitch<BinaryKind>(op)
                        .Case("Add", BinaryKind::add)
                        .Case("Sub", BinaryKind::sub)
                        .Case("Mul", BinaryKind::mul)
                        .Case("Div", BinaryKind::div)
                        .Case("And", BinaryKind::land)
                        .Case("Or", BinaryKind::lor)
                        .Case("Xor", BinaryKind::lxor)
                        .Case("BitwiseAnd", BinaryKind::land)
                        .Case("BitwiseOr", BinaryKind::lor)
                        .Case("BitwiseXor", BinaryKind::lxor)
                        .Default(BinaryKind::add);
  if (op.starts_with("Bitwise") && (isFloatValue(a) || isFloatValue(b))) {
    ctx.error() << "needs integer inputs";
    return failure();
  }
  if (op == "Pow") {
    // The exponent may have another type than the base.
    kind = BinaryKind::pow;
    b = ctx.convert(b, elemOf(a));
  } else if (op == "Mod") {
    bool fmod = ctx.attrInt("fmod", 0) != 0;
    // fmod=0 on floats (numpy's mod, opset 13 on): the remainder takes
    // the divisor's sign, as for integers.
    kind = fmod ? BinaryKind::rem : BinaryKind::mod;
  } else if (op == "BitShift") {
    std::string dir = ctx.attrString("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") {
      ctx.error() << "direction must be LEFT or RIGHT, got '" << dir << "'";
      return failure();
    }
    kind = dir == "LEFT" ? BinaryKind::shl : BinaryKind::shr;
    if (isFloatValue(a) || elemOf(a) != elemOf(b)) {
      ctx.error() << "needs two integer inputs of one type";
      return failure();
    }
    // A shift by the width or more, or by a negative amount, gives 0 (the
    // sign for a right shift of a signed value), not LLVM's poison.
    SmallVector<Value> ab = ctx.broadcastPair(a, b);
    if (ab.empty())
      return failure();
    auto it = cast<IntegerType>(elemOf(a));
    int64_t width = it.getWidth();
    Value tooFar =
        ctx.compare(CompareKind::ge, ab[1], ctx.splatLike(ab[1], width));
    if (!it.isUnsigned())
      tooFar = ctx.binary(
          BinaryKind::lor, tooFar,
          ctx.compare(CompareKind::lt, ab[1], ctx.splatLike(ab[1], 0)));
    Value safe = ctx.select(tooFar, ctx.splatLike(ab[1], 0), ab[1]);
    Value shifted = ctx.binary(kind, ab[0], safe);
    Value far = kind == BinaryKind::shr && !it.isUnsigned()
                    ? ctx.binary(BinaryKind::shr, ab[0],
                                 ctx.splatLike(ab[1], width - 1))
                    : ctx.splatLike(ab[0], 0);
    return ctx.finish(ctx.select(tooFar, far, shifted));
  }
  return ctx.finish(ctx.binary(kind, a, b));
}

LogicalResult convertCompare(NodeContext &ctx) {
  Value a = ctx.input(0), b = ctx.input(1);
  if (!a || !b)
    return failure();
  CompareKind kind = llvm::StringSwitch<CompareKind>(ctx.opType())
                         .Case("Equal", CompareKind::eq)
                         .Case("Less", CompareKind::lt)
                         .Case("LessOrEqual", CompareKind::le)
                         .Case("Greater", CompareKind::gt)
                         .Default(CompareKind::ge);
  return ctx.finish(ctx.compare(kind, a, b));
}

/// Max, Min, Sum, Mean: variadic with multidirectional broadcasting.
LogicalResult convertVariadic(NodeContext &ctx) {
  StringRef op = ctx.opType();
  if (ctx.numInputs() == 0) {
    ctx.error() << "needs at least one input";
    return failure();
  }
  BinaryKind kind = op == "Max"   ? BinaryKind::max
                    : op == "Min" ? BinaryKind::min
                                  : BinaryKind::add;
  Value acc = ctx.input(0);
  for (int i = 1; acc && i < ctx.numInputs(); ++i) {
    Value v = ctx.input(i);
    acc = v ? ctx.binary(kind, acc, v) : Value();
  }
  if (acc && op == "Mean" && ctx.numInputs() > 1)
    acc = ctx.binary(BinaryKind::div, acc,
                     ctx.splat(elemOf(acc), {}, ctx.numInputs()));
  return ctx.finish(acc);
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

/// Swish_alpha(x) = x * sigmoid(alpha * x): `cleave.unary silu` for alpha 1
/// (its VJP recomputes the sigmoid from x), spelled out otherwise.
Value swish(NodeContext &ctx, Value x, double alpha) {
  if (alpha == 1.0)
    return ctx.unary(UnaryKind::silu, x);
  Value ax = ctx.binary(BinaryKind::mul, x, ctx.splat(elemOf(x), {}, alpha));
  return ctx.binary(BinaryKind::mul, x, ctx.unary(UnaryKind::sigmoid, ax));
}

/// SwiGLU (opset 28): Swish_alpha(A) * B, A and B of one shape.
LogicalResult convertSwiGLU(NodeContext &ctx) {
  Value a = ctx.input(0), b = ctx.input(1);
  if (!a || !b || failed(requireFloat(ctx, a)))
    return failure();
  if (a.getType() != b.getType()) {
    ctx.error() << "A and B must have one type and shape (SwiGLU does not "
                   "broadcast), got "
                << a.getType() << " and " << b.getType();
    return failure();
  }
  return ctx.finish(ctx.binary(BinaryKind::mul,
                               swish(ctx, a, ctx.attrFloat("alpha", 1.0)), b));
}

LogicalResult convertActivation(NodeContext &ctx) {
  StringRef op = ctx.opType();
  Value x = ctx.input(0);
  if (!x)
    return failure();
  auto c = [&](double v) { return ctx.splat(elemOf(x), {}, v); };
  auto bin = [&](BinaryKind k, Value a, Value b) {
    return ctx.binary(k, a, b);
  };
  auto un = [&](UnaryKind k, Value a) { return ctx.unary(k, a); };
  if (op == "Relu") {
    // x <= 0 ? 0 : x rather than max(x, 0): NaN passes through, and the
    // gradient at 0 is 0, as in PyTorch's relu.
    if (isa<FloatType>(elemOf(x)))
      return ctx.finish(
          ctx.select(ctx.compare(CompareKind::le, x, c(0)), c(0), x));
    return ctx.finish(bin(BinaryKind::max, x, c(0)));
  }
  if (failed(requireFloat(ctx, x)))
    return failure();
  if (op == "Swish") // opset 24
    return ctx.finish(swish(ctx, x, ctx.attrFloat("alpha", 1.0)));
  if (op == "LeakyRelu") {
    double alpha = ctx.attrFloat("alpha", 0.01);
    Value neg = ctx.compare(CompareKind::lt, x, c(0));
    return ctx.finish(ctx.select(neg, bin(BinaryKind::mul, x, c(alpha)), x));
  }
  if (op == "Elu") {
    double alpha = ctx.attrFloat("alpha", 1.0);
    Value neg = ctx.compare(CompareKind::lt, x, c(0));
    Value e = bin(BinaryKind::mul,
                  bin(BinaryKind::sub, un(UnaryKind::exp, x), c(1)), c(alpha));
    return ctx.finish(ctx.select(neg, e, x));
  }
  if (op == "Selu") {
    double alpha = ctx.attrFloat("alpha", 1.67326319217681884765625);
    double gamma = ctx.attrFloat("gamma", 1.05070102214813232421875);
    Value neg = ctx.compare(CompareKind::le, x, c(0));
    Value e =
        bin(BinaryKind::sub,
            bin(BinaryKind::mul, un(UnaryKind::exp, x), c(alpha)), c(alpha));
    return ctx.finish(bin(BinaryKind::mul, ctx.select(neg, e, x), c(gamma)));
  }
  if (op == "Celu") {
    double alpha = ctx.attrFloat("alpha", 1.0);
    if (alpha == 0) {
      ctx.error() << "alpha must be non-zero";
      return failure();
    }
    Value e =
        bin(BinaryKind::mul,
            bin(BinaryKind::sub,
                un(UnaryKind::exp, bin(BinaryKind::div, x, c(alpha))), c(1)),
            c(alpha));
    return ctx.finish(bin(BinaryKind::add, bin(BinaryKind::max, x, c(0)),
                          bin(BinaryKind::min, e, c(0))));
  }
  if (op == "HardSigmoid" || op == "HardSwish") {
    double alpha = op == "HardSwish" ? 1.0 / 6 : ctx.attrFloat("alpha", 0.2);
    double beta = op == "HardSwish" ? 0.5 : ctx.attrFloat("beta", 0.5);
    Value h = bin(BinaryKind::add, bin(BinaryKind::mul, x, c(alpha)), c(beta));
    h = bin(BinaryKind::max, bin(BinaryKind::min, h, c(1)), c(0));
    return ctx.finish(op == "HardSwish" ? bin(BinaryKind::mul, x, h) : h);
  }
  if (op == "Softplus" || op == "Mish") {
    // max(x, 0) + log(1 + exp(-|x|)), stable for large |x|.
    Value sp = bin(
        BinaryKind::add, bin(BinaryKind::max, x, c(0)),
        un(UnaryKind::log,
           bin(BinaryKind::add, c(1),
               un(UnaryKind::exp, un(UnaryKind::neg, un(UnaryKind::abs, x))))));
    if (op == "Mish")
      return ctx.finish(bin(BinaryKind::mul, x, un(UnaryKind::tanh, sp)));
    return ctx.finish(sp);
  }
  if (op == "Softsign")
    return ctx.finish(bin(BinaryKind::div, x,
                          bin(BinaryKind::add, c(1), un(UnaryKind::abs, x))));
  if (op == "Gelu") {
    std::string approx = ctx.attrString("approximate", "none");
    if (approx == "tanh") {
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      Value x3 = bin(BinaryKind::mul, bin(BinaryKind::mul, x, x), x);
      Value inner =
          bin(BinaryKind::mul,
              bin(BinaryKind::add, x, bin(BinaryKind::mul, x3, c(0.044715))),
              c(std::sqrt(2.0 / M_PI)));
      Value t = bin(BinaryKind::add, c(1), un(UnaryKind::tanh, inner));
      return ctx.finish(
          bin(BinaryKind::mul, bin(BinaryKind::mul, x, t), c(0.5)));
    }
    if (approx != "none") {
      ctx.error() << "approximate must be 'none' or 'tanh', got '" << approx
                  << "'";
      return failure();
    }
    Value e = un(UnaryKind::erf, bin(BinaryKind::mul, x, c(M_SQRT1_2)));
    return ctx.finish(bin(BinaryKind::mul, bin(BinaryKind::mul, x, c(0.5)),
                          bin(BinaryKind::add, c(1), e)));
  }
  if (op == "ThresholdedRelu") {
    double alpha = ctx.attrFloat("alpha", 1.0);
    return ctx.finish(
        ctx.select(ctx.compare(CompareKind::gt, x, c(alpha)), x, c(0)));
  }
  if (op == "Shrink") {
    double bias = ctx.attrFloat("bias", 0), lambd = ctx.attrFloat("lambd", 0.5);
    Value lo = ctx.compare(CompareKind::lt, x, c(-lambd));
    Value hi = ctx.compare(CompareKind::gt, x, c(lambd));
    Value r = ctx.select(lo, bin(BinaryKind::add, x, c(bias)), c(0));
    return ctx.finish(ctx.select(hi, bin(BinaryKind::sub, x, c(bias)), r));
  }
  ctx.error() << "internal: no activation rule";
  return failure();
}

LogicalResult convertPRelu(NodeContext &ctx) {
  Value x = ctx.input(0), slope = ctx.input(1);
  if (!x || !slope)
    return failure();
  // Before opset 7, a [C] slope applies per channel (dimension 1), which
  // numpy broadcasting would match against the last dimension instead.
  if (ctx.settings.sourceOpset < 7 && rankOf(slope) == 1 && rankOf(x) >= 2 &&
      shapeOf(slope)[0] != 1 && shapeOf(slope)[0] == shapeOf(x)[1]) {
    SmallVector<int64_t> shape(shapeOf(x).size(), 1);
    shape[1] = shapeOf(slope)[0];
    slope = ctx.reshape(slope, shape);
  }
  Value neg = ctx.compare(CompareKind::lt, x, ctx.splat(elemOf(x), {}, 0));
  Value scaled = ctx.binary(BinaryKind::mul, x, slope);
  if (!neg || !scaled)
    return failure();
  if (shapeOf(scaled) != shapeOf(x)) {
    ctx.error() << "slope must broadcast to the input's shape";
    return failure();
  }
  return ctx.finish(ctx.select(neg, scaled, x));
}

LogicalResult convertClip(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  Value lo, hi;
  if (ctx.opset < 11) {
    lo = ctx.splat(elemOf(x), {}, ctx.attrFloat("min", -3.4028234663852886e38));
    hi = ctx.splat(elemOf(x), {}, ctx.attrFloat("max", 3.4028234663852886e38));
  } else {
    if (ctx.hasInput(1) && !(lo = ctx.input(1)))
      return failure();
    if (ctx.hasInput(2) && !(hi = ctx.input(2)))
      return failure();
  }
  // x < lo ? lo : x, then t > hi ? hi : t: NaN passes through, and x
  // takes the whole gradient at the bounds, as in PyTorch's clamp.
  if (lo && isa<FloatType>(elemOf(x)))
    x = ctx.select(ctx.compare(CompareKind::lt, x, lo), lo, x);
  else if (lo)
    x = ctx.binary(BinaryKind::max, x, lo);
  if (x && hi && isa<FloatType>(elemOf(x)))
    x = ctx.select(ctx.compare(CompareKind::gt, x, hi), hi, x);
  else if (x && hi)
    x = ctx.binary(BinaryKind::min, x, hi);
  return ctx.finish(x);
}

LogicalResult convertIsNaNInf(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x || failed(requireFloat(ctx, x)))
    return failure();
  if (ctx.opType() == "IsNaN")
    return ctx.finish(ctx.compare(CompareKind::ne, x, x));
  bool pos = ctx.attrInt("detect_positive", 1) != 0;
  bool neg = ctx.attrInt("detect_negative", 1) != 0;
  Value r = ctx.splat(ctx.b.getI1Type(), shapeOf(x), 0);
  double inf = std::numeric_limits<double>::infinity();
  if (pos)
    r = ctx.binary(
        BinaryKind::lor, r,
        ctx.compare(CompareKind::eq, x, ctx.splat(elemOf(x), {}, inf)));
  if (neg)
    r = ctx.binary(
        BinaryKind::lor, r,
        ctx.compare(CompareKind::eq, x, ctx.splat(elemOf(x), {}, -inf)));
  return ctx.finish(r);
}

//===----------------------------------------------------------------------===//
// Identity, casts, select
//===----------------------------------------------------------------------===//

LogicalResult convertIdentity(NodeContext &ctx) {
  Value x = ctx.input(0);
  return ctx.finish(x);
}

/// Dropout. For inference (training_mode absent or a constant false, or a
/// ratio of 0; before opset 12 Dropout has no training mode and runtimes
/// run it for inference) it is the identity with an all-ones mask. In
/// training mode an element is kept when 24 of its random bits
/// (cleave::buildRandomBits with the key of a cleave.rng_key, which a training
/// step draws anew each step) are at least ratio * 2^24, and kept elements are
/// scaled by 1 / (1 - ratio). The stream's salt is a hash of the node's output
/// name, mixed with its `seed` when it has one, so each Dropout node draws its
/// own mask.
LogicalResult convertDropout(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  // The ratio matters (and must be known) only in training mode.
  double ratio = 0.5;
  bool training = false;
  if (ctx.hasInput(2)) {
    FailureOr<double> t = ctx.constScalar(2, "training_mode");
    if (failed(t))
      return failure();
    training = *t != 0.0;
  }
  if (training && ctx.hasInput(1)) {
    FailureOr<double> r = ctx.constScalar(1, "ratio");
    if (failed(r))
      return failure();
    ratio = *r;
  }
  if (training && ratio != 0.0) {
    if (!(ratio > 0.0 && ratio < 1.0)) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", ratio);
      ctx.error() << "ratio " << text << " is outside [0, 1)";
      return failure();
    }
    if (!isa<FloatType>(elemOf(x))) {
      ctx.error() << "training-mode dropout needs a float input, not "
                  << elemOf(x);
      return failure();
    }
    // The output's name picks the node's stream (stable across compiles);
    // the `seed` attribute (an int) moves it, so that nodes sharing a seed
    // still draw apart.
    uint64_t salt = llvm::xxh3_64bits(ctx.node.output(0));
    if (ctx.hasAttr("seed"))
      salt = mix64(salt ^ static_cast<uint64_t>(ctx.attrInt("seed", 0)));
    auto u64 = IntegerType::get(ctx.b.getContext(), 64, IntegerType::Unsigned);
    Value key = RngKeyOp::create(ctx.b, ctx.loc, RankedTensorType::get({}, u64),
                                 ctx.b.getIntegerAttr(u64, salt));
    Value bits = buildRandomBits(ctx.b, ctx.loc, key, shapeOf(x));
    auto bitsType = cast<RankedTensorType>(bits.getType());
    auto splatU64 = [&](uint64_t v) -> Value {
      return ConstantOp::create(ctx.b, ctx.loc,
                                DenseElementsAttr::get(bitsType, APInt(64, v)));
    };
    Value draw = ctx.binary(BinaryKind::shr, bits, splatU64(40));
    auto threshold = static_cast<uint64_t>(std::llround(ratio * (1 << 24)));
    Value keep = ctx.compare(CompareKind::ge, draw, splatU64(threshold));
    Value scaled =
        ctx.binary(BinaryKind::mul, x, ctx.splatLike(x, 1.0 / (1.0 - ratio)));
    ctx.setOutput(0, ctx.select(keep, scaled, ctx.splatLike(x, 0.0)));
    if (ctx.hasOutput(1))
      ctx.setOutput(1, keep);
    return success();
  }
  ctx.setOutput(0, x);
  // The mask is all ones: bool from opset 10, the input's type before
  // (Dropout-1 to -9 declare it as T; a model converted to a newer opset
  // casts the bool mask back, see castDropoutMasks).
  if (ctx.hasOutput(1))
    ctx.setOutput(1, ctx.splat(ctx.opset < 10 ? elemOf(x) : ctx.b.getI1Type(),
                               shapeOf(x), 1));
  return success();
}

Value bitcast(NodeContext &ctx, Value v, Type elemType) {
  return BitcastOp::create(ctx.b, ctx.loc,
                           RankedTensorType::get(shapeOf(v), elemType), v)
      .getResult();
}

/// Cast to float8e8m0 as ONNX's reference computes it on the float32 bits:
/// the exponent field, plus one by `round_mode` ("up": any fraction,
/// "down": never, "nearest": guard bit and any of round, sticky or a
/// non-zero exponent); saturate keeps 2^127 from rounding up to the NaN
/// 0xff; NaN and infinity give 0xff; the sign is dropped.
Value castToE8M0(NodeContext &ctx, Value x, Type to) {
  std::string mode = ctx.attrString("round_mode", "up");
  if (mode != "up" && mode != "down" && mode != "nearest") {
    ctx.error() << "round_mode must be \"up\", \"down\" or \"nearest\", "
                << "got \"" << mode << "\"";
    return {};
  }
  bool saturate = ctx.attrInt("saturate", 1) != 0;
  Value bits = bitcast(ctx, ctx.convert(x, ctx.b.getF32Type()),
                       ctx.b.getIntegerType(32, /*isSigned=*/false));
  auto k = [&](double v) { return ctx.splatLike(bits, v); };
  auto band = [&](Value a, double m) {
    return ctx.binary(BinaryKind::land, a, k(m));
  };
  auto nonZero = [&](Value a) { return ctx.compare(CompareKind::ne, a, k(0)); };
  auto both = [&](Value a, Value b) {
    return ctx.binary(BinaryKind::land, a, b);
  };
  Value e = band(ctx.binary(BinaryKind::shr, bits, k(23)), 0xff);
  Value special = ctx.compare(CompareKind::eq, e, k(0xff));
  Value up;
  if (mode == "up") {
    up = nonZero(band(bits, 0x7fffff));
  } else if (mode == "nearest") {
    Value g = nonZero(band(bits, 0x400000));
    Value rest =
        ctx.binary(BinaryKind::lor,
                   ctx.binary(BinaryKind::lor, nonZero(band(bits, 0x200000)),
                              nonZero(band(bits, 0x1fffff))),
                   ctx.compare(CompareKind::gt, e, k(0)));
    up = both(g, rest);
  } else {
    up = ctx.splat(ctx.b.getI1Type(), shapeOf(e), 0); // "down": never
  }
  if (saturate)
    up = both(up, ctx.compare(CompareKind::ne, e, k(0xfe)));
  e = ctx.binary(BinaryKind::add, e, ctx.select(up, k(1), k(0)));
  Value code = ctx.select(special, k(0xff), e);
  return bitcast(ctx, ctx.convert(code, ctx.b.getIntegerType(8, false)), to);
}

LogicalResult convertCast(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  Type to;
  if (ctx.opType() == "CastLike") {
    Value like = ctx.input(1);
    if (!like)
      return failure();
    to = elemOf(like);
  } else {
    std::string why;
    to = convertElementType(ctx.b.getContext(), ctx.attrInt("to", 0), why);
    if (!to) {
      ctx.error() << "cannot cast: " << why;
      return failure();
    }
  }
  if (elemOf(x) == to)
    return ctx.finish(x);
  if (isa<Float8E8M0FNUType>(to))
    return ctx.finish(castToE8M0(ctx, x, to));
  // saturate (1 by default) clamps to the float8 type's finite range before
  // rounding, NaN kept (the reference clips, then converts); without it an
  // overflow is infinity (e5m2) or NaN (the others), as cleave.convert
  // rounds.
  if (isa<Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2Type,
          Float8E5M2FNUZType>(to) &&
      ctx.attrInt("saturate", 1) != 0)
    x = clampToFinite(ctx, x, to);
  return ctx.finish(ctx.convert(x, to));
}

/// BitCast (opset 26): the same bits as another type of the same width.
LogicalResult convertBitCast(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  std::string why;
  Type to = convertElementType(ctx.b.getContext(), ctx.attrInt("to", 0), why);
  if (!to) {
    ctx.error() << "cannot bitcast: " << why;
    return failure();
  }
  auto bits = [](Type t) {
    return t.isInteger(1) ? 8u : t.getIntOrFloatBitWidth();
  };
  if (bits(elemOf(x)) != bits(to)) {
    ctx.error() << "cannot reinterpret " << bits(elemOf(x)) << "-bit "
                << elemOf(x) << " as " << bits(to) << "-bit " << to
                << ": the widths must be equal";
    return failure();
  }
  return ctx.finish(bitcast(ctx, x, to));
}

LogicalResult convertWhere(NodeContext &ctx) {
  Value c = ctx.input(0), a = ctx.input(1), b = ctx.input(2);
  if (!c || !a || !b)
    return failure();
  return ctx.finish(ctx.select(ctx.convert(c, ctx.b.getI1Type()), a, b));
}

} // namespace

Value clampToFinite(NodeContext &ctx, Value x, Type to) {
  if (!elemOf(x).isF32() && !elemOf(x).isF64())
    x = ctx.convert(x, ctx.b.getF32Type());
  double largest = APFloat::getLargest(cast<FloatType>(to).getFloatSemantics())
                       .convertToDouble();
  x = ctx.binary(BinaryKind::max, x, ctx.splatLike(x, -largest));
  return ctx.binary(BinaryKind::min, x, ctx.splatLike(x, largest));
}

void registerElementwiseConverters(llvm::StringMap<ConverterFn> &t) {
  for (StringRef op :
       {"Neg",     "Abs",   "Exp",  "Log",   "Sqrt",      "Reciprocal", "Tanh",
        "Sigmoid", "Erf",   "Sin",  "Cos",   "Tan",       "Asin",       "Acos",
        "Atan",    "Sinh",  "Cosh", "Asinh", "Acosh",     "Atanh",      "Floor",
        "Ceil",    "Round", "Sign", "Not",   "BitwiseNot"})
    t[op] = convertUnary;
  for (StringRef op :
       {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor",
        "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor"})
    t[op] = convertBinary;
  for (StringRef op :
       {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
    t[op] = convertCompare;
  for (StringRef op : {"Max", "Min", "Sum", "Mean"})
    t[op] = convertVariadic;
  for (StringRef op : {"Relu", "LeakyRelu", "Elu", "Selu", "Celu",
                       "HardSigmoid", "HardSwish", "Softplus", "Softsign",
                       "Gelu", "ThresholdedRelu", "Mish", "Shrink", "Swish"})
    t[op] = convertActivation;
  t["PRelu"] = convertPRelu;
  t["SwiGLU"] = convertSwiGLU;
  t["Clip"] = convertClip;
  t["IsNaN"] = convertIsNaNInf;
  t["IsInf"] = convertIsNaNInf;
  t["Identity"] = convertIdentity;
  t["Dropout"] = convertDropout;
  t["Cast"] = convertCast;
  t["CastLike"] = convertCast;
  t["BitCast"] = convertBitCast;
  t["Where"] = convertWhere;
}

} // namespace cleave::onnximport
