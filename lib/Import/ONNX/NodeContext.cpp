//===- NodeContext.cpp - Node view and op-building helpers for converters -===//

#include "NodeContext.h"

#include "ModelChecks.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

//===----------------------------------------------------------------------===//
// ConstTensor
//===----------------------------------------------------------------------===//

int64_t ConstTensor::numel() const { return product(shape); }

void ConstTensor::allocate() {
  int64_t n = numel();
  if (isFloat())
    floats.assign(n, 0.0);
  else
    ints.assign(n, 0);
}

int64_t wrapInt(Type elemType, int64_t v) {
  auto it = dyn_cast<IntegerType>(elemType);
  if (!it)
    return v;
  unsigned w = it.getWidth();
  if (w == 1)
    return v != 0;
  if (w >= 64)
    return v;
  APInt a(64, static_cast<uint64_t>(v), /*isSigned=*/true);
  a = a.trunc(w);
  return it.isUnsigned() ? static_cast<int64_t>(a.getZExtValue())
                         : a.getSExtValue();
}

DenseElementsAttr toAttr(const ConstTensor &c) {
  auto type = c.type();
  if (auto ft = dyn_cast<FloatType>(c.elemType)) {
    SmallVector<APFloat> vals;
    vals.reserve(c.floats.size());
    for (double d : c.floats) {
      APFloat f(d);
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(f);
    }
    return DenseElementsAttr::get(type, vals);
  }
  auto it = cast<IntegerType>(c.elemType);
  if (it.getWidth() == 1) {
    SmallVector<bool> vals;
    for (int64_t v : c.ints)
      vals.push_back(v != 0);
    return DenseElementsAttr::get(type, vals);
  }
  SmallVector<APInt> vals;
  vals.reserve(c.ints.size());
  for (int64_t v : c.ints)
    vals.push_back(
        APInt(64, static_cast<uint64_t>(v), true).trunc(it.getWidth()));
  return DenseElementsAttr::get(type, vals);
}

std::optional<ConstTensor> fromAttr(ElementsAttr attr) {
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto type = cast<ShapedType>(dense.getType());
  if (!type.hasStaticShape() || type.getNumElements() > kMaxFoldElements)
    return std::nullopt;
  ConstTensor c;
  c.elemType = type.getElementType();
  c.shape.assign(type.getShape().begin(), type.getShape().end());
  if (isa<FloatType>(c.elemType)) {
    for (APFloat f : dense.getValues<APFloat>())
      c.floats.push_back(f.convertToDouble() /*exact for f64*/);
    return c;
  }
  auto it = dyn_cast<IntegerType>(c.elemType);
  if (!it)
    return std::nullopt;
  for (APInt v : dense.getValues<APInt>())
    c.ints.push_back(it.getWidth() == 1 ? (v.isZero() ? 0 : 1)
                     : it.isUnsigned()  ? static_cast<int64_t>(v.getZExtValue())
                                        : v.getSExtValue());
  return c;
}

//===----------------------------------------------------------------------===//
// NodeContext: inputs, attributes, outputs
//===----------------------------------------------------------------------===//

InFlightDiagnostic NodeContext::error() const {
  auto diag = mlir::emitError(loc);
  std::string name = node.name();
  if (auto nameLoc = dyn_cast<NameLoc>(loc))
    name = nameLoc.getName().str();
  diag << node.op_type() << " node '" << name << "': ";
  return diag;
}

