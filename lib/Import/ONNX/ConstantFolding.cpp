//===- ConstantFolding.cpp - Evaluate shape computations at import time --===//
//
// PyTorch exports compute shapes at run time (Shape -> Gather -> Concat ->
// Reshape). Since every shape is static here, those chains are evaluated
// while importing, so ops that need static attributes (Reshape's shape,
// Slice's starts, ...) find them as known constants. A fold that does not
// apply returns false silently; the op's converter then reports problems.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace cleave::onnximport {
namespace {

using Inputs = SmallVector<const ConstTensor *>;

/// Linear index into `in` (broadcast to `out`) of the element at `outIdx`.
int64_t broadcastIndex(ArrayRef<int64_t> out, ArrayRef<int64_t> in,
                       int64_t outIdx) {
  int64_t idx = 0, stride = 1;
  int64_t off = out.size() - in.size();
  for (int64_t d = out.size() - 1; d >= 0; --d) {
    int64_t coord = outIdx % out[d];
    outIdx /= out[d];
    if (d >= off) {
      int64_t id = d - off;
      if (in[id] != 1)
        idx += coord * stride;
      stride *= in[id];
    }
  }
  return idx;
}

/// Applies `fn(i, idx)` over the broadcast of all inputs; `fn` receives the
/// output index and the input indices and returns (float, int) values.
template <typename Fn>
std::optional<ConstTensor> elementwise(const Inputs &ins, Type resultType,
                                       Fn fn) {
  SmallVector<int64_t> shape;
  for (const ConstTensor *c : ins) {
    auto s = broadcastShapes(shape, c->shape);
    if (!s)
      return std::nullopt;
    shape = *s;
  }
  ConstTensor r;
  r.elemType = resultType;
  r.shape = shape;
  if (r.numel() > kMaxFoldElements)
    return std::nullopt;
  r.allocate();
  SmallVector<int64_t> idx(ins.size());
  for (int64_t i = 0, n = r.numel(); i < n; ++i) {
    for (size_t k = 0; k < ins.size(); ++k)
      idx[k] = broadcastIndex(shape, ins[k]->shape, i);
    auto [f, v] = fn(idx);
    r.set(i, f, wrapInt(resultType, v));
  }
  return r;
}

std::optional<ConstTensor> foldArith(StringRef op, const Inputs &in) {
  const ConstTensor &a = *in[0], &b = *in[1];
  if (a.elemType != b.elemType)
    return std::nullopt;
  bool fp = a.isFloat();
  return elementwise(in, a.elemType,
                     [&](ArrayRef<int64_t> i) -> std::pair<double, int64_t> {
                       double x = a.getF(i[0]), y = b.getF(i[1]);
                       int64_t m = a.getI(i[0]), n = b.getI(i[1]);
                       if (op == "Add")
                         return {x + y, (int64_t)((uint64_t)m + (uint64_t)n)};
                       if (op == "Sub")
                         return {x - y, (int64_t)((uint64_t)m - (uint64_t)n)};
                       if (op == "Mul")
                         return {x * y, (int64_t)((uint64_t)m * (uint64_t)n)};
                       if (op == "Div") {
                         if (!fp && (n == 0 || (n == -1 && m == INT64_MIN)))
                           return {0, 0};
                         return {x / y, fp ? 0 : m / n};
                       }
                       if (op == "Max")
                         return {std::max(x, y), std::max(m, n)};
                       return {std::min(x, y), std::min(m, n)}; // Min
                     });
}

std::optional<ConstTensor> foldCompare(StringRef op, const Inputs &in,
                                       Type i1) {
  const ConstTensor &a = *in[0], &b = *in[1];
  if (a.elemType != b.elemType)
    return std::nullopt;
  bool fp = a.isFloat();
  return elementwise(in, i1,
                     [&](ArrayRef<int64_t> i) -> std::pair<double, int64_t> {
                       auto cmp = [&](auto x, auto y) {
                         if (op == "Equal")
                           return x == y;
                         if (op == "Less")
                           return x < y;
                         if (op == "LessOrEqual")
                           return x <= y;
                         if (op == "GreaterOrEqual")
                           return x >= y;
                         return x > y;
                       };
                       bool r = fp ? cmp(a.floats[i[0]], b.floats[i[1]])
                                   : cmp(a.ints[i[0]], b.ints[i[1]]);
                       return {0.0, r};
                     });
}

std::optional<ConstTensor> reshaped(const ConstTensor &c,
                                    ArrayRef<int64_t> shape) {
  ConstTensor r = c;
  r.shape.assign(shape.begin(), shape.end());
  if (r.numel() != c.numel())
    return std::nullopt;
  return r;
}

std::optional<ConstTensor> foldGather(NodeContext &ctx, const Inputs &in) {
  const ConstTensor &data = *in[0], &indices = *in[1];
  int64_t rank = data.shape.size();
  int64_t axis = ctx.attrInt("axis", 0);
  if (indices.isFloat() || axis < -rank || axis >= rank)
    return std::nullopt;
  if (axis < 0)
    axis += rank;
  int64_t n = data.shape[axis];
  int64_t outer = product(ArrayRef<int64_t>(data.shape).take_front(axis));
  int64_t inner = product(ArrayRef<int64_t>(data.shape).drop_front(axis + 1));
  ConstTensor r;
  r.elemType = data.elemType;
  r.shape.assign(data.shape.begin(), data.shape.begin() + axis);
  r.shape.append(indices.shape.begin(), indices.shape.end());
  r.shape.append(data.shape.begin() + axis + 1, data.shape.end());
  if (r.numel() > kMaxFoldElements)
    return std::nullopt;
  r.allocate();
  int64_t k = indices.numel(), pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j) {
      int64_t idx = indices.ints[j];
      if (idx < -n || idx >= n)
        return std::nullopt;
      if (idx < 0)
        idx += n;
      for (int64_t q = 0; q < inner; ++q, ++pos) {
        int64_t src = (o * n + idx) * inner + q;
        r.set(pos, data.isFloat() ? data.floats[src] : 0,
              data.isFloat() ? 0 : data.ints[src]);
      }
    }
  return r;
}

