//===- CleaveFolds.cpp - Cleave folders and canonicalizations -------------===//

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// Constants and elementwise
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult UnaryOp::fold(FoldAdaptor adaptor) {
  auto value = dyn_cast_if_present<DenseElementsAttr>(adaptor.getOperand());
  if (!value)
    return {};
  Type et = getType().getElementType();
  if (auto ft = dyn_cast<FloatType>(et)) {
    switch (getKind()) {
    case UnaryKind::neg:
      return value.mapValues(
          et, [](const APFloat &v) { return llvm::neg(v).bitcastToAPInt(); });
    case UnaryKind::abs:
      return value.mapValues(
          et, [](const APFloat &v) { return llvm::abs(v).bitcastToAPInt(); });
    default:
      return {};
    }
  }
  switch (getKind()) {
  case UnaryKind::neg:
    return value.mapValues(et, [](const APInt &v) { return -v; });
  case UnaryKind::lnot:
    return value.mapValues(et, [](const APInt &v) { return ~v; });
  default:
    return {};
  }
}

/// Folds integer arithmetic on constants (the shape arithmetic of imported
/// models) and float add/sub/mul/div: up to 4096 elements, or two splats of
/// any size (a splat result, computed once: e.g. the `3 - 1` exponent the
/// derivative of pow(x, 3) gets).
OpFoldResult BinaryOp::fold(FoldAdaptor adaptor) {
  auto lhs = dyn_cast_if_present<DenseElementsAttr>(adaptor.getLhs());
  auto rhs = dyn_cast_if_present<DenseElementsAttr>(adaptor.getRhs());
  if (!lhs || !rhs)
    return {};
  if (lhs.isSplat() && rhs.isSplat() && lhs.getNumElements() > 1) {
    auto scalar = RankedTensorType::get({}, getType().getElementType());
    auto folded = BinaryOp::fold(
        FoldAdaptor({lhs.resizeSplat(scalar), rhs.resizeSplat(scalar)}, *this));
    auto value = dyn_cast_if_present<DenseElementsAttr>(
        dyn_cast_if_present<Attribute>(folded));
    if (!value)
      return {};
    return value.resizeSplat(getType());
  }
  if (lhs.getNumElements() > 4096)
    return {};
  Type et = getType().getElementType();
  if (isa<FloatType>(et)) {
    SmallVector<APFloat> out;
    auto l = lhs.getValues<APFloat>(), r = rhs.getValues<APFloat>();
    for (int64_t i = 0, e = lhs.getNumElements(); i < e; ++i) {
      APFloat a = l[i], b = r[i];
      switch (getKind()) {
      case BinaryKind::add:
        a.add(b, APFloat::rmNearestTiesToEven);
        break;
      case BinaryKind::sub:
        a.subtract(b, APFloat::rmNearestTiesToEven);
        break;
      case BinaryKind::mul:
        a.multiply(b, APFloat::rmNearestTiesToEven);
        break;
      case BinaryKind::div:
        a.divide(b, APFloat::rmNearestTiesToEven);
        break;
      default:
        return {};
      }
      out.push_back(a);
    }
    return DenseElementsAttr::get(getType(), out);
  }
  bool isUnsigned = et.isUnsignedInteger();
  SmallVector<APInt> out;
  auto l = lhs.getValues<APInt>(), r = rhs.getValues<APInt>();
  for (int64_t i = 0, e = lhs.getNumElements(); i < e; ++i) {
    APInt a = l[i], b = r[i];
    switch (getKind()) {
    case BinaryKind::add:
      out.push_back(a + b);
      break;
    case BinaryKind::sub:
      out.push_back(a - b);
      break;
    case BinaryKind::mul:
      out.push_back(a * b);
      break;
    case BinaryKind::div:
      // Division by zero and signed INT_MIN / -1 are left to the runtime.
      if (b.isZero() || (!isUnsigned && a.isMinSignedValue() && b.isAllOnes()))
        return {};
      out.push_back(isUnsigned ? a.udiv(b) : a.sdiv(b));
      break;
    case BinaryKind::max:
      out.push_back(isUnsigned ? llvm::APIntOps::umax(a, b)
                               : llvm::APIntOps::smax(a, b));
      break;
    case BinaryKind::min:
      out.push_back(isUnsigned ? llvm::APIntOps::umin(a, b)
                               : llvm::APIntOps::smin(a, b));
      break;
    default:
      return {};
    }
  }
  return DenseElementsAttr::get(getType(), out);
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  if (getOnTrue() == getOnFalse())
    return getOnTrue();
  auto cond = dyn_cast_if_present<SplatElementsAttr>(adaptor.getCond());
  if (!cond)
    return {};
  return cond.getSplatValue<bool>() ? getOnTrue() : getOnFalse();
}