TensorEntry *NodeContext::lookup(StringRef name) {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

Value NodeContext::input(int i) {
  if (!hasInput(i)) {
    error() << "missing required input " << i;
    return {};
  }
  TensorEntry *e = lookup(node.input(i));
  if (!e) {
    error() << "input '" << node.input(i) << "' is not defined";
    return {};
  }
  if (e->sequence) {
    error() << "input " << i << " ('" << node.input(i)
            << "') is a sequence, which only the sequence ops take";
    return {};
  }
  if (!e->value && e->known) {
    OpBuilder::InsertionGuard g(b);
    e->value = ConstantOp::create(b, loc, toAttr(*e->known)).getResult();
  }
  return e->value;
}

const ConstTensor *NodeContext::constInput(int i) const {
  if (!hasInput(i))
    return nullptr;
  auto it = tensors.find(node.input(i));
  if (it == tensors.end() || !it->second.known)
    return nullptr;
  return &*it->second.known;
}

RankedTensorType NodeContext::inputType(int i) {
  if (const ConstTensor *c = constInput(i))
    return c->type();
  Value v = input(i);
  return v ? cast<RankedTensorType>(v.getType()) : RankedTensorType();
}

FailureOr<SmallVector<int64_t>> NodeContext::constInts(int i, StringRef what) {
  if (!hasInput(i)) {
    error() << "missing input '" << what << "'";
    return failure();
  }
  const ConstTensor *c = constInput(i);
  if (!c) {
    error() << "input '" << what << "' (tensor '" << node.input(i)
            << "') must be a constant computable at import time";
    return failure();
  }
  if (c->isFloat()) {
    error() << "input '" << what << "' must hold integers";
    return failure();
  }
  return SmallVector<int64_t>(c->ints.begin(), c->ints.end());
}

FailureOr<double> NodeContext::constScalar(int i, StringRef what) {
  const ConstTensor *c = constInput(i);
  if (!c || c->numel() != 1) {
    error() << "input '" << what
            << "' must be a one-element constant computable at import time";
    return failure();
  }
  return c->getF(0);
}

const onnx::AttributeProto *NodeContext::attr(StringRef name) const {
  for (const auto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

const onnx::AttributeProto *NodeContext::typedAttr(StringRef name,
                                                   int type) const {
  const auto *a = attr(name);
  if (!a || attributeHolds(*a, type))
    return a;
  if (!badAttribute)
    error() << "attribute '" << name << "' holds " << describeAttribute(*a)
            << "; it must hold " << attributeTypeNoun(type);
  badAttribute = true;
  return nullptr;
}

int64_t NodeContext::attrInt(StringRef name, int64_t def) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::INT);
  return a ? a->i() : def;
}

double NodeContext::attrFloat(StringRef name, double def) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::FLOAT);
  return a ? a->f() : def;
}

std::string NodeContext::attrString(StringRef name, StringRef def) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::STRING);
  return a ? a->s() : def.str();
}

SmallVector<int64_t> NodeContext::attrInts(StringRef name) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::INTS);
  if (!a)
    return {};
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

SmallVector<double> NodeContext::attrFloats(StringRef name) const {
  const auto *a = typedAttr(name, onnx::AttributeProto::FLOATS);
  if (!a)
    return {};
  return SmallVector<double>(a->floats().begin(), a->floats().end());
}

void NodeContext::setOutput(int i, Value v) {
  if (!hasOutput(i))
    return;
  TensorEntry &e = tensors[node.output(i)];
  e.value = v;
  e.known.reset();
  e.sequence.reset();
  if (auto cst = v.getDefiningOp<ConstantOp>())
    e.known = fromAttr(cst.getValue());
}

void NodeContext::setConstOutput(int i, ConstTensor c) {
  if (!hasOutput(i))
    return;
  TensorEntry &e = tensors[node.output(i)];
  e.value = {};
  e.known = std::move(c);
  e.sequence.reset();
}

void NodeContext::setSequenceOutput(int i, std::vector<TensorEntry> elements) {
  if (!hasOutput(i))
    return;
  TensorEntry &e = tensors[node.output(i)];
  e.value = {};
  e.known.reset();
  e.sequence = std::move(elements);
}

//===----------------------------------------------------------------------===//
// NodeContext: op-building helpers
//===----------------------------------------------------------------------===//

