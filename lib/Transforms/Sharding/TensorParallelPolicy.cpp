//===- TensorParallelPolicy.cpp - Megatron's tp seeds from the program ----===//
//
// Megatron's tensor parallelism splits a matmul weight by columns and the
// next one by rows, so that everything between them (activations, heads,
// biases, the attention of each head) is split too and the only collective
// is one all-reduce of the second matmul's partial result. The policy here
// finds such regions from the ops' sharding rules, not from names: a split
// of one dimension of a parameter is followed through the forward program,
// across every op that keeps it (parallel factors, in both directions: to
// an op's results and to its other operands), and the region is accepted
// when it closes without a gather:
//   - it ends only in contractions that reduce over it (the row-split
//     partner; partial sums are all-reduced there), in embedding lookups
//     of a split table (the vocabulary-parallel embedding), or in sums and
//     maxima over it (whose smaller results are all-reduced: the tied
//     head's logits through a log_softmax, which the partitioner computes
//     split, to the cross-entropy's pick of each label);
//   - it never reaches an op that reads the dimension whole (a softmax row,
//     a layer norm, a slice), another reduction, a data input, or a
//     dimension that does not divide over tp.
// Each accepted region contributes one seed, its first parameter; the
// propagation pass splits the rest of the region from it.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Sharding/ShardProgram.h"

#include "Cleave/IR/CleaveDialect.h"
#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/ShardingRule.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::cleave;

namespace cleave {
namespace {

/// The ops the loss depends on: the forward program inside a training step.
/// In a program without a loss result every op counts.
DenseSet<Operation *> forwardOps(func::FuncOp main) {
  DenseSet<Operation *> forward;
  auto ret = cast<func::ReturnOp>(main.getBody().back().getTerminator());
  SmallVector<Value> worklist;
  for (unsigned i = 0; i < main.getNumResults(); ++i)
    if (getResultRole(main, i) == Role::loss)
      worklist.push_back(ret.getOperand(i));
  if (worklist.empty()) {
    main.walk([&](Operation *op) { forward.insert(op); });
    return forward;
  }
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val().getDefiningOp();
    if (!op || !forward.insert(op).second)
      continue;
    llvm::append_range(worklist, op->getOperands());
  }
  return forward;
}

StringRef parameterName(func::FuncOp main, unsigned i) {
  if (StringAttr p = getArgParameter(main, i))
    return p.getValue();
  if (StringAttr n = getArgName(main, i))
    return n.getValue();
  return "";
}

bool isParameter(func::FuncOp main, unsigned i) {
  return isParameterArg(main, i);
}

/// The region one split reaches: which value is split on which dimension,
/// the parameters among them, and where it ends.
class Region {
public:
  Region(func::FuncOp main, const DenseSet<Operation *> &forward, int64_t tp)
      : main(main), forward(forward), tp(tp) {}

  /// Follows a split of dimension `dim` of `start`. Returns false, with
  /// `why` set, when the region needs a gather.
  bool close(Value start, int64_t dim) {
    worklist.push_back({start, dim});
    while (!worklist.empty() && why.empty()) {
      auto [v, d] = worklist.pop_back_val();
      visitValue(v, d);
    }
    return why.empty();
  }

  const llvm::MapVector<unsigned, int64_t> &getParameters() const {
    return parameters;
  }
  int64_t getNumRowSplits() const { return rowSplits.size(); }
  int64_t getNumEmbeddings() const { return embeddings; }
  int64_t getNumRowReductions() const { return rowReductions; }
  const std::string &getWhy() const { return why; }
  /// The parameters whose contracting dimension ends the region.
  SmallVector<std::string> getRowSplitNames() const {
    SmallVector<std::string> names;
    for (auto [arg, d] : parameters)
      if (rowParameters.contains(arg))
        names.push_back(parameterName(main, arg).str());
    return names;
  }

private:
  void fail(Operation *op, const Twine &what) {
    if (!why.empty())
      return;
    why = what.str();
    if (op)
      if (std::string where = describeLocation(op->getLoc()); !where.empty())
        why += " (" + where + ")";
  }

