//===- TopK.cpp - Lower cleave.top_k to scf selection loops ---------------===//
//
// cleave.top_k becomes an scf.for nest over the operand's other dimensions;
// per row, pass j (of k) scans the row and picks the best element that comes
// after pick j-1 in the total order "better value first, lower position
// first on ties" (NaN counts as the worst value), and inserts it and its
// position into the two results. No mask is needed, and the output is
// sorted. Cost O(k * n) per row: fine for the small k of TopK in models.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::lowering;

namespace {

/// Scalar comparisons of the selection order.
struct Order {
  bool largest;
  bool isUnsigned;

  static Value isNaN(OpBuilder &b, Location l, Value a) {
    return arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNO, a, a);
  }

  /// a is strictly worse than b (comes after it, ignoring positions).
  Value worse(OpBuilder &b, Location l, Value a, Value c) const {
    if (isa<FloatType>(a.getType())) {
      Value cmp = arith::CmpFOp::create(
          b, l, largest ? arith::CmpFPredicate::OLT : arith::CmpFPredicate::OGT,
          a, c);
      Value nanA = isNaN(b, l, a);
      Value notNanC = arith::XOrIOp::create(
          b, l, isNaN(b, l, c),
          arith::ConstantIntOp::create(b, l, b.getI1Type(), 1));
      return arith::OrIOp::create(b, l, cmp,
                                  arith::AndIOp::create(b, l, nanA, notNanC));
    }
    bool u = isUnsigned || a.getType().isInteger(1);
    arith::CmpIPredicate pred =
        largest ? (u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt)
                : (u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt);
    return arith::CmpIOp::create(b, l, pred, a, c);
  }

  /// a and b hold the same value (NaNs are equal).
  Value same(OpBuilder &b, Location l, Value a, Value c) const {
    if (isa<FloatType>(a.getType()))
      return arith::OrIOp::create(
          b, l, arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, a, c),
          arith::AndIOp::create(b, l, isNaN(b, l, a), isNaN(b, l, c)));
    return arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, a, c);
  }
};

struct TopKLowering : OpConversionPattern<TopKOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TopKOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value operand = adaptor.getOperand();
    auto inType = cast<RankedTensorType>(operand.getType());
    Type et = inType.getElementType();
    int64_t dim = op.getDimension();
    int64_t n = inType.getDimSize(dim);
    int64_t k = op.getK();
    Order order{op.getLargest(), isUnsignedElement(op.getOperand().getType())};

    SmallVector<int64_t> outShape(inType.getShape());
    outShape[dim] = k;
    Value values0 = createEmpty(rewriter, loc, outShape, et);
    Value indices0 =
        createEmpty(rewriter, loc, outShape, rewriter.getI64Type());

    Value c0 = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(rewriter, loc, 1);
    Value cK = arith::ConstantIndexOp::create(rewriter, loc, k);
    Value cN = arith::ConstantIndexOp::create(rewriter, loc, n);
    Value zeroV =
        arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(et));
    Value falseV =
        arith::ConstantIntOp::create(rewriter, loc, rewriter.getI1Type(), 0);
    Value trueV =
        arith::ConstantIntOp::create(rewriter, loc, rewriter.getI1Type(), 1);

    SmallVector<Value> lbs, ubs, steps;
    for (int64_t d = 0; d < inType.getRank(); ++d) {
      if (d == dim)
        continue;
      lbs.push_back(c0);
      ubs.push_back(
          arith::ConstantIndexOp::create(rewriter, loc, inType.getDimSize(d)));
      steps.push_back(c1);
    }
    // Full positions from the outer induction variables and one along dim.
    auto position = [&](ValueRange outer, Value along) {
      SmallVector<Value> pos(outer);
      pos.insert(pos.begin() + dim, along);
      return pos;
    };

    scf::LoopNest nest = scf::buildLoopNest(
        rewriter, loc, lbs, ubs, steps, ValueRange{values0, indices0},
        [&](OpBuilder &b, Location l, ValueRange outer,
            ValueRange rowArgs) -> scf::ValueVector {
          auto passes = scf::ForOp::create(
              b, l, c0, cK, c1, ValueRange{rowArgs[0], rowArgs[1], zeroV, c0},
              [&](OpBuilder &pb, Location pl, Value j, ValueRange passArgs) {
                Value prevV = passArgs[2], prevI = passArgs[3];
                Value first = arith::CmpIOp::create(
                    pb, pl, arith::CmpIPredicate::eq, j, c0);
                auto scan = scf::ForOp::create(
                    pb, pl, c0, cN, c1, ValueRange{zeroV, c0, falseV},
                    [&](OpBuilder &sb, Location sl, Value c, ValueRange best) {
                      Value v = tensor::ExtractOp::create(sb, sl, operand,
                                                          position(outer, c));
                      // Eligible: after the previous pick in the order.
                      Value later = arith::CmpIOp::create(
                          sb, sl, arith::CmpIPredicate::sgt, c, prevI);
                      Value after = arith::OrIOp::create(
                          sb, sl, order.worse(sb, sl, v, prevV),
                          arith::AndIOp::create(
                              sb, sl, order.same(sb, sl, v, prevV), later));
                      Value eligible =
                          arith::OrIOp::create(sb, sl, first, after);
                      // Better than the best so far (ties keep the earlier).
                      Value notFound =
                          arith::XOrIOp::create(sb, sl, best[2], trueV);
                      Value better = arith::OrIOp::create(
                          sb, sl, notFound, order.worse(sb, sl, best[0], v));
                      Value take =
                          arith::AndIOp::create(sb, sl, eligible, better);
                      scf::YieldOp::create(
                          sb, sl,
                          ValueRange{
                              arith::SelectOp::create(sb, sl, take, v, best[0]),
                              arith::SelectOp::create(sb, sl, take, c, best[1]),
                              arith::OrIOp::create(sb, sl, best[2], take)});
                    });
                Value bestV = scan.getResult(0), bestI = scan.getResult(1);
                SmallVector<Value> outPos = position(outer, j);
                Value vals = tensor::InsertOp::create(pb, pl, bestV,
                                                      passArgs[0], outPos);
                Value idx64 =
                    arith::IndexCastOp::create(pb, pl, pb.getI64Type(), bestI);
                Value idxs = tensor::InsertOp::create(pb, pl, idx64,
                                                      passArgs[1], outPos);
                scf::YieldOp::create(pb, pl,
                                     ValueRange{vals, idxs, bestV, bestI});
              });
          return {passes.getResult(0), passes.getResult(1)};
        });
    rewriter.replaceOp(op, nest.results);
    return success();
  }
};

} // namespace

void mlir::cleave::lowering::populateTopKPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<TopKLowering>(converter, patterns.getContext());
}
