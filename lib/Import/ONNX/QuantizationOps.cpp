//===- QuantizationOps.cpp - Linear quantization and integer matmuls ------===//
//
// Linear (de)quantization to and from the 8-, 16- and 32-bit integer types,
// per tensor, per axis and blocked (opset 21), built from elementwise ops:
//
//   QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)
//   DequantizeLinear: y = (x - zero_point) * scale
//
// DynamicQuantizeLinear, MatMulInteger and QLinearMatMul compute in f32 or
// f64 where the integers are exact.
//
// The narrow types of opset 19 and later quantize the same way: int4, uint4,
// int2 and uint2 as integers; float8 as y = convert(x / scale), clamped to
// the type's finite range first when saturate (the default) is set, the
// zero point unused; float4e2m1 as y = convert(x / scale + zero_point),
// which saturates. Dequantizing a float8/float4 ignores the zero point (the
// reference requires a float8 one to be zero).
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

/// Broadcasts a scale or zero point to `shape`: a scalar as it is, a 1-D
/// tensor along `axis` (per axis), a tensor of the input's rank by repeating
/// each element block_size times along `axis` (blocked).
Value expandQuantParam(NodeContext &ctx, Value p, ArrayRef<int64_t> shape,
                       StringRef what) {
  int64_t rank = shape.size();
  ArrayRef<int64_t> ps = shapeOf(p);
  if (product(ps) == 1)
    return ctx.broadcastTo(ctx.reshape(p, {}), shape);
  auto axis = ctx.normAxis(ctx.attrInt("axis", 1), rank);
  if (failed(axis))
    return {};
  int64_t blockSize = ctx.attrInt("block_size", 0);
  if (blockSize <= 0) {
    if (ps.size() != 1 || ps[0] != shape[*axis]) {
      ctx.error() << what << " must be a scalar or hold one value per element "
                  << "of axis " << *axis << " (" << shape[*axis] << ")";
      return {};
    }
    SmallVector<int64_t> along(rank, 1);
    along[*axis] = ps[0];
    return ctx.broadcastTo(ctx.reshape(p, along), shape);
  }
  int64_t blocks = (shape[*axis] + blockSize - 1) / blockSize;
  if (static_cast<int64_t>(ps.size()) != rank || ps[*axis] != blocks ||
      llvm::any_of(llvm::seq<int64_t>(0, rank), [&](int64_t d) {
        return d != *axis && ps[d] != shape[d];
      })) {
    ctx.error() << what << " of a blocked quantization must have the "
                << "input's shape with ceil(" << shape[*axis] << " / "
                << blockSize << ") = " << blocks << " along axis " << *axis;
    return {};
  }
  SmallVector<int64_t> split(ps.begin(), ps.end()), wide(ps.begin(), ps.end());
  split.insert(split.begin() + *axis + 1, 1);
  wide.insert(wide.begin() + *axis + 1, blockSize);
  Value v = ctx.broadcastTo(ctx.reshape(p, split), wide);
  SmallVector<int64_t> merged(ps.begin(), ps.end());
  merged[*axis] = blocks * blockSize;
  v = ctx.reshape(v, merged);
  SmallVector<int64_t> start(rank, 0), limit(merged), strides(rank, 1);
  limit[*axis] = shape[*axis];
  return ctx.slice(v, start, limit, strides);
}

bool isFloatQuantizedType(Type t) {
  return isa<Float8E4M3FNType, Float8E4M3FNUZType, Float8E5M2Type,
             Float8E5M2FNUZType, Float4E2M1FNType>(t);
}

bool isQuantizedType(Type t) {
  auto it = dyn_cast<IntegerType>(t);
  return it && it.getWidth() >= 2 && it.getWidth() <= 32;
}

