//===- SignalOps.cpp - Window functions -----------------------------------===//
//
// HannWindow, HammingWindow and BlackmanWindow depend only on their
// (compile-time) size, so they fold to constants. DFT (forward, inverse,
// one-sided and its inverse, irfft) is a product with constant cosine and
// sine matrices along the signal axis, computed in f64.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

LogicalResult convertWindow(NodeContext &ctx) {
  auto sizes = ctx.constInts(0, "size");
  if (failed(sizes))
    return failure();
  if (sizes->size() != 1 || (*sizes)[0] < 0) {
    ctx.error() << "size must be one non-negative integer";
    return failure();
  }
  int64_t size = (*sizes)[0];
  std::string why;
  Type et = convertElementType(ctx.b.getContext(),
                               ctx.attrInt("output_datatype", 1), why);
  if (!et || !(isa<FloatType>(et) || isa<IntegerType>(et))) {
    ctx.error() << "output_datatype is not supported"
                << (why.empty() ? "" : ": ") << why;
    return failure();
  }
  bool periodic = ctx.attrInt("periodic", 1) != 0;
  double n = periodic ? size : size - 1;
  StringRef op = ctx.opType();
  ConstTensor c;
  c.elemType = et;
  c.shape = {size};
  c.allocate();
  for (int64_t i = 0; i < size; ++i) {
    double a = n > 0 ? 2 * M_PI * i / n : 0, v;
    if (op == "HannWindow")
      v = 0.5 - 0.5 * std::cos(a);
    else if (op == "HammingWindow")
      v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(a);
    else
      v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    c.set(i, v, static_cast<int64_t>(v));
  }
  return ctx.finish(ctx.constant(c));
}

/// MelWeightMatrix with every input known at import time: the constant
/// [dft_length / 2 + 1, num_mel_bins] matrix of triangular mel filters, as
/// the ONNX reference computes it.
LogicalResult convertMelWeightMatrix(NodeContext &ctx) {
  auto bins = ctx.constInts(0, "num_mel_bins");
  auto dft = ctx.constInts(1, "dft_length");
  auto rate = ctx.constInts(2, "sample_rate");
  auto lo = ctx.constScalar(3, "lower_edge_hertz");
  auto hi = ctx.constScalar(4, "upper_edge_hertz");
  if (failed(bins) || failed(dft) || failed(rate) || failed(lo) || failed(hi))
    return failure();
  if (bins->size() != 1 || dft->size() != 1 || rate->size() != 1 ||
      (*bins)[0] <= 0 || (*dft)[0] <= 0 || (*rate)[0] <= 0 ||
      (*bins)[0] * ((*dft)[0] / 2 + 1) > kMaxFoldElements * 16) {
    ctx.error() << "num_mel_bins, dft_length and sample_rate must be single "
                   "positive values of a moderate product";
    return failure();
  }
  int64_t mels = (*bins)[0], length = (*dft)[0], sampleRate = (*rate)[0];
  int64_t spectrum = length / 2 + 1;
  std::string why;
  Type et = convertElementType(ctx.b.getContext(),
                               ctx.attrInt("output_datatype", 1), why);
  if (!et || !isa<FloatType>(et)) {
    ctx.error() << "output_datatype must be a float type";
    return failure();
  }
  auto toMel = [](double hz) {
    return 2595 * std::log1p(hz / 700) / std::log(10.0);
  };
  double low = toMel(*lo), high = toMel(*hi);
  double step = (high - low) / (mels + 2);
  SmallVector<int64_t> edges;
  for (int64_t i = 0; i < mels + 2; ++i) {
    double hz = 700 * std::expm1((i * step + low) / 2595 * std::log(10.0));
    edges.push_back(
        static_cast<int64_t>(std::floor((length + 1) * hz / sampleRate)));
  }
  ConstTensor c;
  c.elemType = et;
  c.shape = {spectrum, mels};
  c.allocate();
  auto set = [&](int64_t j, int64_t i, double v) {
    if (j >= 0 && j < spectrum)
      c.floats[j * mels + i] = v;
  };
  for (int64_t i = 0; i < mels; ++i) {
    int64_t left = edges[i], center = edges[i + 1], right = edges[i + 2];
    if (center == left)
      set(center, i, 1);
    else
      for (int64_t j = left; j <= center; ++j)
        set(j, i, double(j - left) / double(center - left));
    if (right > center)
      for (int64_t j = center; j < right; ++j)
        set(j, i, double(right - j) / double(right - center));
  }
  return ctx.finish(ctx.constant(c));
}

/// `v` [..., n] times the constant matrix `m` [n, k], in `v`'s type.
Value timesMatrix(NodeContext &ctx, Value v, ArrayRef<double> m, int64_t n,
                  int64_t k) {
  ConstTensor c;
  c.elemType = elemOf(v);
  c.shape = {n, k};
  c.floats.assign(m.begin(), m.end());
  SmallVector<int64_t> shape(shapeOf(v));
  shape.back() = k;
  int64_t last = rankOf(v) - 1;
  return ContractOp::create(
             ctx.b, ctx.loc, RankedTensorType::get(shape, elemOf(v)), v,
             ctx.constant(c), ArrayRef<int64_t>{}, ArrayRef<int64_t>{},
             ArrayRef<int64_t>{last}, ArrayRef<int64_t>{0})
      .getResult();
}

