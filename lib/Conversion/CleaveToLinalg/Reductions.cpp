//===- Reductions.cpp - Lower cleave contractions and reductions ----------===//
//
// contract, reduce, arg_reduce, cumsum and the composites softmax,
// log_softmax and layer_norm. Half floats accumulate in f32.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::lowering;

namespace {

//===----------------------------------------------------------------------===//
// contract
//===----------------------------------------------------------------------===//

struct ContractLowering : OpConversionPattern<ContractOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ContractOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto outType =
        cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    // The iteration space is the op's sharding rule: one loop per factor
    // (batch, lhs free, rhs free, then the contracting reductions).
    ShardingRule rule = op.getShardingRule();
    MLIRContext *ctx = rewriter.getContext();
    SmallVector<AffineMap> maps = rule.getIndexingMaps(ctx);
    SmallVector<utils::IteratorType> iterators = rule.getIteratorTypes();

    Location loc = op.getLoc();
    Type elementType = outType.getElementType();
    Type accType = getComputeType(elementType);
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(accType));
    Value init = createFilled(rewriter, loc, outType.getShape(), accType, zero);
    bool isFloat = isa<FloatType>(accType);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{init.getType()},
        ValueRange{adaptor.getLhs(), adaptor.getRhs()}, ValueRange{init}, maps,
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value x = convertScalar(b, l, args[0], accType, false, false);
          Value y = convertScalar(b, l, args[1], accType, false, false);
          Value r;
          if (isFloat)
            r = arith::AddFOp::create(b, l, args[2],
                                      arith::MulFOp::create(b, l, x, y));
          else
            r = arith::AddIOp::create(b, l, args[2],
                                      arith::MulIOp::create(b, l, x, y));
          linalg::YieldOp::create(b, l, r);
        });
    rewriter.replaceOp(
        op, convertTensor(rewriter, loc, generic.getResult(0), elementType));
    return success();
  }
};

/// A reduction's operand in its compute type (f32 for narrow floats), with
/// the element type its result returns to.
struct ComputeOperand {
  Value value;
  Type elementType, accType;
};
static ComputeOperand inComputeType(OpBuilder &b, Location loc, Value input) {
  Type elementType = getElementType(input.getType());
  Type accType = getComputeType(elementType);
  return {convertTensor(b, loc, input, accType), elementType, accType};
}

//===----------------------------------------------------------------------===//
// reduce, arg_reduce
//===----------------------------------------------------------------------===//

struct ReduceLowering : OpConversionPattern<ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ComputeOperand in = inComputeType(rewriter, loc, adaptor.getOperand());
    Value result = createReduction(
        rewriter, loc, in.value, op.getDimensions(), op.getKind(),
        isUnsignedElement(op.getOperand().getType()));
    rewriter.replaceOp(op,
                       convertTensor(rewriter, loc, result, in.elementType));
    return success();
  }
};