  void visitValue(Value v, int64_t d) {
    auto [it, inserted] = split.insert({v, d});
    if (!inserted) {
      if (it->second != d)
        fail(v.getDefiningOp(),
             "it would split two dimensions of a " + typeString(v));
      return;
    }
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getDimSize(d) % tp != 0)
      return fail(v.getDefiningOp(),
                  "dimension " + Twine(d) + " of a " + typeString(v) +
                      " does not divide over tp (" + Twine(tp) + " ranks)");
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      unsigned i = arg.getArgNumber();
      if (!isParameter(main, i))
        return fail(nullptr,
                    "it reaches the input '" + parameterName(main, i) + "'");
      parameters.insert({i, d});
    } else if (Operation *def = v.getDefiningOp(); forward.contains(def)) {
      visitOp(def, v, d);
    }
    for (OpOperand &use : v.getUses())
      if (forward.contains(use.getOwner()))
        visitOp(use.getOwner(), v, d);
  }

  void visitOp(Operation *op, Value from, int64_t d) {
    if (!why.empty())
      return;
    ShardingRule rule = getShardingRule(op);
    if (rule.isReplicatedOnly())
      return fail(op, "'" + op->getName().getStringRef() +
                          "' has no sharding rule");
    SmallVector<Value> tensors(op->getOperands());
    llvm::append_range(tensors, op->getResults());
    for (auto [t, v] : llvm::enumerate(tensors)) {
      if (v != from)
        continue;
      ArrayRef<int64_t> factors = rule.getTensor(t)[d];
      if (factors.empty())
        return fail(op, "'" + op->getName().getStringRef() +
                            "' has no factor for it");
      int64_t f = factors.front();
      const ShardingFactor &factor = rule.getFactor(f);
      if (factor.size % tp != 0)
        return fail(op, "'" + op->getName().getStringRef() +
                            "' splits it into parts of " + Twine(factor.size) +
                            ", which do not divide over tp (" + Twine(tp) +
                            " ranks)");
      if (factor.kind == FactorKind::NeedReplication)
        return fail(op,
                    "'" + op->getName().getStringRef() + "' reads it whole");
      if (factor.kind == FactorKind::Reduction) {
        if (isa<ContractOp>(op)) {
          if (rowSplits.insert(op).second)
            for (Value operand : op->getOperands())
              noteRowParameter(operand);
        } else if (auto gather = dyn_cast<GatherOp>(op); gather && t == 0) {
          if (!readsData(gather.getIndices()))
            return fail(op, "'" + op->getName().getStringRef() +
                                "' looks it up by indices that read no "
                                "data input");
          ++embeddings;
        } else if (auto reduce = dyn_cast<ReduceOp>(op);
                   reduce && (reduce.getKind() == ReduceKind::sum ||
                              reduce.getKind() == ReduceKind::max)) {
          // A row sum or maximum (a cross-entropy's pick of the label's
          // log-probability): its result, without the split dimension, is
          // all-reduced.
          ++rowReductions;
        } else {
          return fail(op,
                      "'" + op->getName().getStringRef() + "' reduces over it");
        }
      }
      // Every tensor of the op that carries the factor is split with it;
      // a reduction's result does not carry it.
      for (auto [t2, v2] : llvm::enumerate(tensors)) {
        for (auto [d2, list] : llvm::enumerate(rule.getTensor(t2))) {
          if (!llvm::is_contained(list, f))
            continue;
          if (list.front() != f)
            return fail(op, "'" + op->getName().getStringRef() +
                                "' moves it inside a dimension of a " +
                                typeString(v2));
          worklist.push_back({v2, (int64_t)d2});
        }
      }
    }
  }

  /// Whether `v` depends on a data input (token ids, not positions): a
  /// table looked up by positions is too small to split.
  bool readsData(Value v) {
    SmallVector<Value> worklist = {v};
    DenseSet<Value> seen;
    while (!worklist.empty()) {
      Value x = worklist.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      if (auto arg = dyn_cast<BlockArgument>(x)) {
        unsigned i = arg.getArgNumber();
        std::optional<Role> role = getArgRole(main, i);
        if (role ? role == Role::data : !hasArgState(main, i))
          return true;
        continue;
      }
      llvm::append_range(worklist, x.getDefiningOp()->getOperands());
    }
    return false;
  }

  /// The parameter a contraction's operand is, through conversions and
  /// layout changes.
  void noteRowParameter(Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (!isa<ConvertOp, TransposeOp, ReshapeOp>(def))
        return;
      v = def->getOperand(0);
    }
    if (auto arg = dyn_cast<BlockArgument>(v))
      rowParameters.insert(arg.getArgNumber());
  }

  static std::string typeString(Value v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << v.getType();
    return s;
  }

  func::FuncOp main;
  const DenseSet<Operation *> &forward;
  int64_t tp;
  SmallVector<std::pair<Value, int64_t>> worklist;
  llvm::DenseMap<Value, int64_t> split;
  llvm::MapVector<unsigned, int64_t> parameters;
  llvm::DenseSet<unsigned> rowParameters;
  llvm::DenseSet<Operation *> rowSplits;
  int64_t embeddings = 0;
  int64_t rowReductions = 0;
  std::string why;
};

