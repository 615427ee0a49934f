//===- MathOps.cpp - MatMul, Gemm and Einsum as cleave.contract ----------===//

#include "NodeContext.h"

#include "llvm/ADT/StringExtras.h"

#include <map>
#include <set>

using namespace mlir;
using namespace mlir::cleave;

namespace cleave::onnximport {
namespace {

Value contract(NodeContext &ctx, Value a, Value b, ArrayRef<int64_t> lb,
               ArrayRef<int64_t> rb, ArrayRef<int64_t> lc,
               ArrayRef<int64_t> rc) {
  SmallVector<int64_t> shape;
  auto as = shapeOf(a), bs = shapeOf(b);
  for (int64_t d : lb)
    shape.push_back(as[d]);
  for (int64_t d = 0; d < (int64_t)as.size(); ++d)
    if (!llvm::is_contained(lb, d) && !llvm::is_contained(lc, d))
      shape.push_back(as[d]);
  for (int64_t d = 0; d < (int64_t)bs.size(); ++d)
    if (!llvm::is_contained(rb, d) && !llvm::is_contained(rc, d))
      shape.push_back(bs[d]);
  return ContractOp::create(ctx.b, ctx.loc,
                            RankedTensorType::get(shape, elemOf(a)), a, b, lb,
                            rb, lc, rc)
      .getResult();
}

LogicalResult convertMatMul(NodeContext &ctx) {
  Value a = ctx.input(0), b = ctx.input(1);
  if (!a || !b)
    return failure();
  int64_t ra = rankOf(a), rb = rankOf(b);
  if (ra == 0 || rb == 0) {
    ctx.error() << "inputs must have rank >= 1";
    return failure();
  }
  if (elemOf(a) != elemOf(b)) {
    ctx.error() << "input element types differ";
    return failure();
  }
  if (ra == 1)
    a = ctx.reshape(a, {1, shapeOf(a)[0]});
  if (rb == 1)
    b = ctx.reshape(b, {shapeOf(b)[0], 1});
  auto as = shapeOf(a), bs = shapeOf(b);
  int64_t k = as.back();
  if (k != bs[bs.size() - 2]) {
    ctx.error() << "contracted dimensions differ: " << a.getType() << " x "
                << b.getType();
    return failure();
  }
  Value r;
  if (bs.size() == 2) {
    // [..., M, K] x [K, N]: no batch dimensions needed.
    r = contract(ctx, a, b, {}, {}, {(int64_t)as.size() - 1}, {0});
  } else {
    auto batch = broadcastShapes(as.drop_back(2), bs.drop_back(2));
    if (!batch) {
      ctx.error() << "batch dimensions do not broadcast: " << a.getType()
                  << " x " << b.getType();
      return failure();
    }
    SmallVector<int64_t> sa(*batch), sb(*batch);
    sa.append(as.end() - 2, as.end());
    sb.append(bs.end() - 2, bs.end());
    a = ctx.broadcastTo(a, sa);
    b = ctx.broadcastTo(b, sb);
    int64_t nb = batch->size();
    SmallVector<int64_t> bd = llvm::to_vector(llvm::seq<int64_t>(0, nb));
    r = contract(ctx, a, b, bd, bd, {nb + 1}, {nb});
  }
  SmallVector<int64_t> out(shapeOf(r));
  if (rb == 1)
    out.pop_back();
  if (ra == 1)
    out.erase(out.end() - (rb == 1 ? 1 : 2));
  ctx.setOutput(0, ctx.reshape(r, out));
  return success();
}

LogicalResult convertGemm(NodeContext &ctx) {
  Value a = ctx.input(0), b = ctx.input(1);
  if (!a || !b)
    return failure();
  if (rankOf(a) != 2 || rankOf(b) != 2 || elemOf(a) != elemOf(b)) {
    ctx.error() << "A and B must be matrices of one element type, got "
                << a.getType() << " and " << b.getType();
    return failure();
  }
  int64_t ta = ctx.attrInt("transA", 0) != 0, tb = ctx.attrInt("transB", 0) != 0;
  int64_t ca = ta ? 0 : 1, cb = tb ? 1 : 0;
  if (shapeOf(a)[ca] != shapeOf(b)[cb]) {
    ctx.error() << "contracted dimensions differ: " << a.getType() << " x "
                << b.getType();
    return failure();
  }
  Value r = contract(ctx, a, b, {}, {}, {ca}, {cb});
  double alpha = ctx.attrFloat("alpha", 1.0), beta = ctx.attrFloat("beta", 1.0);
  if (alpha != 1.0)
    r = ctx.binary(BinaryKind::mul, r, ctx.splat(elemOf(r), {}, alpha));
  if (ctx.hasInput(2) && beta != 0.0) {
    Value c = ctx.input(2);
    if (!c)
      return failure();
    auto s = broadcastShapes(shapeOf(r), shapeOf(c));
    if (!s || ArrayRef<int64_t>(*s) != shapeOf(r)) {
      ctx.error() << "C " << c.getType() << " does not broadcast to "
                  << r.getType();
      return failure();
    }
    if (beta != 1.0)
      c = ctx.binary(BinaryKind::mul, c, ctx.splat(elemOf(c), {}, beta));
    r = ctx.binary(BinaryKind::add, r, c);
  }
  if (!r)
    return failure();
  ctx.setOutput(0, r);
  return success();
}

//===----------------------------------------------------------------------===//
// Einsum
//===----------------------------------------------------------------------===//

struct Operand {
  Value value;
  SmallVector<int> labels; // one per dimension; ellipsis dims are >= 256
};

/// Parses one term ("ab...c") for a tensor of `rank`; ellipsis dims get
/// labels 256 + position aligned right to `ellipsisRank`.
bool parseTerm(StringRef term, int64_t rank, int64_t &ellipsisRank,
               SmallVector<int> &labels, bool assign, std::string &why) {
  labels.clear();
  size_t dots = term.find("...");
  int64_t explicitCount = term.size() - (dots == StringRef::npos ? 0 : 3);
  for (char ch : term)
    if (ch != '.' && !llvm::isAlpha(ch)) {
      why = std::string("invalid label '") + ch + "'";
      return false;
    }
  int64_t e = dots == StringRef::npos ? 0 : rank - explicitCount;
  if (rank >= 0 && (e < 0 || (dots == StringRef::npos && explicitCount != rank))) {
    why = "term '" + term.str() + "' does not match rank " + std::to_string(rank);
    return false;
  }
  if (assign)
    ellipsisRank = std::max(ellipsisRank, e);
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      int64_t n = rank >= 0 ? e : ellipsisRank;
      for (int64_t j = 0; j < n; ++j)
        labels.push_back(256 + (ellipsisRank - n) + j);
      i += 2;
      continue;
    }
    labels.push_back(term[i]);
  }
  return true;
}