struct ArgReduceLowering : OpConversionPattern<ArgReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ArgReduceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (op.getKind() != ReduceKind::max && op.getKind() != ReduceKind::min)
      return rewriter.notifyMatchFailure(op, "arg_reduce needs max or min");
    Location loc = op.getLoc();
    ComputeOperand in = inComputeType(rewriter, loc, adaptor.getOperand());
    Value input = in.value;
    Type accType = in.accType;
    auto inType = cast<RankedTensorType>(input.getType());
    auto outType = cast<RankedTensorType>(op.getType());
    bool isUnsigned = isUnsignedElement(op.getOperand().getType());
    bool isMax = op.getKind() == ReduceKind::max;
    bool last = op.getSelectLastIndex();
    int64_t dim = op.getDimension();
    unsigned rank = inType.getRank();

    Value identity = arith::ConstantOp::create(
        rewriter, loc,
        getReductionIdentity(rewriter, accType, op.getKind(), isUnsigned));
    Value valInit =
        createFilled(rewriter, loc, outType.getShape(), accType, identity);
    Value zero =
        arith::ConstantOp::create(rewriter, loc, rewriter.getI64IntegerAttr(0));
    Value idxInit = createFilled(rewriter, loc, outType.getShape(),
                                 rewriter.getI64Type(), zero);
    SmallVector<AffineExpr> outExprs;
    for (unsigned d = 0; d < rank; ++d)
      if (d != dim)
        outExprs.push_back(rewriter.getAffineDimExpr(d));
    AffineMap outMap = AffineMap::get(rank, 0, outExprs, rewriter.getContext());
    SmallVector<AffineMap> maps = {rewriter.getMultiDimIdentityMap(rank),
                                   outMap, outMap};
    SmallVector<utils::IteratorType> iterators = parallelIterators(rank);
    iterators[dim] = utils::IteratorType::reduction;
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{valInit.getType(), idxInit.getType()},
        ValueRange{input}, ValueRange{valInit, idxInit}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value v = args[0], acc = args[1], accIdx = args[2];
          Value better;
          if (isa<FloatType>(accType)) {
            arith::CmpFPredicate pred =
                isMax ? (last ? arith::CmpFPredicate::OGE
                              : arith::CmpFPredicate::OGT)
                      : (last ? arith::CmpFPredicate::OLE
                              : arith::CmpFPredicate::OLT);
            better = arith::CmpFOp::create(b, l, pred, v, acc);
          } else {
            bool u = isUnsigned || accType.isInteger(1);
            arith::CmpIPredicate pred;
            if (isMax)
              pred = last ? (u ? arith::CmpIPredicate::uge
                               : arith::CmpIPredicate::sge)
                          : (u ? arith::CmpIPredicate::ugt
                               : arith::CmpIPredicate::sgt);
            else
              pred = last ? (u ? arith::CmpIPredicate::ule
                               : arith::CmpIPredicate::sle)
                          : (u ? arith::CmpIPredicate::ult
                               : arith::CmpIPredicate::slt);
            better = arith::CmpIOp::create(b, l, pred, v, acc);
          }
          Value i = arith::IndexCastOp::create(
              b, l, b.getI64Type(), linalg::IndexOp::create(b, l, dim));
          Value newVal = arith::SelectOp::create(b, l, better, v, acc);
          Value newIdx = arith::SelectOp::create(b, l, better, i, accIdx);
          linalg::YieldOp::create(b, l, ValueRange{newVal, newIdx});
        });
    rewriter.replaceOp(op, generic.getResult(1));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// cumsum
//===----------------------------------------------------------------------===//

