//===- CleaveShardingRules.cpp - ShardingRule and every op's rule ---------===//

#include "Cleave/IR/CleaveOps.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <numeric>

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// ShardingRule
//===----------------------------------------------------------------------===//

static int64_t rankOf(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return shaped && shaped.hasRank() ? shaped.getRank() : 0;
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

ShardingRule ShardingRule::forOp(Operation *op) {
  ShardingRule rule;
  for (Type t : op->getOperandTypes())
    rule.operands.emplace_back(rankOf(t));
  for (Type t : op->getResultTypes())
    rule.results.emplace_back(rankOf(t));
  return rule;
}

ShardingRule ShardingRule::replicatedOnly(Operation *op, StringRef reason) {
  ShardingRule rule = forOp(op);
  rule.replicatedReason = reason.str();
  return rule;
}

int64_t ShardingRule::addFactor(int64_t size, FactorKind kind) {
  factors.push_back({size, kind, ReduceKind::sum});
  return factors.size() - 1;
}

int64_t ShardingRule::addReduction(int64_t size, ReduceKind kind) {
  factors.push_back({size, FactorKind::Reduction, kind});
  return factors.size() - 1;
}

void ShardingRule::setExchange(int64_t factor, int64_t with) {
  assert(factors[factor].kind == FactorKind::NeedReplication &&
         factors[with].kind == FactorKind::Parallel &&
         "an exchange trades a need-replication factor for a parallel one");
  factors[factor].exchangeWith = with;
}

void ShardingRule::mapOperand(unsigned index, int64_t dim, int64_t factor) {
  operands[index][dim].push_back(factor);
}

void ShardingRule::mapResult(unsigned index, int64_t dim, int64_t factor) {
  results[index][dim].push_back(factor);
}

SmallVector<int64_t> ShardingRule::addIdentity(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> ids;
  for (int64_t d = 0, e = shape.size(); d < e; ++d) {
    int64_t f = addFactor(shape[d]);
    ids.push_back(f);
    for (TensorFactors &t : operands)
      if ((int64_t)t.size() == e)
        t[d].push_back(f);
    for (TensorFactors &t : results)
      if ((int64_t)t.size() == e)
        t[d].push_back(f);
  }
  return ids;
}

bool ShardingRule::hasSimpleIndexing() const {
  SmallVector<bool> used(factors.size(), false);
  for (int64_t t = 0; t < getNumTensors(); ++t)
    for (const auto &dim : getTensor(t)) {
      if (dim.size() > 1)
        return false;
      for (int64_t f : dim)
        used[f] = true;
    }
  for (auto [f, u] : llvm::enumerate(used))
    if (!u && factors[f].size > 1)
      return false;
  return true;
}

AffineMap ShardingRule::getIndexingMap(MLIRContext *ctx, int64_t t) const {
  SmallVector<AffineExpr> exprs;
  for (const auto &dim : getTensor(t))
    exprs.push_back(dim.empty() ? getAffineConstantExpr(0, ctx)
                                : getAffineDimExpr(dim.front(), ctx));
  return AffineMap::get(factors.size(), 0, exprs, ctx);
}

SmallVector<AffineMap> ShardingRule::getIndexingMaps(MLIRContext *ctx) const {
  SmallVector<AffineMap> maps;
  for (int64_t t = 0; t < getNumTensors(); ++t)
    maps.push_back(getIndexingMap(ctx, t));
  return maps;
}

SmallVector<utils::IteratorType> ShardingRule::getIteratorTypes() const {
  return llvm::map_to_vector(factors, [](const ShardingFactor &f) {
    return f.kind == FactorKind::Reduction ? utils::IteratorType::reduction
                                           : utils::IteratorType::parallel;
  });
}

/// Factor names as in Shardy's rules: i, j, ..., z, then z_1, z_2, ...
std::string ShardingRule::getFactorName(int64_t f) {
  if (f < 18)
    return std::string(1, char('i' + f));
  return "z_" + std::to_string(f - 17);
}

void ShardingRule::print(raw_ostream &os) const {
  if (isReplicatedOnly()) {
    os << "replicated: " << replicatedReason;
    return;
  }
  auto printTensors = [&](ArrayRef<TensorFactors> tensors) {
    os << "(";
    llvm::interleaveComma(tensors, os, [&](const TensorFactors &t) {
      os << "[";
      llvm::interleaveComma(t, os, [&](const SmallVector<int64_t, 1> &dim) {
        if (dim.empty())
          os << "_";
        for (int64_t f : dim)
          os << getFactorName(f);
      });
      os << "]";
    });
    os << ")";
  };
  printTensors(operands);
  os << " -> ";
  printTensors(results);
  os << " {";
  llvm::interleaveComma(
      llvm::seq<int64_t>(0, factors.size()), os,
      [&](int64_t f) { os << getFactorName(f) << "=" << factors[f].size; });
  os << "}";
  auto printKind = [&](FactorKind kind, StringRef name) {
    SmallVector<int64_t> fs;
    for (int64_t f = 0, e = factors.size(); f < e; ++f)
      if (factors[f].kind == kind)
        fs.push_back(f);
    if (fs.empty())
      return;
    os << " " << name << "={";
    llvm::interleaveComma(fs, os, [&](int64_t f) {
      os << getFactorName(f);
      if (kind == FactorKind::Reduction &&
          factors[f].reduceKind != ReduceKind::sum)
        os << ":" << stringifyReduceKind(factors[f].reduceKind);
    });
    os << "}";
  };
  printKind(FactorKind::Reduction, "reduction");
  printKind(FactorKind::NeedReplication, "need_replication");
  SmallVector<int64_t> exchanged;
  for (int64_t f = 0, e = factors.size(); f < e; ++f)
    if (factors[f].exchangeWith >= 0)
      exchanged.push_back(f);
  if (exchanged.empty())
    return;
  os << " exchange={";
  llvm::interleaveComma(exchanged, os, [&](int64_t f) {
    os << getFactorName(f) << ":" << getFactorName(factors[f].exchangeWith);
  });
  os << "}";
}

std::string ShardingRule::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  print(os);
  return s;
}