/// Besides the identity, rounds a float splat to another float type (the
/// constants mixed precision narrows: `0.5` of a bf16 GELU), so that the
/// kernels that read it inline a constant instead of a convert kernel
/// starting a kernel of its own.
OpFoldResult ConvertOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  // convert(convert(x : A -> B) : B -> A) is x when B holds every A
  // exactly (bf16 -> f32 -> bf16, a pipeline message widened and rounded
  // back).
  if (auto inner = getOperand().getDefiningOp<ConvertOp>();
      inner && inner.getOperand().getType() == getType()) {
    auto from = dyn_cast<FloatType>(getType().getElementType());
    auto middle = dyn_cast<FloatType>(inner.getType().getElementType());
    if (from && middle &&
        APFloat::isRepresentableBy(from.getFloatSemantics(),
                                   middle.getFloatSemantics()))
      return inner.getOperand();
  }
  auto splat = dyn_cast_if_present<SplatElementsAttr>(adaptor.getOperand());
  auto to = dyn_cast<FloatType>(getType().getElementType());
  if (!splat || !to || !isa<FloatType>(splat.getElementType()))
    return {};
  APFloat v = splat.getSplatValue<APFloat>();
  bool losesInfo = false;
  v.convert(to.getFloatSemantics(), APFloat::rmNearestTiesToEven, &losesInfo);
  return SplatElementsAttr::get(getType(), v);
}

OpFoldResult BitcastOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  return {};
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  if (auto splat = dyn_cast_if_present<SplatElementsAttr>(adaptor.getOperand()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  if (auto value = dyn_cast_if_present<DenseElementsAttr>(adaptor.getOperand()))
    return value.reshape(getType());
  return {};
}

namespace {
/// reshape(reshape(x)) -> reshape(x).
struct FoldReshapeChain : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getOperand().getDefiningOp<ReshapeOp>();
    if (!inner)
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(),
                                           inner.getOperand());
    return success();
  }
};

/// transpose(transpose(x)) -> transpose(x) with the composed permutation.
struct FoldTransposeChain : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getOperand().getDefiningOp<TransposeOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t> perm;
    for (int64_t p : op.getPermutation())
      perm.push_back(inner.getPermutation()[p]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(),
                                             inner.getOperand(), perm);
    return success();
  }
};
/// A transpose that keeps the order of the dimensions larger than 1 (it
/// only moves unit dimensions) moves no element: a reshape, which the plan
/// builder makes a view instead of a copy.
struct TransposeOfUnitDimensions : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(op.getOperand().getType()).getShape();
    int64_t last = -1;
    for (int64_t p : op.getPermutation()) {
      if (shape[p] == 1)
        continue;
      if (p < last)
        return failure();
      last = p;
    }
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), op.getOperand());
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<FoldReshapeChain>(context);
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    if (static_cast<int64_t>(i) != p)
      return {};
  return getOperand();
}

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<FoldTransposeChain, TransposeOfUnitDimensions>(context);
}

OpFoldResult SliceOp::fold(FoldAdaptor) {
  if (getOperand().getType() != getType())
    return {};
  for (int64_t s : getStrides())
    if (s != 1)
      return {};
  return getOperand();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}
