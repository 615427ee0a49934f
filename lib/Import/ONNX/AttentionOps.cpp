//===- AttentionOps.cpp - ONNX Attention and RotaryEmbedding --------------===//
//
// Attention becomes one cleave.attention on B x H x S x D operands: 3-D
// inputs are split into heads, the past key/value cache is concatenated in
// front (present_key/present_value), and every mask the node describes
// (attn_mask, boolean or additive and padded to the keys; the padding of
// nonpad_kv_seqlen; a per-batch causal frontier; sliding windows) is folded
// into one additive bias of 0 and -inf. A causal mask whose frontier is the
// same for every batch stays the op's `causal` flag, which a fused kernel
// can use to skip whole tiles. The optional qk_matmul_output is built from
// the op by the same expressions its decomposition uses.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "Cleave/Utils/AttentionExpansion.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// B x S x (H * E) -> B x H x S x E.
Value splitHeads(NodeContext &ctx, Value x, int64_t heads) {
  ArrayRef<int64_t> s = shapeOf(x);
  Value r = ctx.reshape(x, {s[0], s[1], heads, s[2] / heads});
  return ctx.transpose(r, {0, 2, 1, 3});
}

/// i (queries) and j (keys) as Sq x Skv index tensors.
std::pair<Value, Value> positions(NodeContext &ctx, int64_t sq, int64_t skv) {
  auto type = RankedTensorType::get({sq, skv}, ctx.b.getI64Type());
  return {IotaOp::create(ctx.b, ctx.loc, type, 0).getResult(),
          IotaOp::create(ctx.b, ctx.loc, type, 1).getResult()};
}

/// 0 where `allowed`, -inf elsewhere, in `elem`.
Value biasOf(NodeContext &ctx, Value allowed, Type elem) {
  return ctx.select(allowed, ctx.splat(elem, {}, 0.0),
                    ctx.splat(elem, {}, kNegInf));
}

/// `a + b` with broadcasting; either may be null.
Value addBias(NodeContext &ctx, Value a, Value b) {
  if (!a)
    return b;
  if (!b)
    return a;
  return ctx.binary(BinaryKind::add, a, b);
}

