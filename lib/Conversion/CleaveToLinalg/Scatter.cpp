//===- Scatter.cpp - Lower cleave.scatter to an scf loop nest -------------===//
//
// cleave.scatter becomes a perfect scf.for nest over the indices' iteration
// space that carries the result tensor (initially the operand). Each
// iteration reads its index and update with tensor.extract, wraps a negative
// index, and, when the index is in range, combines the update into the
// carried tensor with tensor.extract / tensor.insert. The carried tensor
// starts as a linalg.copy of the operand into a fresh tensor (kernel
// arguments bufferize as writable, so the operand's buffer must not be
// reused); one-shot bufferization then updates that one buffer in place.
//
// Iterations run in row-major order, one after the other, so duplicate
// indices are combined deterministically: `none` keeps the last update, the
// accumulating kinds see every update.
//
//===----------------------------------------------------------------------===//

#include "LoweringUtils.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::lowering;

namespace {

/// The reduction applied by an accumulating scatter kind.
static ReduceKind toReduceKind(ScatterKind kind) {
  switch (kind) {
  case ScatterKind::add:
    return ReduceKind::sum;
  case ScatterKind::mul:
    return ReduceKind::prod;
  case ScatterKind::max:
    return ReduceKind::max;
  case ScatterKind::min:
  case ScatterKind::none:
    break;
  }
  return ReduceKind::min;
}

struct ScatterLowering : OpConversionPattern<ScatterOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ScatterOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value operand = adaptor.getOperand();
    Value indices = adaptor.getIndices();
    Value updates = adaptor.getUpdates();
    auto inType = cast<RankedTensorType>(operand.getType());
    auto idxType = cast<RankedTensorType>(indices.getType());
    int64_t axis = op.getAxis();
    int64_t axisSize = inType.getDimSize(axis);
    ScatterKind kind = op.getKind();
    bool idxUnsigned = isUnsignedElement(op.getIndices().getType());
    bool valUnsigned = isUnsignedElement(op.getOperand().getType());

    SmallVector<Value> lbs, ubs, steps;
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    for (int64_t d : idxType.getShape()) {
      lbs.push_back(zero);
      ubs.push_back(arith::ConstantIndexOp::create(rewriter, loc, d));
      steps.push_back(one);
    }
    // Kernel arguments bufferize as writable: scatter into a copy so the
    // caller's operand buffer is never updated in place. A splat operand
    // (the zeros an embedding's gradient accumulates into) is a fill: a
    // copy of a large constant is folded element by element later, which
    // takes seconds for a vocabulary-sized table.
    Value empty =
        createEmpty(rewriter, loc, inType.getShape(), inType.getElementType());
    DenseElementsAttr splat;
    Value init;
    if (matchPattern(operand, m_Constant(&splat)) && splat.isSplat()) {
      Value scalar = arith::ConstantOp::create(
          rewriter, loc, cast<TypedAttr>(splat.getSplatValue<Attribute>()));
      init = linalg::FillOp::create(rewriter, loc, scalar, empty).getResult(0);
    } else {
      init = linalg::CopyOp::create(rewriter, loc, operand, empty).getResult(0);
    }
    scf::LoopNest nest = scf::buildLoopNest(
        rewriter, loc, lbs, ubs, steps, ValueRange{init},
        [&](OpBuilder &b, Location l, ValueRange ivs,
            ValueRange iterArgs) -> scf::ValueVector {
          Value acc = iterArgs[0];
          Value raw = tensor::ExtractOp::create(b, l, indices, ivs);
          Value update = tensor::ExtractOp::create(b, l, updates, ivs);
          Value i =
              convertScalar(b, l, raw, b.getIndexType(), idxUnsigned, false);
          Value c0 = arith::ConstantIndexOp::create(b, l, 0);
          Value n = arith::ConstantIndexOp::create(b, l, axisSize);
          Value isNeg =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, i, c0);
          i = arith::SelectOp::create(b, l, isNeg,
                                      arith::AddIOp::create(b, l, i, n), i);
          Value inRange = arith::AndIOp::create(
              b, l,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, i, c0),
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, i, n));
          auto ifOp = scf::IfOp::create(
              b, l, inRange,
              [&](OpBuilder &tb, Location tl) {
                SmallVector<Value> pos(ivs);
                pos[axis] = i;
                Value v = update;
                if (kind != ScatterKind::none) {
                  Value old = tensor::ExtractOp::create(tb, tl, acc, pos);
                  v = combineReduction(tb, tl, toReduceKind(kind), old, update,
                                       valUnsigned);
                }
                Value next = tensor::InsertOp::create(tb, tl, v, acc, pos);
                scf::YieldOp::create(tb, tl, next);
              },
              [&](OpBuilder &eb, Location el) {
                scf::YieldOp::create(eb, el, acc);
              });
          return {ifOp.getResult(0)};
        });
    rewriter.replaceOp(op, nest.results.empty() ? init : nest.results[0]);
    return success();
  }
};

} // namespace

void mlir::cleave::lowering::populateScatterPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<ScatterLowering>(converter, patterns.getContext());
}