std::string ShardingRule::check(Operation *op) const {
  if (operands.size() != op->getNumOperands() ||
      results.size() != op->getNumResults())
    return "the rule's tensor count differs from the op's";
  if (isReplicatedOnly())
    return {};
  auto checkTensor = [&](const TensorFactors &t, Type type,
                         const Twine &what) -> std::string {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || (int64_t)t.size() != shaped.getRank())
      return (what + ": the rule's rank differs from the type's").str();
    for (auto [d, dim] : llvm::enumerate(t)) {
      int64_t product = 1;
      for (int64_t f : dim) {
        if (f < 0 || f >= (int64_t)factors.size())
          return (what + ": dimension " + Twine(d) + " names no factor").str();
        product *= factors[f].size;
      }
      if (product != shaped.getDimSize(d))
        return (what + ": dimension " + Twine(d) + " has size " +
                Twine(shaped.getDimSize(d)) + " but its factors " +
                Twine(product))
            .str();
    }
    return {};
  };
  for (auto [i, t] : llvm::enumerate(operands))
    if (std::string e =
            checkTensor(t, op->getOperand(i).getType(), "operand " + Twine(i));
        !e.empty())
      return e;
  for (auto [i, t] : llvm::enumerate(results))
    if (std::string e =
            checkTensor(t, op->getResult(i).getType(), "result " + Twine(i));
        !e.empty())
      return e;
  return {};
}

ShardingRule mlir::cleave::getShardingRule(Operation *op) {
  if (auto iface = dyn_cast<ShardingRuleOpInterface>(op))
    return iface.getShardingRule();
  return ShardingRule::replicatedOnly(
      op,
      ("'" + op->getName().getStringRef() + "' has no sharding rule").str());
}

bool mlir::cleave::getReshapeFactors(ArrayRef<int64_t> from,
                                     ArrayRef<int64_t> to, ShardingRule &rule) {
  // Walk both shapes major to minor, cutting the current dimensions at
  // their common size whenever one divides the other. Size-1 dimensions
  // have no factor.
  size_t i = 0, j = 0;
  int64_t restFrom = 0, restTo = 0;
  auto skipOnes = [](ArrayRef<int64_t> shape, size_t &k, int64_t &rest) {
    while (rest <= 1 && k < shape.size()) {
      rest = shape[k];
      if (rest == 1) {
        ++k;
        rest = 0;
        continue;
      }
      break;
    }
  };
  SmallVector<std::pair<size_t, size_t>> pending;
  while (true) {
    if (restFrom == 0)
      skipOnes(from, i, restFrom);
    if (restTo == 0)
      skipOnes(to, j, restTo);
    if (i >= from.size() || j >= to.size())
      break;
    int64_t common;
    if (restFrom % restTo == 0)
      common = restTo;
    else if (restTo % restFrom == 0)
      common = restFrom;
    else
      return false;
    int64_t f = rule.addFactor(common);
    rule.mapOperand(0, i, f);
    rule.mapResult(0, j, f);
    restFrom /= common;
    restTo /= common;
    if (restFrom == 1) {
      ++i;
      restFrom = 0;
    }
    if (restTo == 1) {
      ++j;
      restTo = 0;
    }
  }
  return i >= from.size() && j >= to.size();
}

