//===- DataMovement.cpp - Lower cleave data-movement ops ------------------===//
//
// broadcast_in_dim and transpose become linalg.generic with projected maps;
// reshape becomes tensor.collapse_shape/expand_shape; slice and concat
// become tensor.extract_slice/insert_slice; constant pads become tensor.pad;
// reverse, reflect/edge pads, gather and gather_elements become
// linalg.generic bodies that compute source indices and `tensor.extract`.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::lowering;

namespace {

/// Builds a linalg.generic producing a `shape` x `elementType` tensor whose
/// body gets the scalar inputs (read through `inputMaps`) and the loop
/// indices, and returns the element.
static Value createIndexedGeneric(
    OpBuilder &b, Location loc, ValueRange inputs,
    ArrayRef<AffineMap> inputMaps, ArrayRef<int64_t> shape, Type elementType,
    function_ref<Value(OpBuilder &, Location, ValueRange, ArrayRef<Value>)>
        body) {
  unsigned rank = shape.size();
  Value init = createEmpty(b, loc, shape, elementType);
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(b.getMultiDimIdentityMap(rank));
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
      parallelIterators(rank),
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        SmallVector<Value> ivs;
        for (unsigned d = 0; d < rank; ++d)
          ivs.push_back(linalg::IndexOp::create(nb, nloc, d));
        linalg::YieldOp::create(nb, nloc,
                                body(nb, nloc, args.drop_back(), ivs));
      });
  return generic.getResult(0);
}

static Value indexConst(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

//===----------------------------------------------------------------------===//
// broadcast_in_dim, transpose, reshape
//===----------------------------------------------------------------------===//

/// broadcast_in_dim and transpose copy their operand through their sharding
/// rule's maps: a loop per result dimension, the operand indexed through
/// the permutation, or at index 0 along a repeated dimension of size 1.
template <typename OpT>
struct CopyThroughRuleLowering : OpConversionPattern<OpT> {
  using OpConversionPattern<OpT>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpT op, typename OpT::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType = cast<RankedTensorType>(
        this->getTypeConverter()->convertType(op.getType()));
    ShardingRule rule = op.getShardingRule();
    Location loc = op.getLoc();
    Value init = createEmpty(rewriter, loc, outType.getShape(),
                             outType.getElementType());
    SmallVector<AffineMap> maps = rule.getIndexingMaps(rewriter.getContext());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{outType}, adaptor.getOperand(),
        ValueRange{init}, maps, rule.getIteratorTypes(),
        [](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, args[0]);
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};
using BroadcastInDimLowering = CopyThroughRuleLowering<BroadcastInDimOp>;
using TransposeLowering = CopyThroughRuleLowering<TransposeOp>;

/// Reshapes `value` to `type` with collapse/expand; through 1-D when the
/// shapes share no reassociation.
static Value createReshape(OpBuilder &b, Location loc, Value value,
                           RankedTensorType type) {
  auto srcType = cast<RankedTensorType>(value.getType());
  if (srcType == type)
    return value;
  if (srcType.getRank() > type.getRank()) {
    if (auto reassoc = getReassociationIndicesForCollapse(srcType.getShape(),
                                                          type.getShape()))
      return tensor::CollapseShapeOp::create(b, loc, type, value, *reassoc);
  } else if (srcType.getRank() < type.getRank()) {
    if (auto reassoc = getReassociationIndicesForCollapse(type.getShape(),
                                                          srcType.getShape()))
      return tensor::ExpandShapeOp::create(b, loc, type, value, *reassoc);
  }
  // General case: flatten, then expand.
  int64_t n = srcType.getNumElements();
  auto flatType = RankedTensorType::get({n}, srcType.getElementType());
  Value flat;
  if (srcType.getRank() == 0) {
    flat = tensor::ExpandShapeOp::create(b, loc, flatType, value,
                                         ArrayRef<ReassociationIndices>{});
  } else {
    ReassociationIndices all;
    for (int64_t d = 0; d < srcType.getRank(); ++d)
      all.push_back(d);
    flat = tensor::CollapseShapeOp::create(b, loc, flatType, value,
                                           ArrayRef<ReassociationIndices>{all});
  }
  if (type.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, type, flat,
                                           ArrayRef<ReassociationIndices>{});
  if (type.getRank() == 1)
    return flat;
  ReassociationIndices all;
  for (int64_t d = 0; d < type.getRank(); ++d)
    all.push_back(d);
  return tensor::ExpandShapeOp::create(b, loc, type, flat,
                                       ArrayRef<ReassociationIndices>{all});
}

struct ReshapeLowering : OpConversionPattern<ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    rewriter.replaceOp(op, createReshape(rewriter, op.getLoc(),
                                         adaptor.getOperand(), outType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// slice, reverse, concat, pad
//===----------------------------------------------------------------------===//

struct SliceLowering : OpConversionPattern<SliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (auto [start, size, stride] :
         llvm::zip(op.getStartIndices(), outType.getShape(), op.getStrides())) {
      offsets.push_back(rewriter.getIndexAttr(start));
      sizes.push_back(rewriter.getIndexAttr(size));
      strides.push_back(rewriter.getIndexAttr(stride));
    }
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, outType, adaptor.getOperand(), offsets, sizes, strides);
    return success();
  }
};