/// Whether `v` is (a conversion or layout change of) parameter argument
/// `arg`.
bool comesFrom(Value v, BlockArgument arg) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<ConvertOp, TransposeOp, ReshapeOp>(def))
      return false;
    v = def->getOperand(0);
  }
  return v == arg;
}

} // namespace

TensorParallelPolicy findTensorParallelSeeds(func::FuncOp main, int64_t tp) {
  TensorParallelPolicy policy;
  llvm::raw_string_ostream os(policy.report);
  DenseSet<Operation *> forward = forwardOps(main);
  // Parameters already in an accepted region, with their split dimension.
  llvm::DenseMap<unsigned, int64_t> covered;
  for (BlockArgument arg : main.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!isParameter(main, i) || !type || type.getRank() < 2 ||
        covered.count(i))
      continue;
    // Candidates: the weights of forward contractions (matmuls, the tied
    // logits) and embedding tables.
    bool isWeight = false;
    for (Operation *op : forward) {
      if (auto contract = dyn_cast<ContractOp>(op))
        isWeight |= comesFrom(contract.getLhs(), arg) ||
                    comesFrom(contract.getRhs(), arg);
      else if (auto gather = dyn_cast<GatherOp>(op))
        isWeight |= comesFrom(gather.getOperand(), arg);
    }
    if (!isWeight)
      continue;
    // Why each dimension's split fails, last dimension (a column split)
    // first.
    SmallVector<std::string> why;
    bool accepted = false;
    for (int64_t d = type.getRank() - 1; d >= 0 && !accepted; --d) {
      Region region(main, forward, tp);
      if (!region.close(arg, d)) {
        why.push_back("dimension " + std::to_string(d) + ": " +
                      region.getWhy());
        continue;
      }
      if (region.getNumRowSplits() == 0 && region.getNumEmbeddings() == 0 &&
          region.getNumRowReductions() == 0) {
        why.push_back("dimension " + std::to_string(d) +
                      ": its split is never reduced");
        continue;
      }
      if (llvm::any_of(region.getParameters(), [&](auto p) {
            auto it = covered.find(p.first);
            return it != covered.end() && it->second != p.second;
          })) {
        why.push_back("dimension " + std::to_string(d) +
                      ": its region overlaps another's");
        continue;
      }
      accepted = true;
      for (auto [p, pd] : region.getParameters())
        covered[p] = pd;
      policy.seeds.push_back({i, d});
      os << "tp seed: " << parameterName(main, i) << " split on dimension " << d
         << "; its region splits " << region.getParameters().size()
         << " parameters";
      SmallVector<std::string> rows = region.getRowSplitNames();
      if (!rows.empty())
        os << " and ends in " << region.getNumRowSplits()
           << " contractions over it (rows of " << llvm::join(rows, ", ")
           << ")";
      if (region.getNumEmbeddings())
        os << (rows.empty() ? " and ends in " : ", ")
           << region.getNumEmbeddings() << " vocabulary-parallel lookups";
      if (region.getNumRowReductions())
        os << (rows.empty() && !region.getNumEmbeddings() ? " and ends in "
                                                          : ", ")
           << region.getNumRowReductions() << " reductions over it";
      os << "\n";
    }
    if (!accepted)
      os << "tp: " << parameterName(main, i) << " stays whole; splitting "
         << llvm::join(why, "; splitting ") << "\n";
  }
  return policy;
}

} // namespace cleave
