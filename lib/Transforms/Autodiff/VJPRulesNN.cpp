//===- VJPRulesNN.cpp - VJP rules of conv, reduce_window, pad, scatter ----===//
//
// conv: the input gradient is a transposed convolution (the cotangent
//   dilated by the stride, padded by the filter's dilated extent and
//   convolved with the filter swapped per group and reversed spatially); the
//   filter gradient is a convolution of the input with the cotangent, batch
//   and channel roles exchanged (channels become the batch, the batch the
//   reduced channels, the groups kept), the original dilation as stride and
//   the original stride as dilation.
// reduce_window sum: the adjoint of a window sum is separable, applied one
//   dimension at a time as a sum of shifted copies of the dilated cotangent.
// reduce_window max/min: for each window offset a strided slice of the
//   (identity-padded) operand is compared with the result; the cotangent
//   goes to the first matching position (PyTorch's max_pool) and is placed
//   back with dilate + pad.
// pad reflect/edge: per padded dimension, a scatter-add of the cotangent
//   into the operand's extent along a compile-time source-index map.
// scatter mul/max/min: the product rule (dividing by the update) and
//   routing to the maxima/minima (ties split).
//
//===----------------------------------------------------------------------===//

#include "VJPHelpers.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::autodiff {
namespace {

/// Spreads `g` along `dim` so that element `j` lands at `j * stride`, zeros
/// between: [r] -> [(r - 1) * stride + 1].
Value dilate(Emitter &e, Value g, int64_t dim, int64_t stride) {
  if (stride == 1)
    return g;
  RankedTensorType type = Emitter::typeOf(g);
  SmallVector<int64_t> shape(type.getShape());
  int64_t r = shape[dim];
  if (r == 0)
    return g;
  SmallVector<int64_t> split(shape);
  split.insert(split.begin() + dim + 1, 1);
  SmallVector<int64_t> low(split.size(), 0), high(split.size(), 0);
  high[dim + 1] = stride - 1;
  Value spread = e.padZeros(e.reshape(g, split), low, high);
  return mergeSpread(e, spread, shape, dim, stride);
}

/// `v` with its two leading dimensions viewed as the three of `split`,
/// those permuted by `perm` and merged into the two of `merged`; the other
/// dimensions stay (a convolution's channels regrouped per group).
Value regroupLeading(Emitter &e, Value v, ArrayRef<int64_t> split,
                     ArrayRef<int64_t> perm, ArrayRef<int64_t> merged) {
  ArrayRef<int64_t> rest = Emitter::typeOf(v).getShape().drop_front(2);
  SmallVector<int64_t> splitShape(split), permutation(perm),
      mergedShape(merged);
  splitShape.append(rest.begin(), rest.end());
  mergedShape.append(rest.begin(), rest.end());
  for (int64_t i = 0; i < int64_t(rest.size()); ++i)
    permutation.push_back(3 + i);
  return e.reshape(e.transpose(e.reshape(v, splitShape), permutation),
                   mergedShape);
}

/// The identity permutation with `a` and `b` swapped.
SmallVector<int64_t> swapPerm(int64_t rank, int64_t a, int64_t b) {
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[a], perm[b]);
  return perm;
}

/// Slices the padding off a gradient with respect to a padded operand.
Value unpad(Emitter &e, Value g, ArrayRef<int64_t> low,
            ArrayRef<int64_t> size) {
  SmallVector<int64_t> limit, strides(size.size(), 1);
  for (size_t d = 0; d < size.size(); ++d)
    limit.push_back(low[d] + size[d]);
  return e.slice(g, low, limit, strides);
}

} // namespace

//===----------------------------------------------------------------------===//
// conv
//===----------------------------------------------------------------------===//

