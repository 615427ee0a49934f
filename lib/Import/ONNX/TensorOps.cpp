//===- TensorOps.cpp - Data-movement ONNX ops (reshape, slice, gather...) -===//

#include "NodeContext.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

LogicalResult convertGather(NodeContext &ctx) {
  Value x = ctx.input(0), idx = ctx.input(1);
  if (!x || !idx)
    return failure();
  if (!isa<IntegerType>(elemOf(idx)) || rankOf(x) == 0) {
    ctx.error() << "needs integer indices and data of rank >= 1";
    return failure();
  }
  auto axis = ctx.normAxis(ctx.attrInt("axis", 0), rankOf(x));
  if (failed(axis))
    return failure();
  // Constant indices are validated here: out-of-range ones are an error.
  if (failed(ctx.checkConstIndices(1, shapeOf(x)[*axis])))
    return failure();
  auto xs = shapeOf(x);
  SmallVector<int64_t> shape(xs.begin(), xs.begin() + *axis);
  llvm::append_range(shape, shapeOf(idx));
  shape.append(xs.begin() + *axis + 1, xs.end());
  bool elements = ctx.opType() == "GatherElements";
  if (elements) {
    if (rankOf(idx) != rankOf(x)) {
      ctx.error() << "indices must have the data's rank";
      return failure();
    }
    shape.assign(shapeOf(idx).begin(), shapeOf(idx).end());
    return ctx.finish(
        GatherElementsOp::create(ctx.b, ctx.loc,
                                 RankedTensorType::get(shape, elemOf(x)), x,
                                 idx, static_cast<uint64_t>(*axis))
            .getResult());
  }
  return ctx.finish(GatherOp::create(ctx.b, ctx.loc,
                                     RankedTensorType::get(shape, elemOf(x)), x,
                                     idx, static_cast<uint64_t>(*axis))
                        .getResult());
}

/// Compress with a condition known at import time: a Gather of the indices
/// it selects (the output's size depends on the condition's values).
LogicalResult convertCompress(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  const ConstTensor *cond = ctx.hasInput(1) ? ctx.constInput(1) : nullptr;
  if (!cond) {
    ctx.error() << "input 'condition' must be a constant computable at "
                   "import time: the output's shape depends on its values";
    return failure();
  }
  if (cond->shape.size() != 1) {
    ctx.error() << "condition must be 1-D";
    return failure();
  }
  int64_t axis = 0;
  if (ctx.hasAttr("axis")) {
    auto a = ctx.normAxis(ctx.attrInt("axis", 0), rankOf(x));
    if (failed(a))
      return failure();
    axis = *a;
  } else {
    x = ctx.reshape(x, {product(shapeOf(x))});
  }
  int64_t n = shapeOf(x)[axis];
  if (cond->numel() > n) {
    ctx.error() << "condition has " << cond->numel()
                << " values for an axis of size " << n;
    return failure();
  }
  ConstTensor idx;
  idx.elemType = ctx.b.getI64Type();
  for (int64_t i = 0; i < cond->numel(); ++i)
    if (cond->getF(i) != 0)
      idx.ints.push_back(i);
  idx.shape = {static_cast<int64_t>(idx.ints.size())};
  SmallVector<int64_t> shape(shapeOf(x));
  shape[axis] = idx.shape[0];
  return ctx.finish(
      GatherOp::create(ctx.b, ctx.loc, RankedTensorType::get(shape, elemOf(x)),
                       x, ctx.constant(idx), static_cast<uint64_t>(axis))
          .getResult());
}

