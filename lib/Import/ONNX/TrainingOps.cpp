//===- TrainingOps.cpp - ai.onnx.preview.training optimizers --------------===//
//
// Adagrad, Adam and Momentum (standard and Nesterov) of the
// ai.onnx.preview.training domain. Each node takes the learning rate R and
// the update count T (0-d) followed by n tensors of each kind (X..., G...,
// then the optimizer state V..., H...) and returns the updated X... and
// state tensors; the update is a pure elementwise formula. T enters through
// `T > 0` selects and powers `alpha^T`, so R and T may be runtime values.
// (The Gradient op of the same domain is imported by ONNXImporter.cpp,
// which needs the graph: see importGradientNode below. It becomes a
// cleave.gradient marker, which --cleave-expand-gradients expands.)
//
//===----------------------------------------------------------------------===//

#include "TrainingOps.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

/// The common inputs of an optimizer node: R, T and `kinds` groups of n
/// tensors each.
struct OptimizerInputs {
  Value r, t;      // learning rate and update count, converted to the float
                   // type of the X tensors (0-d)
  Value tPositive; // i1 0-d: T > 0
  int64_t n = 0;
  Type ft;
  SmallVector<SmallVector<Value>> groups; // groups[k][i]
};

FailureOr<OptimizerInputs> readOptimizerInputs(NodeContext &ctx, int kinds,
                                               int outputsPerTensor) {
  OptimizerInputs in;
  int rest = ctx.numInputs() - 2;
  if (rest <= 0 || rest % kinds != 0) {
    ctx.error() << "expected R, T and " << kinds
                << " groups of equally many tensors, got " << ctx.numInputs()
                << " inputs";
    return failure();
  }
  in.n = rest / kinds;
  if (ctx.numOutputs() > outputsPerTensor * in.n) {
    ctx.error() << "expected at most " << outputsPerTensor * in.n
                << " outputs, got " << ctx.numOutputs();
    return failure();
  }
  for (int k = 0; k < kinds; ++k) {
    in.groups.emplace_back();
    for (int64_t i = 0; i < in.n; ++i) {
      Value v = ctx.input(2 + k * in.n + i);
      if (!v)
        return failure();
      if (!isa<FloatType>(elemOf(v))) {
        ctx.error() << "input " << 2 + k * in.n + i
                    << " must be a float tensor, got " << v.getType();
        return failure();
      }
      if (k > 0 && shapeOf(v) != shapeOf(in.groups[0][i])) {
        ctx.error() << "input " << 2 + k * in.n + i << " has type "
                    << v.getType() << ", expected the shape of X" << i << " "
                    << in.groups[0][i].getType();
        return failure();
      }
      in.groups.back().push_back(v);
    }
  }
  in.ft = elemOf(in.groups[0][0]);
  Value r = ctx.input(0), t = ctx.input(1);
  if (!r || !t)
    return failure();
  if (product(shapeOf(r)) != 1 || product(shapeOf(t)) != 1) {
    ctx.error() << "R and T must be scalars, got " << r.getType() << " and "
                << t.getType();
    return failure();
  }
  r = ctx.reshape(r, {});
  t = ctx.reshape(t, {});
  in.r = ctx.convert(r, in.ft);
  in.t = ctx.convert(t, in.ft);
  in.tPositive = ctx.compare(CompareKind::gt, in.t, ctx.splat(in.ft, {}, 0.0));
  return in;
}

/// Converts a result back to the element type of `like` and sets output i.
void setOut(NodeContext &ctx, int i, Value v, Value like) {
  if (ctx.hasOutput(i))
    ctx.setOutput(i, ctx.convert(v, elemOf(like)));
}

/// `norm_coefficient * x + g`.
Value regularize(NodeContext &ctx, Value x, Value g, double norm) {
  if (norm == 0.0)
    return g;
  return ctx.binary(BinaryKind::add,
                    ctx.binary(BinaryKind::mul, ctx.splatLike(x, norm), x), g);
}

