//===- BuildTrainStep.cpp - A forward program into one training step -------===//
//
// Rewrites @main into
//   @main(params..., optimizer_state..., batch..., lr, step)
//       -> (params'..., optimizer_state'..., loss, grad_norm)
// with gradients from reverse-mode autodiff and the optimizer update in
// cleave ops. See Passes.td for the attributes the plan builder reads.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Training/Passes.h"

#include "Cleave/IR/CleaveOps.h"
#include "cleave/Transforms/Autodiff.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/Support/Regex.h"

#define DEBUG_TYPE "cleave-build-train-step"

namespace cleave {
#define GEN_PASS_DEF_BUILDTRAINSTEPPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

//===----------------------------------------------------------------------===//
// Building cleave ops
//===----------------------------------------------------------------------===//

/// Small helpers that emit cleave ops at one place.
struct Emitter {
  OpBuilder &b;
  Location loc;

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  Value splat(Type elem, ArrayRef<int64_t> shape, double value) {
    auto type = RankedTensorType::get(shape, elem);
    Attribute scalar = isa<FloatType>(elem)
                           ? Attribute(b.getFloatAttr(elem, value))
                           : Attribute(b.getIntegerAttr(elem, (int64_t)value));
    return ConstantOp::create(b, loc, type,
                              DenseElementsAttr::get(type, scalar));
  }
  Value scalar(Type elem, double value) { return splat(elem, {}, value); }
  /// Broadcasts a 0-d tensor to `shape`.
  Value broadcast(Value v, ArrayRef<int64_t> shape) {
    auto t = typeOf(v);
    if (t.getShape() == shape)
      return v;
    return BroadcastInDimOp::create(
        b, loc, RankedTensorType::get(shape, t.getElementType()), v,
        ArrayRef<int64_t>{});
  }
  Value convert(Value v, Type elem) {
    auto t = typeOf(v);
    if (t.getElementType() == elem)
      return v;
    return ConvertOp::create(b, loc, t.clone(elem), v);
  }
  Value binary(BinaryKind kind, Value lhs, Value rhs) {
    return BinaryOp::create(b, loc, lhs.getType(), kind, lhs, rhs);
  }
  Value unary(UnaryKind kind, Value v) {
    return UnaryOp::create(b, loc, v.getType(), kind, v);
  }
  Value add(Value x, Value y) { return binary(BinaryKind::add, x, y); }
  Value sub(Value x, Value y) { return binary(BinaryKind::sub, x, y); }
  Value mul(Value x, Value y) { return binary(BinaryKind::mul, x, y); }
  Value div(Value x, Value y) { return binary(BinaryKind::div, x, y); }
  /// `s * x` for a 0-d `s` of x's element type.
  Value scale(Value x, Value s) { return mul(x, broadcast(s, typeOf(x).getShape())); }
  /// `c * x` for a compile-time constant c.
  Value scale(Value x, double c) {
    auto t = typeOf(x);
    return mul(x, splat(t.getElementType(), t.getShape(), c));
  }
  /// Sum of all elements, as a 0-d tensor.
  Value sumAll(Value v) {
    auto t = typeOf(v);
    if (t.getRank() == 0)
      return v;
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < t.getRank(); ++d)
      dims.push_back(d);
    return ReduceOp::create(b, loc, RankedTensorType::get({}, t.getElementType()),
                            ReduceKind::sum, v, dims);
  }
};

/// One state slot an optimizer keeps per parameter.
struct Slot {
  StringRef name;
};

SmallVector<Slot> slotsOf(StringRef optimizer) {
  if (optimizer == "momentum" || optimizer == "nesterov")
    return {{"momentum"}};
  if (optimizer == "adam" || optimizer == "adamw")
    return {{"adam_m"}, {"adam_v"}};
  return {};
}

