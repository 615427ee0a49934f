//===- MathOps.cpp - MatMul, Gemm and Einsum as cleave.contract ----------===//

#include "NodeContext.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
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

} // namespace

Value buildMatMul(NodeContext &ctx, Value a, Value b) {
  int64_t ra = rankOf(a), rb = rankOf(b);
  if (ra == 0 || rb == 0) {
    ctx.error() << "inputs must have rank >= 1";
    return {};
  }
  if (elemOf(a) != elemOf(b)) {
    ctx.error() << "input element types differ";
    return {};
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
    return {};
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
      return {};
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
  return ctx.reshape(r, out);
}

namespace {

LogicalResult convertMatMul(NodeContext &ctx) {
  Value a = ctx.input(0), b = ctx.input(1);
  if (!a || !b)
    return failure();
  Value r = buildMatMul(ctx, a, b);
  return ctx.finish(r);
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
  int64_t ta = ctx.attrInt("transA", 0) != 0,
          tb = ctx.attrInt("transB", 0) != 0;
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
  return ctx.finish(r);
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
  if (rank >= 0 &&
      (e < 0 || (dots == StringRef::npos && explicitCount != rank))) {
    why =
        "term '" + term.str() + "' does not match rank " + std::to_string(rank);
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
    // A label of both that the output and the operands after `next` do not
    // have is contracted here; one they have stays a batch dimension.
    std::set<int> later = outSet;
    for (size_t j = i + 1; j < ops.size(); ++j)
      later.insert(ops[j].labels.begin(), ops[j].labels.end());
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
      if (later.count(l)) {
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
  return ctx.finish(ctx.transpose(acc.value, perm));
}

/// Det of [..., n, n] for n <= 4: the sum over permutations of the signed
/// products (24 terms at most), each element a slice of the input.
LogicalResult convertDet(NodeContext &ctx) {
  Value x = ctx.input(0);
  if (!x)
    return failure();
  int64_t rank = rankOf(x);
  if (rank < 2 || !isa<FloatType>(elemOf(x)) ||
      shapeOf(x)[rank - 1] != shapeOf(x)[rank - 2] ||
      shapeOf(x)[rank - 1] > 4 || shapeOf(x)[rank - 1] < 1) {
    ctx.error() << "needs float square matrices of size 1 to 4, got "
                << x.getType();
    return failure();
  }
  int64_t n = shapeOf(x)[rank - 1];
  SmallVector<int64_t> batch(shapeOf(x).drop_back(2));
  auto element = [&](int64_t i, int64_t j) {
    SmallVector<int64_t> start(rank, 0), limit(shapeOf(x)), strides(rank, 1);
    start[rank - 2] = i;
    start[rank - 1] = j;
    limit[rank - 2] = i + 1;
    limit[rank - 1] = j + 1;
    return ctx.reshape(ctx.slice(x, start, limit, strides), batch);
  };
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, n));
  Value sum;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j)
        inversions += perm[i] > perm[j];
    Value term = element(0, perm[0]);
    for (int64_t i = 1; i < n; ++i)
      term = ctx.binary(BinaryKind::mul, term, element(i, perm[i]));
    if (!sum)
      sum = inversions % 2 ? ctx.unary(UnaryKind::neg, term) : term;
    else
      sum = ctx.binary(inversions % 2 ? BinaryKind::sub : BinaryKind::add, sum,
                       term);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return ctx.finish(sum);
}

/// AffineGrid (opset 20): theta [N, d, d+1] times the homogeneous
/// coordinates (x, y[, z], 1) of every output point, in [-1, 1], of the
/// spatial size the `size` input gives; the result is [N, <spatial>, d].
LogicalResult convertAffineGrid(NodeContext &ctx) {
  Value theta = ctx.input(0);
  auto size = ctx.constInts(1, "size");
  if (!theta || failed(size))
    return failure();
  int64_t d = static_cast<int64_t>(size->size()) - 2;
  if ((d != 2 && d != 3) || !isa<FloatType>(elemOf(theta)) ||
      shapeOf(theta) != ArrayRef<int64_t>({(*size)[0], d, d + 1})) {
    ctx.error() << "needs a size of 4 or 5 values [N, C, (D,) H, W] and a "
                   "float theta of shape [N, d, d+1]";
    return failure();
  }
  SmallVector<int64_t> spatial(size->begin() + 2, size->end());
  if (llvm::any_of(spatial, [](int64_t v) { return v <= 0; }) ||
      product(spatial) * (d + 1) > kMaxFoldElements * 16) {
    ctx.error() << "spatial size must be positive and moderate";
    return failure();
  }
  bool align = ctx.attrInt("align_corners", 0) != 0;
  auto coord = [&](int64_t i, int64_t n) -> double {
    if (align)
      return n == 1 ? -1.0 : -1.0 + 2.0 * i / (n - 1);
    return -1.0 + (2.0 * i + 1.0) / n;
  };
  ConstTensor base;
  base.elemType = elemOf(theta);
  int64_t points = product(spatial);
  base.shape = {points, d + 1};
  for (int64_t p = 0; p < points; ++p) {
    // p walks the spatial dims row-major; the coordinates list x (the last
    // dim) first.
    SmallVector<int64_t> idx(d);
    for (int64_t k = d - 1, rem = p; k >= 0; --k) {
      idx[k] = rem % spatial[k];
      rem /= spatial[k];
    }
    for (int64_t k = d - 1; k >= 0; --k)
      base.floats.push_back(coord(idx[k], spatial[k]));
    base.floats.push_back(1.0);
  }
  Value grid = contract(ctx, theta, ctx.constant(base), {}, {}, {2}, {1});
  grid = ctx.transpose(grid, {0, 2, 1});
  SmallVector<int64_t> shape{(*size)[0]};
  shape.append(spatial);
  shape.push_back(d);
  return ctx.finish(ctx.reshape(grid, shape));
}

/// Col2Im (opset 18) with constant image and block shapes: the sum of every
/// block's column into the image is a product with a constant 0/1 matrix
/// [K * L, image pixels] (K kernel offsets, L blocks).
LogicalResult convertCol2Im(NodeContext &ctx) {
  Value x = ctx.input(0);
  auto image = ctx.constInts(1, "image_shape");
  auto block = ctx.constInts(2, "block_shape");
  if (!x || failed(image) || failed(block))
    return failure();
  int64_t d = image->size();
  if (d == 0 || static_cast<int64_t>(block->size()) != d || rankOf(x) != 3) {
    ctx.error() << "needs a 3-D input and image_shape and block_shape of one "
                   "length";
    return failure();
  }
  auto orOnes = [&](StringRef name, int64_t count, int64_t fill) {
    SmallVector<int64_t> v = ctx.attrInts(name);
    if (v.empty())
      v.assign(count, fill);
    return v;
  };
  SmallVector<int64_t> dil = orOnes("dilations", d, 1),
                       strides = orOnes("strides", d, 1),
                       pads = orOnes("pads", 2 * d, 0);
  if (static_cast<int64_t>(dil.size()) != d ||
      static_cast<int64_t>(strides.size()) != d ||
      static_cast<int64_t>(pads.size()) != 2 * d) {
    ctx.error() << "dilations, strides and pads must have " << d << ", " << d
                << " and " << 2 * d << " values";
    return failure();
  }
  SmallVector<int64_t> blocks(d);
  int64_t k = 1, l = 1, pixels = 1;
  for (int64_t i = 0; i < d; ++i) {
    int64_t span = dil[i] * ((*block)[i] - 1) + 1;
    int64_t room = (*image)[i] + pads[i] + pads[i + d] - span;
    if ((*image)[i] <= 0 || (*block)[i] <= 0 || dil[i] <= 0 ||
        strides[i] <= 0 || room < 0) {
      ctx.error() << "image_shape, block_shape, dilations and strides must be "
                     "positive and the block fit the padded image";
      return failure();
    }
    blocks[i] = room / strides[i] + 1;
    k *= (*block)[i];
    l *= blocks[i];
    pixels *= (*image)[i];
  }
  ArrayRef<int64_t> xs = shapeOf(x);
  if (xs[1] % k != 0 || xs[2] != l) {
    ctx.error() << "input " << x.getType() << " must be [N, C * " << k << ", "
                << l << "] for these shapes";
    return failure();
  }
  if (k * l * pixels > (int64_t(1) << 24)) {
    ctx.error() << "the image (" << pixels << " pixels from " << k * l
                << " block elements) is too large";
    return failure();
  }
  ConstTensor m;
  m.elemType = elemOf(x);
  m.shape = {k * l, pixels};
  m.allocate();
  SmallVector<int64_t> kk(d), bb(d);
  for (int64_t ki = 0; ki < k; ++ki) {
    int64_t rem = ki;
    for (int64_t i = d - 1; i >= 0; --i) {
      kk[i] = rem % (*block)[i];
      rem /= (*block)[i];
    }
    for (int64_t bi = 0; bi < l; ++bi) {
      int64_t r = bi;
      for (int64_t i = d - 1; i >= 0; --i) {
        bb[i] = r % blocks[i];
        r /= blocks[i];
      }
      int64_t flat = 0;
      bool inside = true;
      for (int64_t i = 0; i < d; ++i) {
        int64_t y = bb[i] * strides[i] - pads[i] + kk[i] * dil[i];
        inside &= y >= 0 && y < (*image)[i];
        flat = flat * (*image)[i] + y;
      }
      if (!inside)
        continue;
      int64_t at = (ki * l + bi) * pixels + flat;
      if (m.isFloat())
        m.floats[at] += 1;
      else
        m.ints[at] += 1;
    }
  }
  int64_t c = xs[1] / k;
  Value cols = ctx.reshape(x, {xs[0], c, k * l});
  Value img = contract(ctx, cols, ctx.constant(m), {}, {}, {2}, {0});
  SmallVector<int64_t> shape{xs[0], c};
  shape.append(image->begin(), image->end());
  return ctx.finish(ctx.reshape(img, shape));
}

} // namespace

void registerMathConverters(llvm::StringMap<ConverterFn> &t) {
  t["MatMul"] = convertMatMul;
  t["AffineGrid"] = convertAffineGrid;
  t["Col2Im"] = convertCol2Im;
  t["Det"] = convertDet;
  t["Gemm"] = convertGemm;
  t["Einsum"] = convertEinsum;
}

} // namespace cleave::onnximport