VJPResult vjp(ConvOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0];
  Value x = op.getInput(), w = op.getFilter();
  RankedTensorType xType = Emitter::typeOf(x), wType = Emitter::typeOf(w),
                   gType = Emitter::typeOf(g);
  if (gType.getNumElements() == 0 || xType.getNumElements() == 0)
    return SmallVector<Value>{e.zerosLike(x), e.zerosLike(w)};
  ArrayRef<int64_t> xs = xType.getShape(), ws = wType.getShape(),
                    gs = gType.getShape();
  ArrayRef<int64_t> strides = op.getStrides(), padLow = op.getPadLow(),
                    padHigh = op.getPadHigh(), dils = op.getDilations();
  int64_t rank = xType.getRank(), spatial = rank - 2;
  int64_t n = xs[0], c = xs[1], o = ws[0], groups = op.getGroups();
  int64_t cg = c / groups, og = o / groups;
  SmallVector<int64_t> padded; // padded input extents
  for (int64_t i = 0; i < spatial; ++i)
    padded.push_back(xs[2 + i] + padLow[i] + padHigh[i]);
  SmallVector<int64_t> ones(spatial, 1);

  // Input gradient: dilate g by the strides, pad by the filter's dilated
  // extent and convolve with the per-group swapped, reversed filter.
  Value gd = g;
  for (int64_t i = 0; i < spatial; ++i)
    gd = dilate(e, gd, 2 + i, strides[i]);
  Value wt = regroupLeading(e, w, {groups, og, cg}, {0, 2, 1}, {c, og});
  SmallVector<int64_t> spatialDims =
      llvm::to_vector(llvm::seq<int64_t>(2, rank));
  wt = ReverseOp::create(b, op.getLoc(), wt, spatialDims);
  SmallVector<int64_t> tLow, tHigh, dxPaddedShape{n, c};
  for (int64_t i = 0; i < spatial; ++i) {
    tLow.push_back((ws[2 + i] - 1) * dils[i]);
    tHigh.push_back(padded[i] - ((gs[2 + i] - 1) * strides[i] + 1));
    dxPaddedShape.push_back(padded[i]);
  }
  Value dxPadded = ConvOp::create(b, op.getLoc(), xType.clone(dxPaddedShape),
                                  gd, wt, ones, tLow, tHigh, dils, groups);
  SmallVector<int64_t> low{0, 0};
  low.append(padLow.begin(), padLow.end());
  Value dx = unpad(e, dxPadded, low, xs);

  // Filter gradient: input as [Cg, G*N, S...] (channel g*N + n), cotangent
  // as [O, N, S'...], grouped conv with strides and dilations exchanged.
  Value xr = regroupLeading(e, x, {n, groups, cg}, {2, 1, 0}, {cg, groups * n});
  Value gr = e.transpose(g, swapPerm(rank, 0, 1));
  SmallVector<int64_t> dwShape{cg, o};
  for (int64_t i = 0; i < spatial; ++i)
    dwShape.push_back((padded[i] - (gs[2 + i] - 1) * strides[i] - 1) / dils[i] +
                      1);
  Value dwFull = ConvOp::create(b, op.getLoc(), wType.clone(dwShape), xr, gr,
                                dils, padLow, padHigh, strides, groups);
  SmallVector<int64_t> zeros(rank, 0), sliceLimit{cg, o}, unit(rank, 1);
  sliceLimit.append(ws.begin() + 2, ws.end());
  Value dw = e.transpose(e.slice(dwFull, zeros, sliceLimit, unit),
                         swapPerm(rank, 0, 1));
  return SmallVector<Value>{dx, dw};
}

//===----------------------------------------------------------------------===//
// reduce_window
//===----------------------------------------------------------------------===//

