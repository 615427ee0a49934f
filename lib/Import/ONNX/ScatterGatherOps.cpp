//===- ScatterGatherOps.cpp - ONNX scatter, GatherND and TopK -------------===//
//
// ScatterElements (and its deprecated alias Scatter) map to cleave.scatter.
// ScatterND and GatherND flatten the indexed leading dimensions of the data
// into one and compute a linear index from each index tuple (wrapping
// negative components; a tuple with a component out of range gets an index
// that cleave.scatter skips and cleave.gather reads as zero), then use
// cleave.scatter / cleave.gather on axis 0. TopK maps to cleave.top_k with
// `k` known at import time.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

/// The `reduction` attribute of the scatter ops.
FailureOr<ScatterKind> getScatterKind(NodeContext &ctx) {
  std::string r = ctx.attrString("reduction", "none");
  if (std::optional<ScatterKind> kind = symbolizeScatterKind(r))
    return *kind;
  ctx.error() << "unsupported reduction '" << r
              << "'; expected none, add, mul, max or min";
  return failure();
}

LogicalResult checkIntegerIndices(NodeContext &ctx, Value idx) {
  if (isa<IntegerType>(elemOf(idx)) && !elemOf(idx).isInteger(1))
    return success();
  ctx.error() << "indices must be int32 or int64, got " << elemOf(idx);
  return failure();
}

Value i64Vector(NodeContext &ctx, ArrayRef<int64_t> values) {
  ConstTensor c;
  c.elemType = ctx.b.getI64Type();
  c.shape = {static_cast<int64_t>(values.size())};
  c.ints.assign(values.begin(), values.end());
  return ctx.constant(c);
}

/// Linear index of each tuple in the last dimension of `idx` into a tensor
/// of shape `dims` (row-major), as i64 with `idx`'s shape minus the last
/// dimension. Negative components count from the end; a tuple with a
/// component still out of range maps to `sentinel`.
Value linearIndex(NodeContext &ctx, Value idx, ArrayRef<int64_t> dims,
                  int64_t sentinel) {
  Type i64 = ctx.b.getI64Type();
  int64_t last = rankOf(idx) - 1;
  Value v = ctx.convert(idx, i64);
  SmallVector<int64_t> strides(dims.size(), 1);
  for (int64_t j = static_cast<int64_t>(dims.size()) - 2; j >= 0; --j)
    strides[j] = strides[j + 1] * dims[j + 1];
  Value sizes = i64Vector(ctx, dims);
  Value zero = ctx.splatLike(v, 0);
  Value wrapped = ctx.select(ctx.compare(CompareKind::lt, v, zero),
                             ctx.binary(BinaryKind::add, v, sizes), v);
  if (!wrapped)
    return {};
  Value lin = ctx.reduce(
      ReduceKind::sum,
      ctx.binary(BinaryKind::mul, wrapped, i64Vector(ctx, strides)), {last},
      /*keepDims=*/false);
  Value outside = ctx.convert(
      ctx.binary(BinaryKind::lor, ctx.compare(CompareKind::lt, wrapped, zero),
                 ctx.compare(CompareKind::ge, wrapped,
                             ctx.broadcastTo(sizes, shapeOf(wrapped)))),
      i64);
  Value anyOutside =
      ctx.reduce(ReduceKind::max, outside, {last}, /*keepDims=*/false);
  if (!lin || !anyOutside)
    return {};
  return ctx.select(
      ctx.compare(CompareKind::ne, anyOutside, ctx.splatLike(anyOutside, 0)),
      ctx.splatLike(lin, static_cast<double>(sentinel)), lin);
}

/// A scatter node's data, integer indices, updates and `reduction`.
struct ScatterNode {
  Value x, idx, upd;
  ScatterKind kind;
};

FailureOr<ScatterNode> getScatterNode(NodeContext &ctx) {
  Value x = ctx.input(0), idx = ctx.input(1), upd = ctx.input(2);
  if (!x || !idx || !upd || failed(checkIntegerIndices(ctx, idx)))
    return failure();
  FailureOr<ScatterKind> kind = getScatterKind(ctx);
  if (failed(kind))
    return failure();
  return ScatterNode{x, idx, upd, *kind};
}

LogicalResult checkUpdatesType(NodeContext &ctx, Value upd, Value x) {
  if (elemOf(upd) == elemOf(x))
    return success();
  ctx.error() << "updates element type " << elemOf(upd)
              << " differs from the data element type " << elemOf(x);
  return failure();
}

//===----------------------------------------------------------------------===//
// ScatterElements, Scatter
//===----------------------------------------------------------------------===//