/// TensorScatter (opset 24, a KV cache's update) with write indices known
/// at import time: each batch entry is the concatenation, along the
/// sequence axis, of the runs of cache rows and update rows it keeps (the
/// update's run wraps around in circular mode); then the entries are
/// concatenated.
LogicalResult convertTensorScatter(NodeContext &ctx) {
  Value cache = ctx.input(0), update = ctx.input(1);
  if (!cache || !update)
    return failure();
  int64_t rank = rankOf(cache);
  auto axis = ctx.normAxis(ctx.attrInt("axis", -2), rank);
  if (failed(axis))
    return failure();
  std::string mode = ctx.attrString("mode", "linear");
  ArrayRef<int64_t> cs = shapeOf(cache), us = shapeOf(update);
  bool fits = rankOf(update) == rank && elemOf(update) == elemOf(cache) &&
              *axis > 0 && us[*axis] <= cs[*axis];
  for (int64_t d = 0; fits && d < rank; ++d)
    fits = d == *axis || us[d] == cs[d];
  if (!fits || (mode != "linear" && mode != "circular")) {
    ctx.error() << "needs an update shaped like the cache except along axis "
                << *axis << " (not the batch axis), of one type, and mode "
                << "linear or circular; got " << cache.getType() << " and "
                << update.getType();
    return failure();
  }
  int64_t batch = cs[0], len = cs[*axis], seq = us[*axis];
  SmallVector<int64_t> writes(batch, 0);
  if (ctx.hasInput(2)) {
    auto w = ctx.constInts(2, "write_indices");
    if (failed(w))
      return failure();
    if (static_cast<int64_t>(w->size()) != batch) {
      ctx.error() << "write_indices must hold one index per batch entry";
      return failure();
    }
    writes = *w;
  }
  SmallVector<Value> entries;
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t at = writes[b];
    if (at < 0 || at >= len || (mode == "linear" && at + seq > len)) {
      ctx.error() << "write index " << at << " of batch entry " << b
                  << " does not fit " << seq << " rows into " << len;
      return failure();
    }
    // Source of each row: the update's row (>= 0) or the cache's (-1).
    SmallVector<int64_t> from(len, -1);
    for (int64_t j = 0; j < seq; ++j)
      from[(at + j) % len] = j;
    SmallVector<Value> runs;
    SmallVector<int64_t> shape(cs);
    shape[0] = 1;
    for (int64_t p = 0; p < len;) {
      bool fromUpdate = from[p] >= 0;
      int64_t q = p + 1;
      while (q < len && (from[q] >= 0) == fromUpdate &&
             (!fromUpdate || from[q] == from[q - 1] + 1))
        ++q;
      Value src = fromUpdate ? update : cache;
      SmallVector<int64_t> start(rank, 0), limit(fromUpdate ? us : cs);
      start[0] = b;
      limit[0] = b + 1;
      start[*axis] = fromUpdate ? from[p] : p;
      limit[*axis] = start[*axis] + (q - p);
      runs.push_back(ctx.slice(src, start, limit, strides));
      p = q;
    }
    entries.push_back(
        runs.size() == 1
            ? runs[0]
            : ConcatOp::create(ctx.b, ctx.loc,
                               RankedTensorType::get(shape, elemOf(cache)),
                               runs, static_cast<uint64_t>(*axis))
                  .getResult());
  }
  if (entries.size() == 1)
    return ctx.finish(entries[0]);
  return ctx.finish(ConcatOp::create(ctx.b, ctx.loc, cache.getType(), entries,
                                     static_cast<uint64_t>(0))
                        .getResult());
}

LogicalResult convertReshape(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  SmallVector<int64_t> spec;
  if (ctx.opset < 5) {
    spec = ctx.attrInts("shape");
  } else {
    auto s = ctx.constInts(1, "shape");
    if (failed(s))
      return failure();
    spec = *s;
  }
  std::string why;
  auto shape =
      computeReshape(shapeOf(x), spec, ctx.attrInt("allowzero", 0) != 0, why);
  if (!shape) {
    ctx.error() << "cannot reshape " << x.getType() << ": " << why;
    return failure();
  }
  return ctx.finish(ctx.reshape(x, *shape));
}

LogicalResult convertFlatten(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  int64_t rank = rankOf(x), axis = ctx.attrInt("axis", 1);
  if (axis < -rank || axis > rank) {
    ctx.error() << "axis " << axis << " is out of range for rank " << rank;
    return failure();
  }
  if (axis < 0)
    axis += rank;
  auto s = shapeOf(x);
  return ctx.finish(ctx.reshape(
      x, {product(s.take_front(axis)), product(s.drop_front(axis))}));
}