VJPResult vjp(ReduceWindowOp op, OpBuilder &b, ValueRange cotangents) {
  Value x = op.getOperand();
  if (!isFloatTensor(x))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0];
  RankedTensorType xType = Emitter::typeOf(x);
  if (Emitter::typeOf(g).getNumElements() == 0 || xType.getNumElements() == 0)
    return SmallVector<Value>{e.zerosLike(x)};
  ArrayRef<int64_t> xs = xType.getShape(), ys = Emitter::typeOf(g).getShape();
  ArrayRef<int64_t> window = op.getWindow(), strides = op.getStrides(),
                    padLow = op.getPadLow(), padHigh = op.getPadHigh(),
                    dils = op.getDilations();
  int64_t rank = xType.getRank();
  SmallVector<int64_t> padded;
  for (int64_t d = 0; d < rank; ++d)
    padded.push_back(xs[d] + padLow[d] + padHigh[d]);
  /// Places `c` (the result's shape) at window offset `k` of the padded
  /// operand along dimension d: dilate by the stride, shift by k*dilation.
  auto placeAlong = [&](Value c, int64_t d, int64_t k) {
    Value spread = dilate(e, c, d, strides[d]);
    SmallVector<int64_t> low(rank, 0), high(rank, 0);
    low[d] = k * dils[d];
    high[d] = padded[d] - low[d] - Emitter::typeOf(spread).getDimSize(d);
    return e.padZeros(spread, low, high);
  };

  switch (op.getKind()) {
  case ReduceKind::sum: {
    // Separable: the adjoint along each dimension in turn.
    Value acc = g;
    for (int64_t d = 0; d < rank; ++d) {
      if (window[d] == 1 && strides[d] == 1 && padded[d] == ys[d])
        continue;
      Value sum;
      for (int64_t k = 0; k < window[d]; ++k) {
        Value term = placeAlong(acc, d, k);
        sum = sum ? e.add(sum, term) : term;
      }
      acc = sum;
    }
    return SmallVector<Value>{unpad(e, acc, padLow, xs)};
  }
  case ReduceKind::max:
  case ReduceKind::min: {
    bool isMax = op.getKind() == ReduceKind::max;
    Type et = xType.getElementType();
    double identity = isMax ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity();
    Value xPadded = x;
    if (llvm::any_of(padLow, [](int64_t v) { return v != 0; }) ||
        llvm::any_of(padHigh, [](int64_t v) { return v != 0; }))
      xPadded = PadOp::create(b, op.getLoc(), xType.clone(padded), x,
                              e.splat(RankedTensorType::get({}, et), identity),
                              padLow, padHigh, PadMode::constant);
    Value y = op.getResult();
    // Every window offset as a multi-index.
    SmallVector<SmallVector<int64_t>> offsets{{}};
    for (int64_t d = 0; d < rank; ++d) {
      SmallVector<SmallVector<int64_t>> next;
      for (const auto &prefix : offsets)
        for (int64_t k = 0; k < window[d]; ++k) {
          next.push_back(prefix);
          next.back().push_back(k);
        }
      offsets = std::move(next);
    }
    // As PyTorch's max_pool: the first element of the window (in row-major
    // window order) equal to the extremum takes the whole cotangent; a
    // window without a match (NaN) passes none.
    Value zero = e.zerosLike(g);
    Value acc, taken;
    for (const auto &k : offsets) {
      SmallVector<int64_t> start, limit;
      for (int64_t d = 0; d < rank; ++d) {
        start.push_back(k[d] * dils[d]);
        limit.push_back(start.back() + (ys[d] - 1) * strides[d] + 1);
      }
      Value xk = e.slice(xPadded, start, limit, strides);
      Value mask = e.compare(CompareKind::eq, xk, y);
      if (taken) {
        Value fresh = e.compare(CompareKind::eq, taken,
                                e.splat(Emitter::typeOf(taken), 0));
        mask = e.binary(BinaryKind::land, mask, fresh);
        taken = e.binary(BinaryKind::lor, taken, mask);
      } else {
        taken = mask;
      }
      Value term = e.select(mask, g, zero);
      for (int64_t d = 0; d < rank; ++d)
        term = placeAlong(term, d, k[d]);
      acc = acc ? e.add(acc, term) : term;
    }
    return SmallVector<Value>{unpad(e, acc, padLow, xs)};
  }
  default:
    return op.emitError() << "no VJP rule for 'cleave.reduce_window' with kind "
                          << stringifyReduceKind(op.getKind());
  }
}

//===----------------------------------------------------------------------===//
// pad (reflect, edge)
//===----------------------------------------------------------------------===//