LogicalResult convertAdagrad(NodeContext &ctx) {
  auto in = readOptimizerInputs(ctx, 3, 2);
  if (failed(in))
    return failure();
  double decay = ctx.attrFloat("decay_factor", 0.0);
  double eps = ctx.attrFloat("epsilon", 1e-6); // the schema default
  double norm = ctx.attrFloat("norm_coefficient", 0.0);
  Type ft = in->ft;
  // r = R / (1 + T * decay_factor)
  Value r = ctx.binary(
      BinaryKind::div, in->r,
      ctx.binary(BinaryKind::add, ctx.splat(ft, {}, 1.0),
                 ctx.binary(BinaryKind::mul, in->t, ctx.splat(ft, {}, decay))));
  for (int64_t i = 0; i < in->n; ++i) {
    Value x = in->groups[0][i], g = in->groups[1][i], h = in->groups[2][i];
    Value gr = regularize(ctx, x, g, norm);
    Value hNew =
        ctx.binary(BinaryKind::add, h, ctx.binary(BinaryKind::mul, gr, gr));
    Value hSqrt = ctx.binary(BinaryKind::add, ctx.unary(UnaryKind::sqrt, hNew),
                             ctx.splatLike(hNew, eps));
    Value xNew = ctx.binary(
        BinaryKind::sub, x,
        ctx.binary(BinaryKind::div, ctx.binary(BinaryKind::mul, r, gr), hSqrt));
    if (!xNew || !hNew)
      return failure();
    setOut(ctx, i, xNew, x);
    setOut(ctx, in->n + i, hNew, h);
  }
  return success();
}

LogicalResult convertMomentum(NodeContext &ctx) {
  for (StringRef name : {"alpha", "beta", "mode", "norm_coefficient"})
    if (!ctx.hasAttr(name)) {
      ctx.error() << "missing required attribute '" << name << "'";
      return failure();
    }
  std::string mode = ctx.attrString("mode", "standard");
  if (mode != "standard" && mode != "nesterov") {
    ctx.error() << "mode must be 'standard' or 'nesterov', got '" << mode
                << "'";
    return failure();
  }
  auto in = readOptimizerInputs(ctx, 3, 2);
  if (failed(in))
    return failure();
  double alpha = ctx.attrFloat("alpha", 0.0);
  double beta = ctx.attrFloat("beta", 0.0);
  double norm = ctx.attrFloat("norm_coefficient", 0.0);
  Type ft = in->ft;
  // The coefficient of the gradient is 1 at the first update (T == 0).
  // (With beta == 1 it is 1 at every T, and no multiplication is emitted.)
  Value betaAdjusted = beta == 1.0
                           ? Value()
                           : ctx.select(in->tPositive, ctx.splat(ft, {}, beta),
                                        ctx.splat(ft, {}, 1.0));
  for (int64_t i = 0; i < in->n; ++i) {
    Value x = in->groups[0][i], g = in->groups[1][i], v = in->groups[2][i];
    Value gr = regularize(ctx, x, g, norm);
    Value vNew = ctx.binary(
        BinaryKind::add,
        ctx.binary(BinaryKind::mul, ctx.splatLike(v, alpha), v),
        betaAdjusted ? ctx.binary(BinaryKind::mul, betaAdjusted, gr) : gr);
    Value step = vNew;
    if (mode == "nesterov")
      step = ctx.binary(
          BinaryKind::add, gr,
          ctx.binary(BinaryKind::mul, ctx.splatLike(vNew, alpha), vNew));
    Value xNew = ctx.binary(BinaryKind::sub, x,
                            ctx.binary(BinaryKind::mul, in->r, step));
    if (!xNew || !vNew)
      return failure();
    setOut(ctx, i, xNew, x);
    setOut(ctx, in->n + i, vNew, v);
  }
  return success();
}