FailureOr<int64_t> NodeContext::normAxis(int64_t axis, int64_t rank,
                                         StringRef what) {
  if (axis < -rank || axis >= rank) {
    error() << what << " " << axis << " is out of range for rank " << rank;
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

FailureOr<int64_t> NodeContext::axisAttr(Value x, int64_t def) {
  if (!x)
    return failure();
  if (rankOf(x) == 0) {
    error() << "input must have rank >= 1";
    return failure();
  }
  return normAxis(attrInt("axis", def), rankOf(x));
}

LogicalResult NodeContext::checkConstIndices(int i, int64_t n) {
  if (const ConstTensor *c = constInput(i))
    for (int64_t v : c->ints)
      if (v < -n || v >= n) {
        error() << "index " << v << " is out of range for axis size " << n;
        return failure();
      }
  return success();
}

FailureOr<SmallVector<int64_t>>
NodeContext::normAxes(ArrayRef<int64_t> axes, int64_t rank, StringRef what) {
  SmallVector<int64_t> out;
  for (int64_t a : axes) {
    auto n = normAxis(a, rank, what);
    if (failed(n))
      return failure();
    if (llvm::is_contained(out, *n)) {
      error() << what << " repeats axis " << a;
      return failure();
    }
    out.push_back(*n);
  }
  return out;
}

std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b) {
  size_t r = std::max(a.size(), b.size());
  SmallVector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return std::nullopt;
  }
  return out;
}

Value NodeContext::broadcastTo(Value v, ArrayRef<int64_t> shape) {
  auto in = shapeOf(v);
  if (in == shape)
    return v;
  SmallVector<int64_t> dims;
  int64_t off = static_cast<int64_t>(shape.size()) - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    dims.push_back(off + i);
  return BroadcastInDimOp::create(
             b, loc, RankedTensorType::get(shape, elemOf(v)), v, dims)
      .getResult();
}

SmallVector<Value> NodeContext::broadcastAll(ArrayRef<Value> values) {
  // A null value is the result of a step that failed, having said why.
  if (llvm::any_of(values, [](Value v) { return !v; }))
    return {};
  SmallVector<int64_t> shape;
  for (Value v : values) {
    auto s = broadcastShapes(shape, shapeOf(v));
    if (!s) {
      auto diag = error() << "operand shapes are not broadcastable:";
      for (Value w : values)
        diag << " " << w.getType();
      return {};
    }
    shape = *s;
  }
  SmallVector<Value> out;
  for (Value v : values)
    out.push_back(broadcastTo(v, shape));
  return out;
}

Value NodeContext::unary(UnaryKind kind, Value v) {
  if (!v)
    return {};
  return UnaryOp::create(b, loc, v.getType(), kind, v).getResult();
}

/// x and y broadcast to one shape; empty (after an error) when they do not
/// broadcast or their element types differ.
SmallVector<Value> NodeContext::broadcastPair(Value x, Value y) {
  SmallVector<Value> vs = broadcastAll({x, y});
  if (!vs.empty() && vs[0].getType() != vs[1].getType()) {
    error() << "operand element types differ: " << x.getType() << " and "
            << y.getType();
    return {};
  }
  return vs;
}

Value NodeContext::binary(BinaryKind kind, Value x, Value y) {
  SmallVector<Value> vs = broadcastPair(x, y);
  if (vs.empty())
    return {};
  return BinaryOp::create(b, loc, vs[0].getType(), kind, vs[0], vs[1])
      .getResult();
}

Value NodeContext::compare(CompareKind kind, Value x, Value y) {
  SmallVector<Value> vs = broadcastPair(x, y);
  if (vs.empty())
    return {};
  auto type = RankedTensorType::get(shapeOf(vs[0]), b.getI1Type());
  return CompareOp::create(b, loc, type, kind, vs[0], vs[1]).getResult();
}

