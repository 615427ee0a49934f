//===- RecognizeAttention.cpp - Spelled-out attention as cleave.attention -===//
//
// Part of --cleave-recognize-composites: from each softmax, the scores'
// product of q and k, their scale and masks, and the product with v.
//
//===----------------------------------------------------------------------===//

#include "Recognize.h"

#include "Cleave/Utils/Emitter.h"

#include "mlir/IR/Builders.h"

#include <array>
#include <cmath>
#include <map>
#include <mutex>

using ::cleave::Emitter;

namespace cleave::recognize {

/// A mask's fill (a `select`'s value where keys are masked, or an additive
/// mask's value there) must be at most this. The softmax then gives the
/// masked keys exp(fill - max) with max, the row's largest allowed score:
/// exactly 0 in f32 (exp underflows below -104), as the op's -inf gives,
/// unless every allowed score of the row is below fill + 104, i.e. below
/// -9,896 at this bound, which trained attention does not produce. Exporters
/// write -inf, the type's lowest value (PyTorch's finfo.min), -1e9 or -1e4.
static constexpr double kMaskFillBound = -1e4;

namespace {

/// q, k or v as a contraction reads it, traced back through the ops that
/// keep it one tensor of heads: transposes, multiplications by a scalar
/// constant (q and k) and the repetition of key/value heads for grouped
/// queries (k and v: reshape to B x Hkv x 1 x S x D, broadcast to G, reshape
/// to B x Hkv*G x S x D, as `repeat_kv` exports).
struct TracedOperand {
  /// The tensor the chain starts from.
  Value base;
  /// Dimension i of the contraction's operand is dimension perm[i] of base.
  SmallVector<int64_t, 4> perm = {0, 1, 2, 3};
  double scale = 1.0;
  /// The dimension of base whose heads are repeated, and how many times.
  int64_t repeatDim = -1;
  int64_t groups = 1;
  SmallVector<Operation *> ops;
};

/// The key/value head repetition: `v` = reshape(broadcast(reshape(w))) with
/// w's dimension r split into (r, 1), the unit dimension broadcast to G and
/// the two merged again. Returns w and sets `dim` and `groups`.
static Value matchHeadRepeat(Value v, int64_t &dim, int64_t &groups,
                             SmallVectorImpl<Operation *> &ops) {
  auto merge = v.getDefiningOp<ReshapeOp>();
  if (!merge)
    return {};
  auto spread = merge.getOperand().getDefiningOp<BroadcastInDimOp>();
  if (!spread || !spread->hasOneUse())
    return {};
  auto split = spread.getOperand().getDefiningOp<ReshapeOp>();
  if (!split || !split->hasOneUse())
    return {};
  Value w = split.getOperand();
  ArrayRef<int64_t> in = typeOf(w).getShape();
  ArrayRef<int64_t> one = typeOf(split).getShape();
  ArrayRef<int64_t> wide = typeOf(spread).getShape();
  ArrayRef<int64_t> out = typeOf(v).getShape();
  if (in.size() != 4 || one.size() != 5 || out.size() != 4 ||
      !llvm::equal(spread.getBroadcastDimensions(), llvm::seq<int64_t>(0, 5)))
    return {};
  for (int64_t r = 0; r < 4; ++r) {
    SmallVector<int64_t> expectOne(in), expectOut(in);
    expectOne.insert(expectOne.begin() + r + 1, 1);
    if (one != ArrayRef<int64_t>(expectOne))
      continue;
    int64_t g = wide[r + 1];
    SmallVector<int64_t> expectWide(expectOne);
    expectWide[r + 1] = g;
    expectOut[r] = in[r] * g;
    if (wide != ArrayRef<int64_t>(expectWide) ||
        out != ArrayRef<int64_t>(expectOut))
      return {};
    dim = r;
    groups = g;
    ops.append({merge, spread, split});
    return w;
  }
  return {};
}

static TracedOperand traceOperand(Value v, bool allowScale, bool allowRepeat) {
  TracedOperand t;
  while (true) {
    Operation *op = v.getDefiningOp();
    if (typeOf(v).getRank() != 4 || !op)
      break;
    if (auto transpose = dyn_cast<TransposeOp>(op)) {
      ArrayRef<int64_t> p = transpose.getPermutation();
      for (int64_t &d : t.perm)
        d = p[d];
      if (t.repeatDim >= 0)
        t.repeatDim = p[t.repeatDim];
      t.ops.push_back(op);
      v = transpose.getOperand();
      continue;
    }
    if (auto binary = dyn_cast<BinaryOp>(op);
        binary && allowScale &&
        (binary.getKind() == BinaryKind::mul ||
         binary.getKind() == BinaryKind::div)) {
      bool div = binary.getKind() == BinaryKind::div;
      std::optional<double> c = getSplat(binary.getRhs());
      Value x = binary.getLhs();
      if (!c && !div) {
        c = getSplat(binary.getLhs());
        x = binary.getRhs();
      }
      if (!c || !(*c > 0) || !std::isfinite(*c))
        break;
      t.scale *= div ? 1.0 / *c : *c;
      t.ops.push_back(op);
      v = x;
      continue;
    }
    if (allowRepeat && t.repeatDim < 0) {
      SmallVector<Operation *> repeatOps;
      if (Value w = matchHeadRepeat(v, t.repeatDim, t.groups, repeatOps)) {
        t.ops.append(repeatOps);
        v = w;
        continue;
      }
    }
    break;
  }
  t.base = v;
  return t;
}

/// Lays `t` out as `[d0, d1, d2, d3]` of the contraction's operand.
static Value layOut(Emitter &e, const TracedOperand &t,
                    ArrayRef<int64_t> dims) {
  SmallVector<int64_t> perm;
  for (int64_t d : dims)
    perm.push_back(t.perm[d]);
  return e.transpose(t.base, perm);
}

/// The free dimension of a rank-4 contraction operand with two batch
/// dimensions and one contracting dimension.
static int64_t freeDim(ArrayRef<int64_t> batch, ArrayRef<int64_t> contract) {
  for (int64_t d = 0; d < 4; ++d)
    if (!llvm::is_contained(batch, d) && !llvm::is_contained(contract, d))
      return d;
  return -1;
}

/// A constant mask over the scores `B x H x Sq x Skv`: a constant, or a
/// tensor computed from constants alone (evaluateConstantTensor), reached
/// through at most one reshape and one broadcast, whose elements map to
/// (query i, key j).
struct ConstantMask {
  std::optional<ConstantElements> data;
  /// The elements of a mask computed from constants (when `data` is not
  /// set), and the value they are of.
  std::shared_ptr<const std::vector<double>> evaluated;
  Value evaluatedValue;
  /// The strides and sizes of the dimensions of the (reshaped) constant that
  /// the query and key dimensions of the scores come from.
  int64_t rowStride = 0, rows = 0, colStride = 0, cols = 0;

