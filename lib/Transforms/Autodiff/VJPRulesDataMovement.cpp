//===- VJPRulesDataMovement.cpp - VJP rules of the data movement ops ------===//
//
// broadcast_in_dim, reshape, transpose, slice, reverse, concat, pad
// (constant mode), gather, gather_elements, scatter (none, add) and top_k.
// Gathers turn into scatter-adds into zeros.
//
//===----------------------------------------------------------------------===//

#include "VJPHelpers.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::autodiff {

VJPResult vjp(BroadcastInDimOp op, OpBuilder &b, ValueRange g) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  return SmallVector<Value>{e.unbroadcast(
      g[0], Emitter::typeOf(op.getOperand()), op.getBroadcastDimensions())};
}

VJPResult vjp(ReshapeOp op, OpBuilder &b, ValueRange g) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  return SmallVector<Value>{
      e.reshape(g[0], Emitter::typeOf(op.getOperand()).getShape())};
}

VJPResult vjp(TransposeOp op, OpBuilder &b, ValueRange g) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  ArrayRef<int64_t> perm = op.getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return SmallVector<Value>{e.transpose(g[0], inverse)};
}

VJPResult vjp(ReverseOp op, OpBuilder &b, ValueRange g) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  return SmallVector<Value>{
      ReverseOp::create(b, op.getLoc(), g[0], op.getDimensions())};
}

/// Spreads `g` along `dim` so that element `j` lands at `j * stride`, with
/// zeros between: [r] -> [(r - 1) * stride + 1]. Built as concat with zeros
/// in a new dimension, a reshape and a slice (the convolution rules'
/// `dilate` pads instead; the two keep their own IR).
static Value interleaveZeros(Emitter &e, Value g, int64_t dim, int64_t stride) {
  RankedTensorType type = Emitter::typeOf(g);
  SmallVector<int64_t> shape(type.getShape());
  SmallVector<int64_t> split(shape), zerosShape(shape);
  split.insert(split.begin() + dim + 1, 1);
  zerosShape.insert(zerosShape.begin() + dim + 1, stride - 1);
  Value zeros = e.splat(type.clone(zerosShape), 0.0);
  Value spread = e.concat({e.reshape(g, split), zeros}, dim + 1);
  return mergeSpread(e, spread, shape, dim, stride);
}

VJPResult vjp(SliceOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0];
  if (Emitter::typeOf(g).getNumElements() == 0)
    return SmallVector<Value>{e.zerosLike(op.getOperand())};
  ArrayRef<int64_t> in = Emitter::typeOf(op.getOperand()).getShape();
  ArrayRef<int64_t> start = op.getStartIndices(), strides = op.getStrides();
  for (auto [d, stride] : llvm::enumerate(strides))
    if (stride > 1)
      g = interleaveZeros(e, g, d, stride);
  SmallVector<int64_t> high;
  for (size_t d = 0; d < in.size(); ++d)
    high.push_back(in[d] - start[d] - Emitter::typeOf(g).getDimSize(d));
  return SmallVector<Value>{e.padZeros(g, start, high)};
}

VJPResult vjp(ConcatOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0];
  int64_t dim = op.getDimension();
  ArrayRef<int64_t> shape = Emitter::typeOf(g).getShape();
  SmallVector<Value> result;
  int64_t offset = 0;
  for (Value input : op.getInputs()) {
    int64_t size = Emitter::typeOf(input).getDimSize(dim);
    SmallVector<int64_t> start(shape.size(), 0), limit(shape),
        strides(shape.size(), 1);
    start[dim] = offset;
    limit[dim] = offset + size;
    offset += size;
    result.push_back(isFloatTensor(input) ? e.slice(g, start, limit, strides)
                                          : Value());
  }
  return result;
}