std::optional<ConstTensor> foldConcat(NodeContext &ctx, const Inputs &in) {
  if (in.empty())
    return std::nullopt;
  int64_t rank = in[0]->shape.size();
  int64_t axis = ctx.attrInt("axis", 0);
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  if (axis < 0)
    axis += rank;
  ConstTensor r;
  r.elemType = in[0]->elemType;
  r.shape = in[0]->shape;
  r.shape[axis] = 0;
  for (const ConstTensor *c : in) {
    if (c->elemType != r.elemType || (int64_t)c->shape.size() != rank)
      return std::nullopt;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && c->shape[d] != r.shape[d])
        return std::nullopt;
    r.shape[axis] += c->shape[axis];
  }
  if (r.numel() > kMaxFoldElements)
    return std::nullopt;
  int64_t outer = product(ArrayRef<int64_t>(r.shape).take_front(axis));
  for (int64_t o = 0; o < outer; ++o)
    for (const ConstTensor *c : in) {
      int64_t chunk = product(ArrayRef<int64_t>(c->shape).drop_front(axis));
      for (int64_t q = 0; q < chunk; ++q) {
        if (r.isFloat())
          r.floats.push_back(c->floats[o * chunk + q]);
        else
          r.ints.push_back(c->ints[o * chunk + q]);
      }
    }
  return r;
}

std::optional<ConstTensor> foldSlice(NodeContext &ctx, const Inputs &in) {
  const ConstTensor &data = *in[0];
  SmallVector<int64_t> starts, ends, axes, steps;
  auto ints = [&](int i, SmallVector<int64_t> &out) {
    if (i < (int)in.size() && in[i] && !in[i]->isFloat())
      out.assign(in[i]->ints.begin(), in[i]->ints.end());
  };
  if (ctx.opset < 10) {
    starts = ctx.attrInts("starts");
    ends = ctx.attrInts("ends");
    axes = ctx.attrInts("axes");
  } else {
    ints(1, starts);
    ints(2, ends);
    ints(3, axes);
    ints(4, steps);
  }
  std::string why;
  auto dims = computeSlice(data.shape, starts, ends, axes, steps, why);
  if (!dims)
    return std::nullopt;
  ConstTensor r;
  r.elemType = data.elemType;
  for (auto &d : *dims)
    r.shape.push_back(d.count);
  r.allocate();
  int64_t rank = data.shape.size();
  for (int64_t i = 0, n = r.numel(); i < n; ++i) {
    int64_t rem = i, src = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t c = rem % r.shape[d];
      rem /= r.shape[d];
      src += ((*dims)[d].start + c * (*dims)[d].step) * stride;
      stride *= data.shape[d];
    }
    r.set(i, data.isFloat() ? data.floats[src] : 0,
          data.isFloat() ? 0 : data.ints[src]);
  }
  return r;
}