  static std::optional<ConstantMask> get(Value mask, MaskCache &cache) {
    ArrayRef<int64_t> full = typeOf(mask).getShape();
    Value v = mask;
    SmallVector<int64_t> dims = {0, 1, 2, 3};
    if (auto b = v.getDefiningOp<BroadcastInDimOp>()) {
      dims = llvm::to_vector(b.getBroadcastDimensions());
      v = b.getOperand();
    }
    ArrayRef<int64_t> view = typeOf(v).getShape();
    if (auto r = v.getDefiningOp<ReshapeOp>())
      v = r.getOperand();
    ConstantMask m;
    m.data = ConstantElements::get(v);
    if (!m.data) {
      auto [it, added] = cache.evaluated.try_emplace(v.getAsOpaquePointer());
      if (added)
        if (std::optional<std::vector<double>> e = evaluateConstantTensor(v))
          it->second =
              std::make_shared<const std::vector<double>>(std::move(*e));
      if (!it->second)
        return std::nullopt;
      m.evaluated = it->second;
      m.evaluatedValue = v;
    }
    // The strides of the view the broadcast reads (a reshape keeps the
    // row-major order of the elements).
    SmallVector<int64_t> strides(view.size(), 1);
    for (int64_t d = static_cast<int64_t>(view.size()) - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * view[d + 1];
    for (auto [d, to] : llvm::enumerate(dims)) {
      if (to == 2 && view[d] == full[2]) {
        m.rowStride = strides[d];
        m.rows = view[d];
      }
      if (to == 3 && view[d] == full[3]) {
        m.colStride = strides[d];
        m.cols = view[d];
      }
    }
    // Every element must be placed by its query and key (a mask constant
    // along them cannot be causal unless a dimension is 1).
    if ((m.rows == 0 && full[2] != 1) || (m.cols == 0 && full[3] != 1))
      return std::nullopt;
    return m;
  }

  /// Calls `fn(index, value)` for every element, in order, until it
  /// returns false.
  bool allElements(llvm::function_ref<bool(int64_t, double)> fn) const {
    if (data)
      return data->all(fn);
    for (auto [index, value] : llvm::enumerate(*evaluated))
      if (!fn(static_cast<int64_t>(index), value))
        return false;
    return true;
  }

  /// Calls `fn(i, j, value)` for every element.
  bool all(llvm::function_ref<bool(int64_t, int64_t, double)> fn) const {
    return allElements([&](int64_t index, double value) {
      int64_t i = rows ? index / rowStride % rows : 0;
      int64_t j = cols ? index / colStride % cols : 0;
      return fn(i, j, value);
    });
  }

  /// causalOffset, once per constant, layout and `kind` of `allowed`: per
  /// attribute within a pass, and by contents across the process's
  /// contexts (the planner compiles the same model's mask in every
  /// profile, each in its own context; a 2048 x 2048 mask is 4M elements).
  std::optional<int64_t> cachedCausalOffset(
      MaskCache &cache, int kind, int64_t keys,
      llvm::function_ref<std::optional<bool>(double)> allowed) const {
    const void *id = data ? data->getValue().getAsOpaquePointer()
                          : evaluatedValue.getAsOpaquePointer();
    auto key =
        std::make_tuple(id, rowStride, rows, colStride, cols, keys, kind);
    auto it = cache.offsets.find(key);
    if (it != cache.offsets.end())
      return it->second;
    std::string type;
    llvm::raw_string_ostream(type)
        << (data ? data->getType() : typeOf(evaluatedValue))
        << (data ? "" : " evaluated");
    ArrayRef<char> bytes =
        data ? data->getBytes()
             : ArrayRef<char>(reinterpret_cast<const char *>(evaluated->data()),
                              evaluated->size() * sizeof(double));
    ContentKey content{type,
                       llvm::hash_value(bytes),
                       {rowStride, rows, colStride, cols, keys, kind}};
    std::optional<int64_t> offset;
    if (!processCache().lookup(content, bytes, offset)) {
      offset = causalOffset(keys, allowed);
      processCache().insert(content, bytes, offset);
    }
    return cache.offsets.emplace(key, offset).first->second;
  }

  /// A constant's contents and layout, the key of the process's cache.
  struct ContentKey {
    std::string type;
    size_t hash;
    std::array<int64_t, 6> layout;
    bool operator<(const ContentKey &o) const {
      return std::tie(type, hash, layout) < std::tie(o.type, o.hash, o.layout);
    }
  };
  /// Causal offsets by contents; each entry keeps its bytes, compared on
  /// a hit.
  class ProcessCache {
  public:
    bool lookup(const ContentKey &key, ArrayRef<char> bytes,
                std::optional<int64_t> &offset) {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = entries.find(key);
      if (it == entries.end() ||
          it->second.first != StringRef(bytes.data(), bytes.size()))
        return false;
      offset = it->second.second;
      return true;
    }
    void insert(const ContentKey &key, ArrayRef<char> bytes,
                std::optional<int64_t> offset) {
      std::lock_guard<std::mutex> lock(mutex);
      entries[key] = {std::string(bytes.data(), bytes.size()), offset};
    }

  private:
    std::mutex mutex;
    std::map<ContentKey, std::pair<std::string, std::optional<int64_t>>>
        entries;
  };
  static ProcessCache &processCache() {
    static ProcessCache cache;
    return cache;
  }

  /// The causal offset `o` for which `allowed(i, j)` is exactly j <= i + o,
  /// taken from row 0 and checked on every element; nullopt if there is
  /// none. `o` is at least -1 and at most the number of keys - 1.
  std::optional<int64_t>
  causalOffset(int64_t keys,
               llvm::function_ref<std::optional<bool>(double)> allowed) const {
    int64_t offset = -1;
    while (offset + 1 < keys) {
      bool found = false, ok = true;
      // Is (0, offset + 1) allowed? Read from the elements of row 0.
      all([&](int64_t i, int64_t j, double value) {
        if (i != 0 || j != offset + 1)
          return true;
        std::optional<bool> a = allowed(value);
        ok = a.has_value();
        found = a.value_or(false);
        return false;
      });
      if (!ok)
        return std::nullopt;
      if (!found)
        break;
      ++offset;
    }
    bool causal = all([&](int64_t i, int64_t j, double value) {
      std::optional<bool> a = allowed(value);
      return a && *a == (j <= i + offset);
    });
    if (!causal)
      return std::nullopt;
    return offset;
  }
};

/// A spelled-out attention, from its softmax.
struct AttentionMatch {
  ContractOp scores, output;
  TracedOperand q, k, v;
  double scale = 1.0;
  Value bias;
  bool causal = false;
  int64_t causalOffset = 0;
  SmallVector<Operation *> ops;
};

} // namespace

/// Whether `v` comes from a contraction of rank 4 through the ops between
/// the scores and the softmax (masks and scales).
static bool reachesScores(Value v) {
  while (Operation *op = v.getDefiningOp()) {
    if (isa<ContractOp>(op))
      return typeOf(v).getRank() == 4;
    if (auto select = dyn_cast<SelectOp>(op)) {
      v = getSplat(select.getOnTrue()) ? select.getOnFalse()
                                       : select.getOnTrue();
      continue;
    }
    auto binary = dyn_cast<BinaryOp>(op);
    if (!binary || (binary.getKind() != BinaryKind::add &&
                    binary.getKind() != BinaryKind::mul &&
                    binary.getKind() != BinaryKind::div))
      return false;
    v = getSplat(binary.getLhs()) ? binary.getRhs() : binary.getLhs();
  }
  return false;
}

/// An additive mask as the op's bias: the tensor a broadcast to the scores
/// spreads, with unit dimensions where the broadcast adds them, when that
/// is B' x H' x Sq' x Skv; else the broadcast tensor itself.
static Value biasOperand(Emitter &e, Value mask) {
  auto spread = mask.getDefiningOp<BroadcastInDimOp>();
  if (!spread)
    return mask;
  ArrayRef<int64_t> full = typeOf(mask).getShape();
  ArrayRef<int64_t> in = typeOf(spread.getOperand()).getShape();
  // The broadcast's dimensions increase, so the reshape keeps the order.
  SmallVector<int64_t> shape(4, 1);
  for (auto [d, to] : llvm::enumerate(spread.getBroadcastDimensions()))
    shape[to] = in[d];
  for (int64_t d = 0; d < 4; ++d)
    if (shape[d] != full[d] && (d == 3 || shape[d] != 1))
      return mask;
  return e.reshape(spread.getOperand(), shape);
}

static LogicalResult matchAttention(SoftmaxOp softmax, AttentionMatch &m,
                                    MaskCache &masks) {
  auto sType = typeOf(softmax.getResult());
  if (sType.getRank() != 4 || softmax.getDimension() != 3)
    return miss(softmax, "not a softmax over the last axis of a rank-4 tensor");
  if (!softmax->hasOneUse())
    return miss(softmax, "the probabilities have other uses");
  m.output = dyn_cast<ContractOp>(*softmax->user_begin());
  if (!m.output || m.output.getLhs() != softmax.getResult() ||
      m.output.getLhsBatchingDimensions() != ArrayRef<int64_t>{0, 1} ||
      m.output.getLhsContractingDimensions() != ArrayRef<int64_t>{3} ||
      typeOf(m.output.getRhs()).getRank() != 4 ||
      m.output.getRhsBatchingDimensions().size() != 2)
    return miss(softmax, "the probabilities are not contracted over the keys "
                         "with the values");
  m.ops.push_back(m.output);
  m.ops.push_back(softmax);

  // The masks, in any order: a select of a constant causal pattern and a
  // very negative fill, or an additive mask (a constant causal pattern of 0
  // and a very negative fill, zeros, or any other tensor: the bias).
  Value x = softmax.getOperand();
  auto fillOk = [](double fill) { return fill <= kMaskFillBound; };
  int64_t keys = sType.getDimSize(3);
  auto setCausal = [&](int64_t offset) {
    // A row with no allowed key would get zeros from the op and NaN or a
    // uniform row from the softmax: only offsets that leave key 0 to row 0.
    if (m.causal || offset < 0)
      return false;
    m.causal = true;
    m.causalOffset = offset;
    return true;
  };
  while (true) {
    Operation *op = x.getDefiningOp();
    if (!op)
      break;
    if (auto select = dyn_cast<SelectOp>(op)) {
      if (!x.hasOneUse())
        return miss(op, "a masked score has other uses");
      std::optional<double> fill = getSplat(select.getOnFalse());
      Value kept = select.getOnTrue();
      bool keepWhen = true;
      if (!fill) {
        fill = getSplat(select.getOnTrue());
        kept = select.getOnFalse();
        keepWhen = false;
      }
      if (!fill || !fillOk(*fill))
        return miss(op, "the mask's fill is not -inf or below -1e4");
      std::optional<ConstantMask> mask =
          ConstantMask::get(select.getCond(), masks);
      if (!mask)
        return miss(op, "the mask is not a constant");
      std::optional<int64_t> offset = mask->cachedCausalOffset(
          masks, keepWhen ? 1 : 0, keys, [&](double c) -> std::optional<bool> {
            return (c != 0) == keepWhen;
          });
      if (!offset)
        return miss(op, "the constant mask is not causal (j > i + offset)");
      if (*offset < keys - 1 && !setCausal(*offset))
        return miss(op, "a second causal mask, or one that masks every key "
                        "of a row");
      m.ops.push_back(op);
      x = kept;
      continue;
    }
    auto add = dyn_cast<BinaryOp>(op);
    if (!add || add.getKind() != BinaryKind::add)
      break;
    if (!x.hasOneUse())
      return miss(op, "a masked score has other uses");
    bool lhsScores = reachesScores(add.getLhs());
    if (lhsScores == reachesScores(add.getRhs()))
      return miss(op, "cannot tell the scores from the mask");
    Value mask = lhsScores ? add.getRhs() : add.getLhs();
    m.ops.push_back(op);
    x = lhsScores ? add.getLhs() : add.getRhs();
    if (std::optional<ConstantMask> c = ConstantMask::get(mask, masks)) {
      // (kind 2: the additive form, whose test is always the same.)
      std::optional<int64_t> offset = c->cachedCausalOffset(
          masks, 2, keys, [&](double v) -> std::optional<bool> {
            if (v == 0)
              return true;
            if (fillOk(v))
              return false;
            return std::nullopt;
          });
      if (offset && *offset == keys - 1)
        continue; // Zeros: no mask.
      if (offset && setCausal(*offset))
        continue;
    }
    if (m.bias)
      return miss(op, "more than one additive mask");
    m.bias = mask;
  }

  // The scale, on the scores.
  while (auto binary = x.getDefiningOp<BinaryOp>()) {
    bool div = binary.getKind() == BinaryKind::div;
    if (!div && binary.getKind() != BinaryKind::mul)
      break;
    std::optional<double> c = getSplat(binary.getRhs());
    Value rest = binary.getLhs();
    if (!c && !div) {
      c = getSplat(binary.getLhs());
      rest = binary.getRhs();
    }
    if (!c)
      return miss(binary, "the scores are scaled by a tensor that is not a "
                          "scalar constant");
    if (!(*c > 0) || !std::isfinite(*c))
      return miss(binary, "the scale is not a positive number");
    if (!x.hasOneUse())
      return miss(binary, "a scaled score has other uses");
    m.scale *= div ? 1.0 / *c : *c;
    m.ops.push_back(binary);
    x = rest;
  }

  m.scores = x.getDefiningOp<ContractOp>();
  if (!m.scores || !x.hasOneUse())
    return miss(softmax, "the softmax does not read the product of q and k "
                         "(through masks and a scale) alone");
  ContractOp s = m.scores;
  if (typeOf(s.getLhs()).getRank() != 4 || typeOf(s.getRhs()).getRank() != 4 ||
      s.getLhsBatchingDimensions().size() != 2 ||
      s.getLhsContractingDimensions().size() != 1)
    return miss(s, "the scores are not a product of rank-4 q and k over one "
                   "dimension, batched over two");
  m.ops.push_back(s);

  // Every tensor of the form has one element type (a product accumulated
  // into a wider type is a different computation).
  Type et = sType.getElementType();
  for (Value v : {s.getLhs(), s.getRhs(), s.getResult(), m.output.getRhs(),
                  m.output.getResult()})
    if (typeOf(v).getElementType() != et)
      return miss(s, "the element types differ");

  m.q = traceOperand(s.getLhs(), /*allowScale=*/true, /*allowRepeat=*/false);
  m.k = traceOperand(s.getRhs(), /*allowScale=*/true, /*allowRepeat=*/true);
  m.v = traceOperand(m.output.getRhs(), /*allowScale=*/false,
                     /*allowRepeat=*/true);
  // Grouped heads only where k and v repeat theirs alike along the heads.
  int64_t kHeads =
      m.k.repeatDim >= 0 ? m.k.perm[s.getRhsBatchingDimensions()[1]] : -1;
  int64_t vHeads = m.v.repeatDim >= 0
                       ? m.v.perm[m.output.getRhsBatchingDimensions()[1]]
                       : -1;
  if (m.k.repeatDim < 0 || m.v.repeatDim < 0 || m.k.groups != m.v.groups ||
      m.k.repeatDim != kHeads || m.v.repeatDim != vHeads) {
    m.k = traceOperand(s.getRhs(), true, false);
    m.v = traceOperand(m.output.getRhs(), false, false);
  }
  m.scale *= m.q.scale * m.k.scale;
  if (!(m.scale > 0) || !std::isfinite(m.scale))
    return miss(s, "the scale is not a positive number");
  return success();
}

/// Rewrites a matched attention into one op before its output contraction.
static void rewriteAttention(AttentionMatch &m) {
  OpBuilder b(m.output);
  Emitter e{b, m.output.getLoc()};
  ContractOp s = m.scores, o = m.output;
  ArrayRef<int64_t> qb = s.getLhsBatchingDimensions(),
                    kb = s.getRhsBatchingDimensions(),
                    vb = o.getRhsBatchingDimensions();
  int64_t qc = s.getLhsContractingDimensions()[0],
          kc = s.getRhsContractingDimensions()[0],
          vc = o.getRhsContractingDimensions()[0];
  Value q = layOut(e, m.q, {qb[0], qb[1], freeDim(qb, {qc}), qc});
  Value k = layOut(e, m.k, {kb[0], kb[1], freeDim(kb, {kc}), kc});
  Value v = layOut(e, m.v, {vb[0], vb[1], vc, freeDim(vb, {vc})});
  Value bias = m.bias ? biasOperand(e, m.bias) : Value();
  auto op = AttentionOp::create(
      b, o.getLoc(), o.getType(), q, k, v, bias, APFloat(m.scale), m.causal,
      static_cast<uint64_t>(m.causalOffset), APFloat(0.0));
  o.getResult().replaceAllUsesWith(op.getResult());
  SmallVector<Operation *> ops(m.ops);
  ops.append(m.q.ops);
  ops.append(m.k.ops);
  ops.append(m.v.ops);
  eraseDead(ops);
}

/// Checks the shapes the op's verifier will (the contractions already
/// pair q's and k's head size, and the keys of k and v).
static LogicalResult checkAttentionShapes(AttentionMatch &m) {
  ContractOp s = m.scores, o = m.output;
  auto shapeAt = [](const TracedOperand &t, int64_t d) {
    return typeOf(t.base).getDimSize(t.perm[d]);
  };
  int64_t qHeads = shapeAt(m.q, s.getLhsBatchingDimensions()[1]);
  int64_t kHeads = shapeAt(m.k, s.getRhsBatchingDimensions()[1]);
  int64_t vHeads = shapeAt(m.v, o.getRhsBatchingDimensions()[1]);
  if (kHeads != vHeads || kHeads == 0 || qHeads % kHeads != 0)
    return miss(s, "the query heads are not groups of the key/value heads");
  return success();
}

bool recognizeAttention(SoftmaxOp softmax, MaskCache &masks, bool &causal) {
  AttentionMatch m;
  if (failed(matchAttention(softmax, m, masks)) ||
      failed(checkAttentionShapes(m)))
    return false;
  rewriteAttention(m);
  causal = m.causal;
  return true;
}

} // namespace cleave::recognize
