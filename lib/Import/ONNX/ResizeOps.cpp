//===- ResizeOps.cpp - Resize and Upsample --------------------------------===//
//
// Scales and sizes are compile-time constants, so every resized axis gets a
// table of input indices and weights built here (following the ONNX
// reference's coordinate transforms and neighbour selection); the axis is
// then resampled with a gather, a multiply by the weights and a sum over the
// taps. Nearest mode needs the gather only.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

struct AxisTable {
  int64_t out = 0;
  int64_t taps = 0;
  std::vector<int64_t> idx;     // [out * taps], clipped to [0, in)
  std::vector<double> weight;   // [out * taps]
  std::vector<int64_t> outside; // [out], tf_crop_and_resize extrapolation
  bool identity = false;
};

/// The n nearest integers to x in [0, limit), ties to the smaller, ascending.
SmallVector<int64_t> neighbours(double x, int64_t n, int64_t limit) {
  SmallVector<int64_t> cand;
  int64_t f = static_cast<int64_t>(std::floor(x));
  for (int64_t i = f - n - 1; i <= f + n + 1; ++i)
    if (i >= 0 && i < limit)
      cand.push_back(i);
  std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
    double da = std::fabs(x - a), db = std::fabs(x - b);
    return da != db ? da < db : a < b;
  });
  if ((int64_t)cand.size() > n)
    cand.resize(n);
  llvm::sort(cand);
  return cand;
}

struct ResizeMode {
  std::string mode, coord, nearest;
  double cubicA = -0.75, extrapolation = 0;
  bool excludeOutside = false;
  /// Opset 18: when downsampling, linear and cubic filters widen by
  /// 1 / scale (more taps, renormalized), as in the ONNX reference.
  bool antialias = false;
};

/// The first tap's offset from the sample's floor and the tap count of an
/// antialiased filter of support `support` (1 linear, 2 cubic).
int64_t antialiasStart(double scale, double support) {
  return static_cast<int64_t>(std::floor(-support / std::min(scale, 1.0)) + 1);
}

