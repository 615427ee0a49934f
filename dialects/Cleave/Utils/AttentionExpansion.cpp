//===- AttentionExpansion.cpp - Attention and rotary spelled out ----------===//
//
// cleave.attention as contractions, a masked softmax and elementwise ops,
// shared by the decomposition before planning (--cleave-decompose-attention),
// the importer and the VJP rules. Query heads are grouped by their
// key/value head: q is viewed as B x Hkv x G x Sq x D, so every product is a
// contraction batched over (B, Hkv) and no key or value is repeated.
//
// The gradients, spelled out (attentionGradients):
//   dV = P^T dY,  dP = dY V^T,  dS = P * (dP - rowsum(dP * P)),
//   dBias = dS (summed to the bias's shape),
//   dS' = dS * (1 - tanh^2) (softcap) * scale,
//   dQ = dS' K,  dK = dS'^T Q.
//
//===----------------------------------------------------------------------===//

#include "Cleave/Utils/AttentionExpansion.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave {

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// The element type scores and probabilities are computed in: f32 for bf16
/// and f16 operands, else the operands' own.
static Type scoreElementType(Type operand) {
  if (operand.isBF16() || operand.isF16())
    return Float32Type::get(operand.getContext());
  return operand;
}

/// `x` (B x H x S x E, H = Hkv * G) viewed as B x Hkv x G x S x E.
static Value groupHeads(Emitter &e, Value x, int64_t group) {
  ArrayRef<int64_t> s = Emitter::typeOf(x).getShape();
  return e.reshape(x, {s[0], s[1] / group, group, s[2], s[3]});
}

/// The operands and attributes attention and attention_grad share, with
/// `result` the attention's result (or the gradient's `out`).
template <typename OpTy>
static AttentionOperands operandsOf(OpTy op, Value result) {
  AttentionOperands a;
  a.q = op.getQ();
  a.k = op.getK();
  a.v = op.getV();
  a.bias = op.getBias();
  a.scale = op.getScale().convertToDouble();
  a.softcap = op.getSoftcap().convertToDouble();
  a.causal = op.getCausal();
  // The I64Attr getter is unsigned: read the offset signed.
  a.causalOffset = static_cast<int64_t>(op.getCausalOffset());
  ArrayRef<int64_t> shape = Emitter::typeOf(result).getShape();
  a.resultShape.assign(shape.begin(), shape.end());
  return a;
}

AttentionOperands AttentionOperands::of(AttentionOp op) {
  return operandsOf(op, op.getResult());
}

AttentionOperands AttentionOperands::of(AttentionGradOp op) {
  return operandsOf(op, op.getOut());
}

int64_t AttentionOperands::groupSize() const {
  return Emitter::typeOf(q).getDimSize(1) /
         std::max<int64_t>(Emitter::typeOf(k).getDimSize(1), 1);
}

