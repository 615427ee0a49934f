//===- LossOps.cpp - NegativeLogLikelihood and SoftmaxCrossEntropy --------===//

#include "NodeContext.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

/// NLL of log-probabilities `logp` [N, C, d...] against `target` [N, d...].
LogicalResult buildNLL(NodeContext &ctx, Value logp, Value target,
                       Value weight) {
  auto ls = shapeOf(logp);
  if (ls.size() < 2 || !isa<FloatType>(elemOf(logp))) {
    ctx.error() << "input must be float N x C x ..., got " << logp.getType();
    return failure();
  }
  SmallVector<int64_t> tshape{ls[0]};
  tshape.append(ls.begin() + 2, ls.end());
  if (shapeOf(target) != ArrayRef<int64_t>(tshape) ||
      !isa<IntegerType>(elemOf(target))) {
    ctx.error() << "target must be integer with shape N x d..., got "
                << target.getType();
    return failure();
  }
  int64_t c = ls[1];
  if (weight && (shapeOf(weight) != ArrayRef<int64_t>{c} ||
                 elemOf(weight) != elemOf(logp))) {
    ctx.error() << "weight must be [" << c << "] of the input's type";
    return failure();
  }
  std::string reduction = ctx.attrString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    ctx.error() << "reduction must be none, sum or mean, got '" << reduction
                << "'";
    return failure();
  }
  Type ft = elemOf(logp);
  Type it = elemOf(target);
  target = ctx.convert(target, ctx.b.getI64Type());
  it = ctx.b.getI64Type();
  Value mask; // i1, true where the target is not ignored
  if (ctx.hasAttr("ignore_index")) {
    int64_t ignore = ctx.attrInt("ignore_index", 0);
    mask = ctx.compare(CompareKind::ne, target, ctx.splat(it, {}, ignore));
    target = ctx.select(mask, target, ctx.splat(it, {}, 0));
  }
  // Pick -logp[n, target[n, d], d] with gather_elements along dim 1.
  SmallVector<int64_t> ishape(tshape);
  ishape.insert(ishape.begin() + 1, 1);
  Value idx = ctx.reshape(target, ishape);
  Value picked =
      GatherElementsOp::create(ctx.b, ctx.loc,
                               RankedTensorType::get(ishape, ft), logp, idx, 1)
          .getResult();
  Value loss = ctx.unary(UnaryKind::neg, ctx.reshape(picked, tshape));
  Value w; // per-element weight
  if (weight)
    w = GatherOp::create(ctx.b, ctx.loc, RankedTensorType::get(tshape, ft),
                         weight, target, 0)
            .getResult();
  if (mask) {
    Value m = ctx.convert(mask, ft);
    w = w ? ctx.binary(BinaryKind::mul, w, m) : m;
  }
  if (w)
    loss = ctx.binary(BinaryKind::mul, loss, w);
  if (reduction == "none")
    return ctx.finish(loss);
  SmallVector<int64_t> all =
      llvm::to_vector(llvm::seq<int64_t>(0, tshape.size()));
  Value sum = ctx.reduce(ReduceKind::sum, loss, all, false);
  if (reduction == "mean") {
    Value denom = w ? ctx.reduce(ReduceKind::sum, w, all, false)
                    : ctx.splat(ft, {}, product(tshape));
    sum = ctx.binary(BinaryKind::div, sum, denom);
  }
  return ctx.finish(sum);
}

LogicalResult convertNLL(NodeContext &ctx) {
  Value x = ctx.input(0), t = ctx.input(1);
  if (!x || !t)
    return failure();
  Value w;
  if (ctx.hasInput(2) && !(w = ctx.input(2)))
    return failure();
  return buildNLL(ctx, x, t, w);
}

LogicalResult convertSCE(NodeContext &ctx) {
  Value x = ctx.input(0), t = ctx.input(1);
  if (!x || !t)
    return failure();
  if (rankOf(x) < 2 || !isa<FloatType>(elemOf(x))) {
    ctx.error() << "scores must be float N x C x ..., got " << x.getType();
    return failure();
  }
  Value w;
  if (ctx.hasInput(2) && !(w = ctx.input(2)))
    return failure();
  Value logp = LogSoftmaxOp::create(ctx.b, ctx.loc, x.getType(), x, 1);
  if (failed(buildNLL(ctx, logp, t, w)))
    return failure();
  ctx.setOutput(1, logp);
  return success();
}

} // namespace

void registerLossConverters(llvm::StringMap<ConverterFn> &t) {
  t["NegativeLogLikelihoodLoss"] = convertNLL;
  t["SoftmaxCrossEntropyLoss"] = convertSCE;
}

} // namespace cleave::onnximport