LogicalResult convertQuantizeLinear(NodeContext &ctx) {
  Value x = ctx.input(0), scale = ctx.input(1);
  if (!x || !scale)
    return failure();
  if (!isa<FloatType>(elemOf(x)) || elemOf(scale) != elemOf(x)) {
    ctx.error() << "needs a float input and a scale of its type";
    return failure();
  }
  Value zp = ctx.hasInput(2) ? ctx.input(2) : Value();
  if (ctx.hasInput(2) && !zp)
    return failure();
  Type out;
  if (zp) {
    out = elemOf(zp);
  } else {
    std::string why;
    int64_t dtype = ctx.attrInt("output_dtype", onnx::TensorProto::UINT8);
    out = convertElementType(ctx.b.getContext(), dtype, why);
    if (!out) {
      ctx.error() << "output type: " << why;
      return failure();
    }
  }
  if (!isQuantizedType(out) && !isFloatQuantizedType(out)) {
    ctx.error() << "quantizing to " << out << " is not supported";
    return failure();
  }
  ArrayRef<int64_t> shape = shapeOf(x);
  Value s = expandQuantParam(ctx, scale, shape, "y_scale");
  if (!s)
    return failure();
  if (isFloatQuantizedType(out)) {
    Value q = ctx.binary(BinaryKind::div, x, s);
    if (isa<Float4E2M1FNType>(out) && zp) {
      Value z = expandQuantParam(ctx, ctx.convert(zp, elemOf(x)), shape,
                                 "y_zero_point");
      if (!z)
        return failure();
      q = ctx.binary(BinaryKind::add, q, z);
    }
    if (!isa<Float4E2M1FNType>(out) && ctx.attrInt("saturate", 1) != 0)
      q = clampToFinite(ctx, q, out);
    return ctx.finish(ctx.convert(q, out));
  }
  Value q = ctx.unary(UnaryKind::round, ctx.binary(BinaryKind::div, x, s));
  if (zp) {
    Value z = expandQuantParam(ctx, ctx.convert(zp, elemOf(x)), shape,
                               "y_zero_point");
    if (!z)
      return failure();
    q = ctx.binary(BinaryKind::add, q, z);
  }
  auto it = cast<IntegerType>(out);
  unsigned w = it.getWidth();
  double lo = it.isUnsigned() ? 0.0 : -std::ldexp(1.0, w - 1);
  double hi =
      it.isUnsigned() ? std::ldexp(1.0, w) - 1 : std::ldexp(1.0, w - 1) - 1;
  // Saturate in f32 where it holds the bounds exactly, else in f64.
  Type wide = w > 16 ? ctx.b.getF64Type() : ctx.b.getF32Type();
  q = ctx.convert(q, wide);
  q = ctx.binary(BinaryKind::max, q, ctx.splatLike(q, lo));
  q = ctx.binary(BinaryKind::min, q, ctx.splatLike(q, hi));
  return ctx.finish(ctx.convert(q, out));
}

LogicalResult convertDequantizeLinear(NodeContext &ctx) {
  Value x = ctx.input(0), scale = ctx.input(1);
  if (!x || !scale)
    return failure();
  bool floatInput = isFloatQuantizedType(elemOf(x));
  if ((!isQuantizedType(elemOf(x)) && !floatInput) ||
      !isa<FloatType>(elemOf(scale))) {
    ctx.error() << "needs a 2- to 32-bit integer, float8 or float4 input and "
                   "a float scale, got "
                << elemOf(x) << " and " << elemOf(scale);
    return failure();
  }
  Type ft = elemOf(scale);
  ArrayRef<int64_t> shape = shapeOf(x);
  if (floatInput) {
    Value s = expandQuantParam(ctx, scale, shape, "x_scale");
    if (!s)
      return failure();
    Value v = ctx.convert(ctx.convert(x, ctx.b.getF32Type()), ft);
    return ctx.finish(ctx.binary(BinaryKind::mul, v, s));
  }
  // int32 values exceed f32's exact range: subtract in f64.
  Type wide = cast<IntegerType>(elemOf(x)).getWidth() > 16 ? ctx.b.getF64Type()
                                                           : ctx.b.getF32Type();
  Value v = ctx.convert(x, wide);
  if (ctx.hasInput(2)) {
    Value zp = ctx.input(2);
    if (!zp)
      return failure();
    if (elemOf(zp) != elemOf(x)) {
      ctx.error() << "x_zero_point must have the input's type";
      return failure();
    }
    Value z =
        expandQuantParam(ctx, ctx.convert(zp, wide), shape, "x_zero_point");
    if (!z)
      return failure();
    v = ctx.binary(BinaryKind::sub, v, z);
  }
  Value s = expandQuantParam(ctx, scale, shape, "x_scale");
  if (!s)
    return failure();
  return ctx.finish(ctx.binary(BinaryKind::mul, ctx.convert(v, ft), s));
}

