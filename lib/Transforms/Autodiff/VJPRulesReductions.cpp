//===- VJPRulesReductions.cpp - VJP rules of contractions and reductions --===//
//
// contract (two contractions and transposes), grouped_matmul (the expert
// GEMMs: one against the transposed weights, one weight gradient), reduce (sum,
// max, min, prod), cumsum and the composites softmax, log_softmax, layer_norm
// and rms_norm.
//
//===----------------------------------------------------------------------===//

#include "VJPHelpers.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::autodiff {

//===----------------------------------------------------------------------===//
// Contract
//===----------------------------------------------------------------------===//

/// Position of `d` among the sorted `dims`.
static int64_t rankIn(ArrayRef<int64_t> dims, int64_t d) {
  return llvm::count_if(dims, [&](int64_t other) { return other < d; });
}

/// The cotangent of one operand (`self`) of a contraction, as a contraction
/// of the result cotangent `g` with the other operand, transposed into
/// `self`'s layout. `selfFirst` says whether `self` is the lhs (its free
/// dimensions come first in the result).
static Value contractVJP(Emitter &e, Value g, Value self, Value other,
                         ArrayRef<int64_t> selfBatch,
                         ArrayRef<int64_t> selfContract,
                         ArrayRef<int64_t> otherBatch,
                         ArrayRef<int64_t> otherContract, bool selfFirst) {
  RankedTensorType selfType = Emitter::typeOf(self);
  int64_t nb = selfBatch.size();
  SmallVector<int64_t> selfFree = ContractOp::getFreeDimensions(
      selfType.getRank(), selfBatch, selfContract);
  SmallVector<int64_t> otherFree = ContractOp::getFreeDimensions(
      Emitter::typeOf(other).getRank(), otherBatch, otherContract);
  // Position of the other operand's free dimensions in the result.
  int64_t otherFreeStart = selfFirst ? nb + selfFree.size() : nb;
  SmallVector<int64_t> gBatch, gContract;
  for (int64_t i = 0; i < nb; ++i)
    gBatch.push_back(i);
  for (size_t i = 0; i < otherFree.size(); ++i)
    gContract.push_back(otherFreeStart + i);
  // contract(g, other) = [batch, self free (in g order), other's
  // contracting dims in increasing order].
  SmallVector<int64_t> otherContractSorted(otherContract);
  llvm::sort(otherContractSorted);
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < nb; ++i)
    shape.push_back(selfType.getDimSize(selfBatch[i]));
  for (int64_t d : selfFree)
    shape.push_back(selfType.getDimSize(d));
  for (int64_t d : otherContractSorted)
    shape.push_back(Emitter::typeOf(other).getDimSize(d));
  Value product =
      ContractOp::create(e.b, e.loc, selfType.clone(shape), g, other, gBatch,
                         otherBatch, gContract, otherFree);
  // Transpose into self's layout: perm[selfDim] = position in `product`.
  SmallVector<int64_t> perm(selfType.getRank());
  for (int64_t i = 0; i < nb; ++i)
    perm[selfBatch[i]] = i;
  for (auto [j, d] : llvm::enumerate(selfFree))
    perm[d] = nb + j;
  for (auto [k, d] : llvm::enumerate(selfContract))
    perm[d] = nb + selfFree.size() + rankIn(otherContract, otherContract[k]);
  return e.transpose(product, perm);
}

VJPResult vjp(ContractOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getResult()))
    return SmallVector<Value>{Value(), Value()};
  Emitter e{b, op.getLoc()};
  Value g = cotangents[0];
  Value lhsGrad = contractVJP(
      e, g, op.getLhs(), op.getRhs(), op.getLhsBatchingDimensions(),
      op.getLhsContractingDimensions(), op.getRhsBatchingDimensions(),
      op.getRhsContractingDimensions(), /*selfFirst=*/true);
  Value rhsGrad = contractVJP(
      e, g, op.getRhs(), op.getLhs(), op.getRhsBatchingDimensions(),
      op.getRhsContractingDimensions(), op.getLhsBatchingDimensions(),
      op.getLhsContractingDimensions(), /*selfFirst=*/false);
  return SmallVector<Value>{lhsGrad, rhsGrad};
}