LogicalResult convertTranspose(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  int64_t rank = rankOf(x);
  SmallVector<int64_t> perm = ctx.attrInts("perm");
  if (!ctx.hasAttr("perm"))
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  SmallVector<bool> seen(rank, false);
  if ((int64_t)perm.size() != rank) {
    ctx.error() << "perm has " << perm.size() << " entries for rank " << rank;
    return failure();
  }
  for (int64_t &p : perm) {
    if (p < -rank || p >= rank || seen[p < 0 ? p + rank : p]) {
      ctx.error() << "perm is not a permutation";
      return failure();
    }
    if (p < 0)
      p += rank;
    seen[p] = true;
  }
  return ctx.finish(ctx.transpose(x, perm));
}

/// Applies computed slice dims: reverse where steps are negative, then slice.
Value applySlice(NodeContext &ctx, Value x, ArrayRef<SliceDim> dims) {
  auto shape = shapeOf(x);
  SmallVector<int64_t> rev, start, limit, strides;
  for (size_t d = 0; d < dims.size(); ++d) {
    const SliceDim &s = dims[d];
    int64_t first = s.start, step = s.step;
    if (step < 0 && s.count > 1) {
      rev.push_back(d);
      first = shape[d] - 1 - s.start;
      step = -step;
    } else if (step < 0) {
      step = 1;
    }
    start.push_back(first);
    limit.push_back(s.count == 0 ? first : first + (s.count - 1) * step + 1);
    strides.push_back(step);
  }
  if (!rev.empty())
    x = ReverseOp::create(ctx.b, ctx.loc, x.getType(), x, rev).getResult();
  return ctx.slice(x, start, limit, strides);
}

LogicalResult convertSlice(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (ctx.opset < 10) {
    starts = ctx.attrInts("starts");
    ends = ctx.attrInts("ends");
    axes = ctx.attrInts("axes");
  } else {
    auto s = ctx.constInts(1, "starts"), e = ctx.constInts(2, "ends");
    if (failed(s) || failed(e))
      return failure();
    starts = *s;
    ends = *e;
    if (ctx.hasInput(3)) {
      auto a = ctx.constInts(3, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
    if (ctx.hasInput(4)) {
      auto st = ctx.constInts(4, "steps");
      if (failed(st))
        return failure();
      steps = *st;
    }
  }
  std::string why;
  auto dims = computeSlice(shapeOf(x), starts, ends, axes, steps, why);
  if (!dims) {
    ctx.error() << why;
    return failure();
  }
  return ctx.finish(applySlice(ctx, x, *dims));
}

LogicalResult convertConcat(NodeContext &ctx) {
  SmallVector<Value> ins;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    Value v = ctx.input(i);
    if (!v)
      return failure();
    ins.push_back(v);
  }
  if (ins.empty()) {
    ctx.error() << "needs at least one input";
    return failure();
  }
  int64_t rank = rankOf(ins[0]);
  if (rank == 0) {
    ctx.error() << "inputs must have rank >= 1";
    return failure();
  }
  auto axis = ctx.normAxis(ctx.attrInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(shapeOf(ins[0]));
  shape[*axis] = 0;
  for (Value v : ins) {
    if (rankOf(v) != rank || elemOf(v) != elemOf(ins[0])) {
      ctx.error() << "inputs differ in rank or element type";
      return failure();
    }
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && shapeOf(v)[d] != shape[d]) {
        ctx.error() << "inputs differ in dimension " << d;
        return failure();
      }
    shape[*axis] += shapeOf(v)[*axis];
  }
  // Inputs empty along the axis add nothing (the unrotated part of a
  // RotaryEmbedding that rotates every element).
  if (shape[*axis] > 0)
    llvm::erase_if(ins, [&](Value v) { return shapeOf(v)[*axis] == 0; });
  if (ins.size() == 1)
    return ctx.finish(ins[0]);
  return ctx.finish(
      ConcatOp::create(ctx.b, ctx.loc,
                       RankedTensorType::get(shape, elemOf(ins[0])), ins,
                       static_cast<uint64_t>(*axis))
          .getResult());
}

LogicalResult convertSplit(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto axis = ctx.axisAttr(x, 0);
  if (failed(axis))
    return failure();
  int64_t n = shapeOf(x)[*axis], outs = ctx.numOutputs();
  SmallVector<int64_t> sizes;
  if (ctx.opset >= 13 && ctx.hasInput(1)) {
    auto s = ctx.constInts(1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (ctx.hasAttr("split")) {
    sizes = ctx.attrInts("split");
  } else {
    int64_t parts =
        ctx.hasAttr("num_outputs") ? ctx.attrInt("num_outputs", 1) : outs;
    if (parts <= 0 || parts != outs) {
      ctx.error() << "num_outputs must match the " << outs << " outputs";
      return failure();
    }
    int64_t chunk = (n + parts - 1) / parts;
    if (!ctx.hasAttr("num_outputs") && n % parts != 0) {
      ctx.error() << "axis size " << n << " does not split evenly into "
                  << parts;
      return failure();
    }
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, n - i * chunk)));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) {
      ctx.error() << "negative split size " << s;
      return failure();
    }
    total += s;
  }
  if ((int64_t)sizes.size() != outs || total != n) {
    ctx.error() << "split sizes must give " << outs
                << " parts that sum to the axis size " << n;
    return failure();
  }
  int64_t off = 0, rank = rankOf(x);
  for (int64_t i = 0; i < outs; ++i) {
    SmallVector<int64_t> start(rank, 0), limit(shapeOf(x)), strides(rank, 1);
    start[*axis] = off;
    limit[*axis] = off + sizes[i];
    off += sizes[i];
    ctx.setOutput(i, ctx.slice(x, start, limit, strides));
  }
  return success();
}

