//===- RecognizeConstantValues.cpp - Masks computed from constants --------===//
//
// Part of --cleave-recognize-composites: the elements of a tensor that the
// program computes from constants alone (an attention mask materialized by
// comparing position indices, combining boolean constants and selecting a
// fill), evaluated exactly as the program would, so that the attention
// matcher can read its pattern as it reads a constant's.
//
//===----------------------------------------------------------------------===//

#include "Recognize.h"

#include "llvm/ADT/DenseMap.h"

#include <cmath>

namespace cleave::recognize {

namespace {

/// The element types evaluated exactly: f32 and f64 (each operation's
/// result rounded to the type: a double sum, difference or product of two
/// floats rounds to the float the type's operation gives), i1, and signed
/// integers of up to 64 bits whose values stay within 2^53.
enum class Kind { F32, F64, Bool, Int, Unsupported };

Kind kindOf(Type t) {
  Type et = cast<RankedTensorType>(t).getElementType();
  if (et.isF32())
    return Kind::F32;
  if (et.isF64())
    return Kind::F64;
  if (et.isInteger(1))
    return Kind::Bool;
  if (auto it = dyn_cast<IntegerType>(et);
      it && !it.isUnsigned() && it.getWidth() <= 64)
    return Kind::Int;
  return Kind::Unsupported;
}

using Elements = std::vector<double>;

/// Evaluates one expression, each value once, freeing what no other op of
/// the expression reads any more.
class Evaluator {
public:
  std::optional<Elements> run(Value root) {
    if (!countUses(root))
      return std::nullopt;
    if (!eval(root))
      return std::nullopt;
    return std::move(*values[root.getAsOpaquePointer()]);
  }

private:
  /// Counts how often each value of the expression is read within it;
  /// false if it is too large or reads an op outside what eval handles.
  bool countUses(Value v) {
    if (++uses[v] > 1)
      return true;
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape() ||
        type.getNumElements() > kMaxElements ||
        kindOf(type) == Kind::Unsupported)
      return false;
    Operation *op = v.getDefiningOp();
    if (!op || op->getNumResults() != 1 ||
        !isa<ConstantOp, IotaOp, BroadcastInDimOp, ReshapeOp, TransposeOp,
             ConvertOp, UnaryOp, BinaryOp, CompareOp, SelectOp>(op))
      return false;
    for (Value operand : op->getOperands())
      if (!countUses(operand))
        return false;
    return true;
  }

  const Elements *operand(Value v) {
    if (!eval(v))
      return nullptr;
    return &*values[v.getAsOpaquePointer()];
  }

  /// Drops `v`'s elements once the last reader has read them.
  void release(Value v) {
    if (--uses[v] == 0)
      values.erase(v.getAsOpaquePointer());
  }

  static bool isExact(double x, Kind k) {
    if (k == Kind::Int)
      return std::isfinite(x) && std::fabs(x) <= 9007199254740992.0 &&
             x == std::trunc(x);
    return true;
  }

  /// x rounded to the element type (integers must already be exact).
  static double round(double x, Kind k) {
    if (k == Kind::F32)
      return static_cast<float>(x);
    if (k == Kind::Bool)
      return x != 0;
    return x;
  }

  bool readConstant(ConstantOp c, Elements &out) {
    if (mayBeTrained(c))
      return false;
    auto type = cast<RankedTensorType>(c.getType());
    out.resize(type.getNumElements());
    if (std::optional<ConstantElements> e = ConstantElements::get(c)) {
      e->all([&](int64_t i, double x) {
        out[i] = x;
        return true;
      });
      return true;
    }
    auto dense = dyn_cast<DenseIntElementsAttr>(c.getValue());
    if (!dense)
      return readIntegerBlob(c, out);
    int64_t i = 0;
    if (dense.isSplat()) {
      double x =
          static_cast<double>(dense.getSplatValue<APInt>().getSExtValue());
      std::fill(out.begin(), out.end(), x);
    } else {
      for (const APInt &x : dense.getValues<APInt>())
        out[i++] = static_cast<double>(x.getSExtValue());
    }
    return llvm::all_of(out, [](double x) { return isExact(x, Kind::Int); });
  }

