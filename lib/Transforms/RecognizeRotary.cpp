//===- RecognizeRotary.cpp - Spelled-out rotary embedding as cleave.rotary ===//
//
// Part of --cleave-recognize-composites: the rotary position embedding as
// PyTorch's `apply_rotary_pos_emb` exports it,
//
//   y = x * cos + cat(-x[..., R:], x[..., :R]) * sin      (x: B x H x S x 2R)
//
// with cos and sin broadcast over the heads and their two halves equal
// (`cat(freqs, freqs)`), rewritten into `cleave.rotary` with the first half
// of each. The op computes the same: its first half is cos x1 - sin x2 =
// x1 cos + (-x2) sin and its second sin x1 + cos x2 = x2 cos + x1 sin, each
// the same two products summed, so every element is bitwise the same.
//
//===----------------------------------------------------------------------===//

#include "Recognize.h"

#include "Cleave/Utils/Emitter.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>
#include <cstring>

using ::cleave::Emitter;

namespace cleave::recognize {

namespace {

/// cos or sin as the products read them: `full` (B x H x S x 2R), a
/// broadcast of `angles` whose dimensions go, in order, to `dims` of
/// `full`.
struct Angles {
  Value full, angles;
  SmallVector<int64_t, 4> dims;
};

} // namespace

static Angles traceAngles(Value full) {
  Angles a{full, full, {0, 1, 2, 3}};
  if (auto b = full.getDefiningOp<BroadcastInDimOp>()) {
    a.angles = b.getOperand();
    a.dims = llvm::to_vector<4>(b.getBroadcastDimensions());
  }
  return a;
}

/// Whether the two halves of the last dimension of `v` are provably equal,
/// element by element and bit by bit: a constant (not a parameter) whose
/// halves hold the same bits, a concatenation of one value with itself, or
/// what elementwise ops with scalar constants make of such a tensor, through
/// broadcasts and reshapes that keep the last dimension.
/// Whether `v` reads, directly or through the ops that compute it, a
/// constant that training may change (the angles' gradient would then
/// flow to the op's half of them only, summed in another order).
static bool readsTrained(Value v) {
  SmallVector<Value> work = {v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (auto c = dyn_cast<ConstantOp>(op); c && mayBeTrained(c))
      return true;
    llvm::append_range(work, op->getOperands());
  }
  return false;
}

static bool halvesEqual(Value v, int depth = 0) {
  auto type = typeOf(v);
  int64_t d = type.getRank() ? type.getShape().back() : 0;
  if (d % 2 != 0 || d == 0 || depth > 16)
    return false;
  Operation *op = v.getDefiningOp();
  if (!op)
    return false;
  if (auto c = dyn_cast<ConcatOp>(op))
    return static_cast<int64_t>(c.getDimension()) == type.getRank() - 1 &&
           c.getInputs().size() == 2 && c.getInputs()[0] == c.getInputs()[1];
  if (auto u = dyn_cast<UnaryOp>(op))
    return halvesEqual(u.getOperand(), depth + 1);
  if (auto cv = dyn_cast<ConvertOp>(op))
    return halvesEqual(cv.getOperand(), depth + 1);
  if (auto b = dyn_cast<BinaryOp>(op)) {
    if (getSplat(b.getRhs()))
      return halvesEqual(b.getLhs(), depth + 1);
    if (getSplat(b.getLhs()))
      return halvesEqual(b.getRhs(), depth + 1);
    return false;
  }
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    auto in = typeOf(r.getOperand());
    return in.getRank() && in.getShape().back() == d &&
           halvesEqual(r.getOperand(), depth + 1);
  }
  if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
    ArrayRef<int64_t> dims = b.getBroadcastDimensions();
    auto in = typeOf(b.getOperand());
    return !dims.empty() && dims.back() == type.getRank() - 1 &&
           in.getShape().back() == d && halvesEqual(b.getOperand(), depth + 1);
  }
  auto c = dyn_cast<ConstantOp>(op);
  if (!c)
    return false;
  if (mayBeTrained(c))
    return false;
  std::optional<ConstantElements> e = ConstantElements::get(v);
  if (!e || !isa<FloatType>(type.getElementType()))
    return false;
  std::vector<double> values(type.getNumElements());
  e->all([&](int64_t i, double x) {
    values[i] = x;
    return true;
  });
  int64_t r = d / 2;
  for (int64_t i = 0, n = type.getNumElements(); i < n; i += d)
    for (int64_t j = 0; j < r; ++j) {
      double lo = values[i + j], hi = values[i + j + r];
      if (std::isnan(lo) || std::memcmp(&lo, &hi, sizeof(double)) != 0)
        return false;
    }
  return true;
}