LogicalResult convertAttention(NodeContext &ctx) {
  Value q = ctx.input(0), k = ctx.input(1), v = ctx.input(2);
  if (!q || !k || !v)
    return failure();
  Type elem = elemOf(q);
  if (!isa<FloatType>(elem) || elemOf(k) != elem || elemOf(v) != elem) {
    ctx.error() << "Q, K and V must have one floating-point type, got "
                << q.getType() << ", " << k.getType() << " and " << v.getType();
    return failure();
  }
  int64_t rank = rankOf(q);
  if ((rank != 3 && rank != 4) || rankOf(k) != rank || rankOf(v) != rank) {
    ctx.error() << "Q, K and V must all be 3-D or all 4-D, got " << q.getType()
                << ", " << k.getType() << " and " << v.getType();
    return failure();
  }
  if (rank == 3) {
    int64_t qHeads = ctx.attrInt("q_num_heads", 0);
    int64_t kvHeads = ctx.attrInt("kv_num_heads", 0);
    if (qHeads <= 0 || kvHeads <= 0 || shapeOf(q)[2] % qHeads != 0 ||
        shapeOf(k)[2] % kvHeads != 0 || shapeOf(v)[2] % kvHeads != 0) {
      ctx.error() << "3-D inputs need q_num_heads and kv_num_heads that "
                     "divide the hidden sizes (got "
                  << qHeads << " and " << kvHeads << " for " << q.getType()
                  << ", " << k.getType() << ", " << v.getType() << ")";
      return failure();
    }
    q = splitHeads(ctx, q, qHeads);
    k = splitHeads(ctx, k, kvHeads);
    v = splitHeads(ctx, v, kvHeads);
  }
  if (ctx.hasInput(4) != ctx.hasInput(5)) {
    ctx.error() << "past_key and past_value must be given together";
    return failure();
  }
  int64_t past = 0;
  if (ctx.hasInput(4)) {
    Value pastK = ctx.input(4), pastV = ctx.input(5);
    if (!pastK || !pastV)
      return failure();
    auto fits = [&](Value cache, Value x) {
      ArrayRef<int64_t> c = shapeOf(cache), s = shapeOf(x);
      return rankOf(cache) == 4 && elemOf(cache) == elem && c[0] == s[0] &&
             c[1] == s[1] && c[3] == s[3];
    };
    if (!fits(pastK, k) || !fits(pastV, v) ||
        shapeOf(pastK)[2] != shapeOf(pastV)[2]) {
      ctx.error() << "past_key " << pastK.getType() << " and past_value "
                  << pastV.getType() << " do not match the keys " << k.getType()
                  << " and values " << v.getType();
      return failure();
    }
    past = shapeOf(pastK)[2];
    auto concat = [&](Value a, Value b) {
      SmallVector<int64_t> shape(shapeOf(b));
      shape[2] += shapeOf(a)[2];
      return ConcatOp::create(ctx.b, ctx.loc,
                              RankedTensorType::get(shape, elem),
                              ValueRange{a, b}, 2)
          .getResult();
    };
    k = concat(pastK, k);
    v = concat(pastV, v);
  }
  ArrayRef<int64_t> qs = shapeOf(q), ks = shapeOf(k), vs = shapeOf(v);
  int64_t batch = qs[0], qHeads = qs[1], sq = qs[2], kvHeads = ks[1],
          skv = ks[2];
  if (ks[0] != batch || vs[0] != batch || ks[3] != qs[3] || vs[1] != kvHeads ||
      vs[2] != skv || kvHeads == 0 || qHeads % kvHeads != 0) {
    ctx.error() << "Q " << q.getType() << ", K " << k.getType() << " and V "
                << v.getType()
                << " do not fit: batch, head size and key lengths must "
                   "agree and the query heads be a multiple of the "
                   "key/value heads";
    return failure();
  }

  // Masks fold into an additive bias in the scores' type.
  Type biasElem = elem.isBF16() || elem.isF16() ? ctx.b.getF32Type() : elem;
  Value bias;
  if (ctx.hasInput(3)) {
    Value mask = ctx.input(3);
    if (!mask)
      return failure();
    int64_t mr = rankOf(mask);
    if (mr < 1 || mr > 4 || shapeOf(mask).back() > skv) {
      ctx.error() << "attn_mask " << mask.getType()
                  << " must have rank 1 to 4 and at most " << skv << " keys";
      return failure();
    }
    if (elemOf(mask).isInteger(1))
      mask = biasOf(ctx, mask, biasElem);
    else if (isa<FloatType>(elemOf(mask)))
      mask = ctx.convert(mask, biasElem);
    else {
      ctx.error() << "attn_mask must be boolean or floating-point, got "
                  << mask.getType();
      return failure();
    }
    // Shorter than the keys (a cache's new entries): the rest is masked.
    int64_t missing = skv - shapeOf(mask).back();
    if (missing > 0) {
      SmallVector<int64_t> shape(shapeOf(mask)), low(mr, 0), high(mr, 0);
      shape.back() = skv;
      high.back() = missing;
      mask = PadOp::create(
                 ctx.b, ctx.loc, RankedTensorType::get(shape, biasElem), mask,
                 ctx.splat(biasElem, {}, kNegInf), low, high, PadMode::constant)
                 .getResult();
    }
    bias = mask;
  }
  Value nonpad;
  if (ctx.hasInput(6)) {
    nonpad = ctx.input(6);
    if (!nonpad)
      return failure();
    if (past) {
      ctx.error() << "nonpad_kv_seqlen cannot be combined with past_key";
      return failure();
    }
    if (!elemOf(nonpad).isInteger(64) ||
        shapeOf(nonpad) != ArrayRef<int64_t>{batch}) {
      ctx.error() << "nonpad_kv_seqlen must be an int64 tensor of shape ["
                  << batch << "], got " << nonpad.getType();
      return failure();
    }
  }
  bool causal = ctx.attrInt("is_causal", 0) != 0;
  int64_t left = ctx.attrInt("left_window_size", -1);
  int64_t right = ctx.attrInt("right_window_size", -1);
  if (left < -1 || right < -1) {
    ctx.error() << "left_window_size and right_window_size must be -1 or "
                   "non-negative, got "
                << left << " and " << right;
    return failure();
  }
  auto [i, j] = positions(ctx, sq, skv);
  // The query block's position among the keys: query i is at i + offset.
  // With nonpad_kv_seqlen it is per batch (B x 1 x 1, broadcast over the
  // Sq x Skv positions to B x 1 x Sq x Skv).
  Value queryPos = i;
  if (nonpad) {
    Value offset = ctx.binary(BinaryKind::sub, nonpad,
                              ctx.splat(ctx.b.getI64Type(), {}, sq));
    queryPos = ctx.reshape(
        ctx.binary(BinaryKind::add, ctx.reshape(offset, {batch, 1, 1}), i),
        {batch, 1, sq, skv});
  } else if (past) {
    queryPos =
        ctx.binary(BinaryKind::add, i, ctx.splat(ctx.b.getI64Type(), {}, past));
  }
  bool causalFlag = causal && !nonpad;
  if (causal && nonpad)
    bias = addBias(
        ctx, bias,
        biasOf(ctx, ctx.compare(CompareKind::le, j, queryPos), biasElem));
  if (left >= 0 || right >= 0) {
    Value diff = ctx.binary(BinaryKind::sub, queryPos, j);
    Type i64 = ctx.b.getI64Type();
    Value allowed;
    if (left >= 0)
      allowed = ctx.compare(CompareKind::le, diff, ctx.splat(i64, {}, left));
    if (right >= 0) {
      Value r =
          ctx.compare(CompareKind::le, ctx.binary(BinaryKind::sub, j, queryPos),
                      ctx.splat(i64, {}, right));
      allowed = allowed ? ctx.binary(BinaryKind::land, allowed, r) : r;
    }
    bias = addBias(ctx, bias, biasOf(ctx, allowed, biasElem));
  }
  if (nonpad) {
    // Keys at or after a batch's length are padding.
    Value key = IotaOp::create(
        ctx.b, ctx.loc, RankedTensorType::get({skv}, ctx.b.getI64Type()), 0);
    Value keep = ctx.compare(CompareKind::lt, ctx.reshape(key, {1, skv}),
                             ctx.reshape(nonpad, {batch, 1}));
    bias =
        addBias(ctx, bias,
                ctx.reshape(biasOf(ctx, keep, biasElem), {batch, 1, 1, skv}));
  }
  if (bias) {
    // Right-aligned to B' x H' x Sq' x Skv.
    SmallVector<int64_t> shape(shapeOf(bias));
    while (shape.size() < 4)
      shape.insert(shape.begin(), 1);
    bias = ctx.reshape(bias, shape);
    SmallVector<int64_t> full = {batch, qHeads, sq, skv};
    for (int64_t d = 0; d < 4; ++d)
      if (shape[d] != full[d] && shape[d] != 1) {
        ctx.error() << "the mask " << bias.getType()
                    << " does not broadcast to the scores "
                    << RankedTensorType::get(full, biasElem);
        return failure();
      }
  }

  double scale = ctx.attrFloat("scale", 1.0 / std::sqrt(double(qs[3])));
  double softcap = ctx.attrFloat("softcap", 0.0);
  if (!(scale > 0) || !std::isfinite(scale) || !(softcap >= 0)) {
    ctx.error() << "scale must be positive and softcap non-negative, got "
                << scale << " and " << softcap;
    return failure();
  }
  auto resultType = RankedTensorType::get({batch, qHeads, sq, vs[3]}, elem);
  auto op = AttentionOp::create(
      ctx.b, ctx.loc, resultType, q, k, v, bias, APFloat(scale), causalFlag,
      static_cast<uint64_t>(causalFlag ? past : 0), APFloat(softcap));
  Value y = op.getResult();
  if (rank == 3)
    y = ctx.reshape(ctx.transpose(y, {0, 2, 1, 3}),
                    {batch, sq, qHeads * vs[3]});
  ctx.setOutput(0, y);
  if (ctx.hasOutput(1))
    ctx.setOutput(1, k);
  if (ctx.hasOutput(2))
    ctx.setOutput(2, v);
  if (ctx.hasOutput(3)) {
    int64_t mode = ctx.attrInt("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3) {
      ctx.error() << "qk_matmul_output_mode must be 0 to 3, got " << mode;
      return failure();
    }
    Emitter e{ctx.b, ctx.loc};
    AttentionProbabilities parts =
        attentionProbabilities(e, AttentionOperands::of(op));
    // Modes 0 and 1: the scaled (softcapped) product; 2: with the masks;
    // 3: the probabilities.
    Value out = mode == 3   ? parts.probs
                : mode == 2 ? parts.masked
                            : parts.scores;
    ctx.setOutput(
        3, ctx.convert(ctx.reshape(out, {batch, qHeads, sq, skv}), elem));
  }
  return success();
}

