//===- MoeOps.cpp - onnxruntime's com.microsoft.MoE -----------------------===//
//
// onnxruntime's mixture-of-experts contrib op, as its schema and its CPU
// kernel define it: the router's scores (`router_probs`, tokens x E) go
// through a softmax over the experts, each token takes its top k (ties to
// the lower expert), their weights renormalized to sum to one when
// `normalize_routing_weights`; each chosen expert computes
// fc2(act(fc1(x) + b1)) + b2, and the token's result is the weighted sum.
// The weights are in onnxruntime's current layout, (E, out, in): fc1
// (E, f * inter, hidden) with f = 2 for a fused SwiGLU, fc2 (E, hidden,
// inter), fc3 (E, inter, hidden).
//
// Activations: relu, gelu (onnxruntime's tanh form), silu, identity, and
// swiglu = G sigmoid(alpha G) (L + beta), G and L the gate and linear
// halves (fc1 and fc3 apart, swiglu_fusion = 0; interleaved on each row,
// 1; concatenated, 2), clamped by swiglu_limit when it is given (G from
// above, L both ways).
//
// The node becomes the routed rows (each token k times), two
// cleave.grouped_matmuls (rows times their expert's weights, read in place)
// and the combine, the form --cleave-recognize-composites makes of exports
// that spell the experts out. `use_sparse_mixer` is refused.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

enum class Activation { Relu, Gelu, Silu, Identity, SwiGLU };

FailureOr<Activation> activationOf(NodeContext &ctx) {
  std::string name = ctx.attrString("activation_type", "relu");
  if (name == "relu")
    return Activation::Relu;
  if (name == "gelu")
    return Activation::Gelu;
  if (name == "silu")
    return Activation::Silu;
  if (name == "identity")
    return Activation::Identity;
  if (name == "swiglu")
    return Activation::SwiGLU;
  ctx.error() << "activation_type '" << name
              << "' is not one Cleave imports (relu, gelu, silu, identity, "
                 "swiglu)";
  return failure();
}

/// The rows of `table` (E x N) that `ids` name: each routed row's bias.
Value rowsOf(NodeContext &ctx, Value table, Value ids) {
  ArrayRef<int64_t> t = shapeOf(table);
  auto type = RankedTensorType::get({shapeOf(ids)[0], t[1]}, elemOf(table));
  return GatherOp::create(ctx.b, ctx.loc, type, table, ids, 0);
}