//===----------------------------------------------------------------------===//
// Grouped matmul (expert GEMMs)
//===----------------------------------------------------------------------===//

VJPResult vjp(GroupedMatmulOp op, OpBuilder &b, ValueRange cotangents) {
  // dx[m] = dy[m] W[g]^T: the same weights read the other way round; each
  // expert's dW sums its rows' x^T dy. The ids have no gradient.
  Value dy = cotangents[0];
  Value dx = GroupedMatmulOp::create(
      b, op.getLoc(), op.getX().getType(), dy, op.getW(), op.getGroupIds(),
      op.getTransposeW() ? UnitAttr() : b.getUnitAttr());
  Value dw = GroupedMatmulWeightGradOp::create(
      b, op.getLoc(), op.getW().getType(), op.getX(), dy, op.getGroupIds(),
      op.getTransposeWAttr());
  return SmallVector<Value>{dx, dw, Value()};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

VJPResult vjp(ReduceOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  Emitter e{b, op.getLoc()};
  Value x = op.getOperand(), y = op.getResult(), g = cotangents[0];
  RankedTensorType type = Emitter::typeOf(x);
  ArrayRef<int64_t> dims = op.getDimensions();
  switch (op.getKind()) {
  case ReduceKind::sum:
    return SmallVector<Value>{e.broadcastBack(g, type, dims)};
  case ReduceKind::prod: {
    // The product of the other elements, exact where x has zeros (as in
    // PyTorch): with no zero in the group it is y / x; with one zero, the
    // zero gets the product of the rest and the others 0; with more, 0.
    Value zero = e.zerosLike(x);
    Value isZero = e.compare(CompareKind::eq, x, zero);
    Value xNonzero = e.select(isZero, e.splatLike(x, 1.0), x);
    Value restProd = e.broadcastBack(
        e.mul(g, ReduceOp::create(b, op.getLoc(), y.getType(), ReduceKind::prod,
                                  xNonzero, dims)),
        type, dims);
    Value zeros = e.broadcastBack(
        e.reduceSum(e.convert(isZero, type.getElementType()), dims), type,
        dims);
    Value noZero = e.compare(CompareKind::eq, zeros, zero);
    Value oneZero = e.compare(CompareKind::eq, zeros, e.splatLike(x, 1.0));
    return SmallVector<Value>{e.select(
        noZero, e.div(restProd, xNonzero),
        e.select(e.binary(BinaryKind::land, oneZero, isZero), restProd, zero))};
  }
  case ReduceKind::max:
  case ReduceKind::min: {
    // Split the gradient evenly among the elements equal to the extremum.
    Value isExtremum =
        e.compare(CompareKind::eq, x, e.broadcastBack(y, type, dims));
    Value mask = e.convert(isExtremum, type.getElementType());
    Value share = e.div(g, e.reduceSum(mask, dims));
    return SmallVector<Value>{e.mul(mask, e.broadcastBack(share, type, dims))};
  }
  }
  return SmallVector<Value>{Value()};
}

VJPResult vjp(CumSumOp op, OpBuilder &b, ValueRange cotangents) {
  if (!isFloatTensor(op.getOperand()))
    return SmallVector<Value>{Value()};
  // Each input feeds the outputs after it (or before it, reversed).
  return SmallVector<Value>{
      CumSumOp::create(b, op.getLoc(), op.getType(), cotangents[0],
                       op.getDimension(), op.getExclusive(), !op.getReverse())};
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

VJPResult vjp(SoftmaxOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  Value y = op.getResult(), g = cotangents[0];
  int64_t dim = op.getDimension();
  // y * (g - sum(g * y))
  Value dot = e.reduceSum(e.mul(g, y), {dim});
  Value centered = e.sub(g, e.broadcastBack(dot, Emitter::typeOf(y), {dim}));
  return SmallVector<Value>{e.mul(y, centered)};
}

VJPResult vjp(LogSoftmaxOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  Value y = op.getResult(), g = cotangents[0];
  int64_t dim = op.getDimension();
  // g - exp(y) * sum(g)
  Value total =
      e.broadcastBack(e.reduceSum(g, {dim}), Emitter::typeOf(y), {dim});
  return SmallVector<Value>{e.sub(g, e.mul(e.unary(UnaryKind::exp, y), total))};
}

namespace {
/// What the layer_norm and rms_norm rules share: the normalized dimensions
/// `[axis, rank)` and the rest, and the mean over the normalized ones
/// broadcast back to the operand's shape.
struct NormalizedDims {
  NormalizedDims(Emitter &e, RankedTensorType type, int64_t axis)
      : e(e), type(type) {
    for (int64_t d = 0, rank = type.getRank(); d < rank; ++d) {
      (d < axis ? outer : normalized).push_back(d);
      if (d >= axis)
        count *= type.getDimSize(d);
    }
  }
  Value mean(Value v) const {
    Value sum =
        e.scale(e.reduceSum(v, normalized), 1.0 / std::max<int64_t>(count, 1));
    return e.broadcastBack(sum, type, normalized);
  }

  Emitter &e;
  RankedTensorType type;
  SmallVector<int64_t> normalized, outer;
  int64_t count = 1;
};
} // namespace

VJPResult vjp(LayerNormOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  Value x = op.getOperand(), g = cotangents[0];
  NormalizedDims dims(e, Emitter::typeOf(x), op.getAxis());
  // Recompute the normalized input and the reciprocal standard deviation.
  Value centered = e.sub(x, dims.mean(x));
  Value var = dims.mean(e.mul(centered, centered));
  Value rstd =
      e.unary(UnaryKind::rsqrt,
              e.add(var, e.splatLike(var, op.getEpsilon().convertToDouble())));
  Value xhat = e.mul(centered, rstd);

  Value biasGrad = e.reduceSum(g, dims.outer);
  Value scaleGrad = e.reduceSum(e.mul(g, xhat), dims.outer);
  Value gxhat =
      e.mul(g, e.broadcastInDim(op.getScale(), dims.type, dims.normalized));
  // rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat))
  Value operandGrad =
      e.mul(rstd, e.sub(e.sub(gxhat, dims.mean(gxhat)),
                        e.mul(xhat, dims.mean(e.mul(gxhat, xhat)))));
  return SmallVector<Value>{operandGrad, scaleGrad, biasGrad};
}

VJPResult vjp(RmsNormOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  Value x = op.getOperand(), g = cotangents[0];
  NormalizedDims dims(e, Emitter::typeOf(x), op.getAxis());
  // Recompute the reciprocal root mean square and the normalized input.
  Value ms = dims.mean(e.mul(x, x));
  Value rrms =
      e.unary(UnaryKind::rsqrt,
              e.add(ms, e.splatLike(ms, op.getEpsilon().convertToDouble())));
  Value xhat = e.mul(x, rrms);

  Value scaleGrad = e.reduceSum(e.mul(g, xhat), dims.outer);
  Value gxhat =
      e.mul(g, e.broadcastInDim(op.getScale(), dims.type, dims.normalized));
  // rrms * (gxhat - xhat * mean(gxhat * xhat)): layer norm's rule without
  // the centring term.
  Value operandGrad =
      e.mul(rrms, e.sub(gxhat, e.mul(xhat, dims.mean(e.mul(gxhat, xhat)))));
  return SmallVector<Value>{operandGrad, scaleGrad};
}

} // namespace cleave::autodiff