LogicalResult convertSqueeze(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  bool present;
  auto axes = getAxes(ctx, 13, 1, present);
  if (failed(axes))
    return failure();
  int64_t rank = rankOf(x);
  SmallVector<int64_t> shape;
  if (ctx.opType() == "Squeeze") {
    auto norm = ctx.normAxes(*axes, rank);
    if (failed(norm))
      return failure();
    for (int64_t d = 0; d < rank; ++d) {
      bool named = llvm::is_contained(*norm, d);
      if (named && shapeOf(x)[d] != 1) {
        ctx.error() << "cannot squeeze dimension " << d << " of size "
                    << shapeOf(x)[d];
        return failure();
      }
      if (!(present ? named : shapeOf(x)[d] == 1))
        shape.push_back(shapeOf(x)[d]);
    }
  } else {
    if (!present) {
      ctx.error() << "needs axes";
      return failure();
    }
    int64_t outRank = rank + axes->size();
    auto norm = ctx.normAxes(*axes, outRank);
    if (failed(norm))
      return failure();
    int64_t k = 0;
    for (int64_t d = 0; d < outRank; ++d)
      shape.push_back(llvm::is_contained(*norm, d) ? 1 : shapeOf(x)[k++]);
  }
  return ctx.finish(ctx.reshape(x, shape));
}

LogicalResult convertExpand(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto spec = ctx.constInts(1, "shape");
  if (!x || failed(spec))
    return failure();
  auto shape = broadcastShapes(shapeOf(x), *spec);
  if (!shape || llvm::any_of(*spec, [](int64_t d) { return d < 0; })) {
    ctx.error() << "cannot expand " << x.getType() << " to the given shape";
    return failure();
  }
  return ctx.finish(ctx.broadcastTo(x, *shape));
}

LogicalResult convertTile(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto reps = ctx.constInts(1, "repeats");
  if (!x || failed(reps))
    return failure();
  int64_t rank = rankOf(x);
  if ((int64_t)reps->size() != rank ||
      llvm::any_of(*reps, [](int64_t r) { return r < 0; })) {
    ctx.error() << "repeats must hold " << rank << " non-negative values";
    return failure();
  }
  // [d0, d1] -> broadcast to [r0, d0, r1, d1] -> reshape [r0*d0, r1*d1].
  SmallVector<int64_t> wide, dims, out;
  for (int64_t d = 0; d < rank; ++d) {
    wide.push_back((*reps)[d]);
    wide.push_back(shapeOf(x)[d]);
    dims.push_back(2 * d + 1);
    out.push_back((*reps)[d] * shapeOf(x)[d]);
  }
  Value b = BroadcastInDimOp::create(
                ctx.b, ctx.loc, RankedTensorType::get(wide, elemOf(x)), x, dims)
                .getResult();
  return ctx.finish(ctx.reshape(b, out));
}

