//===- GradientScaling.cpp - Loss scaling and gradient clipping -----------===//
//
// What --cleave-build-train-step does to the gradients between the
// backward pass and the optimizer: the loss scale that seeds the backward
// pass and the unscaling, the global gradient norm and clipping to it, and
// the state of dynamic loss scaling (see TrainStep.h).
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

#include "Cleave/IR/CleaveOps.h"

#include <limits>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

Value train_step::buildLossScale(Emitter &e, const LossScaling &scaling,
                                 Value scaleLog2) {
  Type f32 = e.b.getF32Type();
  if (scaling.dynamic)
    return e.mul(e.scalar(f32, scaling.init),
                 e.binary(BinaryKind::pow, e.scalar(f32, 2.0), scaleLog2));
  if (scaling.staticScale > 0.0)
    return e.scalar(f32, scaling.staticScale);
  return {};
}

ClippedGradients train_step::clipGradients(Emitter &e, ArrayRef<Value> grads,
                                           Value scale, double clipNorm,
                                           bool checkFinite,
                                           const PipelineResult *pipeline,
                                           Block *body) {
  OpBuilder &b = e.b;
  Type f32 = b.getF32Type();
  ClippedGradients out;
  // Unscale in f32 (the gradients keep their element type).
  out.unscaled.assign(grads.begin(), grads.end());
  if (scale) {
    Value inv = e.div(e.scalar(f32, 1.0), scale);
    for (Value &g : out.unscaled) {
      Type gt = Emitter::typeOf(g).getElementType();
      g = e.convert(e.scale(e.convert(g, f32), inv), gt);
    }
  }

  // Global gradient norm, and clipping to it.
  Value sumSq = e.scalar(b.getF32Type(), 0.0);
  if (pipeline) {
    // Each rank sums the squares of the gradients it makes (a parameter
    // read on several ranks counts once, on the first), and the partial
    // sums are added over the pipeline.
    SmallVector<Value> partials;
    SmallVector<int64_t> ranks;
    for (int64_t r = 0; r < pipeline->ranks; ++r) {
      Operation *before = body->empty() ? nullptr : &body->back();
      Value partial = e.scalar(b.getF32Type(), 0.0);
      for (auto [g, readers] : llvm::zip(out.unscaled, pipeline->readers))
        if (!readers.empty() && readers.front() == r)
          partial =
              e.add(partial, e.convert(e.sumAll(e.mul(g, g)), b.getF32Type()));
      tagPipelineRank(body, before, r);
      partials.push_back(partial);
      ranks.push_back(r);
    }
    sumSq = PipelineSumOp::create(b, e.loc, partials.front().getType(),
                                  partials, b.getDenseI64ArrayAttr(ranks));
  }
  for (Value g : pipeline ? SmallVector<Value>() : out.unscaled)
    sumSq = e.add(sumSq, e.convert(e.sumAll(e.mul(g, g)), b.getF32Type()));
  out.sumOfSquares = sumSq;
  out.norm = e.unary(UnaryKind::sqrt, sumSq);
  // Dynamic scaling: a step is finite when the sum of squares is (NaN and
  // infinity both fail the ordered comparison).
  if (checkFinite)
    out.finite = CompareOp::create(
        b, e.loc, RankedTensorType::get({}, b.getI1Type()), CompareKind::lt,
        sumSq, e.scalar(f32, std::numeric_limits<double>::infinity()));
  out.clipped = out.unscaled;
  if (clipNorm > 0.0) {
    Value factor = e.div(e.scalar(b.getF32Type(), clipNorm),
                         e.add(out.norm, e.scalar(b.getF32Type(), 1e-6)));
    factor = e.binary(BinaryKind::min, factor, e.scalar(b.getF32Type(), 1.0));
    for (Value &g : out.clipped)
      g = e.scale(g, e.convert(factor, Emitter::typeOf(g).getElementType()));
  }
  return out;
}

LossScaleUpdate train_step::updateLossScale(Emitter &e,
                                            const LossScaling &scaling,
                                            Value finite, Value scaleLog2,
                                            Value goodSteps) {
  OpBuilder &b = e.b;
  Type f32 = b.getF32Type();
  auto scalarF32 = RankedTensorType::get({}, f32);
  // good' = finite ? good + 1 : 0; grow = good' >= window;
  // log2' = finite ? log2 + grow : log2 - 1; good'' = grow ? 0 : good'.
  Value zero = e.scalar(f32, 0.0), one = e.scalar(f32, 1.0);
  auto select = [&](Value c, Value x, Value y) -> Value {
    return SelectOp::create(b, e.loc, scalarF32, c, x, y);
  };
  Value good = select(finite, e.add(goodSteps, one), zero);
  Value grow = CompareOp::create(b, e.loc, scalarF32.clone(b.getI1Type()),
                                 CompareKind::ge, good,
                                 e.scalar(f32, (double)scaling.window));
  Value log2 = select(finite, e.add(scaleLog2, select(grow, one, zero)),
                      e.sub(scaleLog2, one));
  // Keep the scale within f32 (2^-126 .. 2^127 of loss-scale-init).
  log2 = e.binary(BinaryKind::max,
                  e.binary(BinaryKind::min, log2, e.scalar(f32, 127.0)),
                  e.scalar(f32, -126.0));
  good = select(grow, zero, good);
  LossScaleUpdate out;
  out.log2 = log2;
  out.goodSteps = good;
  out.scale = e.mul(e.scalar(f32, scaling.init),
                    e.binary(BinaryKind::pow, e.scalar(f32, 2.0), log2));
  out.foundInf = select(finite, zero, one);
  return out;
}