//===----------------------------------------------------------------------===//
// Elementwise and index generation
//===----------------------------------------------------------------------===//

static ShardingRule elementwiseRule(Operation *op) {
  ShardingRule rule = ShardingRule::forOp(op);
  rule.addIdentity(shapeOf(op->getResult(0)));
  return rule;
}

ShardingRule ConstantOp::getShardingRule() { return elementwiseRule(*this); }
// A rank's slice of an iota along `dimension` starts at its offset; the
// partitioner adds it.
ShardingRule IotaOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule RngKeyOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule UnaryOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule BinaryOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule CompareOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule SelectOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule ConvertOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule BitcastOp::getShardingRule() { return elementwiseRule(*this); }
ShardingRule PipelineTransferOp::getShardingRule() {
  return elementwiseRule(*this);
}
ShardingRule PipelineSumOp::getShardingRule() { return elementwiseRule(*this); }

ShardingRule BroadcastInDimOp::getShardingRule() {
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand()), out = shapeOf(getResult());
  ArrayRef<int64_t> dims = getBroadcastDimensions();
  for (int64_t d = 0, e = out.size(); d < e; ++d) {
    int64_t f = rule.addFactor(out[d]);
    rule.mapResult(0, d, f);
    // An operand dimension of the result's size follows it; one of size 1
    // is repeated and has no factor.
    if (auto *it = llvm::find(dims, d); it != dims.end()) {
      int64_t od = it - dims.begin();
      if (in[od] == out[d] && out[d] != 1)
        rule.mapOperand(0, od, f);
    }
  }
  return rule;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

ShardingRule ReshapeOp::getShardingRule() {
  ShardingRule rule = ShardingRule::forOp(*this);
  if (getReshapeFactors(shapeOf(getOperand()), shapeOf(getResult()), rule))
    return rule;
  // No common factors: the whole tensor is one need-replication factor on
  // each side.
  rule = ShardingRule::forOp(*this);
  auto addWhole = [&](ArrayRef<int64_t> shape, bool isOperand) {
    for (auto [d, size] : llvm::enumerate(shape)) {
      if (size == 1)
        continue;
      int64_t f = rule.addFactor(size, FactorKind::NeedReplication);
      isOperand ? rule.mapOperand(0, d, f) : rule.mapResult(0, d, f);
    }
  };
  addWhole(shapeOf(getOperand()), true);
  addWhole(shapeOf(getResult()), false);
  return rule;
}

ShardingRule TransposeOp::getShardingRule() {
  // One factor per result dimension, in result order (the lowering's loop
  // order, so that writes are contiguous): result[i] = operand[perm[i]].
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> out = shapeOf(getResult());
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> factorOfOperandDim(out.size());
  for (auto [i, size] : llvm::enumerate(out)) {
    int64_t f = rule.addFactor(size);
    rule.mapResult(0, i, f);
    factorOfOperandDim[perm[i]] = f;
  }
  for (auto [d, f] : llvm::enumerate(factorOfOperandDim))
    rule.mapOperand(0, d, f);
  return rule;
}

/// Operand dimension `d` and result dimension `d` share a parallel factor
/// when `same(d)`; otherwise each gets a need-replication factor of its
/// own (the op reads across the dimension: slices, pads, windows).
template <typename Same>
static ShardingRule sameDimsRule(Operation *op, unsigned operand,
                                 unsigned result, Same same) {
  ShardingRule rule = ShardingRule::forOp(op);
  ArrayRef<int64_t> in = shapeOf(op->getOperand(operand));
  ArrayRef<int64_t> out = shapeOf(op->getResult(result));
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    if (same(d)) {
      int64_t f = rule.addFactor(in[d]);
      rule.mapOperand(operand, d, f);
      rule.mapResult(result, d, f);
      continue;
    }
    rule.mapOperand(operand, d,
                    rule.addFactor(in[d], FactorKind::NeedReplication));
    rule.mapResult(result, d,
                   rule.addFactor(out[d], FactorKind::NeedReplication));
  }
  return rule;
}

ShardingRule SliceOp::getShardingRule() {
  ArrayRef<int64_t> in = shapeOf(getOperand());
  return sameDimsRule(*this, 0, 0, [&](int64_t d) {
    return getStartIndices()[d] == 0 && getLimitIndices()[d] == in[d] &&
           getStrides()[d] == 1;
  });
}