/// DynamicQuantizeLinear: uint8 quantization with the scale and zero point
/// of the input's range (widened to include 0):
///   scale = (max(0, max x) - min(0, min x)) / 255
///   zero_point = saturate(round(-min(0, min x) / scale))
LogicalResult convertDynamicQuantizeLinear(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  if (!elemOf(x).isF32()) {
    ctx.error() << "needs a float input, got " << elemOf(x);
    return failure();
  }
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, rankOf(x)));
  Value zero = ctx.splat(elemOf(x), {}, 0.0);
  Value hi = ctx.binary(BinaryKind::max,
                        ctx.reduce(ReduceKind::max, x, all, false), zero);
  Value lo = ctx.binary(BinaryKind::min,
                        ctx.reduce(ReduceKind::min, x, all, false), zero);
  Value scale = ctx.binary(BinaryKind::div, ctx.binary(BinaryKind::sub, hi, lo),
                           ctx.splat(elemOf(x), {}, 255.0));
  auto saturate = [&](Value v) {
    v = ctx.binary(BinaryKind::max, v, ctx.splatLike(v, 0.0));
    v = ctx.binary(BinaryKind::min, v, ctx.splatLike(v, 255.0));
    return ctx.convert(v, ctx.b.getIntegerType(8, /*isSigned=*/false));
  };
  Value zpf = ctx.unary(
      UnaryKind::round,
      ctx.binary(BinaryKind::div, ctx.unary(UnaryKind::neg, lo), scale));
  zpf = ctx.binary(BinaryKind::min,
                   ctx.binary(BinaryKind::max, zpf, ctx.splatLike(zpf, 0.0)),
                   ctx.splatLike(zpf, 255.0));
  Value q = ctx.binary(
      BinaryKind::add,
      ctx.unary(UnaryKind::round, ctx.binary(BinaryKind::div, x, scale)), zpf);
  Value y = saturate(q);
  if (!y || !scale || !zpf)
    return failure();
  ctx.setOutput(0, y);
  if (ctx.hasOutput(1))
    ctx.setOutput(1, scale);
  if (ctx.hasOutput(2))
    ctx.setOutput(2, saturate(zpf));
  return success();
}

/// `v - zero_point` in f64 (exact for 8- to 32-bit integers); the zero
/// point is a scalar or, for the matrix's `axis` (0 for A's rows, 1 for B's
/// columns), one value per row or column.
Value centered(NodeContext &ctx, Value v, int zpInput, bool perColumn) {
  Type f64 = ctx.b.getF64Type();
  Value w = ctx.convert(v, f64);
  if (!ctx.hasInput(zpInput))
    return w;
  Value zp = ctx.input(zpInput);
  if (!zp)
    return {};
  if (elemOf(zp) != elemOf(v)) {
    ctx.error() << "a zero point must have its matrix's type";
    return {};
  }
  Value z = ctx.convert(zp, f64);
  int64_t n = product(shapeOf(z));
  if (n != 1) {
    // Per row of A ([M] or [M, 1]) or per column of B ([N] or [1, N]).
    int64_t r = rankOf(v);
    SmallVector<int64_t> along(r, 1);
    int64_t dim = perColumn ? r - 1 : r - 2;
    if (r < 2 || shapeOf(v)[dim] != n) {
      ctx.error() << "a zero point must hold one value or one per "
                  << (perColumn ? "column" : "row");
      return {};
    }
    along[dim] = n;
    z = ctx.reshape(z, along);
  } else {
    z = ctx.reshape(z, {});
  }
  return ctx.binary(BinaryKind::sub, w, z);
}