std::optional<ConstTensor> foldCastTo(const ConstTensor &c, Type to) {
  ConstTensor r;
  r.elemType = to;
  r.shape = c.shape;
  r.allocate();
  for (int64_t i = 0, n = c.numel(); i < n; ++i) {
    double f = c.getF(i);
    int64_t v;
    if (c.isFloat()) {
      if (std::isnan(f) || std::fabs(f) > 9.2e18)
        return std::nullopt;
      v = static_cast<int64_t>(f);
    } else {
      v = c.ints[i];
    }
    r.set(i, f,
          wrapInt(to, to.isInteger(1) ? (c.isFloat() ? f != 0 : v != 0) : v));
  }
  return r;
}

/// Mod: the sign of the divisor for integers (fmod=0), C's fmod otherwise.
std::optional<ConstTensor> foldMod(NodeContext &ctx, const Inputs &in) {
  const ConstTensor &a = *in[0], &b = *in[1];
  if (a.elemType != b.elemType)
    return std::nullopt;
  bool fmod = ctx.attrInt("fmod", 0) != 0;
  if (a.isFloat() && !fmod)
    return std::nullopt;
  bool zero = false;
  auto r = elementwise(
      in, a.elemType, [&](ArrayRef<int64_t> i) -> std::pair<double, int64_t> {
        if (a.isFloat())
          return {std::fmod(a.floats[i[0]], b.floats[i[1]]), 0};
        int64_t x = a.ints[i[0]], y = b.ints[i[1]];
        if (y == 0 || (y == -1 && x == INT64_MIN)) {
          zero = true;
          return {0, 0};
        }
        int64_t m = x % y;
        if (!fmod && m != 0 && ((m < 0) != (y < 0)))
          m += y;
        return {0, m};
      });
  if (zero)
    return std::nullopt; // the run-time op reports it, not the fold
  return r;
}

/// And, Or, Xor of bools.
std::optional<ConstTensor> foldLogical(StringRef op, const Inputs &in,
                                       Type i1) {
  if (in[0]->elemType != i1 || in[1]->elemType != i1)
    return std::nullopt;
  return elementwise(in, i1, [&](ArrayRef<int64_t> i) {
    bool x = in[0]->ints[i[0]], y = in[1]->ints[i[1]];
    bool r = op == "And" ? x && y : op == "Or" ? x || y : x != y;
    return std::pair<double, int64_t>(0, r);
  });
}

/// Unary float math of shape computations (a head size's square root) and
/// the integer-exact unary ops.
std::optional<ConstTensor> foldUnary(StringRef op, const ConstTensor &c) {
  Inputs in{&c};
  if (!c.isFloat()) {
    if (op != "Abs" && op != "Sign" && op != "Relu")
      return std::nullopt;
    return elementwise(in, c.elemType, [&](ArrayRef<int64_t> i) {
      int64_t v = c.ints[i[0]];
      return std::pair<double, int64_t>(0, op == "Abs"    ? (v < 0 ? -v : v)
                                           : op == "Relu" ? (v < 0 ? 0 : v)
                                                          : (v > 0) - (v < 0));
    });
  }
  return elementwise(in, c.elemType, [&](ArrayRef<int64_t> i) {
    double v = c.floats[i[0]];
    double r = op == "Sqrt"         ? std::sqrt(v)
               : op == "Abs"        ? std::fabs(v)
               : op == "Neg"        ? -v
               : op == "Floor"      ? std::floor(v)
               : op == "Ceil"       ? std::ceil(v)
               : op == "Reciprocal" ? 1.0 / v
               : op == "Relu"       ? (v <= 0 ? 0.0 : v) // NaN passes
                                    : (v > 0) - (v < 0); // Sign
    return std::pair<double, int64_t>(r, 0);
  });
}