VJPResult vjpPadFolded(PadOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0];
  RankedTensorType xType = Emitter::typeOf(op.getOperand());
  ArrayRef<int64_t> xs = xType.getShape();
  if (xType.getNumElements() == 0)
    return SmallVector<Value>{e.zerosLike(op.getOperand()), Value()};
  bool reflect = op.getMode() == PadMode::reflect;
  Type i64 = b.getI64Type();
  for (int64_t d = 0; d < xType.getRank(); ++d) {
    int64_t low = op.getLow()[d], high = op.getHigh()[d], size = xs[d];
    if (low == 0 && high == 0)
      continue;
    // The source element of each padded position along d.
    int64_t total = low + size + high;
    SmallVector<int64_t> source;
    for (int64_t j = 0; j < total; ++j) {
      int64_t p = j - low;
      if (!reflect || size == 1) {
        p = std::clamp<int64_t>(p, 0, size - 1);
      } else {
        int64_t period = 2 * (size - 1);
        p = ((p % period) + period) % period;
        if (p >= size)
          p = period - p;
      }
      source.push_back(p);
    }
    RankedTensorType gType = Emitter::typeOf(g);
    auto mapType = RankedTensorType::get({total}, i64);
    Value map = ConstantOp::create(
        b, op.getLoc(),
        DenseElementsAttr::get(mapType, ArrayRef<int64_t>(source)));
    Value indices = e.broadcastInDim(map, gType.clone(i64), {d});
    SmallVector<int64_t> targetShape(gType.getShape());
    targetShape[d] = size;
    RankedTensorType target = gType.clone(targetShape);
    g = ScatterOp::create(b, op.getLoc(), target, ScatterKind::add,
                          e.splat(target, 0.0), indices, g, d);
  }
  // The padding value is not used by these modes.
  return SmallVector<Value>{g, Value()};
}

//===----------------------------------------------------------------------===//
// scatter (mul, max, min)
//===----------------------------------------------------------------------===//

VJPResult vjpScatterCombine(ScatterOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  Location loc = op.getLoc();
  Value g = cotangents[0];
  Value operand = op.getOperand(), indices = op.getIndices(),
        updates = op.getUpdates();
  int64_t axis = op.getAxis();
  Type updType = updates.getType();
  auto gather = [&](Value v) -> Value {
    return GatherElementsOp::create(b, loc, updType, v, indices, axis);
  };
  auto scatter = [&](ScatterKind kind, Value into, Value upd) -> Value {
    return ScatterOp::create(b, loc, into.getType(), kind, into, indices, upd,
                             axis);
  };
  switch (op.getKind()) {
  case ScatterKind::mul: {
    // result = operand * prod(updates at p): d operand = g * prod(updates),
    // d update = gather(g * result) / update (undefined at a zero update).
    Value prod = scatter(ScatterKind::mul, e.splatLike(operand, 1.0), updates);
    Value operandGrad = e.mul(g, prod);
    Value updatesGrad = e.div(gather(e.mul(g, op.getResult())), updates);
    return SmallVector<Value>{operandGrad, Value(), updatesGrad};
  }
  case ScatterKind::max:
  case ScatterKind::min: {
    // The cotangent goes to the elements equal to the result, split evenly
    // among ties.
    Value result = op.getResult();
    Value operandHit = e.compare(CompareKind::eq, operand, result);
    Value updateHit = e.compare(CompareKind::eq, updates, gather(result));
    Value onesO = e.splatLike(operand, 1.0), zerosO = e.zerosLike(operand);
    Value onesU = e.splatLike(updates, 1.0), zerosU = e.zerosLike(updates);
    Value count = scatter(ScatterKind::add, e.select(operandHit, onesO, zerosO),
                          e.select(updateHit, onesU, zerosU));
    Value share = e.div(g, e.binary(BinaryKind::max, count, onesO));
    Value operandGrad = e.select(operandHit, share, zerosO);
    Value updatesGrad = e.select(updateHit, gather(share), zerosU);
    return SmallVector<Value>{operandGrad, Value(), updatesGrad};
  }
  default:
    return op.emitError() << "no VJP rule for 'cleave.scatter' with kind "
                          << stringifyScatterKind(op.getKind());
  }
}

} // namespace cleave::autodiff
