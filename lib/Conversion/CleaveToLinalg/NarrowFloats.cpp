//===- NarrowFloats.cpp - float8/float6/float4 arithmetic as integer ops --===//
//
// LLVM has no float8, float6 or float4 types: the LLVM type converter maps
// them to integers of their width, and `arith.extf`/`arith.truncf` on them
// have no lowering. This pass first moves every other arith op on them to
// f32 (upstream's unsupported-float emulation), then spells the conversions
// out on the bits:
//
//   extf:   sign, exponent and mantissa fields rebuilt as f32 bits;
//           subnormals as mantissa * 2^(1 - bias - m) in f32 (exact).
//   truncf: round to nearest even on the f32 bits; values below the
//           smallest normal by the f32 addition of a power of two that puts
//           the target's subnormal step at f32's last place (RNE in
//           hardware). Overflow gives infinity where the type has one, NaN
//           where it has only NaN (e4m3fn, the fnuz types), and the largest
//           finite value where it has neither (float4/float6). NaN stays
//           NaN (±0 for the types without one).
//   float8e8m0 (a bare exponent, no sign): |x| rounded to the nearest
//           power of two, ties up; NaN, infinity and overflow give its NaN.
//
// Sources wider than f32 are rounded to f32 first (a double rounding for
// f64; ONNX's reference converts through float32 too), f16/bf16 are
// extended to f32 exactly. Constants of these types need nothing: the LLVM
// dialect takes them as integer constants of their bits. Only scalars are
// rewritten: kernels reach this pass as scalar loops.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"

#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_EXPANDNARROWFLOATSPASS
#include "cleave/Conversion/Passes.h.inc"
} // namespace mlir::cleave

using namespace mlir;

namespace {

/// How a narrow float spells its values.
struct NarrowFormat {
  /// Bits in all, in the exponent and in the mantissa; the exponent bias.
  unsigned width, expBits, manBits;
  int bias;
  enum Special {
    /// All-ones exponent: infinity (mantissa 0) or NaN (e5m2, e4m3, e3m4).
    IEEE,
    /// S.1111.111 is NaN, no infinity (e4m3fn).
    NanAllOnes,
    /// The negative zero's bits are NaN, no infinity, one zero (fnuz).
    NanNegZero,
    /// Finite values only (float4e2m1, float6).
    FiniteOnly,
    /// float8e8m0: no sign or mantissa, 0xff is NaN.
    ExponentOnly,
  } special;