/// ConstantOfShape: the `value` attribute (a one-element tensor; float 0
/// when absent) repeated over the shape its input gives.
std::optional<ConstTensor> foldConstantOfShape(NodeContext &ctx,
                                               const ConstTensor &shape) {
  if (shape.isFloat() || shape.shape.size() > 1)
    return std::nullopt;
  ConstTensor r;
  r.elemType = ctx.b.getF32Type();
  double f = 0;
  int64_t v = 0;
  for (const auto &attr : ctx.node.attribute()) {
    if (attr.name() != "value")
      continue;
    auto value = convertTensorProto(attr.t(), "", ctx.loc, ctx.b.getContext());
    if (failed(value))
      return std::nullopt;
    auto c = fromAttr(*value);
    if (!c || c->numel() != 1)
      return std::nullopt;
    r.elemType = c->elemType;
    f = c->getF(0);
    v = c->getI(0);
  }
  for (int64_t d : shape.ints) {
    if (d < 0)
      return std::nullopt;
    r.shape.push_back(d);
  }
  if (r.numel() > kMaxFoldElements)
    return std::nullopt;
  r.allocate();
  for (int64_t i = 0, n = r.numel(); i < n; ++i)
    r.set(i, f, v);
  return r;
}

std::optional<ConstTensor> foldCast(NodeContext &ctx, const ConstTensor &c) {
  std::string why;
  Type to = convertElementType(ctx.b.getContext(), ctx.attrInt("to", 0), why);
  if (!to)
    return std::nullopt;
  return foldCastTo(c, to);
}

std::optional<ConstTensor> foldNode(NodeContext &ctx, const Inputs &in) {
  StringRef op = ctx.opType();
  Type i1 = ctx.b.getI1Type();
  if (op == "Identity")
    return *in[0];
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" ||
      (in.size() == 2 && (op == "Max" || op == "Min")))
    return foldArith(op, in);
  if (op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
      op == "GreaterOrEqual")
    return foldCompare(op, in, i1);
  if (op == "Mod")
    return foldMod(ctx, in);
  if (op == "And" || op == "Or" || op == "Xor")
    return foldLogical(op, in, i1);
  if (op == "Sqrt" || op == "Abs" || op == "Floor" || op == "Ceil" ||
      op == "Reciprocal" || op == "Sign" || op == "Relu" ||
      (op == "Neg" && in[0]->isFloat()))
    return foldUnary(op, *in[0]);
  if (op == "ConstantOfShape")
    return foldConstantOfShape(ctx, *in[0]);
  if (op == "Not") {
    if (in[0]->elemType != i1)
      return std::nullopt;
    return elementwise(in, i1, [&](ArrayRef<int64_t> i) {
      return std::pair<double, int64_t>(0, !in[0]->ints[i[0]]);
    });
  }
  if (op == "Neg" && !in[0]->isFloat())
    return elementwise(in, in[0]->elemType, [&](ArrayRef<int64_t> i) {
      return std::pair<double, int64_t>(0, -in[0]->ints[i[0]]);
    });
  if (op == "Where") {
    if (in[0]->elemType != i1 || in[1]->elemType != in[2]->elemType)
      return std::nullopt;
    return elementwise(in, in[1]->elemType, [&](ArrayRef<int64_t> i) {
      const ConstTensor *src = in[0]->ints[i[0]] ? in[1] : in[2];
      int64_t j = in[0]->ints[i[0]] ? i[1] : i[2];
      return std::pair<double, int64_t>(src->getF(j), src->getI(j));
    });
  }
  if (op == "Cast")
    return foldCast(ctx, *in[0]);
  if (op == "Gather")
    return foldGather(ctx, in);
  if (op == "Concat")
    return foldConcat(ctx, in);
  if (op == "Slice")
    return foldSlice(ctx, in);
  if (op == "Reshape") {
    if (in.size() < 2 || in[1]->isFloat())
      return std::nullopt;
    std::string why;
    auto shape = computeReshape(in[0]->shape, in[1]->ints,
                                ctx.attrInt("allowzero", 0) != 0, why);
    return shape ? reshaped(*in[0], *shape) : std::nullopt;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    bool present;
    auto axes = getAxes(ctx, 13, 1, present);
    if (failed(axes))
      return std::nullopt;
    SmallVector<int64_t> shape;
    if (op == "Unsqueeze") {
      int64_t outRank = in[0]->shape.size() + axes->size();
      SmallVector<bool> isNew(outRank, false);
      for (int64_t a : *axes) {
        if (a < -outRank || a >= outRank)
          return std::nullopt;
        isNew[a < 0 ? a + outRank : a] = true;
      }
      size_t k = 0;
      for (int64_t d = 0; d < outRank; ++d)
        shape.push_back(isNew[d]                  ? 1
                        : k < in[0]->shape.size() ? in[0]->shape[k++]
                                                  : -1);
      if (llvm::is_contained(shape, -1))
        return std::nullopt;
    } else {
      int64_t rank = in[0]->shape.size();
      for (int64_t d = 0; d < rank; ++d) {
        bool drop = present ? llvm::is_contained(*axes, d) ||
                                  llvm::is_contained(*axes, d - rank)
                            : in[0]->shape[d] == 1;
        if (!drop)
          shape.push_back(in[0]->shape[d]);
      }
    }
    return reshaped(*in[0], shape);
  }
  if (op == "Range") {
    if (in[0]->numel() != 1 || in[1]->numel() != 1 || in[2]->numel() != 1)
      return std::nullopt;
    ConstTensor r;
    r.elemType = in[0]->elemType;
    double start = in[0]->getF(0), limit = in[1]->getF(0),
           delta = in[2]->getF(0);
    if (delta == 0 || std::isnan(start + limit + delta))
      return std::nullopt;
    double count = std::max(std::ceil((limit - start) / delta), 0.0);
    if (count > kMaxFoldElements)
      return std::nullopt;
    r.shape = {static_cast<int64_t>(count)};
    r.allocate();
    for (int64_t i = 0; i < r.shape[0]; ++i)
      r.set(i, start + i * delta,
            static_cast<int64_t>(static_cast<uint64_t>(in[0]->getI(0)) +
                                 static_cast<uint64_t>(i) *
                                     static_cast<uint64_t>(in[2]->getI(0))));
    return r;
  }
  if (op == "Expand") {
    if (in[1]->isFloat())
      return std::nullopt;
    auto shape = broadcastShapes(in[0]->shape, in[1]->ints);
    if (!shape)
      return std::nullopt;
    ConstTensor target;
    target.elemType = i1;
    target.shape = *shape;
    target.ints.assign(target.numel() <= kMaxFoldElements ? target.numel() : 0,
                       0);
    if (target.numel() > kMaxFoldElements)
      return std::nullopt;
    Inputs both{in[0], &target};
    return elementwise(both, in[0]->elemType, [&](ArrayRef<int64_t> i) {
      return std::pair<double, int64_t>(in[0]->getF(i[0]), in[0]->getI(i[0]));
    });
  }
  return std::nullopt;
}

} // namespace