ShardingRule ReverseOp::getShardingRule() {
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand());
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    // A reversed dimension keeps its size but moves every element.
    FactorKind kind = llvm::is_contained(getDimensions(), d)
                          ? FactorKind::NeedReplication
                          : FactorKind::Parallel;
    int64_t f = rule.addFactor(in[d], kind);
    rule.mapOperand(0, d, f);
    rule.mapResult(0, d, f);
  }
  return rule;
}

ShardingRule ConcatOp::getShardingRule() {
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> out = shapeOf(getResult());
  int64_t axis = getDimension();
  for (int64_t d = 0, e = out.size(); d < e; ++d) {
    if (d == axis) {
      for (auto [i, input] : llvm::enumerate(getInputs()))
        rule.mapOperand(
            i, d,
            rule.addFactor(shapeOf(input)[d], FactorKind::NeedReplication));
      rule.mapResult(0, d, rule.addFactor(out[d], FactorKind::NeedReplication));
      continue;
    }
    int64_t f = rule.addFactor(out[d]);
    for (unsigned i = 0, n = getInputs().size(); i < n; ++i)
      rule.mapOperand(i, d, f);
    rule.mapResult(0, d, f);
  }
  return rule;
}

ShardingRule PadOp::getShardingRule() {
  // The padding value is a 0-d operand without dimensions.
  return sameDimsRule(*this, 0, 0, [&](int64_t d) {
    return getLow()[d] == 0 && getHigh()[d] == 0;
  });
}

ShardingRule GatherOp::getShardingRule() {
  // Rows of a table sharded along `axis` are gathered by the ranks that
  // hold them, indices shifted by the rank's offset; the others read zero
  // (an index out of range reads as zero), so the results are partial sums:
  // the vocabulary-parallel embedding.
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand());
  ArrayRef<int64_t> idx = shapeOf(getIndices());
  int64_t axis = getAxis();
  int64_t numIdx = idx.size();
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    if (d == axis) {
      rule.mapOperand(0, d, rule.addReduction(in[d], ReduceKind::sum));
      for (int64_t k = 0; k < numIdx; ++k) {
        int64_t f = rule.addFactor(idx[k]);
        rule.mapOperand(1, k, f);
        rule.mapResult(0, axis + k, f);
      }
      continue;
    }
    int64_t f = rule.addFactor(in[d]);
    rule.mapOperand(0, d, f);
    rule.mapResult(0, d < axis ? d : d + numIdx - 1, f);
  }
  return rule;
}

ShardingRule GatherElementsOp::getShardingRule() {
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand());
  ArrayRef<int64_t> idx = shapeOf(getIndices());
  int64_t axis = getAxis();
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    // The indices and the result share every dimension; the operand shares
    // those of equal size outside `axis`.
    int64_t f = rule.addFactor(idx[d]);
    rule.mapOperand(1, d, f);
    rule.mapResult(0, d, f);
    if (d != axis && in[d] == idx[d])
      rule.mapOperand(0, d, f);
    else
      rule.mapOperand(0, d, rule.addFactor(in[d], FactorKind::NeedReplication));
  }
  return rule;
}

/// True if `v` is a constant whose every element is zero.
static bool isZeros(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return false;
  if (isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().isZero();
  return attr.getSplatValue<APInt>().isZero();
}

ShardingRule ScatterOp::getShardingRule() {
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand());
  ArrayRef<int64_t> upd = shapeOf(getUpdates());
  int64_t axis = getAxis();
  // Adding updates into zeros (the VJP of a gather: an embedding's
  // gradient) is a sum over the updates along `axis`: each rank adds its
  // share of them, and the partial results add up over the ranks.
  bool sumIntoZeros = getKind() == ScatterKind::add && isZeros(getOperand());
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    if (d != axis && in[d] == upd[d]) {
      int64_t f = rule.addFactor(in[d]);
      for (unsigned i = 0; i < 3; ++i)
        rule.mapOperand(i, d, f);
      rule.mapResult(0, d, f);
      continue;
    }
    if (d == axis && sumIntoZeros) {
      int64_t fo = rule.addFactor(in[d], FactorKind::NeedReplication);
      rule.mapOperand(0, d, fo);
      rule.mapResult(0, d, fo);
      int64_t fu = rule.addReduction(upd[d], ReduceKind::sum);
      rule.mapOperand(1, d, fu);
      rule.mapOperand(2, d, fu);
      continue;
    }
    int64_t fo = rule.addFactor(in[d], FactorKind::NeedReplication);
    rule.mapOperand(0, d, fo);
    rule.mapResult(0, d, fo);
    int64_t fu = rule.addFactor(upd[d], FactorKind::NeedReplication);
    rule.mapOperand(1, d, fu);
    rule.mapOperand(2, d, fu);
  }
  return rule;
}