FailureOr<AxisTable> buildAxis(NodeContext &ctx, const ResizeMode &m,
                               int64_t in, int64_t out, double scale,
                               double roiStart, double roiEnd) {
  AxisTable t;
  t.out = out;
  int64_t n = m.mode == "cubic" ? 4 : 2;
  if (m.antialias)
    n = 2 - 2 * antialiasStart(scale, m.mode == "cubic" ? 2 : 1);
  t.taps = m.mode == "nearest" ? 1 : n;
  double outWidth = scale * in;
  t.outside.assign(out, 0);
  for (int64_t x = 0; x < out; ++x) {
    double xo;
    if (m.coord == "align_corners")
      xo = outWidth == 1 ? 0.0 : x * (in - 1) / (outWidth - 1);
    else if (m.coord == "asymmetric")
      xo = x / scale;
    else if (m.coord == "tf_crop_and_resize") {
      xo = outWidth == 1 ? (roiEnd - roiStart) * (in - 1) / 2
                         : x * (roiEnd - roiStart) * (in - 1) / (outWidth - 1);
      xo += roiStart * (in - 1);
      if (xo < 0 || xo > in - 1)
        t.outside[x] = 1;
    } else if (m.coord == "pytorch_half_pixel")
      xo = outWidth == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    else if (m.coord == "half_pixel")
      xo = (x + 0.5) / scale - 0.5;
    else if (m.coord == "half_pixel_symmetric") {
      double adj = out / outWidth;
      xo = in / 2.0 * (1 - adj) + (x + 0.5) / scale - 0.5;
    } else if (m.coord == "tf_half_pixel_for_nn")
      xo = (x + 0.5) / scale;
    else {
      ctx.error() << "coordinate_transformation_mode '" << m.coord
                  << "' is not supported";
      return failure();
    }
    if (t.outside[x]) {
      for (int64_t k = 0; k < t.taps; ++k) {
        t.idx.push_back(0);
        t.weight.push_back(k == 0 ? 1 : 0);
      }
      continue;
    }
    double fl = std::floor(xo);
    bool isInt = xo == fl;
    double ratio = isInt ? 1.0 : xo - fl;
    SmallVector<double> coeffs;
    if (m.mode == "nearest") {
      bool hi;
      if (isInt)
        hi = true;
      else if (m.nearest == "round_prefer_floor")
        hi = ratio > 0.5;
      else if (m.nearest == "round_prefer_ceil")
        hi = ratio >= 0.5;
      else if (m.nearest == "floor")
        hi = false;
      else if (m.nearest == "ceil")
        hi = true;
      else {
        ctx.error() << "nearest_mode '" << m.nearest << "' is not supported";
        return failure();
      }
      coeffs = {hi ? 0.0 : 1.0, hi ? 1.0 : 0.0};
    } else if (m.antialias) {
      double support = m.mode == "cubic" ? 2 : 1, A = m.cubicA, sum = 0;
      double sc = std::min(scale, 1.0);
      int64_t start = antialiasStart(scale, support);
      for (int64_t i = start; i < start + n; ++i) {
        double v = std::fabs(sc * (i - ratio)), c;
        if (m.mode == "linear")
          c = std::clamp(1 - v, 0.0, 1.0);
        else if (v <= 1)
          c = (A + 2) * v * v * v - (A + 3) * v * v + 1;
        else if (v < 2)
          c = A * v * v * v - 5 * A * v * v + 8 * A * v - 4 * A;
        else
          c = 0;
        coeffs.push_back(c);
        sum += c;
      }
      for (double &c : coeffs)
        c /= sum;
    } else if (m.mode == "linear") {
      coeffs = {1 - ratio, ratio};
    } else {
      double A = m.cubicA, r = ratio, q = 1 - ratio;
      coeffs = {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                ((A + 2) * r - (A + 3)) * r * r + 1,
                ((A + 2) * q - (A + 3)) * q * q + 1,
                ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
    }
    int64_t pad = (n + 1) / 2;
    SmallVector<int64_t> nb = neighbours(xo + pad, n, in + 2 * pad);
    SmallVector<int64_t> orig;
    for (int64_t i : nb)
      orig.push_back(i - pad);
    if (m.excludeOutside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        if (orig[k] < 0 || orig[k] >= in)
          coeffs[k] = 0;
        sum += coeffs[k];
      }
      for (double &c : coeffs)
        c /= sum;
    }
    if (m.mode == "nearest") {
      int64_t k = coeffs[0] != 0 ? 0 : 1;
      t.idx.push_back(std::clamp<int64_t>(orig[k], 0, in - 1));
      t.weight.push_back(1);
      continue;
    }
    for (int64_t k = 0; k < n; ++k) {
      t.idx.push_back(std::clamp<int64_t>(orig[k], 0, in - 1));
      t.weight.push_back(coeffs[k]);
    }
  }
  // Identity: same size and each output reads exactly its own input.
  if (out == in && llvm::none_of(t.outside, [](int64_t o) { return o; })) {
    bool id = true;
    for (int64_t x = 0; x < out && id; ++x) {
      double own = 0, other = 0;
      for (int64_t k = 0; k < t.taps; ++k) {
        double w = t.weight[x * t.taps + k];
        (t.idx[x * t.taps + k] == x ? own : other) += w;
      }
      id = own == 1 && other == 0;
    }
    t.identity = id;
  }
  return t;
}

Value resampleAxis(NodeContext &ctx, Value v, int64_t axis,
                   const AxisTable &t) {
  auto s = shapeOf(v);
  Type i64 = ctx.b.getI64Type();
  ConstTensor idx;
  idx.elemType = i64;
  if (t.taps == 1)
    idx.shape = {t.out};
  else
    idx.shape = {t.out, t.taps};
  idx.ints = t.idx;
  Value ids = ctx.constant(idx);
  SmallVector<int64_t> gshape(s.take_front(axis));
  gshape.append(idx.shape.begin(), idx.shape.end());
  gshape.append(s.begin() + axis + 1, s.end());
  Value g =
      GatherOp::create(ctx.b, ctx.loc, RankedTensorType::get(gshape, elemOf(v)),
                       v, ids, static_cast<uint64_t>(axis))
          .getResult();
  if (t.taps == 1)
    return g;
  ConstTensor w;
  w.elemType = elemOf(v);
  w.shape = {t.out, t.taps};
  w.floats = t.weight;
  Value wb = BroadcastInDimOp::create(
                 ctx.b, ctx.loc, RankedTensorType::get(gshape, elemOf(v)),
                 ctx.constant(w), ArrayRef<int64_t>{axis, axis + 1})
                 .getResult();
  Value p = ctx.binary(BinaryKind::mul, g, wb);
  return ctx.reduce(ReduceKind::sum, p, {axis + 1}, false);
}