struct BuildTrainStepPass
    : public ::cleave::impl::BuildTrainStepPassBase<BuildTrainStepPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  FailureOr<Value> buildLoss(Emitter &e, func::FuncOp oldMain,
                             ArrayRef<Value> outputs,
                             SmallVectorImpl<Type> &extraInputs,
                             SmallVectorImpl<std::string> &extraNames,
                             Block *body);
  /// Returns (new parameter, new slots...).
  SmallVector<Value> update(Emitter &e, Value param, Value grad,
                            ArrayRef<Value> slots, Value lr, Value step);
};

} // namespace

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

/// Finds the forward output named `name` (the `cleave.name` result attribute).
static Value findOutput(func::FuncOp main, ArrayRef<Value> outputs,
                        StringRef name) {
  for (auto [i, v] : llvm::enumerate(outputs))
    if (auto attr = main.getResultAttrOfType<StringAttr>(i, "cleave.name"))
      if (attr.getValue() == name)
        return v;
  return {};
}

FailureOr<Value> BuildTrainStepPass::buildLoss(
    Emitter &e, func::FuncOp oldMain, ArrayRef<Value> outputs,
    SmallVectorImpl<Type> &extraInputs, SmallVectorImpl<std::string> &extraNames,
    Block *body) {
  StringRef spec = loss;
  if (spec.empty()) {
    for (Value v : outputs) {
      auto t = Emitter::typeOf(v);
      if (t.getRank() == 0 && isa<FloatType>(t.getElementType()))
        return v;
    }
    return oldMain.emitError()
           << "the model has no scalar float output to train on; add a loss "
              "with --loss=cross_entropy:<logits>,<labels> or "
              "--loss=mse:<output>,<target>";
  }
  auto [kind, rest] = spec.split(':');
  SmallVector<StringRef> parts;
  rest.split(parts, ',');
  if ((kind != "cross_entropy" && kind != "mse") || parts.size() < 2 ||
      parts.size() > (kind == "cross_entropy" ? 3u : 2u))
    return oldMain.emitError()
           << "invalid --loss '" << spec
           << "': expected cross_entropy:<logits>,<labels>[,<ignore_index>] "
              "or mse:<output>,<target>";
  Value out = findOutput(oldMain, outputs, parts[0]);
  if (!out) {
    auto diag = oldMain.emitError()
                << "--loss names '" << parts[0]
                << "', which is not a model output; outputs are:";
    for (unsigned i = 0; i < oldMain.getNumResults(); ++i)
      if (auto a = oldMain.getResultAttrOfType<StringAttr>(i, "cleave.name"))
        diag << " '" << a.getValue() << "'";
    return failure();
  }
  auto outType = Emitter::typeOf(out);
  Type f = outType.getElementType();
  if (!isa<FloatType>(f))
    return oldMain.emitError() << "loss output '" << parts[0]
                               << "' must be a float tensor, got " << outType;

  if (kind == "mse") {
    extraInputs.push_back(outType);
    extraNames.push_back(parts[1].str());
    Value target = body->addArgument(outType, e.loc);
    Value d = e.sub(out, target);
    Value sum = e.sumAll(e.mul(d, d));
    return e.div(sum, e.scalar(f, std::max<int64_t>(outType.getNumElements(), 1)));
  }

  // Cross-entropy over the last dimension; labels index it.
  if (outType.getRank() < 1)
    return oldMain.emitError() << "cross-entropy logits '" << parts[0]
                               << "' need a class dimension";
  int64_t ignore = -100;
  if (parts.size() == 3 && parts[2].getAsInteger(10, ignore))
    return oldMain.emitError() << "invalid ignore index '" << parts[2] << "'";
  int64_t rank = outType.getRank();
  ArrayRef<int64_t> labelShape = outType.getShape().drop_back();
  auto i64 = e.b.getI64Type();
  auto labelType = RankedTensorType::get(labelShape, i64);
  extraInputs.push_back(labelType);
  extraNames.push_back(parts[1].str());
  Value labels = body->addArgument(labelType, e.loc);

  Value logProbs = LogSoftmaxOp::create(e.b, e.loc, outType, out, rank - 1);
  Value classes = IotaOp::create(e.b, e.loc, outType.clone(i64), rank - 1);
  SmallVector<int64_t> keep;
  for (int64_t d = 0; d + 1 < rank; ++d)
    keep.push_back(d);
  Value labelsB = BroadcastInDimOp::create(e.b, e.loc, outType.clone(i64),
                                           labels, keep);
  auto boolType = outType.clone(e.b.getI1Type());
  Value onehot = CompareOp::create(e.b, e.loc, boolType, CompareKind::eq,
                                   classes, labelsB);
  Value picked = SelectOp::create(e.b, e.loc, outType, onehot, logProbs,
                                  e.splat(f, outType.getShape(), 0.0));
  auto rowType = RankedTensorType::get(labelShape, f);
  picked = ReduceOp::create(e.b, e.loc, rowType, ReduceKind::sum, picked,
                            ArrayRef<int64_t>{rank - 1});
  Value valid = CompareOp::create(e.b, e.loc, labelType.clone(e.b.getI1Type()),
                                  CompareKind::ne, labels,
                                  e.splat(i64, labelShape, ignore));
  Value weight = e.convert(valid, f);
  Value total = e.sumAll(e.mul(picked, weight));
  Value count = e.binary(BinaryKind::max, e.sumAll(weight), e.scalar(f, 1.0));
  return e.unary(UnaryKind::neg, e.div(total, count));
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

SmallVector<Value> BuildTrainStepPass::update(Emitter &e, Value p, Value g,
                                              ArrayRef<Value> slots, Value lr,
                                              Value step) {
  auto type = Emitter::typeOf(p);
  Type f = type.getElementType();
  ArrayRef<int64_t> shape = type.getShape();
  Value lrP = e.convert(lr, f);
  bool decoupled = optimizer == "adamw";
  if (weightDecay != 0.0 && !decoupled)
    g = e.add(g, e.scale(p, weightDecay));
  auto decayed = [&](Value delta) {
    // p - lr * (delta + wd * p) for AdamW, p - lr * delta otherwise.
    if (decoupled && weightDecay != 0.0)
      delta = e.add(delta, e.scale(p, weightDecay));
    return e.sub(p, e.scale(delta, lrP));
  };
  if (optimizer == "momentum" || optimizer == "nesterov") {
    Value v = e.add(e.scale(slots[0], momentum), g);
    Value delta = optimizer == "nesterov" ? e.add(g, e.scale(v, momentum)) : v;
    return {decayed(delta), v};
  }
  if (optimizer == "adam" || optimizer == "adamw") {
    Value m = e.add(e.scale(slots[0], beta1), e.scale(g, 1.0 - beta1));
    Value v = e.add(e.scale(slots[1], beta2), e.scale(e.mul(g, g), 1.0 - beta2));
    // Bias correction with t = step + 1.
    Value t = e.convert(
        e.add(step, e.scalar(Emitter::typeOf(step).getElementType(), 1.0)), f);
    Value one = e.scalar(f, 1.0);
    Value c1 = e.sub(one, e.binary(BinaryKind::pow, e.scalar(f, beta1), t));
    Value c2 = e.sub(one, e.binary(BinaryKind::pow, e.scalar(f, beta2), t));
    Value mHat = e.div(m, e.broadcast(c1, shape));
    Value vHat = e.div(v, e.broadcast(c2, shape));
    Value denom = e.add(e.unary(UnaryKind::sqrt, vHat), e.splat(f, shape, epsilon));
    return {decayed(e.div(mHat, denom)), m, v};
  }
  return {decayed(g)};
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

void BuildTrainStepPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto oldMain = module.lookupSymbol<func::FuncOp>("main");
  if (!oldMain || oldMain.getBody().getBlocks().size() != 1) {
    module.emitError() << "expected a single-block func.func @main";
    return signalPassFailure();
  }
  if (optimizer != "sgd" && optimizer != "momentum" && optimizer != "nesterov" &&
      optimizer != "adam" && optimizer != "adamw") {
    module.emitError() << "unknown optimizer '" << optimizer
                       << "' (expected sgd, momentum, nesterov, adam, adamw)";
    return signalPassFailure();
  }
  llvm::Regex trainRe("^(" + trainable + ")$"), frozenRe("^(" + frozen + ")$");
  std::string reError;
  if (!trainRe.isValid(reError) || !frozenRe.isValid(reError)) {
    module.emitError() << "invalid --trainable/--frozen regex: " << reError;
    return signalPassFailure();
  }

  // Trainable parameters: float initializers selected by name.
  SmallVector<ConstantOp> params;
  for (auto cst : oldMain.getBody().front().getOps<ConstantOp>()) {
    auto name = cst->getAttrOfType<StringAttr>("cleave.initializer");
    if (!name || !isa<FloatType>(cst.getType().getElementType()))
      continue;
    if (trainRe.match(name.getValue()) &&
        (frozen.empty() || !frozenRe.match(name.getValue())))
      params.push_back(cst);
  }
  if (params.empty()) {
    oldMain.emitError() << "no trainable parameters: no float initializer "
                           "matches --trainable='"
                        << trainable << "'";
    return signalPassFailure();
  }
  SmallVector<Slot> slots = slotsOf(optimizer);

  // The new function's entry block: params, slots, data, lr, step. Extra
  // data inputs (labels, targets) are appended as the loss is built, so lr
  // and step are added after.
  OpBuilder b(module.getContext());
  Location loc = oldMain.getLoc();
  auto newMain = func::FuncOp::create(b, loc, "train_step",
                                      b.getFunctionType({}, {}));
  Block *body = newMain.addEntryBlock();
  IRMapping mapping;
  SmallVector<Value> paramArgs, slotArgs;
  for (ConstantOp p : params)
    paramArgs.push_back(body->addArgument(p.getType(), p.getLoc()));
  for (ConstantOp p : params)
    for (size_t s = 0; s < slots.size(); ++s)
      slotArgs.push_back(body->addArgument(p.getType(), p.getLoc()));
  for (BlockArgument arg : oldMain.getArguments())
    mapping.map(arg, body->addArgument(arg.getType(), arg.getLoc()));
  for (auto [p, arg] : llvm::zip(params, paramArgs))
    mapping.map(p.getResult(), arg);

  b.setInsertionPointToEnd(body);
  llvm::SmallPtrSet<Operation *, 16> paramOps;
  for (ConstantOp p : params)
    paramOps.insert(p);
  SmallVector<Value> outputs;
  for (Operation &op : oldMain.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        outputs.push_back(mapping.lookup(v));
      continue;
    }
    if (!paramOps.contains(&op))
      b.clone(op, mapping);
  }

  Emitter e{b, loc};
  SmallVector<Type> extraInputs;
  SmallVector<std::string> extraNames;
  FailureOr<Value> lossValue =
      buildLoss(e, oldMain, outputs, extraInputs, extraNames, body);
  if (failed(lossValue)) {
    newMain.erase();
    return signalPassFailure();
  }
  Value lossF32 = e.convert(*lossValue, b.getF32Type());
  auto scalarF32 = RankedTensorType::get({}, b.getF32Type());
  Value lr = body->addArgument(scalarF32, loc);
  Value step = body->addArgument(scalarF32, loc);

  FailureOr<SmallVector<Value>> grads =
      ::cleave::buildGradients(b, *lossValue, paramArgs);
  if (failed(grads)) {
    newMain.erase();
    return signalPassFailure();
  }

  // Global gradient norm, and clipping to it.
  Value sumSq = e.scalar(b.getF32Type(), 0.0);
  for (Value g : *grads)
    sumSq = e.add(sumSq, e.convert(e.sumAll(e.mul(g, g)), b.getF32Type()));
  Value gradNorm = e.unary(UnaryKind::sqrt, sumSq);
  SmallVector<Value> clipped(*grads);
  if (clipGradNorm > 0.0) {
    Value factor = e.div(e.scalar(b.getF32Type(), clipGradNorm),
                         e.add(gradNorm, e.scalar(b.getF32Type(), 1e-6)));
    factor = e.binary(BinaryKind::min, factor, e.scalar(b.getF32Type(), 1.0));
    for (Value &g : clipped)
      g = e.scale(g, e.convert(factor, Emitter::typeOf(g).getElementType()));
  }

  SmallVector<Value> newParams, newSlots;
  for (auto [i, p] : llvm::enumerate(paramArgs)) {
    ArrayRef<Value> pSlots =
        ArrayRef<Value>(slotArgs).slice(i * slots.size(), slots.size());
    SmallVector<Value> updated = update(e, p, clipped[i], pSlots, lr, step);
    newParams.push_back(updated[0]);
    newSlots.append(updated.begin() + 1, updated.end());
  }
  SmallVector<Value> results(newParams);
  llvm::append_range(results, newSlots);
  results.push_back(lossF32);
  results.push_back(gradNorm);
  func::ReturnOp::create(b, loc, results);
  newMain.setFunctionType(
      b.getFunctionType(body->getArgumentTypes(), TypeRange(ValueRange(results))));

  // Attributes for the plan builder.
  auto str = [&](StringRef s) { return b.getStringAttr(s); };
  unsigned argIndex = 0;
  for (ConstantOp p : params) {
    StringRef name = p->getAttrOfType<StringAttr>("cleave.initializer").getValue();
    newMain.setArgAttr(argIndex, "cleave.name", str(name));
    newMain.setArgAttr(argIndex, "cleave.state", str("parameter"));
    newMain.setArgAttr(argIndex, "cleave.parameter", str(name));
    newMain.setArgAttr(argIndex, "cleave.initial_value", p.getValue());
    ++argIndex;
  }
  for (ConstantOp p : params) {
    StringRef name = p->getAttrOfType<StringAttr>("cleave.initializer").getValue();
    for (const Slot &s : slots) {
      newMain.setArgAttr(argIndex, "cleave.name", str((name + "." + s.name).str()));
      newMain.setArgAttr(argIndex, "cleave.state", str("optimizer_state"));
      newMain.setArgAttr(argIndex, "cleave.parameter", str(name));
      newMain.setArgAttr(argIndex, "cleave.slot", str(s.name));
      ++argIndex;
    }
  }
  for (unsigned i = 0; i < oldMain.getNumArguments(); ++i, ++argIndex) {
    if (auto name = oldMain.getArgAttrOfType<StringAttr>(i, "cleave.name"))
      newMain.setArgAttr(argIndex, "cleave.name", name);
    newMain.setArgAttr(argIndex, "cleave.role", str("data"));
  }
  for (const std::string &name : extraNames) {
    newMain.setArgAttr(argIndex, "cleave.name", str(name));
    newMain.setArgAttr(argIndex++, "cleave.role", str("data"));
  }
  newMain.setArgAttr(argIndex, "cleave.name", str("lr"));
  newMain.setArgAttr(argIndex++, "cleave.role", str("lr"));
  newMain.setArgAttr(argIndex, "cleave.name", str("step"));
  newMain.setArgAttr(argIndex++, "cleave.role", str("step"));
  unsigned numState = newParams.size() + newSlots.size();
  for (unsigned i = 0; i < numState; ++i) {
    newMain.setResultAttr(i, "cleave.updates", b.getI64IntegerAttr(i));
    newMain.setResultAttr(i, "cleave.name",
                          newMain.getArgAttrOfType<StringAttr>(i, "cleave.name"));
  }
  newMain.setResultAttr(numState, "cleave.name", str("loss"));
  newMain.setResultAttr(numState, "cleave.role", str("loss"));
  newMain.setResultAttr(numState + 1, "cleave.name", str("grad_norm"));
  newMain.setResultAttr(numState + 1, "cleave.role", str("grad_norm"));

  oldMain.erase();
  module.push_back(newMain);
  newMain.setSymName("main");
}