ShardingRule TopKOp::getShardingRule() {
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand());
  int64_t dim = getDimension();
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    if (d == dim) {
      rule.mapOperand(0, d, rule.addFactor(in[d], FactorKind::NeedReplication));
      int64_t f = rule.addFactor(getK(), FactorKind::NeedReplication);
      rule.mapResult(0, d, f);
      rule.mapResult(1, d, f);
      continue;
    }
    int64_t f = rule.addFactor(in[d]);
    rule.mapOperand(0, d, f);
    rule.mapResult(0, d, f);
    rule.mapResult(1, d, f);
  }
  return rule;
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

ShardingRule ContractOp::getShardingRule() {
  // Factor order is the lowering's loop order: batch, lhs free, rhs free,
  // contracting.
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  ArrayRef<int64_t> lb = getLhsBatchingDimensions();
  ArrayRef<int64_t> rb = getRhsBatchingDimensions();
  ArrayRef<int64_t> lc = getLhsContractingDimensions();
  ArrayRef<int64_t> rc = getRhsContractingDimensions();
  int64_t out = 0;
  for (auto [l, r] : llvm::zip_equal(lb, rb)) {
    int64_t f = rule.addFactor(lhs[l]);
    rule.mapOperand(0, l, f);
    rule.mapOperand(1, r, f);
    rule.mapResult(0, out++, f);
  }
  auto addFree = [&](ArrayRef<int64_t> shape, ArrayRef<int64_t> batch,
                     ArrayRef<int64_t> contract, unsigned operand) {
    for (int64_t d : getFreeDimensions(shape.size(), batch, contract)) {
      int64_t f = rule.addFactor(shape[d]);
      rule.mapOperand(operand, d, f);
      rule.mapResult(0, out++, f);
    }
  };
  addFree(lhs, lb, lc, 0);
  addFree(rhs, rb, rc, 1);
  for (auto [l, r] : llvm::zip_equal(lc, rc)) {
    int64_t f = rule.addReduction(lhs[l], ReduceKind::sum);
    rule.mapOperand(0, l, f);
    rule.mapOperand(1, r, f);
  }
  return rule;
}

ShardingRule ReduceOp::getShardingRule() {
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand());
  int64_t out = 0;
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    if (llvm::is_contained(getDimensions(), d)) {
      rule.mapOperand(0, d, rule.addReduction(in[d], getKind()));
      continue;
    }
    int64_t f = rule.addFactor(in[d]);
    rule.mapOperand(0, d, f);
    rule.mapResult(0, out++, f);
  }
  return rule;
}

/// Ops that read a whole row along `dim` (arg_reduce, cumsum, softmax):
/// `dim` needs replication, every other dimension is parallel and kept in
/// the results unless `dropsDim`.
static ShardingRule rowRule(Operation *op, int64_t dim, bool dropsDim) {
  ShardingRule rule = ShardingRule::forOp(op);
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  int64_t out = 0;
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    bool isRow = d == dim;
    int64_t f = rule.addFactor(in[d], isRow ? FactorKind::NeedReplication
                                            : FactorKind::Parallel);
    rule.mapOperand(0, d, f);
    if (isRow && dropsDim)
      continue;
    rule.mapResult(0, out++, f);
  }
  return rule;
}

ShardingRule ArgReduceOp::getShardingRule() {
  return rowRule(*this, getDimension(), /*dropsDim=*/true);
}
ShardingRule CumSumOp::getShardingRule() {
  return rowRule(*this, getDimension(), /*dropsDim=*/false);
}
ShardingRule SoftmaxOp::getShardingRule() {
  return rowRule(*this, getDimension(), /*dropsDim=*/false);
}
// Every dimension is parallel, the row included: the partitioner computes a
// row split over ranks from the row maximum and sum of exponentials
// all-reduced across them (a vocabulary-parallel cross-entropy's
// log_softmax over the logits of its rank's vocabulary slice).
ShardingRule LogSoftmaxOp::getShardingRule() { return elementwiseRule(*this); }

/// Rows are parallel; the normalized dimensions, which the scales (scale,
/// bias) share, are read whole (the statistics).
static ShardingRule normalizationRule(Operation *op, int64_t axis,
                                      unsigned numScales) {
  ShardingRule rule = ShardingRule::forOp(op);
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    bool normalized = d >= axis;
    int64_t f = rule.addFactor(in[d], normalized ? FactorKind::NeedReplication
                                                 : FactorKind::Parallel);
    rule.mapOperand(0, d, f);
    rule.mapResult(0, d, f);
    if (normalized)
      for (unsigned s = 1; s <= numScales; ++s)
        rule.mapOperand(s, d - axis, f);
  }
  return rule;
}