LogicalResult convertTrilu(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  if (rankOf(x) < 2) {
    ctx.error() << "input must have rank >= 2";
    return failure();
  }
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    auto kv = ctx.constInts(1, "k");
    if (failed(kv))
      return failure();
    if (kv->size() != 1) {
      ctx.error() << "k must hold one value";
      return failure();
    }
    k = (*kv)[0];
  }
  auto s = shapeOf(x);
  SmallVector<int64_t> mat(s.end() - 2, s.end());
  auto it = RankedTensorType::get(mat, ctx.b.getI64Type());
  Value rows = IotaOp::create(ctx.b, ctx.loc, it, 0).getResult();
  Value cols = IotaOp::create(ctx.b, ctx.loc, it, 1).getResult();
  // upper keeps j - i >= k, lower keeps j - i <= k.
  Value diff = ctx.binary(BinaryKind::sub, cols, rows);
  bool upper = ctx.attrInt("upper", 1) != 0;
  Value keep = ctx.compare(upper ? CompareKind::ge : CompareKind::le, diff,
                           ctx.splat(ctx.b.getI64Type(), {}, k));
  return ctx.finish(ctx.select(keep, x, ctx.splat(elemOf(x), {}, 0)));
}

LogicalResult convertPad(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  int64_t rank = rankOf(x);
  std::string modeStr = ctx.attrString("mode", "constant");
  PadMode mode = PadMode::constant;
  bool wrap = modeStr == "wrap"; // opset 19: slices and concatenations
  if (modeStr == "constant" || wrap)
    mode = PadMode::constant;
  else if (modeStr == "reflect")
    mode = PadMode::reflect;
  else if (modeStr == "edge")
    mode = PadMode::edge;
  else {
    ctx.error() << "pad mode '" << modeStr << "' is not supported";
    return failure();
  }
  SmallVector<int64_t> pads;
  Value value;
  if (ctx.opset < 11) {
    pads = ctx.attrInts(ctx.hasAttr("pads") ? "pads" : "paddings");
    value = ctx.splat(elemOf(x), {}, ctx.attrFloat("value", 0));
  } else {
    auto p = ctx.constInts(1, "pads");
    if (failed(p))
      return failure();
    pads = *p;
    if (ctx.hasInput(2)) {
      value = ctx.input(2);
      if (!value)
        return failure();
      if (product(shapeOf(value)) != 1 || elemOf(value) != elemOf(x)) {
        ctx.error() << "constant_value must be one element of the input's type";
        return failure();
      }
      value = ctx.reshape(value, {});
    } else {
      value = ctx.splat(elemOf(x), {}, 0);
    }
  }
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (ctx.hasInput(3)) {
    auto a = ctx.constInts(3, "axes");
    if (failed(a))
      return failure();
    auto n = ctx.normAxes(*a, rank);
    if (failed(n))
      return failure();
    axes = *n;
  }
  if (pads.size() != 2 * axes.size()) {
    ctx.error() << "pads has " << pads.size() << " values, expected "
                << 2 * axes.size();
    return failure();
  }
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    low[axes[i]] = pads[i];
    high[axes[i]] = pads[i + axes.size()];
  }
  // Negative pads crop: slice first, then pad with the rest.
  SmallVector<int64_t> start(rank), limit(shapeOf(x)), strides(rank, 1);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = shapeOf(x)[d];
    if (low[d] < 0)
      start[d] = -low[d], low[d] = 0;
    if (high[d] < 0)
      limit[d] = n + high[d], high[d] = 0;
    if (start[d] > limit[d] || limit[d] < 0 || start[d] > n) {
      ctx.error() << "negative pads remove more than dimension " << d
                  << " holds";
      return failure();
    }
  }
  x = ctx.slice(x, start, limit, strides);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = shapeOf(x)[d];
    if (mode == PadMode::reflect && (low[d] > 0 || high[d] > 0) &&
        (low[d] >= n || high[d] >= n)) {
      ctx.error() << "reflect padding of dimension " << d
                  << " must be smaller than its size " << n;
      return failure();
    }
    if (mode == PadMode::edge && n == 0 && (low[d] > 0 || high[d] > 0)) {
      ctx.error() << "edge padding of empty dimension " << d;
      return failure();
    }
  }
  if (llvm::all_of(low, [](int64_t v) { return v == 0; }) &&
      llvm::all_of(high, [](int64_t v) { return v == 0; }))
    return ctx.finish(x);
  if (wrap) {
    for (int64_t d = 0; d < rank; ++d) {
      if (low[d] == 0 && high[d] == 0)
        continue;
      SmallVector<int64_t> shape(shapeOf(x));
      int64_t n = shape[d];
      if (low[d] > n || high[d] > n) {
        ctx.error() << "wrap padding of dimension " << d
                    << " must be at most its size " << n;
        return failure();
      }
      auto part = [&](int64_t from, int64_t to) {
        SmallVector<int64_t> start(rank, 0), limit(shape), strides(rank, 1);
        start[d] = from;
        limit[d] = to;
        return ctx.slice(x, start, limit, strides);
      };
      SmallVector<Value> pieces;
      if (low[d] > 0)
        pieces.push_back(part(n - low[d], n));
      pieces.push_back(x);
      if (high[d] > 0)
        pieces.push_back(part(0, high[d]));
      shape[d] = n + low[d] + high[d];
      x = ConcatOp::create(ctx.b, ctx.loc,
                           RankedTensorType::get(shape, elemOf(x)), pieces,
                           static_cast<uint64_t>(d))
              .getResult();
    }
    return ctx.finish(x);
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(shapeOf(x)[d] + low[d] + high[d]);
  return ctx.finish(PadOp::create(ctx.b, ctx.loc,
                                  RankedTensorType::get(shape, elemOf(x)), x,
                                  value, low, high, mode)
                        .getResult());
}

