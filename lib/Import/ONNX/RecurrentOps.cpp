//===- RecurrentOps.cpp - RNN, GRU and LSTM -------------------------------===//
//
// The sequence length is static, so the recurrences are unrolled: the input
// projections of all steps are one contraction, each step adds the hidden
// state's projection (a contraction with R) and applies the gates'
// activations. Directions are unrolled separately and concatenated.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

enum class Cell { RNN, GRU, LSTM };

struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

Value applyActivation(NodeContext &ctx, const Activation &a, Value v) {
  Type et = elemOf(v);
  auto c = [&](double x) { return ctx.splat(et, {}, x); };
  auto mul = [&](Value x, Value y) {
    return ctx.binary(BinaryKind::mul, x, y);
  };
  auto add = [&](Value x, Value y) {
    return ctx.binary(BinaryKind::add, x, y);
  };
  std::string n = llvm::StringRef(a.name).lower();
  if (n == "tanh")
    return ctx.unary(UnaryKind::tanh, v);
  if (n == "sigmoid")
    return ctx.unary(UnaryKind::sigmoid, v);
  if (n == "relu")
    return ctx.binary(BinaryKind::max, v, c(0));
  if (n == "affine")
    return add(mul(v, c(a.alpha)), c(a.beta));
  if (n == "leakyrelu")
    return ctx.select(ctx.compare(CompareKind::ge, v, c(0)), v,
                      mul(v, c(a.alpha)));
  if (n == "thresholdedrelu")
    return ctx.select(ctx.compare(CompareKind::gt, v, c(a.alpha)), v,
                      ctx.splatLike(v, 0));
  if (n == "scaledtanh")
    return mul(ctx.unary(UnaryKind::tanh, mul(v, c(a.beta))), c(a.alpha));
  if (n == "hardsigmoid")
    return ctx.binary(
        BinaryKind::max,
        ctx.binary(BinaryKind::min, add(mul(v, c(a.alpha)), c(a.beta)), c(1)),
        c(0));
  if (n == "elu")
    return ctx.select(
        ctx.compare(CompareKind::ge, v, c(0)), v,
        mul(ctx.binary(BinaryKind::sub, ctx.unary(UnaryKind::exp, v), c(1)),
            c(a.alpha)));
  if (n == "softsign")
    return ctx.binary(BinaryKind::div, v,
                      add(ctx.unary(UnaryKind::abs, v), c(1)));
  if (n == "softplus")
    return ctx.unary(UnaryKind::log, add(ctx.unary(UnaryKind::exp, v), c(1)));
  return {};
}

bool knownActivation(StringRef name) {
  std::string n = name.lower();
  return llvm::is_contained({"tanh", "sigmoid", "relu", "affine", "leakyrelu",
                             "thresholdedrelu", "scaledtanh", "hardsigmoid",
                             "elu", "softsign", "softplus"},
                            n);
}

/// Default alpha/beta of the activations that take them.
void activationDefaults(Activation &a, bool &usesAlpha, bool &usesBeta) {
  std::string n = llvm::StringRef(a.name).lower();
  usesAlpha = usesBeta = false;
  if (n == "affine") {
    usesAlpha = usesBeta = true;
    a.alpha = 1;
    a.beta = 0;
  } else if (n == "leakyrelu") {
    usesAlpha = true;
    a.alpha = 0.01;
  } else if (n == "thresholdedrelu" || n == "elu") {
    usesAlpha = true;
    a.alpha = 1.0;
  } else if (n == "scaledtanh") {
    usesAlpha = usesBeta = true;
    a.alpha = a.beta = 1.0;
  } else if (n == "hardsigmoid") {
    usesAlpha = usesBeta = true;
    a.alpha = 0.2;
    a.beta = 0.5;
  }
}

/// x [.., n] -> slice [lo, hi) of the last dim.
Value lastSlice(NodeContext &ctx, Value v, int64_t lo, int64_t hi) {
  auto s = shapeOf(v);
  SmallVector<int64_t> start(s.size(), 0), limit(s.begin(), s.end()),
      strides(s.size(), 1);
  start.back() = lo;
  limit.back() = hi;
  return ctx.slice(v, start, limit, strides);
}

/// The d-th [rows, cols] matrix of a [numDir, rows, cols] tensor (or row of
/// a [numDir, n] one).
Value dirSlice(NodeContext &ctx, Value v, int64_t d) {
  auto s = shapeOf(v);
  SmallVector<int64_t> start(s.size(), 0), limit(s.begin(), s.end()),
      strides(s.size(), 1);
  start[0] = d;
  limit[0] = d + 1;
  Value r = ctx.slice(v, start, limit, strides);
  return ctx.reshape(r, s.drop_front());
}