ShardingRule LayerNormOp::getShardingRule() {
  return normalizationRule(*this, getAxis(), /*numScales=*/2);
}

ShardingRule RmsNormOp::getShardingRule() {
  return normalizationRule(*this, getAxis(), /*numScales=*/1);
}

namespace {
/// The factors attention and attention_grad share: batch, key/value heads,
/// the query heads of each group (-1 when a group is one head), queries and
/// keys.
struct AttentionFactors {
  int64_t b, kvHeads, groupHeads, sq, skv;

  /// Dimension 1 of a query-shaped operand or result (q, the result, its
  /// cotangent, dq): key/value heads major, the group's query heads minor,
  /// so a group's query heads stay with their key/value head.
  void mapQueryHeads(ShardingRule &rule, bool isResult, unsigned index) const {
    for (int64_t f : {kvHeads, groupHeads})
      if (f >= 0)
        isResult ? rule.mapResult(index, 1, f) : rule.mapOperand(index, 1, f);
  }
  /// A bias (operand `index`) maps its full-size dimensions only.
  void mapBias(ShardingRule &rule, unsigned index, ArrayRef<int64_t> m) const {
    if (m[0] != 1)
      rule.mapOperand(index, 0, b);
    if (m[1] != 1)
      mapQueryHeads(rule, false, index);
    if (m[2] != 1)
      rule.mapOperand(index, 2, sq);
    rule.mapOperand(index, 3, skv);
  }
};

/// Adds the shared factors of an attention with these q and k; queries are
/// parallel unless `queriesNeedReplication`.
template <typename OpTy>
AttentionFactors addAttentionFactors(ShardingRule &rule, OpTy op,
                                     bool queriesNeedReplication) {
  ArrayRef<int64_t> q = shapeOf(op.getQ()), k = shapeOf(op.getK());
  int64_t group = op.getGroupSize();
  AttentionFactors f;
  f.b = rule.addFactor(q[0]);
  f.kvHeads = rule.addFactor(k[1]);
  f.groupHeads = group > 1 ? rule.addFactor(group) : -1;
  f.sq =
      rule.addFactor(q[2], queriesNeedReplication ? FactorKind::NeedReplication
                                                  : FactorKind::Parallel);
  f.skv = rule.addFactor(k[2], FactorKind::NeedReplication);
  // All-to-all context parallelism: a sequence split over an axis the
  // partitioner may exchange becomes a split of the key/value heads (each
  // rank attends over the whole sequence for its heads).
  rule.setExchange(f.skv, f.kvHeads);
  if (queriesNeedReplication)
    rule.setExchange(f.sq, f.kvHeads);
  return f;
}
} // namespace

ShardingRule AttentionOp::getShardingRule() {
  // Batch and heads are parallel (AttentionFactors). The keys and the head
  // size are read whole (the softmax and the scores); queries are
  // independent rows unless a causal mask ties them to their positions.
  // The value head size is parallel.
  ShardingRule rule = ShardingRule::forOp(*this);
  AttentionFactors f = addAttentionFactors(rule, *this, getCausal());
  ArrayRef<int64_t> q = shapeOf(getQ()), v = shapeOf(getV());
  int64_t d = rule.addFactor(q[3], FactorKind::NeedReplication);
  int64_t dv = rule.addFactor(v[3]);
  for (unsigned i : {0u, 1u, 2u})
    rule.mapOperand(i, 0, f.b);
  f.mapQueryHeads(rule, false, 0);
  rule.mapOperand(1, 1, f.kvHeads);
  rule.mapOperand(2, 1, f.kvHeads);
  rule.mapOperand(0, 2, f.sq);
  rule.mapOperand(1, 2, f.skv);
  rule.mapOperand(2, 2, f.skv);
  rule.mapOperand(0, 3, d);
  rule.mapOperand(1, 3, d);
  rule.mapOperand(2, 3, dv);
  rule.mapResult(0, 0, f.b);
  f.mapQueryHeads(rule, true, 0);
  rule.mapResult(0, 2, f.sq);
  rule.mapResult(0, 3, dv);
  if (Value bias = getBias())
    f.mapBias(rule, 3, shapeOf(bias));
  return rule;
}

