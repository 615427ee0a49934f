//===- VJPRulesAttention.cpp - The VJP rules of attention and rotary ------===//
//
// The VJP rule of cleave.attention gives cleave.attention_grad, which
// recomputes the probabilities from q and k (as FlashAttention's backward
// pass does) instead of saving them; the bias's gradient is spelled out
// (attentionGradients, Cleave/Utils/AttentionExpansion.h). The rule of
// cleave.rotary is the rotation by the opposite angle.
//
//===----------------------------------------------------------------------===//

#include "VJPHelpers.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::autodiff {

VJPResult vjp(AttentionOp op, OpBuilder &b, ValueRange cotangents) {
  Emitter e{b, op.getLoc()};
  // q, k and v's gradients from one attention_grad (a fused kernel on the
  // CPU). The bias's, when it has one, is spelled out beside it; a constant
  // bias (a mask) needs none, and what computes it is then dead.
  auto grad = AttentionGradOp::create(
      b, op.getLoc(),
      TypeRange{op.getQ().getType(), op.getK().getType(), op.getV().getType()},
      op.getQ(), op.getK(), op.getV(), op.getResult(), cotangents[0],
      op.getBias(), op.getScaleAttr(), op.getCausalAttr(),
      op.getCausalOffsetAttr(), op.getSoftcapAttr());
  SmallVector<Value> grads = {grad.getDq(), grad.getDk(), grad.getDv()};
  if (op.getBias())
    grads.push_back(
        attentionGradients(e, AttentionOperands::of(op), cotangents[0]).dbias);
  return grads;
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

VJPResult vjp(RotaryOp op, OpBuilder &b, ValueRange cotangents) {
  // The rotation by the opposite angle; the angles' gradients (dead when
  // they are constants) spelled out: dcos = sum(dy1 x1 + dy2 x2), dsin =
  // sum(dy2 x1 - dy1 x2) over what cos and sin are broadcast across.
  Emitter e{b, op.getLoc()};
  Value dy = cotangents[0];
  Value dx =
      RotaryOp::create(b, op.getLoc(), op.getX().getType(), dy, op.getCos(),
                       e.neg(op.getSin()), op.getInterleavedAttr());
  int64_t r = Emitter::typeOf(op.getCos()).getDimSize(2);
  RotaryHalves x = rotaryHalves(e, op.getX(), r, op.getInterleaved());
  RotaryHalves g = rotaryHalves(e, dy, r, op.getInterleaved());
  auto angleType = Emitter::typeOf(op.getCos());
  Value dcos = e.unbroadcast(e.add(e.mul(g.x1, x.x1), e.mul(g.x2, x.x2)),
                             angleType, {0, 2, 3});
  Value dsin = e.unbroadcast(e.sub(e.mul(g.x2, x.x1), e.mul(g.x1, x.x2)),
                             angleType, {0, 2, 3});
  return SmallVector<Value>{dx, dcos, dsin};
}

} // namespace cleave::autodiff