struct ReverseLowering : OpConversionPattern<ReverseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReverseOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value input = adaptor.getOperand();
    auto type = cast<RankedTensorType>(input.getType());
    ArrayRef<int64_t> dims = op.getDimensions();
    Value result = createIndexedGeneric(
        rewriter, op.getLoc(), {}, {}, type.getShape(), type.getElementType(),
        [&](OpBuilder &b, Location l, ValueRange, ArrayRef<Value> ivs) {
          SmallVector<Value> idx(ivs);
          for (int64_t d : dims)
            idx[d] = arith::SubIOp::create(
                b, l, indexConst(b, l, type.getDimSize(d) - 1), ivs[d]);
          return tensor::ExtractOp::create(b, l, input, idx);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct ConcatLowering : OpConversionPattern<ConcatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConcatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Location loc = op.getLoc();
    int64_t dim = op.getDimension();
    Value result = createEmpty(rewriter, loc, outType.getShape(),
                               outType.getElementType());
    int64_t offset = 0;
    for (Value input : adaptor.getInputs()) {
      auto type = cast<RankedTensorType>(input.getType());
      SmallVector<OpFoldResult> offsets(outType.getRank(),
                                        rewriter.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes,
          strides(outType.getRank(), rewriter.getIndexAttr(1));
      for (int64_t s : type.getShape())
        sizes.push_back(rewriter.getIndexAttr(s));
      offsets[dim] = rewriter.getIndexAttr(offset);
      offset += type.getDimSize(dim);
      if (type.getNumElements() == 0)
        continue;
      result = tensor::InsertSliceOp::create(rewriter, loc, input, result,
                                             offsets, sizes, strides);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct PadLowering : OpConversionPattern<PadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(PadOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Value input = adaptor.getOperand();
    auto inType = cast<RankedTensorType>(input.getType());
    Location loc = op.getLoc();
    ArrayRef<int64_t> low = op.getLow();
    if (op.getMode() == PadMode::constant) {
      Value padValue = tensor::ExtractOp::create(
          rewriter, loc, adaptor.getPaddingValue(), ValueRange{});
      SmallVector<OpFoldResult> lowOfr, highOfr;
      for (auto [l, h] : llvm::zip(low, op.getHigh())) {
        lowOfr.push_back(rewriter.getIndexAttr(l));
        highOfr.push_back(rewriter.getIndexAttr(h));
      }
      rewriter.replaceOpWithNewOp<tensor::PadOp>(op, outType, input, lowOfr,
                                                 highOfr, padValue);
      return success();
    }
    if (inType.getNumElements() == 0)
      return rewriter.notifyMatchFailure(op,
                                         "reflect/edge pad of empty tensor");
    bool reflect = op.getMode() == PadMode::reflect;
    Value result = createIndexedGeneric(
        rewriter, loc, {}, {}, outType.getShape(), outType.getElementType(),
        [&](OpBuilder &b, Location l, ValueRange, ArrayRef<Value> ivs) {
          SmallVector<Value> idx;
          for (auto [d, iv] : llvm::enumerate(ivs)) {
            int64_t n = inType.getDimSize(d);
            Value i = arith::SubIOp::create(b, l, iv, indexConst(b, l, low[d]));
            Value zero = indexConst(b, l, 0);
            Value last = indexConst(b, l, n - 1);
            if (reflect) {
              // i < 0 -> -i; i > n-1 -> 2(n-1) - i.
              Value negI = arith::SubIOp::create(b, l, zero, i);
              i = arith::MaxSIOp::create(b, l, i, negI);
              Value mirrored =
                  arith::SubIOp::create(b, l, indexConst(b, l, 2 * (n - 1)), i);
              i = arith::MinSIOp::create(b, l, i, mirrored);
            }
            // Clamp (edge mode, and reflect pads wider than the input).
            i = arith::MaxSIOp::create(b, l, i, zero);
            i = arith::MinSIOp::create(b, l, i, last);
            idx.push_back(i);
          }
          return tensor::ExtractOp::create(b, l, input, idx);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// gather, gather_elements
//===----------------------------------------------------------------------===//

/// Wraps a negative index by `size`, clamps into range and returns it with
/// an `i1` telling whether the original index was in range.
static std::pair<Value, Value> normalizeIndex(OpBuilder &b, Location loc,
                                              Value rawIndex, int64_t size,
                                              bool isUnsigned) {
  Value i =
      convertScalar(b, loc, rawIndex, b.getIndexType(), isUnsigned, false);
  Value zero = indexConst(b, loc, 0);
  Value n = indexConst(b, loc, size);
  Value isNeg =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, zero);
  i = arith::SelectOp::create(b, loc, isNeg,
                              arith::AddIOp::create(b, loc, i, n), i);
  Value geZero =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, i, zero);
  Value ltN = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, n);
  Value inRange = arith::AndIOp::create(b, loc, geZero, ltN);
  Value clamped = arith::MaxSIOp::create(b, loc, i, zero);
  clamped = arith::MinSIOp::create(
      b, loc, clamped, indexConst(b, loc, std::max<int64_t>(size - 1, 0)));
  return {clamped, inRange};
}

/// Zero of `type` (integer or float).
static Value zeroOf(OpBuilder &b, Location loc, Type type) {
  return arith::ConstantOp::create(b, loc, b.getZeroAttr(type));
}

struct GatherLowering : OpConversionPattern<GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Value input = adaptor.getOperand();
    Value indices = adaptor.getIndices();
    auto inType = cast<RankedTensorType>(input.getType());
    auto idxType = cast<RankedTensorType>(indices.getType());
    int64_t axis = op.getAxis();
    int64_t q = idxType.getRank();
    unsigned rank = outType.getRank();
    bool idxUnsigned = isUnsignedElement(op.getIndices().getType());
    SmallVector<AffineExpr> idxExprs;
    for (int64_t j = 0; j < q; ++j)
      idxExprs.push_back(rewriter.getAffineDimExpr(axis + j));
    AffineMap idxMap = AffineMap::get(rank, 0, idxExprs, rewriter.getContext());
    Value result = createIndexedGeneric(
        rewriter, op.getLoc(), indices, idxMap, outType.getShape(),
        outType.getElementType(),
        [&](OpBuilder &b, Location l, ValueRange args, ArrayRef<Value> ivs) {
          auto [i, inRange] = normalizeIndex(
              b, l, args[0], inType.getDimSize(axis), idxUnsigned);
          SmallVector<Value> idx;
          for (int64_t d = 0; d < axis; ++d)
            idx.push_back(ivs[d]);
          idx.push_back(i);
          for (int64_t d = axis + 1; d < inType.getRank(); ++d)
            idx.push_back(ivs[d - 1 + q]);
          Value v = tensor::ExtractOp::create(b, l, input, idx);
          return arith::SelectOp::create(
              b, l, inRange, v, zeroOf(b, l, outType.getElementType()));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct GatherElementsLowering : OpConversionPattern<GatherElementsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GatherElementsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Value input = adaptor.getOperand();
    auto inType = cast<RankedTensorType>(input.getType());
    int64_t axis = op.getAxis();
    bool idxUnsigned = isUnsignedElement(op.getIndices().getType());
    Value result = createIndexedGeneric(
        rewriter, op.getLoc(), adaptor.getIndices(),
        rewriter.getMultiDimIdentityMap(outType.getRank()), outType.getShape(),
        outType.getElementType(),
        [&](OpBuilder &b, Location l, ValueRange args, ArrayRef<Value> ivs) {
          auto [i, inRange] = normalizeIndex(
              b, l, args[0], inType.getDimSize(axis), idxUnsigned);
          SmallVector<Value> idx(ivs);
          idx[axis] = i;
          // Other dims of indices may exceed the operand's: clamp them.
          for (int64_t d = 0; d < inType.getRank(); ++d) {
            if (d == axis || outType.getDimSize(d) <= inType.getDimSize(d))
              continue;
            idx[d] = arith::MinSIOp::create(
                b, l, idx[d], indexConst(b, l, inType.getDimSize(d) - 1));
          }
          Value v = tensor::ExtractOp::create(b, l, input, idx);
          return arith::SelectOp::create(
              b, l, inRange, v, zeroOf(b, l, outType.getElementType()));
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::cleave::lowering::populateDataMovementPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<BroadcastInDimLowering, TransposeLowering, ReshapeLowering,
               SliceLowering, ReverseLowering, ConcatLowering, PadLowering,
               GatherLowering, GatherElementsLowering>(converter,
                                                       patterns.getContext());
}