AttentionProbabilities attentionProbabilities(Emitter &e,
                                              const AttentionOperands &op) {
  RankedTensorType qType = Emitter::typeOf(op.q);
  RankedTensorType kType = Emitter::typeOf(op.k);
  int64_t group = op.groupSize();
  int64_t b = qType.getDimSize(0), hkv = kType.getDimSize(1),
          sq = qType.getDimSize(2), skv = kType.getDimSize(2);
  Type ct = scoreElementType(qType.getElementType());
  auto scoresType = RankedTensorType::get({b, hkv, group, sq, skv}, ct);
  AttentionProbabilities r;
  r.q = groupHeads(e, op.q, group);
  // The causal mask comes before the scores: then the scale, the mask and
  // the softmax read the scores in one kernel (the plan builder fuses an op
  // into the kernel of its latest producer).
  Value masked;
  if (op.causal) {
    // Key j is masked for query i when j > i + offset.
    auto idxType = RankedTensorType::get({sq, skv}, e.b.getI64Type());
    Value i = IotaOp::create(e.b, e.loc, idxType, 0);
    Value j = IotaOp::create(e.b, e.loc, idxType, 1);
    if (op.causalOffset != 0)
      i = e.add(i, e.splat(idxType, static_cast<double>(op.causalOffset)));
    masked = e.compare(CompareKind::gt, j, i);
  }
  // [B, Hkv] x (G, Sq) x (Skv): contract the head size.
  Value s = ContractOp::create(e.b, e.loc, scoresType, r.q, op.k,
                               ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{0, 1},
                               ArrayRef<int64_t>{4}, ArrayRef<int64_t>{3});
  // Low-precision operands give low-precision scores, as a mixed-precision
  // library GEMM writes them; the softmax widens them as it reads.
  s = e.convert(e.convert(s, qType.getElementType()), ct);
  s = e.scale(s, op.scale);
  double cap = op.softcap;
  if (cap > 0) {
    r.tanh = e.unary(UnaryKind::tanh, e.scale(s, 1.0 / cap));
    s = e.scale(r.tanh, cap);
  }
  r.scores = s;
  bool maySkipRows = false;
  if (Value bias = op.bias) {
    ArrayRef<int64_t> m = Emitter::typeOf(bias).getShape();
    // B' x H' x Sq' x Skv -> B' x Hkv' x G' x Sq' x Skv, then broadcast.
    Value grouped = m[1] == 1 ? e.reshape(bias, {m[0], 1, 1, m[2], m[3]})
                              : e.reshape(bias, {m[0], hkv, group, m[2], m[3]});
    grouped = e.convert(grouped, ct);
    s = e.add(s, e.broadcastInDim(grouped, scoresType, {0, 1, 2, 3, 4}));
    maySkipRows = true;
  }
  if (op.causal) {
    auto maskType =
        RankedTensorType::get(scoresType.getShape(), e.b.getI1Type());
    s = e.select(e.broadcastInDim(masked, maskType, {3, 4}),
                 e.splatLike(s, -std::numeric_limits<double>::infinity()), s);
    maySkipRows |= op.causalOffset < 0;
  }
  r.masked = s;
  Value p = SoftmaxOp::create(e.b, e.loc, s.getType(), s, 4);
  if (maySkipRows) {
    // A row with no finite score (every key masked) gives zeros, not the
    // softmax's 0/0.
    Value rowMax = ReduceOp::create(
        e.b, e.loc, RankedTensorType::get({b, hkv, group, sq}, ct),
        ReduceKind::max, s, ArrayRef<int64_t>{4});
    Value live = e.compare(
        CompareKind::gt, rowMax,
        e.splatLike(rowMax, -std::numeric_limits<double>::infinity()));
    auto maskType =
        RankedTensorType::get(scoresType.getShape(), e.b.getI1Type());
    p = e.select(e.broadcastBack(live, maskType, {4}), p, e.zerosLike(p));
  }
  r.probs = p;
  return r;
}

Value attentionOutput(Emitter &e, const AttentionOperands &op,
                      const AttentionProbabilities &parts) {
  RankedTensorType vType = Emitter::typeOf(op.v);
  RankedTensorType pType = Emitter::typeOf(parts.probs);
  ArrayRef<int64_t> p = pType.getShape();
  // [B, Hkv] x (G, Sq) x (Dv): contract the keys. Low-precision values
  // take the probabilities rounded to their type; the product accumulates in
  // the scores' type (f32) and is rounded once, as a mixed-precision library
  // GEMM computes it.
  Type ve = vType.getElementType();
  Value probs = e.convert(parts.probs, ve);
  auto outType = RankedTensorType::get(
      {p[0], p[1], p[2], p[3], vType.getDimSize(3)}, pType.getElementType());
  Value y = ContractOp::create(e.b, e.loc, outType, probs, op.v,
                               ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{0, 1},
                               ArrayRef<int64_t>{4}, ArrayRef<int64_t>{2});
  return e.reshape(e.convert(y, ve), op.resultShape);
}