/// CenterCropPad (opset 18): per axis, crops or zero-pads the input to the
/// given size around its centre (the extra element at the end).
LogicalResult convertCenterCropPad(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto sizes = ctx.constInts(1, "shape");
  if (!x || failed(sizes))
    return failure();
  int64_t rank = rankOf(x);
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (ctx.hasAttr("axes")) {
    auto n = ctx.normAxes(ctx.attrInts("axes"), rank);
    if (failed(n))
      return failure();
    axes = *n;
  }
  if (sizes->size() != axes.size()) {
    ctx.error() << "shape has " << sizes->size() << " values for "
                << axes.size() << " axes";
    return failure();
  }
  SmallVector<int64_t> start(rank, 0), limit(shapeOf(x)), strides(rank, 1);
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  for (auto [a, size] : llvm::zip(axes, *sizes)) {
    int64_t dim = shapeOf(x)[a];
    if (size < 0) {
      ctx.error() << "shape[" << a << "] is negative";
      return failure();
    }
    if (size < dim) {
      start[a] = (dim - size) / 2;
      limit[a] = start[a] + size;
    } else if (size > dim) {
      low[a] = (size - dim) / 2;
      high[a] = size - dim - low[a];
    }
  }
  Value r = ctx.slice(x, start, limit, strides);
  if (llvm::any_of(low, [](int64_t v) { return v > 0; }) ||
      llvm::any_of(high, [](int64_t v) { return v > 0; })) {
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < rank; ++d)
      shape.push_back(shapeOf(r)[d] + low[d] + high[d]);
    r = PadOp::create(ctx.b, ctx.loc, RankedTensorType::get(shape, elemOf(r)),
                      r, ctx.splat(elemOf(r), {}, 0), low, high,
                      PadMode::constant)
            .getResult();
  }
  return ctx.finish(r);
}