struct CumSumLowering : OpConversionPattern<CumSumOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CumSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ComputeOperand operand = inComputeType(rewriter, loc, adaptor.getOperand());
    Value input = operand.value;
    Type elementType = operand.elementType, accType = operand.accType;
    auto type = cast<RankedTensorType>(input.getType());
    int64_t dim = op.getDimension();
    int64_t n = type.getDimSize(dim);
    bool exclusive = op.getExclusive(), reverse = op.getReverse();
    if (type.getNumElements() == 0) {
      rewriter.replaceOp(
          op, createEmpty(rewriter, loc, type.getShape(), elementType));
      return success();
    }
    unsigned rank = type.getRank();
    SmallVector<int64_t> sliceShape(type.getShape());
    sliceShape[dim] = 1;
    auto sliceType = RankedTensorType::get(sliceShape, accType);

    // Slice `k` (a Value or constant) of `t` along `dim`.
    auto offsetsAt = [&](OpFoldResult k) {
      SmallVector<OpFoldResult> offsets(rank, rewriter.getIndexAttr(0));
      offsets[dim] = k;
      return offsets;
    };
    SmallVector<OpFoldResult> sizes, strides(rank, rewriter.getIndexAttr(1));
    for (int64_t s : sliceShape)
      sizes.push_back(rewriter.getIndexAttr(s));

    // First position: x[first] (inclusive) or 0 (exclusive).
    int64_t first = reverse ? n - 1 : 0;
    Value firstSlice;
    if (exclusive) {
      Value zero = arith::ConstantOp::create(rewriter, loc,
                                             rewriter.getZeroAttr(accType));
      firstSlice = createFilled(rewriter, loc, sliceShape, accType, zero);
    } else {
      firstSlice = tensor::ExtractSliceOp::create(
          rewriter, loc, sliceType, input,
          offsetsAt(rewriter.getIndexAttr(first)), sizes, strides);
    }
    Value result = createEmpty(rewriter, loc, type.getShape(), accType);
    result = tensor::InsertSliceOp::create(
        rewriter, loc, firstSlice, result,
        offsetsAt(rewriter.getIndexAttr(first)), sizes, strides);

    // For k in [1, n): out[p] = out[prev] + x[exclusive ? prev : p].
    Value lb = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value ub = arith::ConstantIndexOp::create(rewriter, loc, n);
    Value step = arith::ConstantIndexOp::create(rewriter, loc, 1);
    auto loop = scf::ForOp::create(
        rewriter, loc, lb, ub, step, ValueRange{result},
        [&](OpBuilder &b, Location l, Value k, ValueRange iterArgs) {
          Value p, prev;
          Value one = arith::ConstantIndexOp::create(b, l, 1);
          if (reverse) {
            Value nm1 = arith::ConstantIndexOp::create(b, l, n - 1);
            p = arith::SubIOp::create(b, l, nm1, k);
            prev = arith::AddIOp::create(b, l, p, one);
          } else {
            p = k;
            prev = arith::SubIOp::create(b, l, k, one);
          }
          Value acc = tensor::ExtractSliceOp::create(
              b, l, sliceType, iterArgs[0], offsetsAt(prev), sizes, strides);
          Value x = tensor::ExtractSliceOp::create(
              b, l, sliceType, input, offsetsAt(exclusive ? prev : p), sizes,
              strides);
          Value sum = createElementwise(
              b, l, {acc, x}, sliceShape, accType,
              [&](OpBuilder &bb, Location ll, ValueRange args) {
                return combineReduction(bb, ll, ReduceKind::sum, args[0],
                                        args[1], false);
              });
          Value updated = tensor::InsertSliceOp::create(
              b, l, sum, iterArgs[0], offsetsAt(p), sizes, strides);
          scf::YieldOp::create(b, l, updated);
        });
    rewriter.replaceOp(
        op, convertTensor(rewriter, loc, loop.getResult(0), elementType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// softmax, log_softmax, layer_norm
//===----------------------------------------------------------------------===//

/// Lets LLVM vectorize the row reduction computing `reduced` (a
/// createReduction result): float sums may be reassociated (partial sums
/// per vector lane; the order is fixed by the code, so runs stay bitwise
/// reproducible), and a float max becomes maxnum, which LLVM vectorizes as a
/// reduction. maxnum ignores NaN where maximum propagates it; only use that
/// where a NaN row gives NaN anyway (softmax: x - max is NaN).
static void relaxRowReduction(Value reduced, bool maxToMaxNum) {
  auto generic = reduced.getDefiningOp<linalg::GenericOp>();
  if (!generic)
    return;
  Block &body = generic.getRegion().front();
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (auto add = dyn_cast<arith::AddFOp>(op)) {
      add.setFastmath(add.getFastmath() | arith::FastMathFlags::reassoc);
    } else if (auto max = dyn_cast<arith::MaximumFOp>(op); max && maxToMaxNum) {
      OpBuilder b(max);
      Value r =
          arith::MaxNumFOp::create(b, max.getLoc(), max.getLhs(), max.getRhs());
      max.replaceAllUsesWith(r);
      max.erase();
    }
  }
}

template <typename OpTy, bool isLog>
struct SoftmaxLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpConversionPattern<OpTy>::OpAdaptor;
  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value input = adaptor.getOperand();
    Type elementType = getElementType(input.getType());
    Type f = getComputeType(elementType);
    input = convertTensor(rewriter, loc, input, f);
    int64_t dims[] = {static_cast<int64_t>(op.getDimension())};
    Value max =
        createReduction(rewriter, loc, input, dims, ReduceKind::max, false);
    relaxRowReduction(max, /*maxToMaxNum=*/true);
    Value shifted = createBroadcastBinary(
        rewriter, loc, input, max, dims,
        [](OpBuilder &b, Location l, Value x, Value m) -> Value {
          return arith::SubFOp::create(b, l, x, m);
        });
    Value exp = createElementwise(
        rewriter, loc, shifted,
        cast<RankedTensorType>(shifted.getType()).getShape(), f,
        [](OpBuilder &b, Location l, ValueRange args) -> Value {
          return math::ExpOp::create(b, l, args[0]);
        });
    Value sum =
        createReduction(rewriter, loc, exp, dims, ReduceKind::sum, false);
    relaxRowReduction(sum, /*maxToMaxNum=*/false);
    Value result;
    if (isLog)
      result = createBroadcastBinary(
          rewriter, loc, shifted, sum, dims,
          [](OpBuilder &b, Location l, Value x, Value s) -> Value {
            return arith::SubFOp::create(b, l, x, math::LogOp::create(b, l, s));
          });
    else
      result = createBroadcastBinary(
          rewriter, loc, exp, sum, dims,
          [](OpBuilder &b, Location l, Value e, Value s) -> Value {
            return arith::DivFOp::create(b, l, e, s);
          });
    rewriter.replaceOp(op, convertTensor(rewriter, loc, result, elementType));
    return success();
  }
};

