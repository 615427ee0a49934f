//===- Convolution.cpp - Lower cleave conv and reduce_window --------------===//
//
// Both become a tensor.pad (zero or the reduction's identity) followed by one
// linalg.generic whose input map indexes `s * stride + k * dilation`.
// Grouped convolution picks the input channel `(o floordiv O/g) * C/g + c`.
// im2col is the same padded read without the reduction: one copying
// linalg.generic over the columns' dimensions.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::lowering;

namespace {

/// Pads `input` by `low`/`high` with `value` (skipped when all zero).
static Value padWith(OpBuilder &b, Location loc, Value input,
                     ArrayRef<int64_t> low, ArrayRef<int64_t> high,
                     Value value) {
  if (llvm::all_of(low, [](int64_t v) { return v == 0; }) &&
      llvm::all_of(high, [](int64_t v) { return v == 0; }))
    return input;
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> shape;
  SmallVector<OpFoldResult> lowOfr, highOfr;
  for (auto [size, l, h] : llvm::zip(type.getShape(), low, high)) {
    shape.push_back(size + l + h);
    lowOfr.push_back(b.getIndexAttr(l));
    highOfr.push_back(b.getIndexAttr(h));
  }
  auto padType = RankedTensorType::get(shape, type.getElementType());
  return tensor::PadOp::create(b, loc, padType, input, lowOfr, highOfr, value);
}

/// Pads the spatial dimensions of an `N x C x S...` input with zeros.
static Value padSpatialWithZeros(OpBuilder &b, Location loc, Value input,
                                 ArrayRef<int64_t> padLow,
                                 ArrayRef<int64_t> padHigh) {
  SmallVector<int64_t> low = {0, 0}, high = {0, 0};
  llvm::append_range(low, padLow);
  llvm::append_range(high, padHigh);
  Value zero = arith::ConstantOp::create(
      b, loc, b.getZeroAttr(getElementTypeOrSelf(input.getType())));
  return padWith(b, loc, input, low, high, zero);
}

struct ConvLowering : OpConversionPattern<ConvOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConvOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto outType = cast<RankedTensorType>(op.getType());
    auto filterType = cast<RankedTensorType>(adaptor.getFilter().getType());
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    Type elementType = outType.getElementType();
    Type accType = getComputeType(elementType);
    int64_t numSpatial = inType.getRank() - 2;
    int64_t groups = op.getGroups();
    int64_t outChannels = filterType.getDimSize(0);
    int64_t inPerGroup = filterType.getDimSize(1);
    if (groups <= 0 || outChannels % groups != 0)
      return rewriter.notifyMatchFailure(op, "bad group count");
    int64_t outPerGroup = outChannels / groups;

    Value input = padSpatialWithZeros(rewriter, loc, adaptor.getInput(),
                                      op.getPadLow(), op.getPadHigh());

    // Loops: n, o, s_0.., c, k_0..
    int64_t numLoops = 2 + 2 * numSpatial + 1;
    MLIRContext *ctx = rewriter.getContext();
    auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
    int64_t cLoop = 2 + numSpatial;
    SmallVector<AffineExpr> inExprs = {
        d(0), d(1).floorDiv(outPerGroup) * inPerGroup + d(cLoop)};
    SmallVector<AffineExpr> filterExprs = {d(1), d(cLoop)};
    SmallVector<AffineExpr> outExprs = {d(0), d(1)};
    for (int64_t s = 0; s < numSpatial; ++s) {
      AffineExpr out = d(2 + s), k = d(cLoop + 1 + s);
      inExprs.push_back(out * op.getStrides()[s] + k * op.getDilations()[s]);
      filterExprs.push_back(k);
      outExprs.push_back(out);
    }
    SmallVector<AffineMap> maps = {
        AffineMap::get(numLoops, 0, inExprs, ctx),
        AffineMap::get(numLoops, 0, filterExprs, ctx),
        AffineMap::get(numLoops, 0, outExprs, ctx)};
    SmallVector<utils::IteratorType> iterators = parallelIterators(numLoops);
    for (int64_t i = cLoop; i < numLoops; ++i)
      iterators[i] = utils::IteratorType::reduction;
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(accType));
    Value init = createFilled(rewriter, loc, outType.getShape(), accType, zero);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{init.getType()},
        ValueRange{input, adaptor.getFilter()}, ValueRange{init}, maps,
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value x = convertScalar(b, l, args[0], accType, false, false);
          Value w = convertScalar(b, l, args[1], accType, false, false);
          Value r = arith::AddFOp::create(b, l, args[2],
                                          arith::MulFOp::create(b, l, x, w));
          linalg::YieldOp::create(b, l, r);
        });
    rewriter.replaceOp(
        op, convertTensor(rewriter, loc, generic.getResult(0), elementType));
    return success();
  }
};