  /// An integer constant held as a resource blob (little-endian).
  static bool readIntegerBlob(ConstantOp c, Elements &out) {
    auto resource = dyn_cast<DenseResourceElementsAttr>(c.getValue());
    auto type = cast<RankedTensorType>(c.getType());
    auto it = dyn_cast<IntegerType>(type.getElementType());
    if (!resource || !it || it.getWidth() % 8 != 0)
      return false;
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    int64_t bytes = it.getWidth() / 8;
    if (!blob || static_cast<int64_t>(blob->getData().size()) !=
                     bytes * type.getNumElements())
      return false;
    ArrayRef<char> raw = blob->getData();
    for (int64_t i = 0, n = type.getNumElements(); i < n; ++i) {
      uint64_t bits = 0;
      std::memcpy(&bits, raw.data() + bytes * i, bytes);
      out[i] = static_cast<double>(APInt(it.getWidth(), bits).getSExtValue());
      if (!isExact(out[i], Kind::Int))
        return false;
    }
    return true;
  }

  /// Whether integer elements fit their type (so that no operation
  /// wrapped around).
  static bool fitsType(const Elements &out, Type t) {
    auto it = dyn_cast<IntegerType>(cast<RankedTensorType>(t).getElementType());
    if (!it || it.getWidth() < 2 || it.getWidth() >= 54)
      return true;
    double bound = std::ldexp(1.0, it.getWidth() - 1);
    return llvm::all_of(out,
                        [&](double x) { return x >= -bound && x < bound; });
  }

  bool eval(Value v) {
    void *key = v.getAsOpaquePointer();
    if (auto it = values.find(key); it != values.end())
      return it->second.has_value();
    Elements out;
    bool ok = compute(v, out) && fitsType(out, v.getType());
    values[key] = ok ? std::optional<Elements>(std::move(out)) : std::nullopt;
    return ok;
  }

  bool compute(Value v, Elements &out) {
    auto type = cast<RankedTensorType>(v.getType());
    Kind k = kindOf(type);
    ArrayRef<int64_t> shape = type.getShape();
    int64_t n = type.getNumElements();
    Operation *op = v.getDefiningOp();
    auto strides = [](ArrayRef<int64_t> s) {
      SmallVector<int64_t> st(s.size(), 1);
      for (int64_t d = static_cast<int64_t>(s.size()) - 2; d >= 0; --d)
        st[d] = st[d + 1] * s[d + 1];
      return st;
    };
    // Calls fn(i, index) for every element of the result, in order.
    auto forEach =
        [&](llvm::function_ref<void(int64_t, ArrayRef<int64_t>)> fn) {
          SmallVector<int64_t> index(shape.size(), 0);
          for (int64_t i = 0; i < n; ++i) {
            fn(i, index);
            for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0;
                 --d) {
              if (++index[d] < shape[d])
                break;
              index[d] = 0;
            }
          }
        };
    out.assign(n, 0);