LogicalResult convertMoE(NodeContext &ctx) {
  if (ctx.attrInt("use_sparse_mixer", 0) != 0) {
    ctx.error() << "use_sparse_mixer = 1 (SparseMixer routing) is not "
                   "imported; only softmax top-k routing is";
    return failure();
  }
  FailureOr<Activation> act = activationOf(ctx);
  if (failed(act))
    return failure();
  int64_t fusion = ctx.attrInt("swiglu_fusion", 0);
  if (*act == Activation::SwiGLU && (fusion < 0 || fusion > 2)) {
    ctx.error() << "swiglu_fusion " << fusion
                << " is not 0 (fc1 and fc3), 1 (interleaved) or 2 "
                   "(concatenated)";
    return failure();
  }
  if (ctx.attrInt("swiglu_limit_after_activation", 0) != 0) {
    ctx.error() << "swiglu_limit_after_activation = 1 is not imported";
    return failure();
  }
  Value x = ctx.input(0), router = ctx.input(1), w1 = ctx.input(2),
        w2 = ctx.input(4);
  if (!x || !router || !w1 || !w2)
    return failure();
  Value b1 = ctx.hasInput(3) ? ctx.input(3) : Value();
  Value b2 = ctx.hasInput(5) ? ctx.input(5) : Value();
  bool separateGate = *act == Activation::SwiGLU && fusion == 0;
  Value w3 = separateGate && ctx.hasInput(6) ? ctx.input(6) : Value();
  Value b3 = separateGate && ctx.hasInput(7) ? ctx.input(7) : Value();
  if ((ctx.hasInput(3) && !b1) || (ctx.hasInput(5) && !b2) ||
      (separateGate && ctx.hasInput(6) && !w3))
    return failure();
  if (separateGate && !w3) {
    ctx.error() << "swiglu with swiglu_fusion = 0 needs fc3_experts_weights "
                   "(input 6), the linear half";
    return failure();
  }
  if (!separateGate && ctx.hasInput(6)) {
    ctx.error() << "fc3_experts_weights (input 6) is read only by swiglu with "
                   "swiglu_fusion = 0";
    return failure();
  }

  Type et = elemOf(x);
  if (!et.isF32() && !et.isBF16() && !et.isF16()) {
    ctx.error() << "input must be float32, bfloat16 or float16 (what the "
                   "grouped GEMMs take), got "
                << x.getType();
    return failure();
  }
  for (auto [name, v] : {std::pair<const char *, Value>{"router_probs", router},
                         {"fc1_experts_weights", w1},
                         {"fc1_experts_bias", b1},
                         {"fc2_experts_weights", w2},
                         {"fc2_experts_bias", b2},
                         {"fc3_experts_weights", w3},
                         {"fc3_experts_bias", b3}})
    if (v && elemOf(v) != et) {
      ctx.error() << name << " has element type " << elemOf(v) << ", the input "
                  << et << " (one type throughout)";
      return failure();
    }
  ArrayRef<int64_t> xs = shapeOf(x);
  if (xs.size() != 2 && xs.size() != 3) {
    ctx.error() << "input must be tokens x hidden or batch x sequence x "
                   "hidden, got "
                << x.getType();
    return failure();
  }
  int64_t hidden = xs.back();
  int64_t tokens = xs.size() == 2 ? xs[0] : xs[0] * xs[1];
  ArrayRef<int64_t> rs = shapeOf(router);
  if (rs.size() != 2 || rs[0] != tokens) {
    ctx.error() << "router_probs " << router.getType() << " must be " << tokens
                << " tokens x experts";
    return failure();
  }
  int64_t experts = rs[1];
  int64_t k = ctx.attrInt("k", 1);
  if (k < 1 || k > experts) {
    ctx.error() << "k = " << k << " is outside [1, " << experts
                << "] (the router's experts)";
    return failure();
  }
  // fc2 (E, hidden, inter) gives inter; fc1 is (E, f * inter, hidden).
  ArrayRef<int64_t> s2 = shapeOf(w2), s1 = shapeOf(w1);
  if (s2.size() != 3 || s2[0] != experts || s2[1] != hidden) {
    ctx.error() << "fc2_experts_weights " << w2.getType() << " must be ("
                << experts << ", " << hidden
                << ", inter_size): experts x hidden x inter";
    return failure();
  }
  int64_t inter = s2[2];
  int64_t fused = *act == Activation::SwiGLU && fusion != 0 ? 2 : 1;
  auto expectShape = [&](Value v, const char *name,
                         ArrayRef<int64_t> want) -> LogicalResult {
    if (!v || shapeOf(v) == want)
      return success();
    auto diag = ctx.error();
    diag << name << " " << v.getType() << " must be (";
    llvm::interleaveComma(want, diag);
    diag << ")";
    if (name == llvm::StringRef("fc1_experts_weights") && s1.size() == 3 &&
        s1[1] == hidden && s1[2] == fused * inter)
      diag << " (experts x out x in); it is in the older (experts x in x "
              "out) layout, which Cleave does not read";
    return failure();
  };
  if (failed(expectShape(w1, "fc1_experts_weights",
                         {experts, fused * inter, hidden})) ||
      failed(expectShape(b1, "fc1_experts_bias", {experts, fused * inter})) ||
      failed(expectShape(b2, "fc2_experts_bias", {experts, hidden})) ||
      failed(
          expectShape(w3, "fc3_experts_weights", {experts, inter, hidden})) ||
      failed(expectShape(b3, "fc3_experts_bias", {experts, inter})))
    return failure();

  OpBuilder &b = ctx.b;
  Location loc = ctx.loc;
  auto c = [&](Value like, double v) { return ctx.splatLike(like, v); };
  auto bin = [&](BinaryKind kind, Value l, Value r) {
    return ctx.binary(kind, l, r);
  };

  // Router: softmax over the experts, top k, renormalized when asked.
  Value probs = SoftmaxOp::create(b, loc, router.getType(), router, 1);
  auto top = TopKOp::create(b, loc, RankedTensorType::get({tokens, k}, et),
                            RankedTensorType::get({tokens, k}, b.getI64Type()),
                            probs, static_cast<uint64_t>(k), 1,
                            /*largest=*/true, /*sorted=*/true);
  Value weights = top.getValues();
  if (ctx.attrInt("normalize_routing_weights", 0) != 0)
    weights = bin(BinaryKind::div, weights,
                  ctx.broadcastTo(ctx.reduce(ReduceKind::sum, weights, {1},
                                             /*keepDims=*/true),
                                  {tokens, k}));

  // Dispatch: each token k times, next to its expert's id.
  int64_t rows = tokens * k;
  Value x2 = ctx.reshape(x, {tokens, 1, hidden});
  Value routed =
      ctx.reshape(ctx.broadcastTo(x2, {tokens, k, hidden}), {rows, hidden});
  Value ids = ctx.reshape(top.getIndices(), {rows});
  auto product = [&](Value in, Value w, Value bias) {
    int64_t n = shapeOf(w)[1];
    Value y =
        GroupedMatmulOp::create(b, loc, RankedTensorType::get({rows, n}, et),
                                in, w, ids, b.getUnitAttr());
    return bias ? bin(BinaryKind::add, y, rowsOf(ctx, bias, ids)) : y;
  };

  // Experts.
  Value h = product(routed, w1, b1);
  Value a;
  switch (*act) {
  case Activation::Relu:
    a = bin(BinaryKind::max, h, c(h, 0));
    break;
  case Activation::Gelu: {
    // onnxruntime's: 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3))).
    Value h3 = bin(BinaryKind::mul, bin(BinaryKind::mul, h, h), h);
    Value inner =
        bin(BinaryKind::mul,
            bin(BinaryKind::add, h, bin(BinaryKind::mul, h3, c(h, 0.044715))),
            c(h, std::sqrt(2.0 / M_PI)));
    Value t = bin(BinaryKind::add, c(h, 1), ctx.unary(UnaryKind::tanh, inner));
    a = bin(BinaryKind::mul, bin(BinaryKind::mul, h, t), c(h, 0.5));
    break;
  }
  case Activation::Silu:
    a = ctx.unary(UnaryKind::silu, h);
    break;
  case Activation::Identity:
    a = h;
    break;
  case Activation::SwiGLU: {
    Value gate, linear;
    if (fusion == 0) {
      gate = h;
      linear = product(routed, w3, b3);
    } else if (fusion == 1) {
      // [g0, l0, g1, l1, ...]: rows x inter x 2.
      Value pairs = ctx.reshape(h, {rows, inter, 2});
      gate =
          ctx.reshape(ctx.slice(pairs, {0, 0, 0}, {rows, inter, 1}, {1, 1, 1}),
                      {rows, inter});
      linear =
          ctx.reshape(ctx.slice(pairs, {0, 0, 1}, {rows, inter, 2}, {1, 1, 1}),
                      {rows, inter});
    } else {
      gate = ctx.slice(h, {0, 0}, {rows, inter}, {1, 1});
      linear = ctx.slice(h, {0, inter}, {rows, 2 * inter}, {1, 1});
    }
    if (ctx.hasAttr("swiglu_limit")) {
      double limit = ctx.attrFloat("swiglu_limit", 0);
      gate = bin(BinaryKind::min, gate, c(gate, limit));
      linear =
          bin(BinaryKind::max, bin(BinaryKind::min, linear, c(linear, limit)),
              c(linear, -limit));
    }
    double alpha = ctx.attrFloat("activation_alpha", 1.0);
    double beta = ctx.attrFloat("activation_beta", 0.0);
    Value sig = ctx.unary(
        UnaryKind::sigmoid,
        alpha == 1.0 ? gate : bin(BinaryKind::mul, gate, c(gate, alpha)));
    Value lin =
        beta == 0.0 ? linear : bin(BinaryKind::add, linear, c(linear, beta));
    a = bin(BinaryKind::mul, bin(BinaryKind::mul, gate, sig), lin);
    break;
  }
  }
  Value out = product(a, w2, b2);

  // Combine: each row times its routing weight, summed over the token's k.
  Value scaled =
      bin(BinaryKind::mul, out,
          ctx.broadcastTo(ctx.reshape(weights, {rows, 1}), {rows, hidden}));
  Value y =
      ctx.reduce(ReduceKind::sum, ctx.reshape(scaled, {tokens, k, hidden}), {1},
                 /*keepDims=*/false);
  if (!y)
    return failure();
  return ctx.finish(ctx.reshape(y, xs));
}

} // namespace

void registerMoeConverters(llvm::StringMap<ConverterFn> &t) {
  t["com.microsoft.MoE"] = convertMoE;
}

} // namespace cleave::onnximport