  uint32_t manMask() const { return (1u << manBits) - 1; }
  uint32_t expMask() const { return (1u << expBits) - 1; }
  /// Magnitude bits of the largest finite value.
  uint32_t maxCode() const {
    uint32_t allOnes = (1u << (width - 1)) - 1;
    switch (special) {
    case IEEE:
      return allOnes - manMask() - 1; // exponent all ones - 1
    case NanAllOnes:
      return allOnes - 1;
    case NanNegZero:
    case FiniteOnly:
      return allOnes;
    case ExponentOnly:
      return 0xfe;
    }
    return allOnes;
  }
  /// Bits of a quiet NaN without its sign.
  uint32_t nanCode() const {
    switch (special) {
    case IEEE:
      return (expMask() << manBits) | (1u << (manBits - 1));
    case NanAllOnes:
      return (1u << (width - 1)) - 1;
    case NanNegZero:
      return 1u << (width - 1);
    case FiniteOnly:
      return 0;
    case ExponentOnly:
      return 0xff;
    }
    return 0;
  }
};

std::optional<NarrowFormat> narrowFormat(Type t) {
  using F = NarrowFormat;
  if (isa<Float8E4M3FNType>(t))
    return F{8, 4, 3, 7, F::NanAllOnes};
  if (isa<Float8E4M3FNUZType>(t))
    return F{8, 4, 3, 8, F::NanNegZero};
  if (isa<Float8E4M3B11FNUZType>(t))
    return F{8, 4, 3, 11, F::NanNegZero};
  if (isa<Float8E4M3Type>(t))
    return F{8, 4, 3, 7, F::IEEE};
  if (isa<Float8E3M4Type>(t))
    return F{8, 3, 4, 3, F::IEEE};
  if (isa<Float8E5M2Type>(t))
    return F{8, 5, 2, 15, F::IEEE};
  if (isa<Float8E5M2FNUZType>(t))
    return F{8, 5, 2, 16, F::NanNegZero};
  if (isa<Float8E8M0FNUType>(t))
    return F{8, 8, 0, 127, F::ExponentOnly};
  if (isa<Float6E2M3FNType>(t))
    return F{6, 2, 3, 1, F::FiniteOnly};
  if (isa<Float6E3M2FNType>(t))
    return F{6, 3, 2, 3, F::FiniteOnly};
  if (isa<Float4E2M1FNType>(t))
    return F{4, 2, 1, 1, F::FiniteOnly};
  return std::nullopt;
}

/// Small builder for the i32 bit arithmetic.
struct Bits {
  OpBuilder &b;
  Location loc;
  Type i32;
  Bits(OpBuilder &b, Location loc) : b(b), loc(loc), i32(b.getI32Type()) {}
  Value c(uint32_t v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(i32, int64_t(v)));
  }
  Value f(float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value band(Value x, uint32_t m) {
    return arith::AndIOp::create(b, loc, x, c(m));
  }
  Value bor(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value shl(Value x, unsigned s) {
    return s ? arith::ShLIOp::create(b, loc, x, c(s)).getResult() : x;
  }
  Value shr(Value x, unsigned s) {
    return s ? arith::ShRUIOp::create(b, loc, x, c(s)).getResult() : x;
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, uint32_t y) {
    return cmp(p, x, c(y));
  }
  Value sel(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value sel(Value cond, uint32_t x, Value y) { return sel(cond, c(x), y); }
  Value toF32(Value bits) {
    return arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
  }
  Value fromF32(Value x) { return arith::BitcastOp::create(b, loc, i32, x); }
};

/// f32 value of narrow float `x`.
Value decode(OpBuilder &b, Location loc, Value x, const NarrowFormat &fmt) {
  Bits k(b, loc);
  using P = arith::CmpIPredicate;
  Value raw = arith::BitcastOp::create(b, loc, b.getIntegerType(fmt.width), x);
  Value u = arith::ExtUIOp::create(b, loc, k.i32, raw);
  if (fmt.special == NarrowFormat::ExponentOnly) {
    // 2^(u - 127): f32's exponent field, 2^-127 is f32's subnormal 0x400000.
    Value v = k.sel(k.cmp(P::eq, u, 0), 0x400000u, k.shl(u, 23));
    return k.toF32(k.sel(k.cmp(P::eq, u, 0xff), 0x7fc00000u, v));
  }
  Value sign = k.shl(k.shr(u, fmt.width - 1), 31);
  Value e = k.band(k.shr(u, fmt.manBits), fmt.expMask());
  Value m = k.band(u, fmt.manMask());
  // Normal: rebias the exponent, left-align the mantissa.
  Value normal = k.bor(k.shl(k.add(e, k.c(uint32_t(127 - fmt.bias))), 23),
                       k.shl(m, 23 - fmt.manBits));
  // Subnormal: m * 2^(1 - bias - manBits), exact in f32.
  Value scaled = arith::MulFOp::create(
      b, loc, arith::UIToFPOp::create(b, loc, b.getF32Type(), m),
      k.f(std::ldexp(1.0f, 1 - fmt.bias - int(fmt.manBits))));
  Value mag = k.sel(k.cmp(P::eq, e, 0), k.fromF32(scaled), normal);
  Value nan = k.c(0x7fc00000u);
  switch (fmt.special) {
  case NarrowFormat::IEEE: {
    Value top = k.cmp(P::eq, e, fmt.expMask());
    Value inf = k.sel(k.cmp(P::eq, m, 0), 0x7f800000u, nan);
    mag = k.sel(top, inf, mag);
    break;
  }
  case NarrowFormat::NanAllOnes:
    mag = k.sel(k.cmp(P::eq, k.band(u, (1u << (fmt.width - 1)) - 1),
                      (1u << (fmt.width - 1)) - 1),
                nan, mag);
    break;
  case NarrowFormat::NanNegZero:
    mag = k.sel(k.cmp(P::eq, u, 1u << (fmt.width - 1)), nan, mag);
    sign = k.sel(k.cmp(P::eq, u, 1u << (fmt.width - 1)), 0u, sign);
    break;
  default:
    break;
  }
  return k.toF32(k.bor(mag, sign));
}

/// Narrow float nearest to f32 `x` (see the file comment).
Value encode(OpBuilder &b, Location loc, Value x, Type narrowType,
             const NarrowFormat &fmt) {
  Bits k(b, loc);
  using P = arith::CmpIPredicate;
  Value bits = k.fromF32(x);
  Value code;
  if (fmt.special == NarrowFormat::ExponentOnly) {
    // Round to nearest, ties up: the exponent, plus one when the mantissa
    // is at least one half. NaN, infinity and 2^128 are the NaN 0xff.
    Value e = k.band(k.shr(bits, 23), 0xff);
    // f32's subnormals (and zero) lie below 2^-126: code 0 (2^-127) or 1,
    // the midpoint being 1.5 * 2^-127.
    Value mant = k.band(bits, 0x7fffff);
    Value up = k.sel(k.cmp(P::eq, e, 0), k.cmp(P::uge, mant, 0x600000),
                     k.cmp(P::uge, mant, 0x400000));
    Value r = k.add(e, arith::ExtUIOp::create(b, loc, k.i32, up));
    code = k.sel(k.cmp(P::eq, e, 0xff), 0xffu, r);
  } else {
    Value sign = k.shr(bits, 31);
    Value abs = k.band(bits, 0x7fffffff);
    unsigned shift = 23 - fmt.manBits;
    // Normal range: f32 bits shifted to the target's mantissa width and
    // rebiased; round half to even on the dropped bits (a carry moves into
    // the exponent as it should).
    Value base =
        k.sub(k.shr(abs, shift), k.c(uint32_t(127 - fmt.bias) << fmt.manBits));
    Value rem = k.band(abs, (1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    Value odd = k.cmp(P::ne, k.band(base, 1), 0);
    Value up = arith::OrIOp::create(
        b, loc, k.cmp(P::ugt, rem, half),
        arith::AndIOp::create(b, loc, k.cmp(P::eq, rem, half), odd));
    Value normal = k.add(base, arith::ExtUIOp::create(b, loc, k.i32, up));
    // Below the smallest normal: |x| + 2^(24 - bias - manBits) rounds |x|
    // to the subnormal step; the difference of the bits is the code (which
    // is 1 << manBits when it rounds up to the smallest normal).
    Value absF = k.toF32(abs);
    Value magic = k.f(std::ldexp(1.0f, 24 - fmt.bias - int(fmt.manBits)));
    Value sum = arith::AddFOp::create(b, loc, absF, magic);
    Value sub = k.sub(k.fromF32(sum), k.fromF32(magic));
    uint32_t minNormal = uint32_t(127 - fmt.bias + 1) << 23;
    Value mag = k.sel(k.cmp(P::ult, abs, minNormal), sub, normal);
    // Overflow (infinity included).
    uint32_t overflow =
        fmt.special == NarrowFormat::IEEE         ? fmt.expMask() << fmt.manBits
        : fmt.special == NarrowFormat::FiniteOnly ? fmt.maxCode()
                                                  : fmt.nanCode();
    mag = k.sel(k.cmp(P::ugt, mag, fmt.maxCode()), overflow, mag);
    Value isNan = k.cmp(P::ugt, abs, 0x7f800000);
    mag = k.sel(isNan, fmt.nanCode(), mag);
    Value signBit = k.shl(sign, fmt.width - 1);
    if (fmt.special == NarrowFormat::NanNegZero) {
      // One zero; the NaN is the negative zero's bits already.
      Value unsignedCode = arith::OrIOp::create(
          b, loc, k.cmp(P::eq, mag, 0), k.cmp(P::eq, mag, fmt.nanCode()));
      signBit = k.sel(unsignedCode, 0u, signBit);
    }
    code = k.bor(mag, signBit);
  }
  Value narrowInt =
      arith::TruncIOp::create(b, loc, b.getIntegerType(fmt.width), code);
  return arith::BitcastOp::create(b, loc, narrowType, narrowInt);
}

/// extf from a narrow float: decode to f32, then to the result's type.
struct ExpandExtF : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    auto fmt = narrowFormat(op.getIn().getType());
    if (!fmt)
      return failure();
    Location loc = op.getLoc();
    Value v = decode(rewriter, loc, op.getIn(), *fmt);
    Type out = op.getType();
    auto outFloat = cast<FloatType>(out);
    if (outFloat.getWidth() > 32)
      v = arith::ExtFOp::create(rewriter, loc, out, v);
    else if (!out.isF32())
      v = arith::TruncFOp::create(rewriter, loc, out, v); // exact or narrow
    rewriter.replaceOp(op, v);
    return success();
  }
};

/// truncf to a narrow float: the source as f32, then encoded.
struct ExpandTruncF : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    auto fmt = narrowFormat(op.getType());
    if (!fmt)
      return failure();
    Location loc = op.getLoc();
    Value v = op.getIn();
    Type in = v.getType();
    if (cast<FloatType>(in).getWidth() > 32)
      v = arith::TruncFOp::create(rewriter, loc, rewriter.getF32Type(), v);
    else if (!in.isF32())
      v = arith::ExtFOp::create(rewriter, loc, rewriter.getF32Type(), v);
    rewriter.replaceOp(op, encode(rewriter, loc, v, op.getType(), *fmt));
    return success();
  }
};

struct ExpandNarrowFloatsPass
    : mlir::cleave::impl::ExpandNarrowFloatsPassBase<ExpandNarrowFloatsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    SmallVector<Type> narrow = {
        b.getType<Float8E4M3FNType>(),      b.getType<Float8E4M3FNUZType>(),
        b.getType<Float8E4M3B11FNUZType>(), b.getType<Float8E4M3Type>(),
        b.getType<Float8E3M4Type>(),        b.getType<Float8E5M2Type>(),
        b.getType<Float8E5M2FNUZType>(),    b.getType<Float8E8M0FNUType>(),
        b.getType<Float6E2M3FNType>(),      b.getType<Float6E3M2FNType>(),
        b.getType<Float4E2M1FNType>()};
    // Arithmetic on the narrow types moves to f32 first.
    TypeConverter converter;
    arith::populateEmulateUnsupportedFloatsConversions(converter, narrow,
                                                       b.getF32Type());
    RewritePatternSet emulate(ctx);
    arith::populateEmulateUnsupportedFloatsPatterns(emulate, converter);
    ConversionTarget target(*ctx);
    arith::populateEmulateUnsupportedFloatsLegality(target, converter);
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(
            applyPartialConversion(getOperation(), target, std::move(emulate))))
      return signalPassFailure();
    RewritePatternSet patterns(ctx);
    mlir::cleave::populateExpandNarrowFloatsPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::cleave::populateExpandNarrowFloatsPatterns(
    RewritePatternSet &patterns) {
  patterns.add<ExpandExtF, ExpandTruncF>(patterns.getContext());
}