/// layer_norm and rms_norm: one reduction for the mean (layer norm only),
/// one for the sum of squares, then one pass that normalizes, scales and
/// shifts (layer norm only).
template <typename OpTy>
struct NormalizationLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpConversionPattern<OpTy>::OpAdaptor;
  static constexpr bool kCentered = std::is_same_v<OpTy, LayerNormOp>;

  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type elementType = getElementType(op.getType());
    Type f = getComputeType(elementType);
    Value x = convertTensor(rewriter, loc, adaptor.getOperand(), f);
    SmallVector<Value> operands = {
        Value(), Value(), convertTensor(rewriter, loc, adaptor.getScale(), f)};
    if constexpr (kCentered)
      operands.push_back(convertTensor(rewriter, loc, adaptor.getBias(), f));
    auto type = cast<RankedTensorType>(x.getType());
    // The op's sharding rule gives the loops: one factor per dimension of
    // x, parallel over rows, read whole (need-replication) over the
    // normalized dimensions that the scales share.
    ShardingRule rule = op.getShardingRule();
    MLIRContext *ctx = rewriter.getContext();
    SmallVector<int64_t> dims;
    SmallVector<AffineExpr> rows;
    int64_t count = 1;
    for (int64_t f = 0; f < rule.getNumFactors(); ++f) {
      if (rule.getFactor(f).kind == FactorKind::NeedReplication) {
        dims.push_back(f);
        count *= rule.getFactor(f).size;
      } else {
        rows.push_back(rewriter.getAffineDimExpr(f));
      }
    }
    double invCount = count ? 1.0 / static_cast<double>(count) : 0.0;
    double eps = op.getEpsilon().convertToDouble();

    Value centered = x;
    if constexpr (kCentered) {
      Value sum =
          createReduction(rewriter, loc, x, dims, ReduceKind::sum, false);
      relaxRowReduction(sum, /*maxToMaxNum=*/false);
      centered = createBroadcastBinary(
          rewriter, loc, x, sum, dims,
          [&](OpBuilder &b, Location l, Value v, Value s) -> Value {
            Value mean =
                arith::MulFOp::create(b, l, s, createScalar(b, l, f, invCount));
            return arith::SubFOp::create(b, l, v, mean);
          });
    }
    Value squares = createElementwise(
        rewriter, loc, centered, type.getShape(), f,
        [](OpBuilder &b, Location l, ValueRange args) -> Value {
          return arith::MulFOp::create(b, l, args[0], args[0]);
        });
    Value sumSq =
        createReduction(rewriter, loc, squares, dims, ReduceKind::sum, false);
    relaxRowReduction(sumSq, /*maxToMaxNum=*/false);

    // y = centered * rsqrt(sumSq / count + eps) * scale (+ bias): the
    // rule's maps for x, the scales and y, and the rows' map for the
    // statistic.
    SmallVector<AffineMap> maps = rule.getIndexingMaps(ctx);
    maps.insert(maps.begin() + 1,
                AffineMap::get(rule.getNumFactors(), 0, rows, ctx));
    operands[0] = centered;
    operands[1] = sumSq;
    Value init = createEmpty(rewriter, loc, type.getShape(), f);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{init.getType()}, operands, ValueRange{init},
        maps, rule.getIteratorTypes(),
        [&](OpBuilder &b, Location l, ValueRange a) {
          Value var = arith::MulFOp::create(b, l, a[1],
                                            createScalar(b, l, f, invCount));
          Value inv = math::RsqrtOp::create(
              b, l,
              arith::AddFOp::create(b, l, var, createScalar(b, l, f, eps)));
          Value y = arith::MulFOp::create(
              b, l, arith::MulFOp::create(b, l, a[0], inv), a[2]);
          if constexpr (kCentered)
            y = arith::AddFOp::create(b, l, y, a[3]);
          linalg::YieldOp::create(b, l, y);
        });
    rewriter.replaceOp(
        op, convertTensor(rewriter, loc, generic.getResult(0), elementType));
    return success();
  }
};

} // namespace

void mlir::cleave::lowering::populateReductionPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<
      ContractLowering, ReduceLowering, ArgReduceLowering, CumSumLowering,
      SoftmaxLowering<SoftmaxOp, false>, SoftmaxLowering<LogSoftmaxOp, true>,
      NormalizationLowering<LayerNormOp>, NormalizationLowering<RmsNormOp>>(
      converter, patterns.getContext());
}