    if (auto c = dyn_cast<ConstantOp>(op))
      return readConstant(c, out);
    if (auto iota = dyn_cast<IotaOp>(op)) {
      int64_t dim = iota.getDimension();
      if (dim < 0 || dim >= static_cast<int64_t>(shape.size()))
        return false;
      forEach([&](int64_t i, ArrayRef<int64_t> index) {
        out[i] = round(static_cast<double>(index[dim]), k);
      });
      return true;
    }
    if (isa<ReshapeOp, ConvertOp>(op)) {
      Value in = op->getOperand(0);
      const Elements *x = operand(in);
      if (!x)
        return false;
      Kind from = kindOf(in.getType());
      // A float converted to an integer would truncate: not evaluated.
      if (isa<ConvertOp>(op) && k == Kind::Int &&
          (from == Kind::F32 || from == Kind::F64))
        return false;
      for (int64_t i = 0; i < n; ++i)
        out[i] = round((*x)[i], k);
      release(in);
      return true;
    }
    if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
      const Elements *x = operand(b.getOperand());
      if (!x)
        return false;
      ArrayRef<int64_t> inShape = typeOf(b.getOperand()).getShape();
      SmallVector<int64_t> inStrides = strides(inShape);
      ArrayRef<int64_t> dims = b.getBroadcastDimensions();
      forEach([&](int64_t i, ArrayRef<int64_t> index) {
        int64_t at = 0;
        for (auto [d, to] : llvm::enumerate(dims))
          at += (inShape[d] == 1 ? 0 : index[to]) * inStrides[d];
        out[i] = (*x)[at];
      });
      release(b.getOperand());
      return true;
    }
    if (auto t = dyn_cast<TransposeOp>(op)) {
      const Elements *x = operand(t.getOperand());
      if (!x)
        return false;
      SmallVector<int64_t> inStrides =
          strides(typeOf(t.getOperand()).getShape());
      ArrayRef<int64_t> perm = t.getPermutation();
      forEach([&](int64_t i, ArrayRef<int64_t> index) {
        int64_t at = 0;
        for (auto [d, from] : llvm::enumerate(perm))
          at += index[d] * inStrides[from];
        out[i] = (*x)[at];
      });
      release(t.getOperand());
      return true;
    }
    if (auto u = dyn_cast<UnaryOp>(op)) {
      const Elements *x = operand(u.getOperand());
      if (!x)
        return false;
      bool ok = true;
      for (int64_t i = 0; i < n && ok; ++i) {
        double a = (*x)[i];
        if (u.getKind() == UnaryKind::neg)
          out[i] = -a;
        else if (u.getKind() == UnaryKind::lnot && k == Kind::Bool)
          out[i] = a == 0;
        else
          ok = false;
        ok = ok && isExact(out[i], k);
      }
      release(u.getOperand());
      return ok;
    }
    if (auto c = dyn_cast<CompareOp>(op)) {
      const Elements *x = operand(c.getLhs());
      const Elements *y = operand(c.getRhs());
      if (!x || !y)
        return false;
      for (int64_t i = 0; i < n; ++i) {
        double a = (*x)[i], b = (*y)[i];
        switch (c.getKind()) {
        case CompareKind::eq:
          out[i] = a == b;
          break;
        case CompareKind::ne:
          out[i] = a != b;
          break;
        case CompareKind::lt:
          out[i] = a < b;
          break;
        case CompareKind::le:
          out[i] = a <= b;
          break;
        case CompareKind::gt:
          out[i] = a > b;
          break;
        case CompareKind::ge:
          out[i] = a >= b;
          break;
        }
      }
      release(c.getLhs());
      release(c.getRhs());
      return true;
    }
    if (auto s = dyn_cast<SelectOp>(op)) {
      const Elements *cond = operand(s.getCond());
      const Elements *x = operand(s.getOnTrue());
      const Elements *y = operand(s.getOnFalse());
      if (!cond || !x || !y)
        return false;
      for (int64_t i = 0; i < n; ++i)
        out[i] = (*cond)[i] != 0 ? (*x)[i] : (*y)[i];
      release(s.getCond());
      release(s.getOnTrue());
      release(s.getOnFalse());
      return true;
    }
    auto b = cast<BinaryOp>(op);
    const Elements *x = operand(b.getLhs());
    const Elements *y = operand(b.getRhs());
    if (!x || !y)
      return false;
    bool ok = true;
    for (int64_t i = 0; i < n && ok; ++i) {
      double p = (*x)[i], q = (*y)[i];
      switch (b.getKind()) {
      case BinaryKind::add:
        out[i] = p + q;
        break;
      case BinaryKind::sub:
        out[i] = p - q;
        break;
      case BinaryKind::mul:
        out[i] = p * q;
        break;
      case BinaryKind::max:
        out[i] = std::isnan(p) || std::isnan(q) ? NAN : std::max(p, q);
        break;
      case BinaryKind::min:
        out[i] = std::isnan(p) || std::isnan(q) ? NAN : std::min(p, q);
        break;
      case BinaryKind::land:
        out[i] = p != 0 && q != 0;
        break;
      case BinaryKind::lor:
        out[i] = p != 0 || q != 0;
        break;
      case BinaryKind::lxor:
        out[i] = (p != 0) != (q != 0);
        break;
      default:
        ok = false;
        break;
      }
      if ((b.getKind() == BinaryKind::land || b.getKind() == BinaryKind::lor ||
           b.getKind() == BinaryKind::lxor) &&
          k != Kind::Bool)
        ok = false;
      out[i] = round(out[i], k);
      ok = ok && isExact(out[i], k);
    }
    release(b.getLhs());
    release(b.getRhs());
    return ok;
  }

  /// The most elements of any tensor of an evaluated expression.
  static constexpr int64_t kMaxElements = int64_t(1) << 23;

  llvm::DenseMap<Value, int64_t> uses;
  /// The elements of each value evaluated (nullopt: not evaluable); a map
  /// whose entries stay where they are while others are added.
  std::map<const void *, std::optional<Elements>> values;
};

} // namespace

std::optional<std::vector<double>> evaluateConstantTensor(Value v) {
  if (v.getDefiningOp<ConstantOp>())
    return std::nullopt; // Read as a constant, not evaluated.
  return Evaluator().run(v);
}

} // namespace cleave::recognize