/// RotaryEmbedding (opset 23): X is B x H x S x D, or B x S x (H * D) with
/// num_heads; cos_cache and sin_cache are B x S x R, or P x R gathered at
/// position_ids (B x S). One cleave.rotary on B x H x S x D.
LogicalResult convertRotaryEmbedding(NodeContext &ctx) {
  Value x = ctx.input(0), cosCache = ctx.input(1), sinCache = ctx.input(2);
  if (!x || !cosCache || !sinCache)
    return failure();
  Type elem = elemOf(x);
  if (!isa<FloatType>(elem) || elemOf(cosCache) != elem ||
      elemOf(sinCache) != elem) {
    ctx.error() << "X, cos_cache and sin_cache must have one floating-point "
                   "type, got "
                << x.getType() << ", " << cosCache.getType() << " and "
                << sinCache.getType();
    return failure();
  }
  int64_t rank = rankOf(x);
  if (rank != 3 && rank != 4) {
    ctx.error() << "X must be 3-D (batch, sequence, hidden) or 4-D (batch, "
                   "heads, sequence, head size), got "
                << x.getType();
    return failure();
  }
  Value x4 = x;
  if (rank == 3) {
    int64_t heads = ctx.attrInt("num_heads", 0);
    if (heads <= 0 || shapeOf(x)[2] % heads != 0) {
      ctx.error() << "a 3-D X needs num_heads dividing its hidden size "
                  << shapeOf(x)[2] << ", got num_heads = " << heads;
      return failure();
    }
    x4 = splitHeads(ctx, x, heads);
  }
  ArrayRef<int64_t> xs = shapeOf(x4);
  int64_t rotaryDim = ctx.attrInt("rotary_embedding_dim", 0);
  if (rotaryDim == 0)
    rotaryDim = xs[3];
  if (rotaryDim < 0 || rotaryDim % 2 != 0 || rotaryDim > xs[3]) {
    ctx.error() << "rotary_embedding_dim " << rotaryDim
                << " must be even and at most the head size " << xs[3];
    return failure();
  }
  int64_t half = rotaryDim / 2;
  Value cos = cosCache, sin = sinCache;
  if (ctx.hasInput(3)) {
    Value ids = ctx.input(3);
    if (!ids)
      return failure();
    if (!elemOf(ids).isInteger(64) || rankOf(ids) != 2 ||
        shapeOf(ids)[0] != xs[0] || shapeOf(ids)[1] != xs[2] ||
        rankOf(cosCache) != 2 || rankOf(sinCache) != 2) {
      ctx.error() << "position_ids " << ids.getType()
                  << " must be int64 batch x sequence " << xs[0] << "x" << xs[2]
                  << ", with 2-D caches, got cos_cache " << cosCache.getType()
                  << " and sin_cache " << sinCache.getType();
      return failure();
    }
    auto gather = [&](Value cache) -> Value {
      SmallVector<int64_t> shape = {xs[0], xs[2], shapeOf(cache)[1]};
      return GatherOp::create(ctx.b, ctx.loc,
                              RankedTensorType::get(shape, elem), cache, ids,
                              uint64_t{0})
          .getResult();
    };
    cos = gather(cosCache);
    sin = gather(sinCache);
  }
  ArrayRef<int64_t> cs = shapeOf(cos);
  if (rankOf(cos) != 3 || shapeOf(sin) != cs ||
      (cs[0] != 1 && cs[0] != xs[0]) || cs[1] != xs[2] || cs[2] != half) {
    ctx.error() << "cos_cache and sin_cache must give batch x sequence x "
                << half << " (rotary_embedding_dim / 2) angles for X "
                << x.getType() << ", got " << cos.getType() << " and "
                << sin.getType();
    return failure();
  }
  Value y = RotaryOp::create(ctx.b, ctx.loc, x4.getType(), x4, cos, sin,
                             ctx.attrInt("interleaved", 0) != 0);
  if (rank == 3)
    y = ctx.reshape(ctx.transpose(y, {0, 2, 1, 3}), shapeOf(x));
  return ctx.finish(y);
}

} // namespace

void registerAttentionConverters(llvm::StringMap<ConverterFn> &t) {
  t["Attention"] = convertAttention;
  t["RotaryEmbedding"] = convertRotaryEmbedding;
}

} // namespace cleave::onnximport
