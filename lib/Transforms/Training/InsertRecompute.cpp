//===- InsertRecompute.cpp - Activation recomputation (checkpointing) -----===//
//
// Decides which saved activations (forward values the backward pass uses)
// stay alive until the backward pass and which are recomputed: the forward
// producer chain of a dropped value is cloned right before its first
// backward user. See Passes.td for the policies and the layer rule.
//
//===----------------------------------------------------------------------===//

#include "cleave/Analysis/TrainingTags.h"
#include "cleave/Transforms/Training/Passes.h"
#include "cleave/Transforms/Training/RecomputePolicy.h"

#include "Layers.h"

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

#define DEBUG_TYPE "cleave-insert-recompute"

namespace cleave {
#define GEN_PASS_DEF_INSERTRECOMPUTEPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

using Policy = ::cleave::RecomputePolicy::Kind;

static int64_t bytesOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t)
    return 0;
  return mlir::cleave::detail::getSizeInBytes(t);
}

static int64_t flopsOf(Operation *op) {
  if (auto cost = dyn_cast<CostOpInterface>(op))
    return cost.getFlops();
  return 0;
}

/// Cheap ops for the selective policy.
static bool isCheap(Operation *op) {
  return isa<UnaryOp, BinaryOp, CompareOp, SelectOp, ConvertOp, BitcastOp,
             BroadcastInDimOp, ReshapeOp, TransposeOp, SliceOp, ReverseOp,
             ConcatOp, PadOp, IotaOp, RngKeyOp, SoftmaxOp, LogSoftmaxOp,
             LayerNormOp, RmsNormOp, ReduceOp, ArgReduceOp>(op);
}

/// `v` seen through the data movement and conversions `Ops`.
template <typename... Ops> static Value through(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<Ops...>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// True for a value that is a parameter, input or constant seen through
/// data movement and conversion (a contraction with such an operand is a
/// linear layer; one between two activations is, e.g., attention).
static bool isWeightLike(Value v) {
  Operation *def =
      through<TransposeOp, ReshapeOp, ConvertOp, BroadcastInDimOp>(v)
          .getDefiningOp();
  return !def || isa<ConstantOp>(def);
}

struct InsertRecomputePass
    : public ::cleave::impl::InsertRecomputePassBase<InsertRecomputePass> {
  using Base::Base;
  void runOnOperation() override;
};

/// The state of one function while the pass works on it.
class Recompute {
public:
  Recompute(func::FuncOp fn, Policy policy, int64_t budget)
      : fn(fn), policy(policy), budget(budget) {}

  /// Returns failure after a diagnostic; `stats` is filled on success.
  LogicalResult run(::cleave::RecomputeStats &stats);

private:
  bool isForward(Operation *op) const { return forwardSet.contains(op); }
  /// A value the backward pass may use at no memory cost to the pass:
  /// arguments, constants, values of non-forward or unclonable ops.
  bool isFree(Value v) const {
    Operation *def = v.getDefiningOp();
    return !def || !isForward(def) || isa<ConstantOp>(def) ||
           def->getNumRegions() != 0 || !isMemoryEffectFree(def) ||
           isArgumentCopy(v);
  }
  /// A function argument rounded or transposed (a parameter's bf16 copy):
  /// kept for the backward pass rather than recomputed, as mixed-precision
  /// training keeps its low-precision weights for the step.
  static bool isArgumentCopy(Value v) {
    return v.getDefiningOp() &&
           isa<BlockArgument>(through<ConvertOp, TransposeOp, ReshapeOp>(v));
  }
  /// The value whose buffer `v` shares (through forward reshapes).
  Value root(Value v) const {
    while (auto r = v.getDefiningOp<ReshapeOp>()) {
      if (!isForward(r))
        break;
      v = r.getOperand();
    }
    return v;
  }
  bool kept(Value v) const {
    v = root(v);
    if (isFree(v))
      return true;
    return !dropped.contains(v.getDefiningOp());
  }
  void assignLayers();
  bool isBoundary(Value v) const;
  void decide();
  void decideBudget();
  Value materialize(Value v, Operation *before);
  /// Saved activations: roots of forward values that `users` read.
  llvm::SetVector<Value> savedBy(ArrayRef<Operation *> users) const;
  static int64_t sumBytes(const llvm::SetVector<Value> &values) {
    int64_t total = 0;
    for (Value v : values)
      total += bytesOf(v);
    return total;
  }

  func::FuncOp fn;
  Policy policy;
  int64_t budget;
  SmallVector<Operation *> forward, backward;
  DenseSet<Operation *> forwardSet;
  DenseMap<Operation *, int> layerOf; ///< -1: in no layer.
  /// Forward ops (not reshapes) whose results are recomputed.
  DenseSet<Operation *> dropped;
  IRMapping mapping;
  SmallVector<Operation *> clones;
};

} // namespace