LogicalResult convertDepthSpace(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  int64_t bs = ctx.attrInt("blocksize", 0);
  if (rankOf(x) != 4 || bs <= 0) {
    ctx.error() << "needs a 4-D input and a positive blocksize";
    return failure();
  }
  auto s = shapeOf(x);
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (ctx.opType() == "DepthToSpace") {
    if (c % (bs * bs) != 0) {
      ctx.error() << "channels " << c << " not divisible by blocksize^2";
      return failure();
    }
    int64_t oc = c / (bs * bs);
    bool crd = ctx.attrString("mode", "DCR") == "CRD";
    Value r = crd ? ctx.reshape(x, {n, oc, bs, bs, h, w})
                  : ctx.reshape(x, {n, bs, bs, oc, h, w});
    r = crd ? ctx.transpose(r, {0, 1, 4, 2, 5, 3})
            : ctx.transpose(r, {0, 3, 4, 1, 5, 2});
    return ctx.finish(ctx.reshape(r, {n, oc, h * bs, w * bs}));
  }
  if (h % bs != 0 || w % bs != 0) {
    ctx.error() << "spatial dims not divisible by blocksize";
    return failure();
  }
  // DCR (the default): the block offset is the outer part of the new
  // channel; CRD (opset 25): the inner part.
  std::string mode = ctx.attrString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") {
    ctx.error() << "mode must be DCR or CRD, got '" << mode << "'";
    return failure();
  }
  Value r = ctx.reshape(x, {n, c, h / bs, bs, w / bs, bs});
  r = mode == "CRD" ? ctx.transpose(r, {0, 1, 3, 5, 2, 4})
                    : ctx.transpose(r, {0, 3, 5, 1, 2, 4});
  return ctx.finish(ctx.reshape(r, {n, c * bs * bs, h / bs, w / bs}));
}

LogicalResult convertOneHot(NodeContext &ctx) {
  Value idx = ctx.input(0), values = ctx.input(2);
  auto depthV = ctx.constScalar(1, "depth");
  if (!idx || !values || failed(depthV))
    return failure();
  int64_t depth = static_cast<int64_t>(*depthV);
  if (depth <= 0 || product(shapeOf(values)) != 2) {
    ctx.error() << "needs depth > 0 and two values [off, on]";
    return failure();
  }
  int64_t rank = rankOf(idx);
  auto axis = ctx.normAxis(ctx.attrInt("axis", -1), rank + 1);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(shapeOf(idx));
  shape.insert(shape.begin() + *axis, depth);
  Type i64 = ctx.b.getI64Type();
  Value id = ctx.convert(idx, i64);
  // Negative indices count from the end.
  Value neg = ctx.compare(CompareKind::lt, id, ctx.splat(i64, {}, 0));
  id = ctx.select(
      neg, ctx.binary(BinaryKind::add, id, ctx.splat(i64, {}, depth)), id);
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d <= rank; ++d)
    if (d != *axis)
      dims.push_back(d);
  Value idB = BroadcastInDimOp::create(
                  ctx.b, ctx.loc, RankedTensorType::get(shape, i64), id, dims)
                  .getResult();
  Value iota = IotaOp::create(ctx.b, ctx.loc, RankedTensorType::get(shape, i64),
                              static_cast<uint64_t>(*axis))
                   .getResult();
  Value hot = ctx.compare(CompareKind::eq, idB, iota);
  Value flat = ctx.reshape(values, {2});
  Value off = ctx.reshape(ctx.slice(flat, {0}, {1}, {1}), {});
  Value on = ctx.reshape(ctx.slice(flat, {1}, {2}, {1}), {});
  return ctx.finish(ctx.select(hot, on, off));
}

} // namespace

void registerTensorConverters(llvm::StringMap<ConverterFn> &t) {
  t["Gather"] = convertGather;
  t["GatherElements"] = convertGather;
  t["Reshape"] = convertReshape;
  t["Flatten"] = convertFlatten;
  t["Transpose"] = convertTranspose;
  t["Slice"] = convertSlice;
  t["Concat"] = convertConcat;
  t["Split"] = convertSplit;
  t["Squeeze"] = convertSqueeze;
  t["Unsqueeze"] = convertSqueeze;
  t["Expand"] = convertExpand;
  t["Tile"] = convertTile;
  t["Trilu"] = convertTrilu;
  t["Pad"] = convertPad;
  t["DepthToSpace"] = convertDepthSpace;
  t["CenterCropPad"] = convertCenterCropPad;
  t["Compress"] = convertCompress;
  t["TensorScatter"] = convertTensorScatter;
  t["SpaceToDepth"] = convertDepthSpace;
  t["OneHot"] = convertOneHot;
}

} // namespace cleave::onnximport