LogicalResult convertAdam(NodeContext &ctx) {
  auto in = readOptimizerInputs(ctx, 4, 3);
  if (failed(in))
    return failure();
  double alpha = ctx.attrFloat("alpha", 0.9);
  double beta = ctx.attrFloat("beta", 0.999);
  double eps = ctx.attrFloat("epsilon", 1e-6); // the schema default
  double norm = ctx.attrFloat("norm_coefficient", 0.0);
  double normPost = ctx.attrFloat("norm_coefficient_post", 0.0);
  Type ft = in->ft;
  auto scalar = [&](double v) { return ctx.splat(ft, {}, v); };
  // Bias correction when T > 0: R * sqrt(1 - beta^T) / (1 - alpha^T).
  Value betaT = ctx.binary(BinaryKind::pow, scalar(beta), in->t);
  Value alphaT = ctx.binary(BinaryKind::pow, scalar(alpha), in->t);
  Value corrected = ctx.binary(
      BinaryKind::div,
      ctx.binary(BinaryKind::mul, in->r,
                 ctx.unary(UnaryKind::sqrt,
                           ctx.binary(BinaryKind::sub, scalar(1.0), betaT))),
      ctx.binary(BinaryKind::sub, scalar(1.0), alphaT));
  // At T == 0 the correction divides by zero; the select discards it.
  Value r = ctx.select(in->tPositive, corrected, in->r);
  for (int64_t i = 0; i < in->n; ++i) {
    Value x = in->groups[0][i], g = in->groups[1][i], v = in->groups[2][i],
          h = in->groups[3][i];
    Value gr = regularize(ctx, x, g, norm);
    Value vNew = ctx.binary(
        BinaryKind::add,
        ctx.binary(BinaryKind::mul, ctx.splatLike(v, alpha), v),
        ctx.binary(BinaryKind::mul, ctx.splatLike(gr, 1.0 - alpha), gr));
    Value hNew = ctx.binary(
        BinaryKind::add, ctx.binary(BinaryKind::mul, ctx.splatLike(h, beta), h),
        ctx.binary(BinaryKind::mul, ctx.splatLike(gr, 1.0 - beta),
                   ctx.binary(BinaryKind::mul, gr, gr)));
    Value hSqrt = ctx.binary(BinaryKind::add, ctx.unary(UnaryKind::sqrt, hNew),
                             ctx.splatLike(hNew, eps));
    Value xNew =
        ctx.binary(BinaryKind::sub, x,
                   ctx.binary(BinaryKind::mul, r,
                              ctx.binary(BinaryKind::div, vNew, hSqrt)));
    if (normPost != 0.0)
      xNew = ctx.binary(BinaryKind::mul, ctx.splatLike(xNew, 1.0 - normPost),
                        xNew);
    if (!xNew || !vNew || !hNew)
      return failure();
    setOut(ctx, i, xNew, x);
    setOut(ctx, in->n + i, vNew, v);
    setOut(ctx, 2 * in->n + i, hNew, h);
  }
  return success();
}

} // namespace

void registerGradientConverter(llvm::StringMap<ConverterFn> &t);

void registerTrainingConverters(llvm::StringMap<ConverterFn> &t) {
  t[std::string(kTrainingDomain) + ".Adagrad"] = convertAdagrad;
  t[std::string(kTrainingDomain) + ".Adam"] = convertAdam;
  t[std::string(kTrainingDomain) + ".Momentum"] = convertMomentum;
  registerGradientConverter(t);
}

} // namespace cleave::onnximport

//===----------------------------------------------------------------------===//
// Gradient
//===----------------------------------------------------------------------===//