void Recompute::assignLayers() {
  llvm::StringMap<int> ids;
  auto idOf = [&](StringRef key) {
    return ids.try_emplace(key, ids.size()).first->second;
  };
  int previous = -1;
  bool any = false;
  for (Operation *op : forward) {
    int layer = previous;
    if (auto attr = getLayer(op)) {
      layer = attr.getValue().empty() ? -1 : idOf(attr.getValue());
    } else if (std::optional<StringRef> name =
                   ::cleave::training::locName(op->getLoc())) {
      StringRef prefix = ::cleave::training::layerPrefix(*name);
      layer = prefix.empty() ? -1 : idOf(prefix);
    }
    any |= layer >= 0;
    layerOf[op] = layer;
    previous = layer;
  }
  if (any)
    return;
  // No names: ceil(sqrt(n)) runs of consecutive ops of about equal count.
  SmallVector<Operation *> ops;
  for (Operation *op : forward)
    if (!isa<ConstantOp>(op))
      ops.push_back(op);
  if (ops.empty())
    return;
  int64_t segments = static_cast<int64_t>(std::ceil(std::sqrt(ops.size())));
  int64_t per = (ops.size() + segments - 1) / segments;
  for (auto [i, op] : llvm::enumerate(ops))
    layerOf[op] = static_cast<int>(i / per);
}

bool Recompute::isBoundary(Value v) const {
  Operation *def = v.getDefiningOp();
  int layer = layerOf.lookup(def);
  if (layer < 0)
    return true;
  SmallVector<Value> worklist{v};
  while (!worklist.empty()) {
    Value w = worklist.pop_back_val();
    for (Operation *user : w.getUsers()) {
      if (!isForward(user))
        continue;
      if (isa<ReshapeOp>(user)) {
        worklist.push_back(user->getResult(0));
        continue;
      }
      if (layerOf.lookup(user) != layer)
        return true;
    }
  }
  return false;
}

llvm::SetVector<Value> Recompute::savedBy(ArrayRef<Operation *> users) const {
  llvm::SetVector<Value> saved;
  for (Operation *op : users)
    for (Value v : op->getOperands()) {
      Value r = root(v);
      if (!isFree(r))
        saved.insert(r);
    }
  return saved;
}

void Recompute::decide() {
  for (Operation *op : forward) {
    if (isa<ReshapeOp>(op) || op->getNumResults() == 0 ||
        isFree(op->getResult(0)))
      continue;
    bool boundary =
        llvm::any_of(op->getResults(), [&](Value r) { return isBoundary(r); });
    bool keep = true;
    switch (policy) {
    case Policy::None:
    case Policy::Budget:
      break;
    case Policy::Full:
      keep = boundary;
      break;
    case Policy::Selective: {
      bool expensive = !isCheap(op);
      if (auto contract = dyn_cast<ContractOp>(op))
        expensive =
            isWeightLike(contract.getLhs()) || isWeightLike(contract.getRhs());
      keep = boundary || expensive;
      break;
    }
    }
    if (!keep)
      dropped.insert(op);
  }
  if (policy == Policy::Budget)
    decideBudget();
}