const ConstTensor *nonEmptyConst(NodeContext &ctx, int i) {
  if (!ctx.hasInput(i))
    return nullptr;
  const ConstTensor *c = ctx.constInput(i);
  if (c && c->numel() == 0)
    return nullptr;
  return c;
}

LogicalResult convertResize(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  bool upsample = ctx.opType() == "Upsample";
  bool legacy = upsample || ctx.opset < 11; // X, scales; asymmetric
  ResizeMode m;
  m.mode = ctx.attrString("mode", "nearest");
  if (m.mode == "bilinear" || m.mode == "trilinear")
    m.mode = "linear";
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic") {
    ctx.error() << "mode '" << m.mode << "' is not supported";
    return failure();
  }
  if (legacy) {
    m.coord = "asymmetric";
    m.nearest = "floor";
  } else {
    m.coord = ctx.attrString("coordinate_transformation_mode", "half_pixel");
    m.nearest = ctx.attrString("nearest_mode", "round_prefer_floor");
    m.cubicA = ctx.attrFloat("cubic_coeff_a", -0.75);
    m.excludeOutside = ctx.attrInt("exclude_outside", 0) != 0;
    m.extrapolation = ctx.attrFloat("extrapolation_value", 0);
  }
  m.antialias = ctx.attrInt("antialias", 0) != 0;
  if (m.antialias && m.mode == "nearest") {
    ctx.error() << "antialias applies to the linear and cubic modes only";
    return failure();
  }
  if (m.mode != "nearest" && !isa<FloatType>(elemOf(x))) {
    ctx.error() << "mode '" << m.mode << "' needs a floating-point input, got "
                << x.getType();
    return failure();
  }
  int64_t rank = rankOf(x);
  auto xs = shapeOf(x);
  SmallVector<int64_t> axes;
  if (ctx.hasAttr("axes")) {
    auto a = ctx.normAxes(ctx.attrInts("axes"), rank);
    if (failed(a))
      return failure();
    axes = *a;
  } else {
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  size_t na = axes.size();

  // Scales and sizes.
  SmallVector<double> scales(rank, 1.0);
  SmallVector<int64_t> out(xs.begin(), xs.end());
  int scalesIdx = legacy ? 1 : 2, sizesIdx = 3;
  if (upsample && ctx.opset < 9) {
    SmallVector<double> sc = ctx.attrFloats("scales");
    if (sc.size() != (size_t)rank) {
      ctx.error() << "scales attribute must have " << rank << " entries";
      return failure();
    }
    for (int64_t d = 0; d < rank; ++d)
      scales[d] = sc[d];
    for (int64_t d = 0; d < rank; ++d)
      out[d] = static_cast<int64_t>(std::floor(scales[d] * xs[d]));
  } else if (const ConstTensor *sc = nonEmptyConst(ctx, scalesIdx)) {
    if ((size_t)sc->numel() != na) {
      ctx.error() << "scales must have " << na << " entries, got "
                  << sc->numel();
      return failure();
    }
    for (size_t i = 0; i < na; ++i) {
      double f = sc->getF(i);
      if (!(f > 0)) {
        ctx.error() << "scales must be positive";
        return failure();
      }
      scales[axes[i]] = f;
      out[axes[i]] = static_cast<int64_t>(std::floor(f * xs[axes[i]]));
    }
  } else if (!legacy && nonEmptyConst(ctx, sizesIdx)) {
    const ConstTensor *sz = nonEmptyConst(ctx, sizesIdx);
    if ((size_t)sz->numel() != na || sz->isFloat()) {
      ctx.error() << "sizes must hold " << na << " integers";
      return failure();
    }
    SmallVector<int64_t> req;
    for (size_t i = 0; i < na; ++i)
      req.push_back(sz->getI(i));
    std::string policy = ctx.attrString("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        out[axes[i]] = req[i];
        scales[axes[i]] = (double)req[i] / xs[axes[i]];
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double s = policy == "not_larger" ? INFINITY : 0;
      for (size_t i = 0; i < na; ++i) {
        double r = (double)req[i] / xs[axes[i]];
        s = policy == "not_larger" ? std::min(s, r) : std::max(s, r);
      }
      for (size_t i = 0; i < na; ++i) {
        scales[axes[i]] = s;
        out[axes[i]] = static_cast<int64_t>(std::round(s * xs[axes[i]]));
      }
    } else {
      ctx.error() << "keep_aspect_ratio_policy '" << policy << "' is not valid";
      return failure();
    }
  } else {
    int i = ctx.hasInput(scalesIdx) && !ctx.constInput(scalesIdx) ? scalesIdx
                                                                  : sizesIdx;
    if (ctx.hasInput(i) && !ctx.constInput(i)) {
      ctx.error() << "input '" << (i == scalesIdx ? "scales" : "sizes")
                  << "' (tensor '" << ctx.node.input(i)
                  << "') must be a constant computable at import time";
      return failure();
    }
    ctx.error() << "needs scales or sizes";
    return failure();
  }
  for (int64_t d = 0; d < rank; ++d)
    if (out[d] < 1) {
      ctx.error() << "output size " << out[d] << " of dim " << d
                  << " is not positive";
      return failure();
    }

  SmallVector<double> roiStart(rank, 0), roiEnd(rank, 1);
  if (m.coord == "tf_crop_and_resize") {
    const ConstTensor *roi = nonEmptyConst(ctx, 1);
    if (!roi) {
      if (ctx.hasInput(1))
        ctx.error() << "input 'roi' (tensor '" << ctx.node.input(1)
                    << "') must be a constant computable at import time";
      else
        ctx.error() << "tf_crop_and_resize needs roi";
      return failure();
    }
    if ((size_t)roi->numel() != 2 * na) {
      ctx.error() << "roi must have " << 2 * na << " entries";
      return failure();
    }
    for (size_t i = 0; i < na; ++i) {
      roiStart[axes[i]] = roi->getF(i);
      roiEnd[axes[i]] = roi->getF(i + na);
    }
  }

  Value y = x;
  SmallVector<std::vector<int64_t>> outside(rank);
  bool anyOutside = false;
  for (int64_t d = rank - 1; d >= 0; --d) {
    auto t =
        buildAxis(ctx, m, xs[d], out[d], scales[d], roiStart[d], roiEnd[d]);
    if (failed(t))
      return failure();
    outside[d] = t->outside;
    anyOutside |= llvm::any_of(t->outside, [](int64_t o) { return o; });
    if (!t->identity)
      y = resampleAxis(ctx, y, d, *t);
    if (!y)
      return failure();
  }
  if (anyOutside) {
    Type i1 = ctx.b.getI1Type();
    Value mask;
    for (int64_t d = 0; d < rank; ++d) {
      if (llvm::none_of(outside[d], [](int64_t o) { return o; }))
        continue;
      ConstTensor c;
      c.elemType = i1;
      c.shape = {out[d]};
      c.ints = outside[d];
      Value md = BroadcastInDimOp::create(ctx.b, ctx.loc,
                                          RankedTensorType::get(out, i1),
                                          ctx.constant(c), ArrayRef<int64_t>{d})
                     .getResult();
      mask = mask ? ctx.binary(BinaryKind::lor, mask, md) : md;
    }
    y = ctx.select(mask, ctx.splat(elemOf(x), {}, m.extrapolation), y);
    if (!y)
      return failure();
  }
  return ctx.finish(y);
}

} // namespace

void registerResizeConverters(llvm::StringMap<ConverterFn> &t) {
  t["Resize"] = convertResize;
  t["Upsample"] = convertResize;
}

} // namespace cleave::onnximport