LogicalResult convertDFT(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  int64_t rank = rankOf(x);
  Type et = elemOf(x);
  if (rank < 2 || !isa<FloatType>(et) ||
      (shapeOf(x).back() != 1 && shapeOf(x).back() != 2)) {
    ctx.error() << "needs a float input whose last dimension (1: real, 2: "
                   "complex) is 1 or 2, got "
                << x.getType();
    return failure();
  }
  int64_t axisAttr = ctx.opset >= 20 ? -2 : ctx.attrInt("axis", 1);
  if (ctx.opset >= 20 && ctx.hasInput(2)) {
    auto a = ctx.constInts(2, "axis");
    if (failed(a))
      return failure();
    if (a->size() != 1) {
      ctx.error() << "axis must hold one value";
      return failure();
    }
    axisAttr = (*a)[0];
  }
  // A negative axis counts from the end of the whole shape (the last
  // dimension, real/imaginary, included).
  auto axis = ctx.normAxis(axisAttr, rank);
  if (failed(axis))
    return failure();
  if (*axis == rank - 1) {
    ctx.error() << "axis must not be the last (real/imaginary) dimension";
    return failure();
  }
  bool inverse = ctx.attrInt("inverse", 0) != 0;
  bool onesided = ctx.attrInt("onesided", 0) != 0;
  int64_t n = shapeOf(x)[*axis];
  int64_t length = inverse && onesided ? 2 * (n - 1) : n;
  if (ctx.hasInput(1)) {
    auto l = ctx.constInts(1, "dft_length");
    if (failed(l))
      return failure();
    if (l->size() != 1) {
      ctx.error() << "dft_length must hold one value";
      return failure();
    }
    length = (*l)[0];
  }
  if (length <= 0 || n * length > (int64_t(1) << 24)) {
    ctx.error() << "dft_length " << length << " must be positive and the "
                << "transform moderate (" << n << " x " << length << ")";
    return failure();
  }
  if (!inverse && onesided && shapeOf(x).back() == 2) {
    ctx.error() << "a one-sided forward DFT needs a real input";
    return failure();
  }
  // Work in f64 with the signal axis last: [..., n].
  Type f64 = ctx.b.getF64Type();
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != *axis)
      perm.push_back(d);
  perm.push_back(*axis);
  SmallVector<int64_t> start(rank, 0), limit(shapeOf(x)), strides(rank, 1);
  limit.back() = 1;
  SmallVector<int64_t> squeezed(shapeOf(x).drop_back());
  auto part = [&](int64_t which) {
    start.back() = which;
    limit.back() = which + 1;
    Value v = ctx.reshape(ctx.slice(x, start, limit, strides), squeezed);
    return ctx.transpose(ctx.convert(v, f64), perm);
  };
  Value re = part(0);
  Value im = shapeOf(x).back() == 2 ? part(1) : Value();
  // Output bins k and the input samples j each matrix column and row cover.
  int64_t bins = inverse ? length : onesided ? length / 2 + 1 : length;
  int64_t used = std::min(n, inverse && onesided ? length / 2 + 1 : length);
  std::vector<double> cosM(n * bins, 0.0), sinM(n * bins, 0.0);
  for (int64_t j = 0; j < used; ++j)
    for (int64_t k = 0; k < bins; ++k) {
      double theta = 2 * M_PI * double((j * k) % length) / double(length);
      double w = 1.0;
      if (inverse) {
        w = 1.0 / length;
        if (onesided) // Hermitian: the mirrored bins count twice
          w *= (j == 0 || (length % 2 == 0 && j == length / 2)) ? 1.0 : 2.0;
      }
      cosM[j * bins + k] = w * std::cos(theta);
      sinM[j * bins + k] = w * std::sin(theta);
    }
  // forward: re' = re C + im S, im' = im C - re S
  // inverse: re' = re C - im S, im' = re S + im C
  double sgn = inverse ? -1.0 : 1.0;
  Value outRe = timesMatrix(ctx, re, cosM, n, bins);
  Value outIm;
  if (!(inverse && onesided)) {
    outIm = timesMatrix(ctx, re, sinM, n, bins);
    if (!inverse)
      outIm = ctx.unary(UnaryKind::neg, outIm);
  }
  if (im) {
    Value imS = timesMatrix(ctx, im, sinM, n, bins);
    outRe = ctx.binary(sgn > 0 ? BinaryKind::add : BinaryKind::sub, outRe, imS);
    if (outIm)
      outIm = ctx.binary(BinaryKind::add, outIm,
                         timesMatrix(ctx, im, cosM, n, bins));
  }
  // Back to the input's layout with a trailing [re(, im)] dimension.
  SmallVector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[perm[i]] = i;
  SmallVector<int64_t> outShape(squeezed);
  outShape[*axis] = bins;
  outShape.push_back(1);
  auto finish = [&](Value v) {
    return ctx.reshape(ctx.convert(ctx.transpose(v, inv), et), outShape);
  };
  if (!outIm)
    return ctx.finish(finish(outRe));
  SmallVector<Value> parts{finish(outRe), finish(outIm)};
  outShape.back() = 2;
  return ctx.finish(ConcatOp::create(ctx.b, ctx.loc,
                                     RankedTensorType::get(outShape, et), parts,
                                     static_cast<uint64_t>(rank - 1))
                        .getResult());
}

} // namespace

void registerSignalConverters(llvm::StringMap<ConverterFn> &t) {
  t["HannWindow"] = convertWindow;
  t["HammingWindow"] = convertWindow;
  t["BlackmanWindow"] = convertWindow;
  t["DFT"] = convertDFT;
  t["MelWeightMatrix"] = convertMelWeightMatrix;
}

} // namespace cleave::onnximport