/// True if input `i` is a float initializer of more than one element: a
/// tensor that training may update, so folding it in would freeze it.
static bool isParameterLike(NodeContext &ctx, int i) {
  TensorEntry *e = ctx.lookup(ctx.node.input(i));
  if (!e || !e->value)
    return false;
  auto cst = e->value.getDefiningOp<mlir::cleave::ConstantOp>();
  return cst && mlir::cleave::getInitializerName(cst) &&
         isa<FloatType>(cst.getType().getElementType()) &&
         cst.getType().getNumElements() > 1;
}

bool tryFoldNode(NodeContext &ctx) {
  StringRef op = ctx.opType();
  // Shape and Size only need the input's static type.
  if (op == "Shape" || op == "Size") {
    RankedTensorType t = ctx.inputType(0);
    if (!t)
      return false;
    ConstTensor r;
    r.elemType = ctx.b.getI64Type();
    if (op == "Size") {
      r.ints = {t.getNumElements()};
      ctx.setConstOutput(0, r);
      return true;
    }
    int64_t rank = t.getRank();
    int64_t start = ctx.attrInt("start", 0), end = ctx.attrInt("end", rank);
    start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
    end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
    for (int64_t d = start; d < end; ++d)
      r.ints.push_back(t.getDimSize(d));
    r.shape = {static_cast<int64_t>(r.ints.size())};
    ctx.setConstOutput(0, r);
    return true;
  }
  // Split of a known tensor (shape vectors in function bodies).
  if (op == "Split" && ctx.hasInput(0) && ctx.numOutputs() >= 1) {
    const ConstTensor *c = ctx.constInput(0);
    if (!c || c->shape.empty() ||
        (ctx.settings.keepParameters && isParameterLike(ctx, 0)))
      return false;
    int64_t rank = c->shape.size(), axis = ctx.attrInt("axis", 0);
    if (axis < -rank || axis >= rank)
      return false;
    if (axis < 0)
      axis += rank;
    int64_t n = c->shape[axis], outs = ctx.numOutputs();
    SmallVector<int64_t> sizes;
    if (ctx.opset >= 13 && ctx.hasInput(1)) {
      const ConstTensor *s = ctx.constInput(1);
      if (!s || s->isFloat())
        return false;
      sizes.assign(s->ints.begin(), s->ints.end());
    } else if (ctx.hasAttr("split")) {
      sizes = ctx.attrInts("split");
    } else {
      int64_t parts = ctx.attrInt("num_outputs", outs);
      if (parts != outs || parts <= 0)
        return false;
      int64_t chunk = (n + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i)
        sizes.push_back(std::max<int64_t>(0, std::min(chunk, n - i * chunk)));
    }
    int64_t total = 0;
    for (int64_t v : sizes)
      total += v < 0 ? n + 1 : v;
    if ((int64_t)sizes.size() != outs || total != n)
      return false;
    int64_t outer = product(ArrayRef<int64_t>(c->shape).take_front(axis));
    int64_t inner = product(ArrayRef<int64_t>(c->shape).drop_front(axis + 1));
    int64_t offset = 0;
    for (int64_t k = 0; k < outs; ++k) {
      ConstTensor r;
      r.elemType = c->elemType;
      r.shape = c->shape;
      r.shape[axis] = sizes[k];
      r.allocate();
      int64_t pos = 0;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < sizes[k] * inner; ++j, ++pos) {
          int64_t src = (o * n + offset) * inner + j;
          r.set(pos, c->isFloat() ? c->floats[src] : 0,
                c->isFloat() ? 0 : c->ints[src]);
        }
      offset += sizes[k];
      if (ctx.hasOutput(k))
        ctx.setConstOutput(k, std::move(r));
    }
    return true;
  }
  // CastLike needs only the type of its second input.
  if (op == "CastLike" && ctx.numInputs() == 2 && ctx.numOutputs() == 1 &&
      ctx.hasInput(0) && ctx.hasInput(1)) {
    const ConstTensor *c = ctx.constInput(0);
    RankedTensorType like = ctx.inputType(1);
    if (!c || !like || (ctx.settings.keepParameters && isParameterLike(ctx, 0)))
      return false;
    auto r = foldCastTo(*c, like.getElementType());
    if (!r)
      return false;
    ctx.setConstOutput(0, std::move(*r));
    return true;
  }
  static const llvm::StringSet<> foldable = {
      "Identity",   "Add",     "Sub",         "Mul",
      "Div",        "Max",     "Min",         "Equal",
      "Less",       "Greater", "Not",         "Neg",
      "Where",      "Cast",    "Gather",      "Concat",
      "Slice",      "Reshape", "Unsqueeze",   "Squeeze",
      "Range",      "Expand",  "Mod",         "And",
      "Or",         "Xor",     "LessOrEqual", "GreaterOrEqual",
      "Sqrt",       "Abs",     "Floor",       "Ceil",
      "Reciprocal", "Sign",    "Relu",        "ConstantOfShape"};
  if (!foldable.contains(op) || ctx.numOutputs() != 1)
    return false;
  Inputs ins;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i)) {
      ins.push_back(nullptr);
      continue;
    }
    if (ctx.settings.keepParameters && isParameterLike(ctx, i))
      return false;
    const ConstTensor *c = ctx.constInput(i);
    if (!c)
      return false;
    ins.push_back(c);
  }
  if (ins.empty() || !ins[0])
    return false;
  if ((op == "Where" || op == "Range") &&
      (ins.size() != 3 || !ins[1] || !ins[2]))
    return false;
  static const llvm::StringSet<> binary = {"Expand",
                                           "Gather",
                                           "Equal",
                                           "Less",
                                           "Greater",
                                           "LessOrEqual",
                                           "GreaterOrEqual",
                                           "Add",
                                           "Sub",
                                           "Mul",
                                           "Div",
                                           "Mod",
                                           "And",
                                           "Or",
                                           "Xor"};
  if (binary.contains(op) && (ins.size() != 2 || !ins[1]))
    return false;
  if (op == "Concat" && llvm::is_contained(ins, nullptr))
    return false;
  auto r = foldNode(ctx, ins);
  if (!r)
    return false;
  ctx.setConstOutput(0, std::move(*r));
  return true;
}

} // namespace cleave::onnximport