ShardingRule AttentionGradOp::getShardingRule() {
  // As the forward's rule, but only batch and heads are parallel: each
  // gradient sums over what the others keep (dq over the keys, dk and dv
  // over the queries, dq and dk over the value head size).
  ShardingRule rule = ShardingRule::forOp(*this);
  AttentionFactors f = addAttentionFactors(rule, *this, true);
  ArrayRef<int64_t> q = shapeOf(getQ()), v = shapeOf(getV());
  int64_t d = rule.addFactor(q[3], FactorKind::NeedReplication);
  int64_t dv = rule.addFactor(v[3], FactorKind::NeedReplication);
  // Operands q, k, v, out, dout, [bias]; results dq, dk, dv.
  auto mapLike = [&](bool isResult, unsigned index, char what) {
    auto map = [&](int64_t dim, int64_t factor) {
      isResult ? rule.mapResult(index, dim, factor)
               : rule.mapOperand(index, dim, factor);
    };
    bool queries = what == 'q' || what == 'o';
    map(0, f.b);
    if (queries)
      f.mapQueryHeads(rule, isResult, index);
    else
      map(1, f.kvHeads);
    map(2, queries ? f.sq : f.skv);
    map(3, what == 'v' || what == 'o' ? dv : d);
  };
  mapLike(false, 0, 'q');
  mapLike(false, 1, 'k');
  mapLike(false, 2, 'v');
  mapLike(false, 3, 'o');
  mapLike(false, 4, 'o');
  mapLike(true, 0, 'q');
  mapLike(true, 1, 'k');
  mapLike(true, 2, 'v');
  if (Value bias = getBias())
    f.mapBias(rule, 5, shapeOf(bias));
  return rule;
}

// The block forms exist only on local shapes: the partitioner makes them
// from a sequence already split over the ring.
ShardingRule AttentionBlockOp::getShardingRule() {
  return ShardingRule::replicatedOnly(
      *this, "a ring attention block is made on local shapes, after "
             "partitioning");
}

ShardingRule AttentionBlockGradOp::getShardingRule() {
  return ShardingRule::replicatedOnly(
      *this, "a ring attention block is made on local shapes, after "
             "partitioning");
}

/// The factors of a grouped matmul and its weight gradient: rows (M), the
/// experts (E), K and N. Rows are parallel in the forward and summed in the
/// weight gradient (each expert's gradient adds its rows); K is summed in
/// the forward and parallel in the gradient; N is parallel in both. The
/// experts (E) are a sum in the forward, parallel in the gradient.
static ShardingRule groupedMatmulRule(Operation *op, Value x, Value weights,
                                      bool weightsIsResult, Value rows,
                                      bool rowsIsResult, bool transposeW) {
  ShardingRule rule = ShardingRule::forOp(op);
  ArrayRef<int64_t> xs = shapeOf(x), ws = shapeOf(weights);
  int64_t kDim = transposeW ? 2 : 1, nDim = transposeW ? 1 : 2;
  int64_t m = rowsIsResult ? rule.addFactor(xs[0])
                           : rule.addReduction(xs[0], ReduceKind::sum);
  // Experts split over ranks (expert parallelism): each rank multiplies
  // the rows routed to the experts it holds and gives zeros for the others,
  // so the forward's results are partial sums over the split; the weight
  // gradient's experts are its own (PartitionOpModels.cpp shifts the ids).
  int64_t e = weightsIsResult ? rule.addFactor(ws[0])
                              : rule.addReduction(ws[0], ReduceKind::sum);
  int64_t k = weightsIsResult ? rule.addFactor(xs[1])
                              : rule.addReduction(xs[1], ReduceKind::sum);
  int64_t n = rule.addFactor(ws[nDim]);
  auto map = [&](bool isResult, unsigned index, int64_t dim, int64_t factor) {
    isResult ? rule.mapResult(index, dim, factor)
             : rule.mapOperand(index, dim, factor);
  };
  // Operands x, weights or dy, group_ids; one result.
  map(false, 0, 0, m);
  map(false, 0, 1, k);
  map(false, 2, 0, m);
  map(weightsIsResult, weightsIsResult ? 0 : 1, 0, e);
  map(weightsIsResult, weightsIsResult ? 0 : 1, kDim, k);
  map(weightsIsResult, weightsIsResult ? 0 : 1, nDim, n);
  map(rowsIsResult, rowsIsResult ? 0 : 1, 0, m);
  map(rowsIsResult, rowsIsResult ? 0 : 1, 1, n);
  return rule;
}

ShardingRule GroupedMatmulOp::getShardingRule() {
  return groupedMatmulRule(*this, getX(), getW(), false, getResult(), true,
                           getTransposeW());
}