namespace cleave::onnximport {

std::string converterKey(const onnx::NodeProto &node) {
  bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  return defaultDomain ? node.op_type() : node.domain() + "." + node.op_type();
}

namespace {
/// Gradient is imported by importGradientNode (it needs the graph); the
/// table entry only marks it as supported.
LogicalResult convertGradientUnreachable(NodeContext &ctx) {
  ctx.error() << "internal error: Gradient must be imported with its graph";
  return failure();
}
} // namespace

void registerGradientConverter(llvm::StringMap<ConverterFn> &t) {
  t[std::string(kTrainingDomain) + ".Gradient"] = convertGradientUnreachable;
}

bool isGradientNode(const onnx::NodeProto &node) {
  return node.domain() == kTrainingDomain && node.op_type() == "Gradient";
}

LogicalResult importGradientNode(NodeContext &ctx,
                                 const onnx::GraphProto &graph, int nodeIndex,
                                 llvm::StringMap<TensorEntry> &tensors) {
  const onnx::AttributeProto *xsAttr = ctx.attr("xs");
  const onnx::AttributeProto *yAttr = ctx.attr("y");
  if (!xsAttr || !yAttr || xsAttr->strings_size() == 0) {
    ctx.error() << "needs the attributes 'xs' (non-empty) and 'y'";
    return failure();
  }
  SmallVector<std::string> xs(xsAttr->strings().begin(),
                              xsAttr->strings().end());
  SmallVector<std::string> zs;
  if (const onnx::AttributeProto *zsAttr = ctx.attr("zs"))
    zs.assign(zsAttr->strings().begin(), zsAttr->strings().end());
  std::string y = yAttr->s();
  int64_t bound = xs.size() + zs.size();
  if (ctx.numInputs() != bound) {
    ctx.error() << "has " << ctx.numInputs()
                << " inputs, expected one per name of 'xs' and 'zs' (" << bound
                << ")";
    return failure();
  }
  if (ctx.numOutputs() > static_cast<int>(xs.size())) {
    ctx.error() << "has " << ctx.numOutputs()
                << " outputs, expected at most one per name of 'xs' ("
                << xs.size() << ")";
    return failure();
  }

  // The values the subgraph is evaluated at.
  SmallVector<Value> boundValues;
  bool sameTensors = true;
  for (int64_t i = 0; i < bound; ++i) {
    const std::string &name =
        i < static_cast<int64_t>(xs.size()) ? xs[i] : zs[i - xs.size()];
    Value v = ctx.input(i);
    if (!v)
      return failure();
    if (i < static_cast<int64_t>(xs.size()) && !isa<FloatType>(elemOf(v))) {
      ctx.error() << "cannot differentiate with respect to '" << name
                  << "' of type " << v.getType() << ": not a float tensor";
      return failure();
    }
    boundValues.push_back(v);
    sameTensors &= ctx.node.input(i) == name;
  }

  // Evaluate y as a function of the bound values: unless the node's inputs
  // are the xs/zs tensors themselves, re-import the nodes before this one
  // that depend on an xs/zs name, with those names bound to the inputs.
  llvm::StringMap<TensorEntry> sub;
  llvm::StringMap<TensorEntry> *env = &tensors;
  if (!sameTensors) {
    sub = tensors;
    llvm::StringSet<> dirty;
    for (int64_t i = 0; i < bound; ++i) {
      const std::string &name =
          i < static_cast<int64_t>(xs.size()) ? xs[i] : zs[i - xs.size()];
      sub[name] = TensorEntry{boundValues[i], std::nullopt};
      dirty.insert(name);
    }
    const auto &registry = getConverterRegistry();
    for (int j = 0; j < nodeIndex; ++j) {
      const onnx::NodeProto &node = graph.node(j);
      if (llvm::none_of(node.input(), [&](const std::string &in) {
            return dirty.contains(in);
          }))
        continue;
      NodeContext nc(node, ctx.loc, ctx.opset, ctx.b, sub, ctx.settings);
      if (isGradientNode(node)) {
        ctx.error() << "differentiates through the Gradient node '"
                    << node.name() << "', which is not supported";
        return failure();
      }
      if (!tryFoldNode(nc)) {
        auto it = registry.find(converterKey(node));
        if (it == registry.end() || failed(it->second(nc))) {
          ctx.error() << "cannot re-import node '" << node.name()
                      << "' of the differentiated subgraph";
          return failure();
        }
      }
      for (const std::string &out : node.output())
        dirty.insert(out);
    }
    env = &sub;
  }

  auto it = env->find(y);
  if (it == env->end() || (!it->second.value && !it->second.known)) {
    ctx.error() << "y '" << y
                << "' is not produced by a node before the Gradient node";
    return failure();
  }
  Value yValue = it->second.value;
  if (!yValue)
    yValue = ConstantOp::create(ctx.b, ctx.loc, toAttr(*it->second.known));
  if (!isa<FloatType>(elemOf(yValue))) {
    ctx.error() << "y '" << y << "' must be a float tensor, got "
                << yValue.getType();
    return failure();
  }
  // A non-scalar y is differentiated as sum(y) (a cotangent of ones).
  Value loss = yValue;
  if (rankOf(loss) > 0)
    loss =
        ctx.reduce(ReduceKind::sum, loss,
                   llvm::to_vector(llvm::seq<int64_t>(0, rankOf(loss))), false);
  // The gradients are built by --cleave-expand-gradients, after import.
  SmallVector<Value> wrt(boundValues.begin(), boundValues.begin() + xs.size());
  auto marker =
      GradientOp::create(ctx.b, ctx.loc, ValueRange(wrt).getTypes(), loss, wrt);
  for (int i = 0; i < ctx.numOutputs(); ++i)
    if (ctx.hasOutput(i))
      ctx.setOutput(i, marker.getGradients()[i]);
  return success();
}

} // namespace cleave::onnximport