VJPResult vjp(PadOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value(), Value()};
  if (op.getMode() != PadMode::constant)
    return vjpPadFolded(op, b, cotangents); // VJPRulesNN.cpp
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0];
  ArrayRef<int64_t> in = Emitter::typeOf(op.getOperand()).getShape();
  SmallVector<int64_t> limit, strides(in.size(), 1);
  for (size_t d = 0; d < in.size(); ++d)
    limit.push_back(op.getLow()[d] + in[d]);
  Value operandGrad = e.slice(g, op.getLow(), limit, strides);
  // The padding value receives the sum over the padded region.
  Value padGrad = e.sub(e.sumAll(g), e.sumAll(operandGrad));
  return SmallVector<Value>{operandGrad, padGrad};
}

//===----------------------------------------------------------------------===//
// Gathers, scatter, top_k
//===----------------------------------------------------------------------===//

/// Scatter-adds `updates` into zeros of `operandType` at `indices` along
/// `axis` (ScatterElements semantics).
static Value scatterAddIntoZeros(Emitter &e, RankedTensorType operandType,
                                 Value indices, Value updates, int64_t axis) {
  Value zeros = e.splat(operandType, 0.0);
  return ScatterOp::create(e.b, e.loc, operandType, ScatterKind::add, zeros,
                           indices, updates, axis);
}

VJPResult vjp(GatherOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value(), Value()};
  Emitter e{b, op.getLoc()};
  // View the operand as [P, N, Q] and the result as [P, M, Q] (M indices),
  // then scatter-add along the middle dimension.
  RankedTensorType type = Emitter::typeOf(op.getOperand());
  ArrayRef<int64_t> in = type.getShape();
  int64_t axis = op.getAxis();
  auto product = [](ArrayRef<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  };
  int64_t p = product(in.take_front(axis)), n = in[axis],
          q = product(in.drop_front(axis + 1));
  int64_t m = Emitter::typeOf(op.getIndices()).getNumElements();
  Value updates = e.reshape(cotangents[0], {p, m, q});
  Value flatIndices = e.reshape(op.getIndices(), {m});
  RankedTensorType indicesType =
      Emitter::typeOf(flatIndices).clone(ArrayRef<int64_t>{p, m, q});
  Value indices = e.broadcastInDim(flatIndices, indicesType, {1});
  Value grad = scatterAddIntoZeros(e, type.clone(ArrayRef<int64_t>{p, n, q}),
                                   indices, updates, 1);
  return SmallVector<Value>{e.reshape(grad, in), Value()};
}

VJPResult vjp(GatherElementsOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value(), Value()};
  Emitter e{b, op.getLoc()};
  return SmallVector<Value>{
      scatterAddIntoZeros(e, Emitter::typeOf(op.getOperand()), op.getIndices(),
                          cotangents[0], op.getAxis()),
      Value()};
}

VJPResult vjp(ScatterOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>(3, Value());
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0];
  Value updatesGrad =
      GatherElementsOp::create(b, op.getLoc(), op.getUpdates().getType(), g,
                               op.getIndices(), op.getAxis());
  switch (op.getKind()) {
  case ScatterKind::add:
    return SmallVector<Value>{g, Value(), updatesGrad};
  case ScatterKind::none: {
    // Overwritten elements of the operand get no gradient. With duplicate
    // indices every duplicate update receives it (only the last one should).
    Value operandGrad = ScatterOp::create(
        b, op.getLoc(), g.getType(), ScatterKind::none, g, op.getIndices(),
        e.zerosLike(op.getUpdates()), op.getAxis());
    return SmallVector<Value>{operandGrad, Value(), updatesGrad};
  }
  default:
    return vjpScatterCombine(op, b, cotangents); // VJPRulesNN.cpp
  }
}

VJPResult vjp(TopKOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  return SmallVector<Value>{
      scatterAddIntoZeros(e, Emitter::typeOf(op.getOperand()), op.getIndices(),
                          cotangents[0], op.getDimension())};
}

} // namespace cleave::autodiff