struct Im2ColLowering : OpConversionPattern<Im2ColOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(Im2ColOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    auto inType = cast<RankedTensorType>(adaptor.getInput().getType());
    int64_t spatial = inType.getRank() - 2;
    int64_t perGroup = inType.getDimSize(1) / op.getGroups();

    Value input = padSpatialWithZeros(rewriter, loc, adaptor.getInput(),
                                      op.getPadLow(), op.getPadHigh());

    // Loops are the result's dimensions: g, c, k_0.., n, s_0..
    int64_t numLoops = outType.getRank();
    MLIRContext *ctx = rewriter.getContext();
    auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
    SmallVector<AffineExpr> inExprs = {d(2 + spatial), d(0) * perGroup + d(1)};
    for (int64_t i = 0; i < spatial; ++i)
      inExprs.push_back(d(3 + spatial + i) * op.getStrides()[i] +
                        d(2 + i) * op.getDilations()[i]);
    SmallVector<AffineMap> maps = {
        AffineMap::get(numLoops, 0, inExprs, ctx),
        AffineMap::getMultiDimIdentityMap(numLoops, ctx)};
    Value init = createEmpty(rewriter, loc, outType.getShape(),
                             outType.getElementType());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{outType}, ValueRange{input}, ValueRange{init},
        maps, parallelIterators(numLoops),
        [&](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(b, l, args[0]);
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct ReduceWindowLowering : OpConversionPattern<ReduceWindowOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceWindowOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Type elementType = outType.getElementType();
    Type accType = getComputeType(elementType);
    bool isUnsigned = isUnsignedElement(op.getType());
    ReduceKind kind = op.getKind();
    Value input = convertTensor(rewriter, loc, adaptor.getOperand(), accType);
    Value identity = arith::ConstantOp::create(
        rewriter, loc,
        getReductionIdentity(rewriter, accType, kind, isUnsigned));
    input = padWith(rewriter, loc, input, op.getPadLow(), op.getPadHigh(),
                    identity);

    int64_t rank = outType.getRank();
    MLIRContext *ctx = rewriter.getContext();
    SmallVector<AffineExpr> inExprs, winExprs, outExprs;
    for (int64_t i = 0; i < rank; ++i) {
      AffineExpr out = getAffineDimExpr(i, ctx);
      AffineExpr w = getAffineDimExpr(rank + i, ctx);
      inExprs.push_back(out * op.getStrides()[i] + w * op.getDilations()[i]);
      winExprs.push_back(w);
      outExprs.push_back(out);
    }
    // The window tensor only gives the window loops their extent.
    Value window = createEmpty(rewriter, loc, op.getWindow(), accType);
    SmallVector<AffineMap> maps = {AffineMap::get(2 * rank, 0, inExprs, ctx),
                                   AffineMap::get(2 * rank, 0, winExprs, ctx),
                                   AffineMap::get(2 * rank, 0, outExprs, ctx)};
    SmallVector<utils::IteratorType> iterators = parallelIterators(2 * rank);
    for (int64_t i = rank; i < 2 * rank; ++i)
      iterators[i] = utils::IteratorType::reduction;
    Value init =
        createFilled(rewriter, loc, outType.getShape(), accType, identity);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{init.getType()}, ValueRange{input, window},
        ValueRange{init}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          linalg::YieldOp::create(
              b, l, combineReduction(b, l, kind, args[2], args[0], isUnsigned));
        });
    rewriter.replaceOp(
        op, convertTensor(rewriter, loc, generic.getResult(0), elementType));
    return success();
  }
};

} // namespace

void mlir::cleave::lowering::populateConvolutionPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<ConvLowering, Im2ColLowering, ReduceWindowLowering>(
      converter, patterns.getContext());
}
