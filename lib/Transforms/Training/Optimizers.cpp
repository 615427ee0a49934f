//===- Optimizers.cpp - Optimizer update rules ----------------------------===//
//
// SGD, momentum, Nesterov, Adam and AdamW as cleave ops (see Optimizers.h).
//
//===----------------------------------------------------------------------===//

#include "Optimizers.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

SmallVector<Slot> train_step::slotsOf(StringRef optimizer) {
  if (optimizer == "momentum" || optimizer == "nesterov")
    return {{"momentum"}};
  if (optimizer == "adam" || optimizer == "adamw")
    return {{"adam_m"}, {"adam_v"}};
  return {};
}

MomentumStep train_step::buildMomentumStep(Emitter &e, Value velocity,
                                           Value grad, double mu,
                                           bool nesterov) {
  Value v = e.add(e.scale(velocity, mu), grad);
  return {v, nesterov ? e.add(grad, e.scale(v, mu)) : v};
}

SmallVector<Value>
train_step::buildOptimizerUpdate(Emitter &e, const OptimizerOptions &options,
                                 Value p, Value g, ArrayRef<Value> slots,
                                 Value lr, Value step, double decay) {
  StringRef optimizer = options.optimizer;
  double momentum = options.momentum, beta1 = options.beta1,
         beta2 = options.beta2, epsilon = options.epsilon;
  auto type = Emitter::typeOf(p);
  Type f = type.getElementType();
  ArrayRef<int64_t> shape = type.getShape();
  Value lrP = e.convert(lr, f);
  bool decoupled = optimizer == "adamw";
  if (decay != 0.0 && !decoupled)
    g = e.add(g, e.scale(p, decay));
  auto decayed = [&](Value delta) {
    // p - lr * (delta + wd * p) for AdamW, p - lr * delta otherwise.
    if (decoupled && decay != 0.0)
      delta = e.add(delta, e.scale(p, decay));
    return e.sub(p, e.scale(delta, lrP));
  };
  if (optimizer == "momentum" || optimizer == "nesterov") {
    MomentumStep s =
        buildMomentumStep(e, slots[0], g, momentum, optimizer == "nesterov");
    return {decayed(s.direction), s.velocity};
  }
  if (optimizer == "adam" || optimizer == "adamw") {
    Value m = e.add(e.scale(slots[0], beta1), e.scale(g, 1.0 - beta1));
    Value v =
        e.add(e.scale(slots[1], beta2), e.scale(e.mul(g, g), 1.0 - beta2));
    // Bias correction with t = step + 1.
    Value t = e.convert(
        e.add(step, e.scalar(Emitter::typeOf(step).getElementType(), 1.0)), f);
    Value one = e.scalar(f, 1.0);
    Value c1 = e.sub(one, e.binary(BinaryKind::pow, e.scalar(f, beta1), t));
    Value c2 = e.sub(one, e.binary(BinaryKind::pow, e.scalar(f, beta2), t));
    Value mHat = e.div(m, e.broadcast(c1, shape));
    Value vHat = e.div(v, e.broadcast(c2, shape));
    Value denom =
        e.add(e.unary(UnaryKind::sqrt, vHat), e.splat(f, shape, epsilon));
    return {decayed(e.div(mHat, denom)), m, v};
  }
  return {decayed(g)};
}