LogicalResult convertScatterElements(NodeContext &ctx) {
  FailureOr<ScatterNode> node = getScatterNode(ctx);
  if (failed(node))
    return failure();
  auto [x, idx, upd, kind] = *node;
  if (rankOf(x) == 0) {
    ctx.error() << "data must have rank >= 1";
    return failure();
  }
  if (rankOf(idx) != rankOf(x)) {
    ctx.error() << "indices rank " << rankOf(idx)
                << " differs from the data rank " << rankOf(x);
    return failure();
  }
  if (shapeOf(upd) != shapeOf(idx)) {
    ctx.error() << "updates shape " << shapeString(shapeOf(upd))
                << " differs from the indices shape "
                << shapeString(shapeOf(idx));
    return failure();
  }
  if (failed(checkUpdatesType(ctx, upd, x)))
    return failure();
  auto axis = ctx.normAxis(ctx.attrInt("axis", 0), rankOf(x));
  if (failed(axis))
    return failure();
  for (int64_t d = 0; d < rankOf(x); ++d)
    if (d != *axis && shapeOf(idx)[d] > shapeOf(x)[d]) {
      ctx.error() << "indices size " << shapeOf(idx)[d] << " in dimension " << d
                  << " exceeds the data size " << shapeOf(x)[d];
      return failure();
    }
  if (failed(ctx.checkConstIndices(1, shapeOf(x)[*axis])))
    return failure();
  return ctx.finish(ScatterOp::create(ctx.b, ctx.loc, x.getType(), kind, x, idx,
                                      upd, static_cast<uint64_t>(*axis))
                        .getResult());
}

//===----------------------------------------------------------------------===//
// ScatterND, GatherND
//===----------------------------------------------------------------------===//

/// Checks the last dimension of `idx` (the tuple length m) against
/// `available` indexable data dimensions; returns m.
FailureOr<int64_t> tupleLength(NodeContext &ctx, Value idx, int64_t available) {
  if (rankOf(idx) == 0) {
    ctx.error() << "indices must have rank >= 1";
    return failure();
  }
  int64_t m = shapeOf(idx).back();
  if (m > available) {
    ctx.error() << "index tuples have " << m << " entries but only "
                << available << " data dimensions can be indexed";
    return failure();
  }
  return m;
}

/// Errors when constant indices hold a component out of range.
LogicalResult checkConstTuples(NodeContext &ctx, ArrayRef<int64_t> dims) {
  const ConstTensor *c = ctx.constInput(1);
  if (!c || dims.empty())
    return success();
  int64_t m = dims.size();
  for (int64_t i = 0, e = c->numel(); i < e; ++i) {
    int64_t n = dims[i % m], v = c->getI(i);
    if (v < -n || v >= n) {
      ctx.error() << "index " << v << " is out of range for dimension size "
                  << n;
      return failure();
    }
  }
  return success();
}

LogicalResult convertScatterND(NodeContext &ctx) {
  FailureOr<ScatterNode> node = getScatterNode(ctx);
  if (failed(node))
    return failure();
  auto [x, idx, upd, kind] = *node;
  FailureOr<int64_t> m = tupleLength(ctx, idx, rankOf(x));
  if (failed(m))
    return failure();
  auto xs = shapeOf(x), is = shapeOf(idx);
  SmallVector<int64_t> lead(is.begin(), is.end() - 1);
  SmallVector<int64_t> rest(xs.begin() + *m, xs.end());
  SmallVector<int64_t> expected(lead);
  llvm::append_range(expected, rest);
  if (shapeOf(upd) != ArrayRef<int64_t>(expected)) {
    ctx.error() << "updates shape " << shapeString(shapeOf(upd))
                << " differs from the expected " << shapeString(expected)
                << " (indices.shape[:-1] + data.shape[indices.shape[-1]:])";
    return failure();
  }
  if (failed(checkUpdatesType(ctx, upd, x)))
    return failure();
  ArrayRef<int64_t> indexed = xs.take_front(*m);
  if (failed(checkConstTuples(ctx, indexed)))
    return failure();
  int64_t p = product(indexed), n = product(lead);

  // data -> [p, rest...]; each tuple -> one row, broadcast over rest.
  Value lin = linearIndex(ctx, idx, indexed, -2 * p - 1);
  if (!lin)
    return failure();
  SmallVector<int64_t> flatShape{p}, rowShape{n}, rowOnly{n};
  llvm::append_range(flatShape, rest);
  llvm::append_range(rowShape, rest);
  rowOnly.append(rest.size(), 1);
  Value rows = ctx.broadcastTo(ctx.reshape(lin, rowOnly), rowShape);
  Value flat = ctx.reshape(x, flatShape);
  Value flatUpd = ctx.reshape(upd, rowShape);
  if (!rows || !flat || !flatUpd)
    return failure();
  Value scattered = ScatterOp::create(ctx.b, ctx.loc, flat.getType(), kind,
                                      flat, rows, flatUpd, uint64_t{0})
                        .getResult();
  return ctx.finish(ctx.reshape(scattered, xs));
}