/// The angles as the op takes them, `B' x S x R`: the first half of
/// `a.angles`, whose dimensions must go in order to the batch (size 1 or
/// B, or none), the heads (size 1, or none), the positions (all S) and the
/// features (all 2R) of x. Null if they do not.
static Value opAngles(Emitter &e, const Angles &a, ArrayRef<int64_t> x,
                      bool emit, int64_t &batch) {
  ArrayRef<int64_t> in = typeOf(a.angles).getShape();
  if (a.dims.empty() || a.dims.back() != 3 || in.back() != x[3])
    return {};
  batch = 1;
  bool positions = false;
  for (auto [d, to] : llvm::enumerate(a.dims)) {
    if (d > 0 && to <= a.dims[d - 1])
      return {};
    if (to == 0 && in[d] != 1 && in[d] != x[0])
      return {};
    if (to == 0)
      batch = in[d];
    if (to == 1 && in[d] != 1)
      return {};
    if (to == 2) {
      if (in[d] != x[2])
        return {};
      positions = true;
    }
  }
  if (!positions && x[2] != 1)
    return {};
  if (!emit)
    return a.angles;
  SmallVector<int64_t> start(in.size(), 0), limit(in), strides(in.size(), 1);
  limit.back() = x[3] / 2;
  return e.reshape(e.slice(a.angles, start, limit, strides),
                   {batch, x[2], x[3] / 2});
}

/// Whether `v` is cat(-x[..., R:], x[..., :R]) along the last axis, for
/// the `x` it returns.
static Value matchRotateHalf(Value v, SmallVectorImpl<Operation *> &ops) {
  auto cat = v.getDefiningOp<ConcatOp>();
  if (!cat || cat.getDimension() != 3 || cat.getInputs().size() != 2)
    return {};
  auto neg = cat.getInputs()[0].getDefiningOp<UnaryOp>();
  if (!neg || neg.getKind() != UnaryKind::neg)
    return {};
  auto hi = neg.getOperand().getDefiningOp<SliceOp>();
  auto lo = cat.getInputs()[1].getDefiningOp<SliceOp>();
  if (!hi || !lo || hi.getOperand() != lo.getOperand())
    return {};
  Value x = hi.getOperand();
  auto type = typeOf(x);
  if (type.getRank() != 4 || v.getType() != type)
    return {};
  ArrayRef<int64_t> s = type.getShape();
  int64_t r = s[3] / 2;
  if (s[3] % 2 != 0 || r == 0)
    return {};
  auto is = [&](SliceOp slice, int64_t from) {
    return slice.getStartIndices() == ArrayRef<int64_t>{0, 0, 0, from} &&
           slice.getLimitIndices() ==
               ArrayRef<int64_t>{s[0], s[1], s[2], from + r} &&
           llvm::all_of(slice.getStrides(), [](int64_t t) { return t == 1; });
  };
  if (!is(lo, 0) || !is(hi, r))
    return {};
  ops.append({cat, neg, hi, lo});
  return x;
}

bool recognizeRotary(BinaryOp sum) {
  if (sum.getKind() != BinaryKind::add)
    return false;
  auto type = typeOf(sum.getResult());
  if (type.getRank() != 4)
    return false;
  for (int first = 0; first < 2; ++first) {
    auto direct = sum->getOperand(first).getDefiningOp<BinaryOp>();
    auto rotated = sum->getOperand(1 - first).getDefiningOp<BinaryOp>();
    if (!direct || !rotated || direct.getKind() != BinaryKind::mul ||
        rotated.getKind() != BinaryKind::mul)
      continue;
    for (int r = 0; r < 2; ++r) {
      SmallVector<Operation *> ops = {sum, direct, rotated};
      Value x = matchRotateHalf(rotated->getOperand(r), ops);
      if (!x || x.getType() != type)
        continue;
      Value sinFull = rotated->getOperand(1 - r);
      Value cosFull;
      if (direct.getLhs() == x)
        cosFull = direct.getRhs();
      else if (direct.getRhs() == x)
        cosFull = direct.getLhs();
      else
        continue;
      if (cosFull.getType() != type || sinFull.getType() != type)
        continue;
      Angles cos = traceAngles(cosFull), sin = traceAngles(sinFull);
      OpBuilder b(sum);
      Emitter e{b, sum.getLoc()};
      int64_t cosBatch = 0, sinBatch = 0;
      ArrayRef<int64_t> shape = type.getShape();
      if (!opAngles(e, cos, shape, false, cosBatch) ||
          !opAngles(e, sin, shape, false, sinBatch) || cosBatch != sinBatch) {
        (void)miss(sum, "cos and sin are not broadcast over the heads from "
                        "B' x S x 2R");
        continue;
      }
      if (!halvesEqual(cos.angles) || !halvesEqual(sin.angles)) {
        (void)miss(sum, "the halves of cos or sin are not provably equal");
        continue;
      }
      if (readsTrained(cos.angles) || readsTrained(sin.angles)) {
        (void)miss(sum, "cos or sin is computed from a trained initializer");
        continue;
      }
      Value c = opAngles(e, cos, shape, true, cosBatch);
      Value s = opAngles(e, sin, shape, true, sinBatch);
      Value y = RotaryOp::create(b, sum.getLoc(), type, x, c, s,
                                 /*interleaved=*/false);
      sum.getResult().replaceAllUsesWith(y);
      eraseDead(ops);
      return true;
    }
  }
  return false;
}

} // namespace cleave::recognize