/// Sums `op` over labels not in `keep`.
void reduceAway(NodeContext &ctx, Operand &op, const std::set<int> &keep) {
  SmallVector<int64_t> dims;
  SmallVector<int> labels;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (keep.count(op.labels[d]))
      labels.push_back(op.labels[d]);
    else
      dims.push_back(d);
  }
  if (dims.empty())
    return;
  op.value = ctx.reduce(ReduceKind::sum, op.value, dims, false);
  op.labels = labels;
}

LogicalResult convertEinsum(NodeContext &ctx) {
  std::string eq;
  for (char c : ctx.attrString("equation", ""))
    if (c != ' ')
      eq.push_back(c);
  StringRef eqRef(eq);
  auto [lhs, rhs] = eqRef.split("->");
  bool explicitOut = eqRef.contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if ((int)terms.size() != ctx.numInputs() || terms.empty()) {
    ctx.error() << "equation '" << eq << "' has " << terms.size()
                << " terms for " << ctx.numInputs() << " inputs";
    return failure();
  }
  std::string why;
  int64_t ellipsisRank = 0;
  SmallVector<Operand> ops;
  for (size_t i = 0; i < terms.size(); ++i) {
    Value v = ctx.input(i);
    if (!v)
      return failure();
    Operand op{v, {}};
    if (!parseTerm(terms[i], rankOf(v), ellipsisRank, op.labels, true, why)) {
      ctx.error() << why;
      return failure();
    }
    ops.push_back(op);
  }
  // Re-parse to align ellipsis labels to the widest ellipsis.
  std::map<int, int64_t> sizes;
  std::map<int, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t unused = ellipsisRank;
    parseTerm(terms[i], rankOf(ops[i].value), unused, ops[i].labels, false,
              why);
    std::set<int> seen;
    for (size_t d = 0; d < ops[i].labels.size(); ++d) {
      int l = ops[i].labels[d];
      if (!seen.insert(l).second) {
        ctx.error() << "repeated label in one term (diagonal) is not "
                       "supported";
        return failure();
      }
      uses[l]++;
      int64_t n = shapeOf(ops[i].value)[d];
      auto [it, inserted] = sizes.insert({l, n});
      if (!inserted && it->second != n) {
        if (it->second != 1 && n != 1) {
          ctx.error() << "label sizes differ: " << it->second << " vs " << n;
          return failure();
        }
        it->second = std::max(it->second, n);
      }
    }
  }
  if (elemOf(ops[0].value) != elemOf(ops.back().value)) {
    ctx.error() << "inputs differ in element type";
    return failure();
  }
  // Broadcast size-1 dims to the label size.
  for (Operand &op : ops) {
    SmallVector<int64_t> shape;
    for (int l : op.labels)
      shape.push_back(sizes[l]);
    op.value = ctx.broadcastTo(op.value, shape);
  }
  SmallVector<int> outLabels;
  if (explicitOut) {
    int64_t unused = ellipsisRank;
    if (!parseTerm(rhs, -1, unused, outLabels, false, why)) {
      ctx.error() << why;
      return failure();
    }
    for (int l : outLabels)
      if (!sizes.count(l)) {
        ctx.error() << "output label '" << (char)l << "' is not in any input";
        return failure();
      }
  } else {
    for (int64_t j = 0; j < ellipsisRank; ++j)
      outLabels.push_back(256 + j);
    for (auto &[l, n] : uses)
      if (l < 256 && n == 1)
        outLabels.push_back(l);
  }
  std::set<int> outSet(outLabels.begin(), outLabels.end());

  Operand acc = ops[0];
  for (size_t i = 1; i <= ops.size(); ++i) {
    std::set<int> keep = outSet;
    for (size_t j = i; j < ops.size(); ++j)
      keep.insert(ops[j].labels.begin(), ops[j].labels.end());
    if (i == ops.size()) {
      reduceAway(ctx, acc, keep);
      break;
    }
    Operand next = ops[i];
    std::set<int> keepA = keep, keepB = keep;
    keepA.insert(next.labels.begin(), next.labels.end());
    keepB.insert(acc.labels.begin(), acc.labels.end());
    reduceAway(ctx, acc, keepA);
    reduceAway(ctx, next, keepB);
    SmallVector<int64_t> lb, rb, lc, rc;
    SmallVector<int> batch, contractL;
    for (size_t d = 0; d < acc.labels.size(); ++d) {
      int l = acc.labels[d];
      auto it = llvm::find(next.labels, l);
      if (it == next.labels.end())
        continue;
      int64_t e = it - next.labels.begin();
      if (keep.count(l)) {
        lb.push_back(d);
        rb.push_back(e);
        batch.push_back(l);
      } else {
        lc.push_back(d);
        rc.push_back(e);
      }
    }
    SmallVector<int> labels(batch);
    for (int l : acc.labels)
      if (!llvm::is_contained(next.labels, l))
        labels.push_back(l);
    for (int l : next.labels)
      if (!llvm::is_contained(acc.labels, l))
        labels.push_back(l);
    acc.value = contract(ctx, acc.value, next.value, lb, rb, lc, rc);
    acc.labels = labels;
  }
  SmallVector<int64_t> perm;
  for (int l : outLabels) {
    auto it = llvm::find(acc.labels, l);
    if (it == acc.labels.end()) {
      ctx.error() << "internal: label lost during contraction";
      return failure();
    }
    perm.push_back(it - acc.labels.begin());
  }
  ctx.setOutput(0, ctx.transpose(acc.value, perm));
  return success();
}

} // namespace

void registerMathConverters(llvm::StringMap<ConverterFn> &t) {
  t["MatMul"] = convertMatMul;
  t["Gemm"] = convertGemm;
  t["Einsum"] = convertEinsum;
}

} // namespace cleave::onnximport
