//===- TrainLoss.cpp - The loss a training step minimizes -----------------===//
//
// --loss: the model's own scalar output, mean squared error against an
// added target, or cross-entropy of logits against added labels (with an
// ignore index), as cleave ops; with microbatches each one's sum is divided
// by the whole batch's count.
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

#include <algorithm>
#include <optional>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

/// The index of the forward output named `name` (the `cleave.name` result
/// attribute).
static std::optional<unsigned> findOutput(func::FuncOp main, StringRef name) {
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    if (auto attr = getResultName(main, i))
      if (attr.getValue() == name)
        return i;
  return std::nullopt;
}

FailureOr<LossSpec> train_step::resolveLoss(func::FuncOp oldMain,
                                            StringRef loss) {
  LossSpec spec;
  StringRef text = loss;
  if (text.empty()) {
    for (auto [i, t] : llvm::enumerate(oldMain.getResultTypes())) {
      auto type = cast<RankedTensorType>(t);
      if (type.getRank() == 0 && isa<FloatType>(type.getElementType())) {
        spec.output = i;
        return spec;
      }
    }
    return oldMain.emitError()
           << "the model has no scalar float output to train on; add a loss "
              "with --loss=cross_entropy:<logits>,<labels> or "
              "--loss=mse:<output>,<target>";
  }
  auto [kind, rest] = text.split(':');
  SmallVector<StringRef> parts;
  rest.split(parts, ',');
  if ((kind != "cross_entropy" && kind != "mse") || parts.size() < 2 ||
      parts.size() > (kind == "cross_entropy" ? 3u : 2u))
    return oldMain.emitError()
           << "invalid --loss '" << text
           << "': expected cross_entropy:<logits>,<labels>[,<ignore_index>] "
              "or mse:<output>,<target>";
  std::optional<unsigned> out = findOutput(oldMain, parts[0]);
  if (!out) {
    auto diag = oldMain.emitError()
                << "--loss names '" << parts[0]
                << "', which is not a model output; outputs are:";
    for (unsigned i = 0; i < oldMain.getNumResults(); ++i)
      if (auto a = getResultName(oldMain, i))
        diag << " '" << a.getValue() << "'";
    return failure();
  }
  spec.output = *out;
  auto outType = cast<RankedTensorType>(oldMain.getResultTypes()[*out]);
  if (!isa<FloatType>(outType.getElementType()))
    return oldMain.emitError() << "loss output '" << parts[0]
                               << "' must be a float tensor, got " << outType;
  spec.targetName = parts[1].str();
  if (kind == "mse") {
    spec.kind = LossSpec::Mse;
    spec.targetType = outType;
    return spec;
  }
  // Cross-entropy over the last dimension; labels index it.
  if (outType.getRank() < 1)
    return oldMain.emitError() << "cross-entropy logits '" << parts[0]
                               << "' need a class dimension";
  if (parts.size() == 3 && parts[2].getAsInteger(10, spec.ignoreIndex))
    return oldMain.emitError() << "invalid ignore index '" << parts[2] << "'";
  spec.kind = LossSpec::CrossEntropy;
  spec.targetType =
      RankedTensorType::get(outType.getShape().drop_back(),
                            IntegerType::get(oldMain.getContext(), 64));
  return spec;
}

/// The weights of the labels a cross-entropy counts: 1 where the label is
/// not the ignore index, as `f`.
static Value labelWeights(Emitter &e, const LossSpec &spec, Value labels,
                          Type f) {
  auto labelType = Emitter::typeOf(labels);
  Value valid = CompareOp::create(
      e.b, e.loc, labelType.clone(e.b.getI1Type()), CompareKind::ne, labels,
      e.splat(labelType.getElementType(), labelType.getShape(),
              spec.ignoreIndex));
  return e.convert(valid, f);
}

Value train_step::buildLoss(Emitter &e, const LossSpec &spec,
                            ArrayRef<Value> outputs, Value target,
                            Value denominator) {
  Value out = outputs[spec.output];
  auto outType = Emitter::typeOf(out);
  Type f = outType.getElementType();
  if (spec.kind == LossSpec::Scalar)
    return out;
  if (spec.kind == LossSpec::Mse) {
    Value d = e.sub(out, target);
    Value sum = e.sumAll(e.mul(d, d));
    return e.div(
        sum, denominator
                 ? e.convert(denominator, f)
                 : e.scalar(f, std::max<int64_t>(outType.getNumElements(), 1)));
  }
  int64_t rank = outType.getRank();
  ArrayRef<int64_t> labelShape = outType.getShape().drop_back();
  auto i64 = e.b.getI64Type();
  Value labels = target;
  Value logProbs = LogSoftmaxOp::create(e.b, e.loc, outType, out, rank - 1);
  Value classes = IotaOp::create(e.b, e.loc, outType.clone(i64), rank - 1);
  SmallVector<int64_t> keep;
  for (int64_t d = 0; d + 1 < rank; ++d)
    keep.push_back(d);
  Value labelsB =
      BroadcastInDimOp::create(e.b, e.loc, outType.clone(i64), labels, keep);
  auto boolType = outType.clone(e.b.getI1Type());
  Value onehot = CompareOp::create(e.b, e.loc, boolType, CompareKind::eq,
                                   classes, labelsB);
  Value picked = SelectOp::create(e.b, e.loc, outType, onehot, logProbs,
                                  e.splat(f, outType.getShape(), 0.0));
  auto rowType = RankedTensorType::get(labelShape, f);
  picked = ReduceOp::create(e.b, e.loc, rowType, ReduceKind::sum, picked,
                            ArrayRef<int64_t>{rank - 1});
  Value weight = labelWeights(e, spec, labels, f);
  Value total = e.sumAll(e.mul(picked, weight));
  Value count = denominator ? e.convert(denominator, f)
                            : e.binary(BinaryKind::max, e.sumAll(weight),
                                       e.scalar(f, 1.0));
  return e.unary(UnaryKind::neg, e.div(total, count));
}

Value train_step::lossDenominator(Emitter &e, const LossSpec &spec,
                                  Value target) {
  Type f32 = e.b.getF32Type();
  if (spec.kind == LossSpec::CrossEntropy)
    return e.binary(BinaryKind::max,
                    e.sumAll(labelWeights(e, spec, target, f32)),
                    e.scalar(f32, 1.0));
  // Mean squared error (a model's own scalar loss is refused).
  return e.scalar(
      f32, (double)std::max<int64_t>(spec.targetType.getNumElements(), 1));
}