Value NodeContext::select(Value cond, Value x, Value y) {
  auto vs = broadcastAll({cond, x, y});
  if (vs.empty())
    return {};
  if (vs[1].getType() != vs[2].getType()) {
    error() << "value types differ: " << x.getType() << " and " << y.getType();
    return {};
  }
  return SelectOp::create(b, loc, vs[1].getType(), vs[0], vs[1], vs[2])
      .getResult();
}

Value NodeContext::convert(Value v, Type elemType) {
  if (elemOf(v) == elemType)
    return v;
  return ConvertOp::create(b, loc, RankedTensorType::get(shapeOf(v), elemType),
                           v)
      .getResult();
}

Value NodeContext::reshape(Value v, ArrayRef<int64_t> shape) {
  if (shapeOf(v) == shape)
    return v;
  return ReshapeOp::create(b, loc, RankedTensorType::get(shape, elemOf(v)), v)
      .getResult();
}

Value NodeContext::transpose(Value v, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == static_cast<int64_t>(i);
  if (identity)
    return v;
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(shapeOf(v)[p]);
  return TransposeOp::create(b, loc, RankedTensorType::get(shape, elemOf(v)), v,
                             perm)
      .getResult();
}

Value NodeContext::splat(Type elemType, ArrayRef<int64_t> shape, double value) {
  auto type = RankedTensorType::get(shape, elemType);
  Attribute elem;
  if (auto ft = dyn_cast<FloatType>(elemType))
    elem = FloatAttr::get(ft, value);
  else if (elemType.isInteger(1))
    elem = BoolAttr::get(b.getContext(), value != 0);
  else
    elem = IntegerAttr::get(elemType,
                            wrapInt(elemType, static_cast<int64_t>(value)));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, elem))
      .getResult();
}

Value NodeContext::splatLike(Value like, double value) {
  return splat(elemOf(like), shapeOf(like), value);
}

Value NodeContext::constant(const ConstTensor &c) {
  return ConstantOp::create(b, loc, toAttr(c)).getResult();
}

Value NodeContext::reduce(ReduceKind kind, Value v, ArrayRef<int64_t> dims,
                          bool keepDims) {
  auto in = shapeOf(v);
  SmallVector<int64_t> out, kept;
  for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
    if (llvm::is_contained(dims, i)) {
      kept.push_back(1);
    } else {
      out.push_back(in[i]);
      kept.push_back(in[i]);
    }
  }
  SmallVector<int64_t> sorted(dims.begin(), dims.end());
  llvm::sort(sorted);
  Value r = ReduceOp::create(b, loc, RankedTensorType::get(out, elemOf(v)),
                             kind, v, sorted)
                .getResult();
  return keepDims ? reshape(r, kept) : r;
}

Value NodeContext::slice(Value v, ArrayRef<int64_t> start,
                         ArrayRef<int64_t> limit, ArrayRef<int64_t> strides) {
  auto in = shapeOf(v);
  bool identity = true;
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t n = limit[d] > start[d]
                    ? (limit[d] - start[d] + strides[d] - 1) / strides[d]
                    : 0;
    shape.push_back(n);
    identity &= start[d] == 0 && n == in[d] && (strides[d] == 1 || n <= 1);
  }
  if (identity)
    return v;
  return SliceOp::create(b, loc, RankedTensorType::get(shape, elemOf(v)), v,
                         start, limit, strides)
      .getResult();
}

} // namespace cleave::onnximport