/// Greedy: drop the saved activation that frees the most bytes per
/// recomputed flop, with the forward chain it needs (up to values that stay
/// saved), until the saved bytes fit the budget.
void Recompute::decideBudget() {
  llvm::SetVector<Value> saved = savedBy(backward);
  int64_t total = sumBytes(saved);
  while (total > budget) {
    Operation *best = nullptr;
    SmallVector<Operation *> bestChain;
    double bestScore = -1.0;
    int64_t bestBytes = 0;
    for (Operation *op : forward) {
      if (dropped.contains(op) || isa<ReshapeOp>(op) ||
          op->getNumResults() == 0 || isFree(op->getResult(0)))
        continue;
      int64_t bytes = 0;
      for (Value r : op->getResults())
        if (saved.contains(r))
          bytes += bytesOf(r);
      if (bytes == 0)
        continue;
      // The chain: producers of operands that are neither saved, free nor
      // already recomputed.
      SmallVector<Operation *> chain{op};
      DenseSet<Operation *> inChain{op};
      int64_t flops = 0;
      for (size_t i = 0; i < chain.size(); ++i) {
        flops += flopsOf(chain[i]);
        for (Value w : chain[i]->getOperands()) {
          Value q = root(w);
          if (isFree(q) || saved.contains(q))
            continue;
          Operation *def = q.getDefiningOp();
          if (dropped.contains(def) || !inChain.insert(def).second)
            continue;
          chain.push_back(def);
        }
      }
      double score =
          static_cast<double>(bytes) / (static_cast<double>(flops) + 1.0);
      if (score > bestScore) {
        bestScore = score;
        best = op;
        bestChain = std::move(chain);
        bestBytes = bytes;
      }
    }
    if (!best) {
      fn.emitWarning() << "recompute budget of " << budget
                       << " bytes cannot be met: " << total
                       << " bytes of saved activations remain";
      return;
    }
    for (Operation *op : bestChain)
      dropped.insert(op);
    for (Value r : best->getResults())
      saved.remove(r);
    total -= bestBytes;
  }
}

Value Recompute::materialize(Value v, Operation *before) {
  if (Value m = mapping.lookupOrNull(v))
    return m;
  Operation *def = v.getDefiningOp();
  for (Value w : def->getOperands())
    if (!kept(w))
      materialize(w, before);
  OpBuilder b(before);
  Operation *clone = b.clone(*def, mapping);
  clone->setAttr(attr::kRecompute, b.getUnitAttr());
  clones.push_back(clone);
  return mapping.lookup(v);
}

LogicalResult Recompute::run(::cleave::RecomputeStats &stats) {
  Block &block = fn.getBody().front();
  Operation *first = nullptr, *last = nullptr;
  for (Operation &op : block)
    if (op.hasAttr(attr::kBackward)) {
      if (!first)
        first = &op;
      last = &op;
    }
  if (!first) {
    if (policy == Policy::None)
      return success();
    return fn.emitError()
           << "--cleave-insert-recompute found no backward ops (tagged `"
           << attr::kBackward
           << "`): build the training step with "
              "--cleave-build-train-step=\"mark-backward=true\"";
  }
  // The forward and the backward, up to the last backward op. A step of
  // several microbatches (gradient accumulation, a pipeline's schedule)
  // runs one microbatch's forward after another's backward, and each
  // microbatch's activations are recomputed for its own backward. So the
  // forward is every op before the first backward op, and after it the ops
  // that read nothing a backward op made (transitively) and lead to one (a
  // later microbatch's forward; not, say, the learning rate broadcast for
  // an optimizer update). The backward is the rest: the tagged ops and
  // what reads their results, such as the gradients' sums and updates.
  SmallVector<Operation *> ops;
  for (Operation &op : block) {
    ops.push_back(&op);
    if (&op == last)
      break;
  }
  DenseSet<Operation *> afterBackward;
  for (Operation *op : ops)
    if (op->hasAttr(attr::kBackward) ||
        llvm::any_of(op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && afterBackward.contains(def);
        }))
      afterBackward.insert(op);
  DenseSet<Operation *> leadsToBackward;
  for (Operation *op : llvm::reverse(ops)) {
    if (afterBackward.contains(op))
      continue;
    for (Operation *user : op->getUsers()) {
      user = block.findAncestorOpInBlock(*user);
      if (user &&
          (user->hasAttr(attr::kBackward) ||
           (!afterBackward.contains(user) && leadsToBackward.contains(user)))) {
        leadsToBackward.insert(op);
        break;
      }
    }
  }
  bool beforeFirst = true;
  for (Operation *op : ops) {
    beforeFirst &= op != first;
    if (!afterBackward.contains(op) &&
        (beforeFirst || leadsToBackward.contains(op))) {
      forward.push_back(op);
      forwardSet.insert(op);
    } else {
      backward.push_back(op);
    }
  }

  // Forward ops that are dead already (a value nothing reads) would leave
  // with the ones recomputation frees below and count as negative extra
  // flops: they go first.
  auto eraseDeadForward = [&] {
    SmallVector<Operation *> live;
    for (Operation *op : llvm::reverse(forward)) {
      if (isMemoryEffectFree(op) && op->getNumRegions() == 0 &&
          op->use_empty() && !isa<ConstantOp>(op)) {
        forwardSet.erase(op);
        op->erase();
      } else {
        live.push_back(op);
      }
    }
    forward.assign(live.rbegin(), live.rend());
  };
  eraseDeadForward();
  int64_t flopsBefore = 0;
  fn.walk([&](Operation *op) { flopsBefore += flopsOf(op); });
  stats.savedBytesBefore += sumBytes(savedBy(backward));

  assignLayers();
  decide();

  // Clone dropped values right before their first backward user.
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands())
      if (!kept(use.get()))
        use.set(materialize(use.get(), op));

  SmallVector<Operation *> readers(backward);
  llvm::append_range(readers, clones);
  stats.savedBytesAfter += sumBytes(savedBy(readers));

  // Forward ops whose only users were backward ones.
  eraseDeadForward();

  int64_t flopsAfter = 0, recomputeFlops = 0;
  fn.walk([&](Operation *op) { flopsAfter += flopsOf(op); });
  for (Operation *op : clones)
    recomputeFlops += flopsOf(op);
  stats.recomputeFlops += recomputeFlops;
  stats.extraFlops += flopsAfter - flopsBefore;
  stats.recomputedOps += clones.size();
  return success();
}

