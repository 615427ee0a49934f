//===- CleaveCost.cpp - CostOpInterface implementations -------------------===//

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::cleave;

int64_t cleave::detail::getNumElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped)
    return 1;
  return shaped.hasStaticShape() ? shaped.getNumElements() : 0;
}

int64_t cleave::detail::getSizeInBytes(Type type) {
  Type et = getElementTypeOrSelf(type);
  int64_t bits = et.isIntOrFloat() ? et.getIntOrFloatBitWidth() : 64;
  return cleave::detail::getNumElements(type) * ((bits + 7) / 8);
}

int64_t cleave::detail::getTotalResultElements(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getResultTypes())
    n += cleave::detail::getNumElements(t);
  return n;
}

int64_t cleave::detail::getTotalOperandBytes(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getOperandTypes())
    n += cleave::detail::getSizeInBytes(t);
  return n;
}

int64_t cleave::detail::getTotalResultBytes(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getResultTypes())
    n += cleave::detail::getSizeInBytes(t);
  return n;
}

// Pure data movement performs no arithmetic.
int64_t ReshapeOp::getFlops() { return 0; }
int64_t PipelineTransferOp::getFlops() { return 0; }
int64_t TransposeOp::getFlops() { return 0; }
int64_t SliceOp::getFlops() { return 0; }
int64_t ReverseOp::getFlops() { return 0; }
int64_t ConcatOp::getFlops() { return 0; }
int64_t PadOp::getFlops() { return 0; }
int64_t Im2ColOp::getFlops() { return 0; }
int64_t GatherOp::getFlops() { return 0; }
int64_t GatherElementsOp::getFlops() { return 0; }

/// A multiply and an add per result element and contracted index.
int64_t ContractOp::getFlops() {
  int64_t contracted = 1;
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  for (int64_t d : getLhsContractingDimensions())
    contracted *= lhs.getDimSize(d);
  return 2 * getType().getNumElements() * contracted;
}

/// One comparison per element and selected position (k passes per row).
int64_t TopKOp::getFlops() {
  return getK() * cleave::detail::getNumElements(getOperand().getType());
}

int64_t ReduceOp::getFlops() {
  return cleave::detail::getNumElements(getOperand().getType());
}

// max, subtract, exp, sum, divide (or log) per element.
int64_t SoftmaxOp::getFlops() { return 5 * getType().getNumElements(); }
int64_t LogSoftmaxOp::getFlops() { return 5 * getType().getNumElements(); }
// mean, centre, square, variance, normalize, scale, shift.
int64_t LayerNormOp::getFlops() { return 8 * getType().getNumElements(); }
// square, mean, normalize, scale.
int64_t RmsNormOp::getFlops() { return 5 * getType().getNumElements(); }

/// An attention's flops: `perD` and `perDv` flops per score and head
/// feature (q/k and v), `perScore` elementwise ones, over B x Hq x Sq x
/// Skv scores, half of them when `halve`.
static int64_t attentionFlops(Value qValue, Value vValue, int64_t perD,
                              int64_t perDv, int64_t perScore, bool halve) {
  auto q = cast<RankedTensorType>(qValue.getType());
  auto v = cast<RankedTensorType>(vValue.getType());
  int64_t scores =
      q.getDimSize(0) * q.getDimSize(1) * q.getDimSize(2) * v.getDimSize(2);
  if (halve)
    scores /= 2;
  return scores * (perD * q.getDimSize(3) + perDv * v.getDimSize(3) + perScore);
}

/// The two products (2 * D and 2 * Dv per score) and the softmax (5 per
/// score), over every score, masked or not (the unfused plan computes them
/// all).
int64_t AttentionOp::getFlops() {
  return attentionFlops(getQ(), getV(), 2, 2, 5, /*halve=*/false);
}

/// What the fused backward kernel computes per score: the scores twice (a
/// pass for each row's log-sum-exp, then again with the gradients; 2 * D
/// each), dv and dp (2 * Dv each), dq and dk (2 * D each), and the
/// elementwise work between (10).
int64_t AttentionGradOp::getFlops() {
  return attentionFlops(getQ(), getV(), 8, 4, 10, /*halve=*/false);
}

/// A ring attention's block: the forward's work on its scores. A causal
/// block's share of unmasked scores depends on the ranks' positions; half
/// is the average over a ring's blocks.
int64_t AttentionBlockOp::getFlops() {
  return attentionFlops(getQ(), getV(), 2, 2, 5, getCausal());
}

/// The backward kernel on a block, given the rows' log-sum-exp: the scores
/// once (2 * D), dv and dp (2 * Dv each), dq and dk (2 * D each) and the
/// elementwise work between; half the scores when causal (as above).
int64_t AttentionBlockGradOp::getFlops() {
  return attentionFlops(getQ(), getV(), 6, 4, 10, getCausal());
}

/// A multiply and an add per row, output feature and contracted index:
/// each row meets only its own expert's weights.
int64_t GroupedMatmulOp::getFlops() {
  auto x = cast<RankedTensorType>(getX().getType());
  return 2 * getType().getNumElements() * x.getDimSize(1);
}

/// The same products, summed into the expert each row is routed to.
int64_t GroupedMatmulWeightGradOp::getFlops() {
  auto x = cast<RankedTensorType>(getX().getType());
  auto dy = cast<RankedTensorType>(getDy().getType());
  return 2 * x.getNumElements() * dy.getDimSize(1);
}

/// Two products and a sum per rotated feature.
int64_t RotaryOp::getFlops() {
  auto x = cast<RankedTensorType>(getX().getType());
  int64_t rotated =
      2 * cast<RankedTensorType>(getCos().getType()).getDimSize(2);
  return 3 * (x.getNumElements() / std::max<int64_t>(x.getDimSize(3), 1)) *
         rotated;
}

int64_t ConvOp::getFlops() {
  auto filter = cast<RankedTensorType>(getFilter().getType());
  int64_t perOutput = 1;
  for (int64_t d = 1; d < filter.getRank(); ++d)
    perOutput *= filter.getDimSize(d);
  return 2 * getType().getNumElements() * perOutput;
}

int64_t ReduceWindowOp::getFlops() {
  int64_t window = 1;
  for (int64_t w : getWindow())
    window *= w;
  return getType().getNumElements() * window;
}