/// MatMulInteger: (A - a_zero_point) x (B - b_zero_point) in int32,
/// computed in f64 (exact while the sums stay below 2^53).
LogicalResult convertMatMulInteger(NodeContext &ctx) {
  Value a = ctx.input(0), b = ctx.input(1);
  if (!a || !b)
    return failure();
  if (!isQuantizedType(elemOf(a)) || !isQuantizedType(elemOf(b))) {
    ctx.error() << "needs integer inputs";
    return failure();
  }
  Value ca = centered(ctx, a, 2, false), cb = centered(ctx, b, 3, true);
  if (!ca || !cb)
    return failure();
  Value r = buildMatMul(ctx, ca, cb);
  if (!r)
    return failure();
  return ctx.finish(ctx.convert(r, ctx.b.getIntegerType(32)));
}

/// QLinearMatMul as the reference computes it: the integer product of the
/// centered inputs times a_scale * b_scale / y_scale (in the scales' type,
/// then f64), plus y_zero_point, rounded half to even and saturated.
LogicalResult convertQLinearMatMul(NodeContext &ctx) {
  Value a = ctx.input(0), sa = ctx.input(1), b = ctx.input(3),
        sb = ctx.input(4), sy = ctx.input(6);
  if (!a || !sa || !b || !sb || !sy)
    return failure();
  if (!isQuantizedType(elemOf(a)) || !isQuantizedType(elemOf(b)) ||
      !isa<FloatType>(elemOf(sa)) || elemOf(sb) != elemOf(sa) ||
      elemOf(sy) != elemOf(sa) || product(shapeOf(sy)) != 1) {
    ctx.error() << "needs integer matrices, float scales of one type and a "
                   "scalar y_scale";
    return failure();
  }
  Value ca = centered(ctx, a, 2, false), cb = centered(ctx, b, 5, true);
  if (!ca || !cb)
    return failure();
  Value prod = buildMatMul(ctx, ca, cb);
  if (!prod)
    return failure();
  auto perAxis = [&](Value s, bool perColumn) -> Value {
    if (product(shapeOf(s)) == 1)
      return ctx.reshape(s, {});
    int64_t r = rankOf(prod);
    SmallVector<int64_t> along(r, 1);
    along[perColumn ? r - 1 : r - 2] = product(shapeOf(s));
    return ctx.reshape(s, along);
  };
  Value factor = ctx.binary(
      BinaryKind::div,
      ctx.binary(BinaryKind::mul, perAxis(sa, false), perAxis(sb, true)),
      ctx.reshape(sy, {}));
  Type f64 = ctx.b.getF64Type();
  Value d = ctx.binary(BinaryKind::mul, prod, ctx.convert(factor, f64));
  Type out = elemOf(a);
  if (ctx.hasInput(7)) {
    Value zy = ctx.input(7);
    if (!zy)
      return failure();
    out = elemOf(zy);
    if (!isQuantizedType(out) || product(shapeOf(zy)) != 1) {
      ctx.error() << "y_zero_point must be one integer";
      return failure();
    }
    d = ctx.binary(BinaryKind::add, d, ctx.reshape(ctx.convert(zy, f64), {}));
  }
  auto it = cast<IntegerType>(out);
  unsigned w = it.getWidth();
  double lo = it.isUnsigned() ? 0.0 : -std::ldexp(1.0, w - 1);
  double hi =
      it.isUnsigned() ? std::ldexp(1.0, w) - 1 : std::ldexp(1.0, w - 1) - 1;
  d = ctx.unary(UnaryKind::round, d);
  d = ctx.binary(BinaryKind::max, d, ctx.splatLike(d, lo));
  d = ctx.binary(BinaryKind::min, d, ctx.splatLike(d, hi));
  return ctx.finish(ctx.convert(d, out));
}

} // namespace

void registerQuantizationConverters(llvm::StringMap<ConverterFn> &t) {
  t["QuantizeLinear"] = convertQuantizeLinear;
  t["DequantizeLinear"] = convertDequantizeLinear;
  t["DynamicQuantizeLinear"] = convertDynamicQuantizeLinear;
  t["MatMulInteger"] = convertMatMulInteger;
  t["QLinearMatMul"] = convertQLinearMatMul;
}

} // namespace cleave::onnximport
