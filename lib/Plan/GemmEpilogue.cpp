//===- GemmEpilogue.cpp - Elementwise tails a Gemm command absorbs --------===//
//
// Structural matching of a bias add and of the tanh-form GELU after a GEMM
// contraction. Products are matched as multisets of factors (a tree of
// single-use muls flattened), sums of two terms in either order, constants
// as splats within 1e-6 relative of the expected value.
//
//===----------------------------------------------------------------------===//

#include "GemmEpilogue.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::GemmEpilogueMatch;
using ::cleave::GemmShape;
namespace plan = ::cleave::plan;

/// The value of a float splat constant, or of a broadcast of one.
static std::optional<double> splatValue(Value v) {
  if (auto broadcast = v.getDefiningOp<BroadcastInDimOp>())
    v = broadcast.getOperand();
  auto cst = v.getDefiningOp<ConstantOp>();
  if (!cst)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
  if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// True if `v` is a splat of `want` (to the precision of f32).
static bool isSplatOf(Value v, double want) {
  std::optional<double> got = splatValue(v);
  return got && std::abs(*got - want) <= 1e-6 * std::abs(want);
}

/// The binary op of `kind` that defines `v`, or null.
static BinaryOp binaryOf(Value v, BinaryKind kind) {
  auto op = v.getDefiningOp<BinaryOp>();
  return op && op.getKind() == kind ? op : BinaryOp();
}

//===----------------------------------------------------------------------===//
// Bias
//===----------------------------------------------------------------------===//

/// True if `addend` holds the same value in every row (and batch) of a
/// GEMM result of type `result` with N = `n` (its trailing dimensions, the
/// right operand's free ones, hold N elements): a broadcast of a tensor of N
/// elements whose dimensions other than 1 are those trailing dimensions, in
/// order ([N] or ONNX Gemm's [1, N]), or a splat.
static bool matchBias(Value addend, RankedTensorType result, int64_t n,
                      GemmEpilogueMatch &m) {
  if (auto broadcast = addend.getDefiningOp<BroadcastInDimOp>()) {
    auto biasType = cast<RankedTensorType>(broadcast.getOperand().getType());
    if (biasType.getNumElements() != n ||
        biasType.getElementType() != result.getElementType())
      return false;
    // The first of the trailing dimensions that hold N elements.
    int64_t first = result.getRank(), product = 1;
    while (product < n && first > 0)
      product *= result.getDimSize(--first);
    if (product != n)
      return false;
    ArrayRef<int64_t> dims = broadcast.getBroadcastDimensions();
    for (auto [i, d] : llvm::enumerate(dims))
      if (biasType.getDimSize(i) != 1 &&
          (d < first || biasType.getDimSize(i) != result.getDimSize(d)))
        return false;
    // The broadcast keeps the order of the dimensions, so the bias's
    // elements are C's columns in order.
    m.bias = broadcast.getOperand();
    return true;
  }
  if (auto cst = addend.getDefiningOp<ConstantOp>()) {
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (dense && dense.isSplat()) {
      m.splatBias = dense;
      return true;
    }
  }
  return false;
}

//===----------------------------------------------------------------------===//
// GELU (tanh form)
//===----------------------------------------------------------------------===//

namespace {
/// Recognizes y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for a
/// fixed x, collecting the ops from x (exclusive) to y (inclusive).
class GeluMatcher {
public:
  explicit GeluMatcher(Value x) : x(x) {}

  /// The GELU of x among x's users, or null. Only a GELU that uses x all
  /// alone counts: x must have no users outside it.
  Value find();

  SmallVector<Operation *> ops;

private:
  bool match(Value y);
  /// Appends the factors of `v`: the leaves of the tree of muls rooted at
  /// v (inner muls only when used once), x^3 as pow(x, 3) counting three.
  void factors(Value v, bool root, SmallVectorImpl<Value> &out);

  Value x;
};
} // namespace

void GeluMatcher::factors(Value v, bool root, SmallVectorImpl<Value> &out) {
  if (v != x && (root || v.hasOneUse())) {
    if (BinaryOp mul = binaryOf(v, BinaryKind::mul)) {
      ops.push_back(mul);
      factors(mul.getLhs(), false, out);
      factors(mul.getRhs(), false, out);
      return;
    }
    if (BinaryOp pow = binaryOf(v, BinaryKind::pow);
        pow && !root && pow.getLhs() == x && isSplatOf(pow.getRhs(), 3.0)) {
      ops.push_back(pow);
      out.append(3, x);
      return;
    }
  }
  out.push_back(v);
}

bool GeluMatcher::match(Value y) {
  ops.clear();
  // y = x * 0.5 * t, t = 1 + tanh(inner).
  SmallVector<Value> f;
  factors(y, /*root=*/true, f);
  if (f.size() != 3 || llvm::count(f, x) != 1)
    return false;
  auto half = llvm::find_if(f, [](Value v) { return isSplatOf(v, 0.5); });
  if (half == f.end())
    return false;
  auto rest = llvm::find_if(f, [&](Value v) { return v != x && v != *half; });
  if (rest == f.end())
    return false;
  Value t = *rest;
  BinaryOp onePlus = binaryOf(t, BinaryKind::add);
  if (!onePlus || !t.hasOneUse())
    return false;
  ops.push_back(onePlus);
  Value th = isSplatOf(onePlus.getLhs(), 1.0)   ? onePlus.getRhs()
             : isSplatOf(onePlus.getRhs(), 1.0) ? onePlus.getLhs()
                                                : Value();
  auto tanh = th ? th.getDefiningOp<UnaryOp>() : UnaryOp();
  if (!tanh || tanh.getKind() != UnaryKind::tanh || !th.hasOneUse())
    return false;
  ops.push_back(tanh);

  // inner = sqrt(2/pi) * s, s = x + k, k = 0.044715 x^3.
  Value inner = tanh.getOperand();
  if (!inner.hasOneUse())
    return false;
  f.clear();
  factors(inner, /*root=*/true, f);
  const double sqrt2OverPi = std::sqrt(2.0 / M_PI);
  if (f.size() != 2 || llvm::count_if(f, [&](Value v) {
                         return isSplatOf(v, sqrt2OverPi);
                       }) != 1)
    return false;
  Value s = isSplatOf(f[0], sqrt2OverPi) ? f[1] : f[0];
  BinaryOp sum = binaryOf(s, BinaryKind::add);
  if (!sum || !s.hasOneUse() || sum.getLhs() == sum.getRhs() ||
      (sum.getLhs() != x && sum.getRhs() != x))
    return false;
  ops.push_back(sum);
  Value k = sum.getLhs() == x ? sum.getRhs() : sum.getLhs();
  if (!k.hasOneUse())
    return false;
  f.clear();
  factors(k, /*root=*/true, f);
  return f.size() == 4 && llvm::count(f, x) == 3 &&
         llvm::any_of(f, [](Value v) { return isSplatOf(v, 0.044715); });
}

Value GeluMatcher::find() {
  for (Operation *user : x.getUsers()) {
    auto mul = dyn_cast<BinaryOp>(user);
    if (!mul || mul.getKind() != BinaryKind::mul)
      continue;
    // y is the top of a chain of muls over x: try each level, highest
    // first.
    SmallVector<Value> chain = {mul.getResult()};
    while (chain.back().hasOneUse()) {
      BinaryOp next = dyn_cast<BinaryOp>(*chain.back().getUsers().begin());
      if (!next || next.getKind() != BinaryKind::mul)
        break;
      chain.push_back(next.getResult());
    }
    for (Value y : llvm::reverse(chain)) {
      if (!match(y))
        continue;
      llvm::SmallPtrSet<Operation *, 16> inside(ops.begin(), ops.end());
      if (llvm::all_of(x.getUsers(),
                       [&](Operation *u) { return inside.contains(u); }))
        return y;
    }
  }
  ops.clear();
  return Value();
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

GemmEpilogueMatch(::cleave::matchGemmEpilogue)(ContractOp contract,
                                               const GemmShape &shape) {
  GemmEpilogueMatch m;
  auto type = cast<RankedTensorType>(contract.getType());
  if (!type.getElementType().isF32())
    return m;
  Value x = contract.getResult();
  // Bias: the product's only use is the add (in training the product is
  // not kept for the backward pass: it needs the layer's input and the
  // weight; the biased value may be used many times).
  if (x.hasOneUse())
    if (auto add = dyn_cast<BinaryOp>(*x.getUsers().begin());
        add && add.getKind() == BinaryKind::add &&
        add.getLhs() != add.getRhs() &&
        matchBias(add.getLhs() == x ? add.getRhs() : add.getLhs(), type,
                  shape.n, m)) {
      m.kind = plan::GemmEpilogue::Bias;
      m.ops.push_back(add);
      x = add.getResult();
    }
  m.result = x;
  GeluMatcher gelu(x);
  if (Value y = gelu.find()) {
    m.kind = m.kind == plan::GemmEpilogue::Bias ? plan::GemmEpilogue::GeluBias
                                                : plan::GemmEpilogue::Gelu;
    m.ops.append(gelu.ops.begin(), gelu.ops.end());
    m.result = y;
  }
  if (m.kind == plan::GemmEpilogue::None)
    return GemmEpilogueMatch();
  return m;
}