LogicalResult convertGatherND(NodeContext &ctx) {
  Value x = ctx.input(0), idx = ctx.input(1);
  if (!x || !idx || failed(checkIntegerIndices(ctx, idx)))
    return failure();
  int64_t batch = ctx.attrInt("batch_dims", 0);
  if (rankOf(idx) == 0) {
    ctx.error() << "indices must have rank >= 1";
    return failure();
  }
  if (batch < 0 || batch >= rankOf(idx) || batch >= rankOf(x)) {
    ctx.error() << "batch_dims " << batch
                << " must be non-negative and below the ranks of data ("
                << rankOf(x) << ") and indices (" << rankOf(idx) << ")";
    return failure();
  }
  auto xs = shapeOf(x), is = shapeOf(idx);
  if (xs.take_front(batch) != is.take_front(batch)) {
    ctx.error() << "the first " << batch << " dimensions of data "
                << shapeString(xs) << " and indices " << shapeString(is)
                << " must be equal (batch_dims)";
    return failure();
  }
  FailureOr<int64_t> m = tupleLength(ctx, idx, rankOf(x) - batch);
  if (failed(m))
    return failure();
  ArrayRef<int64_t> batchDims = xs.take_front(batch);
  ArrayRef<int64_t> indexed = xs.slice(batch, *m);
  if (failed(checkConstTuples(ctx, indexed)))
    return failure();
  int64_t nb = product(batchDims), p = product(indexed);

  Value lin = linearIndex(ctx, idx, indexed, -2 * nb * p - 1);
  if (!lin)
    return failure();
  // Offset each tuple by its batch's block of p rows.
  if (batch > 0) {
    auto linType = cast<RankedTensorType>(lin.getType());
    int64_t stride = p;
    for (int64_t t = batch - 1; t >= 0; --t) {
      Value pos =
          IotaOp::create(ctx.b, ctx.loc, linType, static_cast<uint64_t>(t))
              .getResult();
      lin = ctx.binary(
          BinaryKind::add, lin,
          ctx.binary(BinaryKind::mul, pos, ctx.splatLike(pos, stride)));
      stride *= batchDims[t];
    }
    if (!lin)
      return failure();
  }
  SmallVector<int64_t> flatShape{nb * p};
  flatShape.append(xs.begin() + batch + *m, xs.end());
  Value flat = ctx.reshape(x, flatShape);
  if (!flat)
    return failure();
  SmallVector<int64_t> outShape(shapeOf(lin));
  outShape.append(xs.begin() + batch + *m, xs.end());
  return ctx.finish(GatherOp::create(ctx.b, ctx.loc,
                                     RankedTensorType::get(outShape, elemOf(x)),
                                     flat, lin, uint64_t{0})
                        .getResult());
}

//===----------------------------------------------------------------------===//
// TopK
//===----------------------------------------------------------------------===//

LogicalResult convertTopK(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto axis = ctx.axisAttr(x, -1);
  if (failed(axis))
    return failure();
  int64_t k;
  if (ctx.opset < 10) {
    if (!ctx.hasAttr("k")) {
      ctx.error() << "missing attribute 'k'";
      return failure();
    }
    k = ctx.attrInt("k", 0);
  } else {
    auto ks = ctx.constInts(1, "K");
    if (failed(ks))
      return failure();
    if (ks->size() != 1) {
      ctx.error() << "input 'K' must hold one value, got " << ks->size();
      return failure();
    }
    k = (*ks)[0];
  }
  int64_t n = shapeOf(x)[*axis];
  if (k < 0 || k > n) {
    ctx.error() << "K = " << k << " is out of range [0, " << n << "] for axis "
                << *axis;
    return failure();
  }
  SmallVector<int64_t> shape(shapeOf(x));
  shape[*axis] = k;
  auto op = TopKOp::create(
      ctx.b, ctx.loc, RankedTensorType::get(shape, elemOf(x)),
      RankedTensorType::get(shape, ctx.b.getI64Type()), x,
      static_cast<uint64_t>(k), static_cast<uint64_t>(*axis),
      ctx.attrInt("largest", 1) != 0, ctx.attrInt("sorted", 1) != 0);
  ctx.setOutput(0, op.getValues());
  ctx.setOutput(1, op.getIndices());
  return success();
}

} // namespace

void registerScatterGatherConverters(llvm::StringMap<ConverterFn> &t) {
  t["ScatterElements"] = convertScatterElements;
  t["Scatter"] = convertScatterElements;
  t["ScatterND"] = convertScatterND;
  t["GatherND"] = convertGatherND;
  t["TopK"] = convertTopK;
}

} // namespace cleave::onnximport