/// Parses `<n>[k|m|g][i][b]` (k = 1024); none past 2^63 - 1 bytes.
static std::optional<int64_t> parseBytes(StringRef s) {
  s = s.trim();
  StringRef digits = s.take_while([](char c) { return c >= '0' && c <= '9'; });
  if (digits.empty())
    return std::nullopt;
  uint64_t n;
  if (digits.getAsInteger(10, n))
    return std::nullopt;
  std::string u = s.drop_front(digits.size()).trim().lower();
  int64_t scale = 1;
  if (u.empty() || u == "b")
    scale = 1;
  else if (u == "k" || u == "kb" || u == "kib")
    scale = 1024;
  else if (u == "m" || u == "mb" || u == "mib")
    scale = 1024 * 1024;
  else if (u == "g" || u == "gb" || u == "gib")
    scale = 1024LL * 1024 * 1024;
  else
    return std::nullopt;
  if (n > static_cast<uint64_t>(INT64_MAX / scale))
    return std::nullopt;
  return static_cast<int64_t>(n) * scale;
}

namespace cleave {
std::string parseRecomputePolicy(StringRef spec, RecomputePolicy &out) {
  out = RecomputePolicy();
  if (spec == "none" || spec.empty())
    out.kind = Policy::None;
  else if (spec == "selective")
    out.kind = Policy::Selective;
  else if (spec == "full")
    out.kind = Policy::Full;
  else if (StringRef bytes = spec; bytes.consume_front("budget:")) {
    std::optional<int64_t> budget = parseBytes(bytes);
    if (!budget)
      return "invalid recompute budget '" + bytes.str() +
             "' (expected bytes, e.g. budget:1048576 or budget:64M)";
    out.kind = Policy::Budget;
    out.budgetBytes = *budget;
  } else {
    return "unknown recompute policy '" + spec.str() +
           "' (expected none, selective, full or budget:<bytes>)";
  }
  return "";
}
} // namespace cleave

void InsertRecomputePass::runOnOperation() {
  ModuleOp module = getOperation();
  ::cleave::RecomputePolicy p;
  if (std::string error = ::cleave::parseRecomputePolicy(policy, p);
      !error.empty()) {
    module.emitError() << error;
    return signalPassFailure();
  }

  ::cleave::RecomputeStats stats;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal() || !fn.getBody().hasOneBlock())
      continue;
    Recompute r(fn, p.kind, p.budgetBytes);
    if (failed(r.run(stats)))
      return signalPassFailure();
  }
  Builder b(module.getContext());
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("policy", b.getStringAttr(StringRef(policy))),
      b.getNamedAttr("saved_bytes_before",
                     b.getI64IntegerAttr(stats.savedBytesBefore)),
      b.getNamedAttr("saved_bytes_after",
                     b.getI64IntegerAttr(stats.savedBytesAfter)),
      b.getNamedAttr("recompute_flops",
                     b.getI64IntegerAttr(stats.recomputeFlops)),
      b.getNamedAttr("extra_flops", b.getI64IntegerAttr(stats.extraFlops)),
      b.getNamedAttr("recomputed_ops",
                     b.getI64IntegerAttr(stats.recomputedOps))};
  module->setAttr(attr::kRecomputeStats, b.getDictionaryAttr(entries));
}

namespace cleave::training {

/// The first NameLoc name in `loc`, if any.
std::optional<StringRef> locName(Location loc) {
  std::optional<StringRef> found;
  loc->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l)) {
      found = n.getName().getValue();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return found;
}

} // namespace cleave::training