AttentionGradients attentionGradients(Emitter &e, const AttentionOperands &op,
                                      Value cotangent) {
  AttentionProbabilities parts = attentionProbabilities(e, op);
  Value p = parts.probs;
  RankedTensorType pType = Emitter::typeOf(p);
  Type ct = pType.getElementType();
  RankedTensorType qType = Emitter::typeOf(op.q);
  RankedTensorType kType = Emitter::typeOf(op.k);
  RankedTensorType vType = Emitter::typeOf(op.v);
  int64_t group = op.groupSize();
  // The products read their operands in q's and v's types (bf16 or f16
  // under mixed precision: P, dY and dS rounded to them, as the forward
  // rounds P) and accumulate in the scores' type, as mixed-precision
  // library GEMMs do; the softmax's gradient stays in the scores' type.
  Type qe = qType.getElementType(), ve = vType.getElementType();
  Value g = e.convert(groupHeads(e, cotangent, group), ve);
  ArrayRef<int64_t> ps = pType.getShape();

  // The softmax's gradient reads P as the products do, rounded to v's type
  // (as a low-precision softmax saves its output for its backward): one
  // low-precision copy of P instead of two.
  Value pLow = e.convert(p, ve);
  p = e.convert(pLow, ct);
  // dV[b, h, j, e] = sum over (G, Sq) of P * dY.
  Value dv = ContractOp::create(
      e.b, e.loc, RankedTensorType::get(vType.getShape(), ct), pLow, g,
      ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{2, 3},
      ArrayRef<int64_t>{2, 3});
  // dP = dY V^T.
  Value dp = ContractOp::create(
      e.b, e.loc, pType, g, op.v, ArrayRef<int64_t>{0, 1},
      ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{4}, ArrayRef<int64_t>{3});
  // dP in v's type too (rounded by its GEMM), widened by the softmax's
  // gradient.
  dp = e.convert(e.convert(dp, ve), ct);
  // Through the softmax: P * (dP - rowsum(dP * P)).
  Value dot = e.reduceSum(e.mul(dp, p), {4});
  Value ds = e.mul(p, e.sub(dp, e.broadcastBack(dot, pType, {4})));

  AttentionGradients r;
  if (Value bias = op.bias) {
    RankedTensorType biasType = Emitter::typeOf(bias);
    Value full = e.reshape(ds, {ps[0], ps[1] * ps[2], ps[3], ps[4]});
    r.dbias = e.convert(e.unbroadcast(full, biasType.clone(ct), {0, 1, 2, 3}),
                        biasType.getElementType());
  }
  if (parts.tanh)
    ds = e.mul(
        ds, e.sub(e.splatLike(parts.tanh, 1.0), e.mul(parts.tanh, parts.tanh)));
  ds = e.scale(ds, op.scale);

  // dQ = dS K (grouped back to Hq heads), dK = dS^T Q.
  Value dsLow = e.convert(ds, qe);
  Value dq = ContractOp::create(
      e.b, e.loc,
      RankedTensorType::get({ps[0], ps[1], ps[2], ps[3], qType.getDimSize(3)},
                            ct),
      dsLow, e.convert(op.k, qe), ArrayRef<int64_t>{0, 1},
      ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{4}, ArrayRef<int64_t>{2});
  dq = e.reshape(dq, qType.getShape());
  Value dk = ContractOp::create(
      e.b, e.loc, RankedTensorType::get(kType.getShape(), ct), dsLow, parts.q,
      ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{0, 1}, ArrayRef<int64_t>{2, 3},
      ArrayRef<int64_t>{2, 3});
  r.dq = dq;
  r.dk = dk;
  r.dv = dv;
  return r;
}

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

RotaryHalves rotaryHalves(Emitter &e, Value x, int64_t r, bool interleaved) {
  ArrayRef<int64_t> s = Emitter::typeOf(x).getShape();
  RotaryHalves h;
  if (interleaved) {
    Value pairs = e.reshape(
        e.slice(x, {0, 0, 0, 0}, {s[0], s[1], s[2], 2 * r}, {1, 1, 1, 1}),
        {s[0], s[1], s[2], r, 2});
    auto half = [&](int64_t i) {
      return e.reshape(e.slice(pairs, {0, 0, 0, 0, i},
                               {s[0], s[1], s[2], r, i + 1}, {1, 1, 1, 1, 1}),
                       {s[0], s[1], s[2], r});
    };
    h.x1 = half(0);
    h.x2 = half(1);
  } else {
    h.x1 = e.slice(x, {0, 0, 0, 0}, {s[0], s[1], s[2], r}, {1, 1, 1, 1});
    h.x2 = e.slice(x, {0, 0, 0, r}, {s[0], s[1], s[2], 2 * r}, {1, 1, 1, 1});
  }
  if (2 * r < s[3])
    h.rest =
        e.slice(x, {0, 0, 0, 2 * r}, {s[0], s[1], s[2], s[3]}, {1, 1, 1, 1});
  return h;
}

/// cos or sin (B' x S x R) broadcast over heads (and batch) to B x H x S x R.
static Value rotaryAngles(Emitter &e, Value c, RankedTensorType halfType) {
  return e.broadcastInDim(c, halfType, {0, 2, 3});
}

Value rotaryOutput(Emitter &e, RotaryOp op) {
  RankedTensorType xType = Emitter::typeOf(op.getX());
  ArrayRef<int64_t> s = xType.getShape();
  int64_t r = Emitter::typeOf(op.getCos()).getDimSize(2);
  RotaryHalves h = rotaryHalves(e, op.getX(), r, op.getInterleaved());
  auto halfType =
      RankedTensorType::get({s[0], s[1], s[2], r}, xType.getElementType());
  Value c = rotaryAngles(e, op.getCos(), halfType);
  Value sn = rotaryAngles(e, op.getSin(), halfType);
  Value y1 = e.sub(e.mul(c, h.x1), e.mul(sn, h.x2));
  Value y2 = e.add(e.mul(sn, h.x1), e.mul(c, h.x2));
  Value y;
  if (op.getInterleaved()) {
    SmallVector<int64_t> one = {s[0], s[1], s[2], r, 1};
    y = e.reshape(e.concat({e.reshape(y1, one), e.reshape(y2, one)}, 4),
                  {s[0], s[1], s[2], 2 * r});
  } else {
    y = e.concat({y1, y2}, 3);
  }
  if (h.rest)
    y = e.concat({y, h.rest}, 3);
  return y;
}

} // namespace cleave