/// [batch, k] x [n, k]^T -> [batch, n].
Value matmulT(NodeContext &ctx, Value a, Value w) {
  SmallVector<int64_t> shape(shapeOf(a).drop_back());
  shape.push_back(shapeOf(w)[0]);
  int64_t ra = rankOf(a);
  return ContractOp::create(ctx.b, ctx.loc,
                            RankedTensorType::get(shape, elemOf(a)), a, w,
                            ArrayRef<int64_t>{}, ArrayRef<int64_t>{},
                            ArrayRef<int64_t>{ra - 1}, ArrayRef<int64_t>{1})
      .getResult();
}

Value concat(NodeContext &ctx, ArrayRef<Value> vs, int64_t dim) {
  if (vs.size() == 1)
    return vs[0];
  SmallVector<int64_t> shape(shapeOf(vs[0]));
  shape[dim] = 0;
  for (Value v : vs)
    shape[dim] += shapeOf(v)[dim];
  return ConcatOp::create(ctx.b, ctx.loc,
                          RankedTensorType::get(shape, elemOf(vs[0])),
                          SmallVector<Value>(vs), static_cast<uint64_t>(dim))
      .getResult();
}

LogicalResult convertRecurrent(NodeContext &ctx) {
  StringRef op = ctx.opType();
  Cell cell = op == "RNN" ? Cell::RNN : op == "GRU" ? Cell::GRU : Cell::LSTM;
  int64_t gates = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 3 : 4;
  int64_t numActs = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 2 : 3;
  Value x = ctx.input(0), w = ctx.input(1), r = ctx.input(2);
  if (!x || !w || !r)
    return failure();
  Type et = elemOf(x);
  if (!isa<FloatType>(et)) {
    ctx.error() << "needs a floating-point input, got " << x.getType();
    return failure();
  }
  std::string dirStr = ctx.attrString("direction", "forward");
  int64_t numDir = dirStr == "bidirectional" ? 2 : 1;
  if (dirStr != "forward" && dirStr != "reverse" && dirStr != "bidirectional") {
    ctx.error() << "direction '" << dirStr << "' is not valid";
    return failure();
  }
  int64_t layout = ctx.attrInt("layout", 0);
  if (rankOf(x) != 3) {
    ctx.error() << "X must have rank 3, got " << x.getType();
    return failure();
  }
  if (layout == 1)
    x = ctx.transpose(x, {1, 0, 2});
  auto xs = shapeOf(x);
  int64_t seq = xs[0], batch = xs[1], inSize = xs[2];
  int64_t hidden = ctx.attrInt("hidden_size", 0);
  if (hidden <= 0 && rankOf(r) == 3)
    hidden = shapeOf(r)[2];
  auto expect = [&](Value v, ArrayRef<int64_t> shape, StringRef what) {
    if (shapeOf(v) != shape || elemOf(v) != et) {
      auto d = ctx.error();
      d << what << " must be [";
      llvm::interleave(shape, [&](int64_t s) { d << s; }, [&] { d << ", "; });
      d << "] of the input's type, got " << v.getType();
      return false;
    }
    return true;
  };
  if (!expect(w, {numDir, gates * hidden, inSize}, "W") ||
      !expect(r, {numDir, gates * hidden, hidden}, "R"))
    return failure();
  Value bias;
  if (ctx.hasInput(3)) {
    bias = ctx.input(3);
    if (!bias || !expect(bias, {numDir, 2 * gates * hidden}, "B"))
      return failure();
  }
  // sequence_lens: only the trivial (all = seq_length) case.
  if (ctx.hasInput(4)) {
    auto lens = ctx.constInts(4, "sequence_lens");
    if (failed(lens))
      return failure();
    for (int64_t l : *lens)
      if (l != seq) {
        ctx.error() << "sequence_lens shorter than the sequence length (" << l
                    << " < " << seq << ") are not supported";
        return failure();
      }
  }
  auto stateInput = [&](int i, StringRef what) -> FailureOr<Value> {
    if (!ctx.hasInput(i))
      return Value();
    Value v = ctx.input(i);
    if (!v)
      return failure();
    if (layout == 1 && rankOf(v) == 3)
      v = ctx.transpose(v, {1, 0, 2});
    if (!expect(v, {numDir, batch, hidden}, what))
      return failure();
    return v;
  };
  auto h0 = stateInput(5, "initial_h");
  if (failed(h0))
    return failure();
  FailureOr<Value> c0 = Value();
  Value peep;
  if (cell == Cell::LSTM) {
    c0 = stateInput(6, "initial_c");
    if (failed(c0))
      return failure();
    if (ctx.hasInput(7)) {
      peep = ctx.input(7);
      if (!peep || !expect(peep, {numDir, 3 * hidden}, "P"))
        return failure();
    }
  }
  bool linearBeforeReset = ctx.attrInt("linear_before_reset", 0) != 0;
  bool inputForget = ctx.attrInt("input_forget", 0) != 0;
  std::optional<double> clip;
  if (ctx.hasAttr("clip"))
    clip = ctx.attrFloat("clip", 0);

  // Activations: numActs per direction.
  SmallVector<Activation> acts;
  {
    auto names = ctx.attr("activations");
    SmallVector<double> alphas = ctx.attrFloats("activation_alpha");
    SmallVector<double> betas = ctx.attrFloats("activation_beta");
    SmallVector<std::string> list;
    if (names) {
      for (const auto &s : names->strings())
        list.push_back(s);
    } else {
      for (int64_t d = 0; d < numDir; ++d) {
        if (cell == Cell::RNN)
          list.push_back("Tanh");
        else if (cell == Cell::GRU)
          list.append({"Sigmoid", "Tanh"});
        else
          list.append({"Sigmoid", "Tanh", "Tanh"});
      }
    }
    if ((int64_t)list.size() == numActs && numDir == 2)
      list.append(SmallVector<std::string>(list)); // same for both
    if ((int64_t)list.size() != numActs * numDir) {
      ctx.error() << "expects " << numActs * numDir << " activations, got "
                  << list.size();
      return failure();
    }
    size_t ai = 0, bi = 0;
    for (auto &name : list) {
      if (!knownActivation(name)) {
        ctx.error() << "activation '" << name << "' is not supported";
        return failure();
      }
      Activation a;
      a.name = name;
      bool ua, ub;
      activationDefaults(a, ua, ub);
      if (ua && ai < alphas.size())
        a.alpha = alphas[ai++];
      if (ub && bi < betas.size())
        a.beta = betas[bi++];
      acts.push_back(a);
    }
  }

  auto clipped = [&](Value v) {
    if (!clip)
      return v;
    return ctx.binary(BinaryKind::min,
                      ctx.binary(BinaryKind::max, v, ctx.splat(et, {}, -*clip)),
                      ctx.splat(et, {}, *clip));
  };
  auto add = [&](Value a, Value b) {
    return ctx.binary(BinaryKind::add, a, b);
  };
  auto mul = [&](Value a, Value b) {
    return ctx.binary(BinaryKind::mul, a, b);
  };

  SmallVector<Value> ys, yhs, ycs;
  int64_t gh = gates * hidden;
  for (int64_t d = 0; d < numDir; ++d) {
    bool reverse = dirStr == "reverse" || d == 1;
    ArrayRef<Activation> da = ArrayRef(acts).slice(d * numActs, numActs);
    Value wd = dirSlice(ctx, w, d), rd = dirSlice(ctx, r, d);
    // All steps' input projections: [seq, batch, G*H] (+ Wb, and Rb where it
    // is not applied inside the reset gate).
    Value xw = matmulT(ctx, x, wd);
    Value wb, rb;
    if (bias) {
      Value bd = dirSlice(ctx, bias, d);
      wb = lastSlice(ctx, bd, 0, gh);
      rb = lastSlice(ctx, bd, gh, 2 * gh);
      xw = add(xw, wb);
    }
    Value h = *h0 ? dirSlice(ctx, *h0, d) : ctx.splat(et, {batch, hidden}, 0);
    Value c;
    if (cell == Cell::LSTM)
      c = *c0 ? dirSlice(ctx, *c0, d) : ctx.splat(et, {batch, hidden}, 0);
    Value pi, po, pf;
    if (peep) {
      Value pd = dirSlice(ctx, peep, d);
      pi = lastSlice(ctx, pd, 0, hidden);
      po = lastSlice(ctx, pd, hidden, 2 * hidden);
      pf = lastSlice(ctx, pd, 2 * hidden, 3 * hidden);
    }
    SmallVector<Value> steps(seq);
    for (int64_t k = 0; k < seq; ++k) {
      int64_t t = reverse ? seq - 1 - k : k;
      Value xt = ctx.reshape(
          ctx.slice(xw, {t, 0, 0}, {t + 1, batch, gh}, {1, 1, 1}), {batch, gh});
      // GRU without linear_before_reset projects H for z and r only.
      Value hr =
          cell == Cell::GRU && !linearBeforeReset
              ? matmulT(ctx, h,
                        ctx.slice(rd, {0, 0}, {2 * hidden, hidden}, {1, 1}))
              : matmulT(ctx, h, rd);
      auto gate = [&](Value v, int64_t g) {
        return lastSlice(ctx, v, g * hidden, (g + 1) * hidden);
      };
      if (cell == Cell::RNN) {
        Value pre = add(xt, hr);
        if (rb)
          pre = add(pre, rb);
        h = applyActivation(ctx, da[0], clipped(pre));
      } else if (cell == Cell::GRU) {
        Value rbz, rbr, rbh;
        if (rb) {
          rbz = gate(rb, 0);
          rbr = gate(rb, 1);
          rbh = gate(rb, 2);
        }
        Value zp = add(gate(xt, 0), gate(hr, 0));
        Value rp = add(gate(xt, 1), gate(hr, 1));
        if (rb) {
          zp = add(zp, rbz);
          rp = add(rp, rbr);
        }
        Value z = applyActivation(ctx, da[0], clipped(zp));
        Value rg = applyActivation(ctx, da[0], clipped(rp));
        Value hp;
        if (linearBeforeReset) {
          Value hh = gate(hr, 2);
          if (rb)
            hh = add(hh, rbh);
          hp = add(gate(xt, 2), mul(rg, hh));
        } else { // (r . H) x Rh^T
          Value rh =
              ctx.slice(rd, {2 * hidden, 0}, {3 * hidden, hidden}, {1, 1});
          hp = add(gate(xt, 2), matmulT(ctx, mul(rg, h), rh));
          if (rb)
            hp = add(hp, rbh);
        }
        Value ht = applyActivation(ctx, da[1], clipped(hp));
        Value one = ctx.splat(et, {}, 1);
        h = add(mul(ctx.binary(BinaryKind::sub, one, z), ht), mul(z, h));
      } else {
        Value pre = add(xt, hr);
        if (rb)
          pre = add(pre, rb);
        Value ip = gate(pre, 0), op_ = gate(pre, 1), fp = gate(pre, 2),
              cp = gate(pre, 3);
        if (peep) {
          ip = add(ip, mul(pi, c));
          fp = add(fp, mul(pf, c));
        }
        Value ig = applyActivation(ctx, da[0], clipped(ip));
        Value fg = inputForget
                       ? ctx.binary(BinaryKind::sub, ctx.splat(et, {}, 1), ig)
                       : applyActivation(ctx, da[0], clipped(fp));
        Value cg = applyActivation(ctx, da[1], clipped(cp));
        c = add(mul(fg, c), mul(ig, cg));
        if (peep)
          op_ = add(op_, mul(po, c));
        Value og = applyActivation(ctx, da[0], clipped(op_));
        h = mul(og, applyActivation(ctx, da[2], c));
      }
      if (!h)
        return failure();
      steps[t] = ctx.reshape(h, {1, 1, batch, hidden});
    }
    ys.push_back(concat(ctx, steps, 0));
    yhs.push_back(ctx.reshape(h, {1, batch, hidden}));
    if (c)
      ycs.push_back(ctx.reshape(c, {1, batch, hidden}));
  }
  Value y = concat(ctx, ys, 1);
  Value yh = concat(ctx, yhs, 0);
  Value yc = cell == Cell::LSTM ? concat(ctx, ycs, 0) : Value();
  if (layout == 1) {
    y = ctx.transpose(y, {2, 0, 1, 3});
    yh = ctx.transpose(yh, {1, 0, 2});
    if (yc)
      yc = ctx.transpose(yc, {1, 0, 2});
  }
  ctx.setOutput(0, y);
  ctx.setOutput(1, yh);
  if (yc)
    ctx.setOutput(2, yc);
  return success();
}

} // namespace

void registerRecurrentConverters(llvm::StringMap<ConverterFn> &t) {
  t["RNN"] = convertRecurrent;
  t["GRU"] = convertRecurrent;
  t["LSTM"] = convertRecurrent;
}

} // namespace cleave::onnximport