namespace cleave::onnximport {

std::optional<SmallVector<int64_t>> computeReshape(ArrayRef<int64_t> in,
                                                   ArrayRef<int64_t> spec,
                                                   bool allowZero,
                                                   std::string &why) {
  SmallVector<int64_t> out;
  int64_t inferAt = -1, known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == -1) {
      if (inferAt >= 0) {
        why = "shape has more than one -1";
        return std::nullopt;
      }
      inferAt = i;
      out.push_back(1);
      continue;
    }
    if (d == 0 && !allowZero) {
      if (i >= in.size()) {
        why = "shape copies dim " + std::to_string(i) +
              " (0) beyond the input's rank";
        return std::nullopt;
      }
      d = in[i];
    }
    if (d < 0) {
      why = "shape has negative dimension " + std::to_string(d);
      return std::nullopt;
    }
    out.push_back(d);
    known *= d;
  }
  int64_t total = product(in);
  if (inferAt >= 0) {
    if (known == 0 || total % known != 0) {
      why = "cannot infer the -1 dimension";
      return std::nullopt;
    }
    out[inferAt] = total / known;
  } else if (known != total) {
    why = "shape has " + std::to_string(known) + " elements but the input " +
          std::to_string(total);
    return std::nullopt;
  }
  return out;
}

std::optional<SmallVector<SliceDim>>
computeSlice(ArrayRef<int64_t> shape, ArrayRef<int64_t> starts,
             ArrayRef<int64_t> ends, ArrayRef<int64_t> axes,
             ArrayRef<int64_t> steps, std::string &why) {
  int64_t rank = shape.size();
  SmallVector<SliceDim> dims(rank);
  for (int64_t d = 0; d < rank; ++d)
    dims[d] = {0, 1, shape[d]};
  if (starts.size() != ends.size() ||
      (!axes.empty() && axes.size() != starts.size()) ||
      (!steps.empty() && steps.size() != starts.size())) {
    why = "starts, ends, axes and steps differ in length";
    return std::nullopt;
  }
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = axes.empty() ? i : axes[i];
    if (axis < -rank || axis >= rank) {
      why = "axis " + std::to_string(axis) + " out of range for rank " +
            std::to_string(rank);
      return std::nullopt;
    }
    if (axis < 0)
      axis += rank;
    if (seen[axis]) {
      why = "axis " + std::to_string(axis) + " repeats";
      return std::nullopt;
    }
    seen[axis] = true;
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0) {
      why = "step is 0";
      return std::nullopt;
    }
    int64_t n = shape[axis];
    // Clamp in 128 bits: ONNX uses INT64_MAX/MIN as "to the end".
    auto norm = [&](int64_t v) -> __int128 {
      return v < 0 ? static_cast<__int128>(v) + n : v;
    };
    __int128 s = norm(starts[i]), e = norm(ends[i]);
    int64_t count;
    int64_t first;
    if (step > 0) {
      s = std::clamp<__int128>(s, 0, n);
      e = std::clamp<__int128>(e, 0, n);
      first = static_cast<int64_t>(s);
      count = e > s ? static_cast<int64_t>((e - s + step - 1) / step) : 0;
    } else {
      s = std::clamp<__int128>(s, 0, n - 1);
      e = std::clamp<__int128>(e, -1, n - 1);
      first = static_cast<int64_t>(s);
      __int128 neg = -static_cast<__int128>(step);
      count = s > e ? static_cast<int64_t>((s - e + neg - 1) / neg) : 0;
    }
    dims[axis] = {count == 0 ? 0 : first, step, count};
  }
  return dims;
}

mlir::FailureOr<SmallVector<int64_t>>
getAxes(NodeContext &ctx, int64_t inputOpset, int inputIndex, bool &present) {
  if (ctx.opset < inputOpset || ctx.hasAttr("axes")) {
    present = ctx.hasAttr("axes");
    return ctx.attrInts("axes");
  }
  present = ctx.hasInput(inputIndex);
  if (!present)
    return SmallVector<int64_t>();
  return ctx.constInts(inputIndex, "axes");
}

Value channelBroadcast(NodeContext &ctx, Value v, ArrayRef<int64_t> shape) {
  return mlir::cleave::BroadcastInDimOp::create(
             ctx.b, ctx.loc, RankedTensorType::get(shape, elemOf(v)), v,
             ArrayRef<int64_t>{1})
      .getResult();
}

} // namespace cleave::onnximport
