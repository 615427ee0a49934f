//===- ShapeOps.cpp - Constants and shape-producing ONNX ops -------------===//
//
// Shape, Size, Constant, ConstantOfShape, Range and EyeLike produce values
// known at import time (shapes are static).
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

LogicalResult convertShapeOrSize(NodeContext &ctx) {
  if (tryFoldNode(ctx))
    return success();
  if (ctx.input(0))
    ctx.error() << "cannot compute the input's shape";
  return failure();
}

LogicalResult convertConstant(NodeContext &ctx) {
  MLIRContext *mctx = ctx.b.getContext();
  if (ctx.node.attribute_size() != 1) {
    ctx.error() << "needs exactly one value attribute";
    return failure();
  }
  const onnx::AttributeProto &a = ctx.node.attribute(0);
  StringRef name = a.name();
  if (name == "value") {
    auto attr = convertTensorProto(a.t(), /*modelDir=*/"", ctx.loc, mctx);
    if (failed(attr))
      return failure();
    // Small constants stay lazy: shape-only uses never materialize them.
    if (auto known = fromAttr(*attr))
      ctx.setConstOutput(0, std::move(*known));
    else
      ctx.setOutput(0, ConstantOp::create(ctx.b, ctx.loc, *attr).getResult());
    return success();
  }
  ConstTensor c;
  if (name == "value_float" || name == "value_floats") {
    c.elemType = ctx.b.getF32Type();
    if (name == "value_float")
      c.floats = {a.f()};
    else
      c.floats.assign(a.floats().begin(), a.floats().end());
  } else if (name == "value_int" || name == "value_ints") {
    c.elemType = ctx.b.getI64Type();
    if (name == "value_int")
      c.ints = {a.i()};
    else
      c.ints.assign(a.ints().begin(), a.ints().end());
  } else {
    ctx.error() << "attribute '" << name.str()
                << "' is not supported (string and sparse constants are not)";
    return failure();
  }
  if (name == "value_floats" || name == "value_ints")
    c.shape = {
        static_cast<int64_t>(c.isFloat() ? c.floats.size() : c.ints.size())};
  ctx.setConstOutput(0, c);
  return success();
}

LogicalResult convertConstantOfShape(NodeContext &ctx) {
  auto shape = ctx.constInts(0, "shape");
  if (failed(shape))
    return failure();
  for (int64_t d : *shape)
    if (d < 0) {
      ctx.error() << "shape has negative dimension " << d;
      return failure();
    }
  Type et = ctx.b.getF32Type();
  double fv = 0;
  int64_t iv = 0;
  if (const auto *a = ctx.attr("value")) {
    auto attr = convertTensorProto(a->t(), "", ctx.loc, ctx.b.getContext());
    if (failed(attr))
      return failure();
    auto c = fromAttr(*attr);
    if (!c || c->numel() != 1) {
      ctx.error() << "value must be a one-element tensor";
      return failure();
    }
    et = c->elemType;
    fv = c->getF(0);
    iv = c->getI(0);
  }
  ConstTensor r;
  r.elemType = et;
  r.shape = *shape;
  if (r.numel() <= kMaxFoldElements) {
    r.allocate();
    for (int64_t i = 0; i < r.numel(); ++i)
      r.set(i, fv, iv);
    ctx.setConstOutput(0, r);
    return success();
  }
  return ctx.finish(ctx.splat(et, *shape, isa<FloatType>(et) ? fv : iv));
}

LogicalResult convertRange(NodeContext &ctx) {
  // Folding handles constant inputs; otherwise the bounds are unknown.
  for (int i = 0; i < 3; ++i)
    if (!ctx.constInput(i)) {
      ctx.error() << "start, limit and delta must be constants computable at "
                     "import time (static shapes only)";
      return failure();
    }
  ctx.error() << "invalid range (delta 0, non-scalar bounds or more than "
              << kMaxFoldElements << " elements)";
  return failure();
}

LogicalResult convertEyeLike(NodeContext &ctx) {
  RankedTensorType t = ctx.inputType(0);
  if (!t)
    return failure();
  if (t.getRank() != 2) {
    ctx.error() << "input must be 2-D";
    return failure();
  }
  Type et = t.getElementType();
  if (ctx.hasAttr("dtype")) {
    std::string why;
    et = convertElementType(ctx.b.getContext(), ctx.attrInt("dtype", 1), why);
    if (!et) {
      ctx.error() << why;
      return failure();
    }
  }
  int64_t k = ctx.attrInt("k", 0);
  auto shape = t.getShape();
  auto idxType = RankedTensorType::get(shape, ctx.b.getI64Type());
  Value rows = IotaOp::create(ctx.b, ctx.loc, idxType, 0).getResult();
  Value cols = IotaOp::create(ctx.b, ctx.loc, idxType, 1).getResult();
  Value diag = ctx.compare(
      CompareKind::eq,
      ctx.binary(BinaryKind::add, rows, ctx.splat(ctx.b.getI64Type(), {}, k)),
      cols);
  return ctx.finish(ctx.convert(diag, et));
}

} // namespace

void registerShapeConverters(llvm::StringMap<ConverterFn> &t) {
  t["Shape"] = convertShapeOrSize;
  t["Size"] = convertShapeOrSize;
  t["Constant"] = convertConstant;
  t["ConstantOfShape"] = convertConstantOfShape;
  t["Range"] = convertRange;
  t["EyeLike"] = convertEyeLike;
}

} // namespace cleave::onnximport