ShardingRule GroupedMatmulWeightGradOp::getShardingRule() {
  return groupedMatmulRule(*this, getX(), getResult(), true, getDy(), false,
                           getTransposeW());
}

ShardingRule RotaryOp::getShardingRule() {
  // Batch, heads and positions are parallel (the angles follow the
  // positions); a feature's partner lies across the feature dimension.
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> x = shapeOf(getX()), c = shapeOf(getCos());
  int64_t b = rule.addFactor(x[0]);
  int64_t h = rule.addFactor(x[1]);
  int64_t s = rule.addFactor(x[2]);
  int64_t d = rule.addFactor(x[3], FactorKind::NeedReplication);
  int64_t r = rule.addFactor(c[2], FactorKind::NeedReplication);
  for (auto [i, f] : llvm::enumerate(ArrayRef<int64_t>{b, h, s, d})) {
    rule.mapOperand(0, i, f);
    rule.mapResult(0, i, f);
  }
  for (unsigned o : {1u, 2u}) {
    if (c[0] != 1)
      rule.mapOperand(o, 0, b);
    rule.mapOperand(o, 1, s);
    rule.mapOperand(o, 2, r);
  }
  return rule;
}

//===----------------------------------------------------------------------===//
// Convolution and windowed reduction
//===----------------------------------------------------------------------===//

ShardingRule ConvOp::getShardingRule() {
  // Input N x C x S..., filter O x C/G x K..., result N x O x S'...: the
  // batch and the output channels are parallel, the input channels of a
  // group are a reduction, and with G > 1 groups the channel dimensions
  // split into a parallel group factor (major) and the per-group factor.
  // Spatial dimensions read windows (halos), so they need replication.
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getInput()), filter = shapeOf(getFilter());
  ArrayRef<int64_t> out = shapeOf(getResult());
  int64_t groups = getGroups();
  int64_t n = rule.addFactor(in[0]);
  rule.mapOperand(0, 0, n);
  rule.mapResult(0, 0, n);
  if (groups > 1) {
    int64_t g = rule.addFactor(groups);
    rule.mapOperand(0, 1, g);
    rule.mapOperand(1, 0, g);
    rule.mapResult(0, 1, g);
  }
  int64_t o = rule.addFactor(filter[0] / groups);
  rule.mapOperand(1, 0, o);
  rule.mapResult(0, 1, o);
  int64_t c = rule.addReduction(filter[1], ReduceKind::sum);
  rule.mapOperand(0, 1, c);
  rule.mapOperand(1, 1, c);
  for (int64_t d = 2, e = in.size(); d < e; ++d) {
    rule.mapOperand(0, d, rule.addFactor(in[d], FactorKind::NeedReplication));
    rule.mapOperand(1, d,
                    rule.addFactor(filter[d], FactorKind::NeedReplication));
    rule.mapResult(0, d, rule.addFactor(out[d], FactorKind::NeedReplication));
  }
  return rule;
}

ShardingRule Im2ColOp::getShardingRule() {
  // Input N x C x S..., result G x C/G x K... x N x S'...: the batch, the
  // groups and the channels of a group are parallel (each column element
  // is one input element); windows read halos, so the spatial and kernel
  // dimensions need replication.
  ShardingRule rule = ShardingRule::forOp(*this);
  ArrayRef<int64_t> in = shapeOf(getInput()), out = shapeOf(getResult());
  int64_t spatial = in.size() - 2;
  int64_t g = rule.addFactor(getGroups());
  rule.mapOperand(0, 1, g);
  rule.mapResult(0, 0, g);
  int64_t c = rule.addFactor(in[1] / getGroups());
  rule.mapOperand(0, 1, c);
  rule.mapResult(0, 1, c);
  int64_t n = rule.addFactor(in[0]);
  rule.mapOperand(0, 0, n);
  rule.mapResult(0, 2 + spatial, n);
  for (int64_t d = 0; d < spatial; ++d) {
    rule.mapOperand(0, 2 + d,
                    rule.addFactor(in[2 + d], FactorKind::NeedReplication));
    rule.mapResult(0, 2 + d,
                   rule.addFactor(out[2 + d], FactorKind::NeedReplication));
    rule.mapResult(
        0, 3 + spatial + d,
        rule.addFactor(out[3 + spatial + d], FactorKind::NeedReplication));
  }
  return rule;
}

ShardingRule ReduceWindowOp::getShardingRule() {
  return sameDimsRule(*this, 0, 0, [&](int64_t d) {
    return getWindow()[d] == 1 && getStrides()[d] == 1 && getPadLow()[d] == 0 &&
           getPadHigh()[d] == 0;
  });
}
