//===- PropagateSharding.cpp - Shardings through the ops' rules -----------===//
//
// Propagation works on a state per tensor value (axes, closed mark and
// priority per dimension) and sweeps: every op projects the current state of
// its operands and results onto its factors, settles each factor's axes, and
// proposes the projection back to all of its tensors; the proposals are then
// merged per value. Sweeps repeat until nothing changes, once per priority
// round. Dimensions only gain axes, so the sweeps end.
//
// A sweep after the first of a round reruns only the ops one of whose
// tensors changed in the sweep before, and merges only the values they
// propose to or that changed: every other op would propose what it did,
// and every other value would merge what it did, to no change. Each op's
// last proposals are kept for the merges. This gives the result of sweeping
// every op every time (a Jacobi iteration) without its cost: the changes of
// a sweep travel one op along the program, so whole sweeps cost the ops
// times the program's depth.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Sharding/FactorSharding.h"
#include "cleave/Transforms/Sharding/Passes.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"
#include "Cleave/IR/CleaveSharding.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <limits>
#include <numeric>
#include <set>
#include <vector>

#define DEBUG_TYPE "cleave-propagate-sharding"

namespace cleave {
#define GEN_PASS_DEF_PROPAGATESHARDINGPASS
#include "cleave/Transforms/Sharding/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;
using namespace ::cleave::sharding;

namespace {

constexpr int64_t kNoPriority = std::numeric_limits<int64_t>::max();

struct DimState {
  Axes axes;
  bool closed = false;
  int64_t priority = kNoPriority;
};

struct TensorState {
  SmallVector<DimState> dims;
  int64_t bytes = 0;
};

struct Proposal {
  Axes axes;
  int64_t priority;
};

/// What one tensor's dimension asks of one factor of an op.
struct Candidate {
  Axes axes;
  int64_t priority;
  int64_t bytes;
};

/// Orders axis lists by their names, for ties.
static bool lessAxes(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(),
      [](StringAttr x, StringAttr y) { return x.getValue() < y.getValue(); });
}

/// Picks one axis list among proposals of equal priority: the longest when
/// they agree (each a prefix of the longest), else the most proposed, then
/// the smallest by name. Independent of the proposals' order.
static Axes pickAgreed(ArrayRef<Axes> candidates) {
  const Axes *longest = &candidates.front();
  for (const Axes &c : candidates)
    if (c.size() > longest->size() ||
        (c.size() == longest->size() && lessAxes(c, *longest)))
      longest = &c;
  if (llvm::all_of(candidates,
                   [&](const Axes &c) { return isPrefix(c, *longest); }))
    return *longest;
  const Axes *best = nullptr;
  int64_t bestCount = 0;
  for (const Axes &c : candidates) {
    int64_t count = llvm::count(candidates, c);
    if (!best || count > bestCount ||
        (count == bestCount && lessAxes(c, *best))) {
      best = &c;
      bestCount = count;
    }
  }
  return *best;
}

class Propagator {
public:
  Propagator(MeshOp mesh, FlatSymbolRefAttr meshRef)
      : mesh(mesh), meshRef(meshRef) {}

  /// The state of a tensor of `rank` with a stated sharding (or none):
  /// stated dimensions without a priority get the first one.
  TensorState fromStated(TensorShardingAttr stated, int64_t rank) {
    TensorState s;
    s.dims.resize(stated ? stated.getRank() : rank);
    if (stated)
      for (auto [d, dim] : llvm::enumerate(stated.getDims())) {
        s.dims[d].axes.assign(dim.getAxes().begin(), dim.getAxes().end());
        s.dims[d].closed = dim.getClosed();
        s.dims[d].priority = dim.getPriority() >= 0 ? dim.getPriority() : 0;
        priorities.insert(s.dims[d].priority);
      }
    return s;
  }

  /// Registers a value with its stated sharding (or none).
  void addValue(Value v, TensorShardingAttr stated) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type)
      return;
    TensorState s = fromStated(stated, type.getRank());
    s.bytes = mlir::cleave::detail::getSizeInBytes(type);
    states.insert({v, std::move(s)});
  }

  /// A function result with its stated sharding, tied to `returned`.
  void addResult(Value returned, TensorShardingAttr stated) {
    if (!isa<RankedTensorType>(returned.getType()))
      return;
    results.push_back(
        {returned,
         fromStated(stated,
                    cast<RankedTensorType>(returned.getType()).getRank())});
  }

  void addOp(Operation *op) {
    ShardingRule rule = getShardingRule(op);
    if (rule.isReplicatedOnly())
      return;
    RuleOp r;
    r.op = op;
    r.rule = std::move(rule);
    r.tensors.append(op->operand_begin(), op->operand_end());
    r.tensors.append(op->result_begin(), op->result_end());
    ops.push_back(std::move(r));
  }

  void run() {
    // Each value's ops, each once, for the merges and the next sweep.
    for (auto [i, r] : llvm::enumerate(ops))
      for (Value v : r.tensors) {
        SmallVector<unsigned> &touching = opsOf[v];
        if (touching.empty() || touching.back() != i)
          touching.push_back(i);
      }
    for (auto [i, result] : llvm::enumerate(results))
      resultsOf[result.first].push_back(i);
    SmallVector<int64_t> rounds(priorities.begin(), priorities.end());
    llvm::sort(rounds);
    rounds.push_back(kNoPriority);
    for (int64_t p : rounds) {
      std::vector<unsigned> all(ops.size());
      std::iota(all.begin(), all.end(), 0u);
      llvm::SetVector<Value> changed;
      [[maybe_unused]] int64_t sweeps = 0;
      for (bool first = true; first || !changed.empty(); first = false) {
        changed = sweep(p, first ? all : opsTouching(changed), first, changed);
        LLVM_DEBUG(llvm::dbgs() << "round "
                                << (p == kNoPriority ? std::string("rest")
                                                     : "p" + std::to_string(p))
                                << ", sweep " << ++sweeps << ": "
                                << changed.size() << " values changed\n");
      }
    }
  }

  const TensorState *lookup(Value v) const {
    auto it = states.find(v);
    return it == states.end() ? nullptr : &it->second;
  }
  ArrayRef<std::pair<Value, TensorState>> getResults() const { return results; }

  TensorShardingAttr toAttr(const TensorState &s, bool keepOpen) const {
    MLIRContext *ctx = meshRef.getContext();
    SmallVector<DimShardingAttr> dims;
    for (const DimState &d : s.dims)
      dims.push_back(DimShardingAttr::get(
          ctx, d.axes, d.closed || !keepOpen,
          keepOpen && d.priority != kNoPriority ? d.priority : -1));
    return TensorShardingAttr::get(ctx, meshRef, dims);
  }

private:
  /// A proposal for dimension `dim` of `value`.
  struct ProposalFor {
    Value value;
    int64_t dim;
    Proposal proposal;
  };
  struct RuleOp {
    Operation *op = nullptr;
    ShardingRule rule;
    /// Conflicts settled on this op's factors, for --explain-sharding.
    SmallVector<std::string> conflicts;
    /// Operands, then results: the rule's tensors.
    SmallVector<Value> tensors;
    /// What the op proposed when it last ran.
    SmallVector<ProposalFor> proposed;
  };

public:
  /// Records each op's settled conflicts as `cleave.sharding_conflicts`.
  void writeConflicts() {
    for (RuleOp &r : ops) {
      if (r.conflicts.empty())
        continue;
      SmallVector<Attribute> notes;
      for (const std::string &c : r.conflicts)
        notes.push_back(StringAttr::get(r.op->getContext(), c));
      r.op->setAttr(kConflictsAttrName,
                    ArrayAttr::get(r.op->getContext(), notes));
    }
  }

private:
  /// The ops of `values`, each once, in program order.
  std::vector<unsigned> opsTouching(const llvm::SetVector<Value> &values) {
    std::vector<unsigned> out;
    for (Value v : values)
      if (auto it = opsOf.find(v); it != opsOf.end())
        out.insert(out.end(), it->second.begin(), it->second.end());
    llvm::sort(out);
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  /// One sweep at priority `p`: proposals from the ops `run`, then one
  /// merge per value they propose to or that `changedBefore` (the last
  /// sweep) changed; on the `first` sweep of a round, also per value a
  /// function result proposes to. Returns the values whose state changed.
  llvm::SetVector<Value> sweep(int64_t p, ArrayRef<unsigned> run, bool first,
                               const llvm::SetVector<Value> &changedBefore) {
    llvm::SetVector<Value> merging = changedBefore;
    for (unsigned i : run) {
      RuleOp &r = ops[i];
      r.proposed.clear();
      proposeFromOp(r, p, [&](Value v, int64_t d, Axes axes, int64_t prio) {
        r.proposed.push_back({v, d, {std::move(axes), prio}});
      });
      for (const ProposalFor &pf : r.proposed)
        merging.insert(pf.value);
    }
    if (first)
      for (auto &[v, s] : results)
        if (states.count(v))
          merging.insert(v);

    llvm::SetVector<Value> changed;
    SmallVector<SmallVector<Proposal>> perDim;
    for (Value v : merging) {
      TensorState &state = states.find(v)->second;
      perDim.assign(state.dims.size(), {});
      bool any = false;
      if (auto it = opsOf.find(v); it != opsOf.end())
        for (unsigned i : it->second)
          for (const ProposalFor &pf : ops[i].proposed)
            if (pf.value == v) {
              perDim[pf.dim].push_back(pf.proposal);
              any = true;
            }
      // A function result's stated sharding is a proposal for the value it
      // returns.
      if (auto it = resultsOf.find(v); it != resultsOf.end())
        for (unsigned i : it->second)
          for (auto [d, dim] : llvm::enumerate(results[i].second.dims))
            if (!dim.axes.empty() && dim.priority <= p) {
              perDim[d].push_back({dim.axes, dim.priority});
              any = true;
            }
      if (any && merge(state, perDim))
        changed.insert(v);
    }
    return changed;
  }

  template <typename Propose>
  void proposeFromOp(RuleOp &r, int64_t p, Propose propose) {
    const ShardingRule &rule = r.rule;
    ArrayRef<Value> tensors = r.tensors;
    if (llvm::any_of(tensors, [&](Value v) { return !states.count(v); }))
      return;

    // Candidates per factor: the axes each tensor's dimension gives it.
    SmallVector<SmallVector<Candidate>> candidates(rule.getNumFactors());
    for (auto [t, v] : llvm::enumerate(tensors)) {
      const TensorState &s = states.find(v)->second;
      for (auto [d, factors] : llvm::enumerate(rule.getTensor(t))) {
        const DimState &dim = s.dims[d];
        if (dim.axes.empty() || dim.priority > p || factors.empty())
          continue;
        SmallVector<Axes> split = splitDimAxes(dim.axes, factors, rule, mesh);
        for (auto [i, f] : llvm::enumerate(factors))
          if (!split[i].empty())
            candidates[f].push_back({split[i], dim.priority, s.bytes});
      }
    }

    // Settle each factor; need-replication factors carry nothing across.
    SmallVector<Axes> factorAxes(rule.getNumFactors());
    SmallVector<int64_t> factorPriority(rule.getNumFactors(), kNoPriority);
    for (int64_t f = 0; f < rule.getNumFactors(); ++f) {
      if (rule.getFactor(f).kind == FactorKind::NeedReplication ||
          candidates[f].empty())
        continue;
      std::tie(factorAxes[f], factorPriority[f]) = settle(candidates[f], r, f);
    }

    // An axis splits at most one factor: factors of higher priority (then
    // lower index) keep theirs, the others are cut before it.
    SmallVector<int64_t> order =
        llvm::to_vector(llvm::seq<int64_t>(0, rule.getNumFactors()));
    llvm::stable_sort(order, [&](int64_t a, int64_t b) {
      return factorPriority[a] < factorPriority[b];
    });
    keepEachAxisOnce(factorAxes, order);

    for (auto [t, v] : llvm::enumerate(tensors)) {
      SmallVector<Axes> dims = projectToTensor(rule, t, factorAxes, mesh);
      for (auto [d, axes] : llvm::enumerate(dims)) {
        if (axes.empty())
          continue;
        int64_t priority = kNoPriority;
        for (int64_t f : rule.getTensor(t)[d])
          priority = std::min(priority, factorPriority[f]);
        propose(v, d, axes, priority);
      }
    }
  }

  /// The axes of one factor from its candidates: agreeing candidates give
  /// the longest; in a conflict, the choice that reshards the fewest bytes
  /// wins, then the higher priority, then the smaller names.
  std::pair<Axes, int64_t> settle(ArrayRef<Candidate> candidates, RuleOp &r,
                                  int64_t factor) {
    SmallVector<Axes> options;
    for (const auto &c : candidates)
      if (!llvm::is_contained(options, c.axes))
        options.push_back(c.axes);
    const Axes *best = nullptr;
    int64_t bestCost = 0, bestPriority = kNoPriority;
    for (const Axes &o : options) {
      // A candidate that is a prefix of `o` agrees with it; the others'
      // tensors must be resharded.
      int64_t cost = 0, priority = kNoPriority;
      bool longestOfAgreeing = true;
      for (const auto &c : candidates) {
        if (isPrefix(c.axes, o))
          priority = std::min(priority, c.priority);
        else if (isPrefix(o, c.axes))
          longestOfAgreeing = false;
        else
          cost += c.bytes;
      }
      if (!longestOfAgreeing)
        continue;
      if (!best || cost < bestCost ||
          (cost == bestCost &&
           (priority < bestPriority ||
            (priority == bestPriority && lessAxes(o, *best))))) {
        best = &o;
        bestCost = cost;
        bestPriority = priority;
      }
    }
    // A real conflict (two options that do not agree) is recorded for
    // --explain-sharding: what won, what lost, and the bytes each reshards.
    for (const Axes &o : options) {
      if (isPrefix(o, *best) || isPrefix(*best, o))
        continue;
      int64_t cost = 0;
      for (const auto &c : candidates)
        if (!isPrefix(c.axes, o) && !isPrefix(o, c.axes))
          cost += c.bytes;
      std::string note =
          "factor " + ShardingRule::getFactorName(factor) + " (size " +
          std::to_string(r.rule.getFactor(factor).size) +
          "): " + axesToString(*best) + " kept, resharding " +
          std::to_string(bestCost) + " bytes; " + axesToString(o) +
          " rejected, it would reshard " + std::to_string(cost) + " bytes";
      if (!llvm::is_contained(r.conflicts, note)) {
        LLVM_DEBUG(llvm::dbgs() << r.op->getName() << " at " << r.op->getLoc()
                                << ": " << note << "\n");
        r.conflicts.push_back(note);
      }
    }
    return {*best, bestPriority};
  }

  /// Merges the proposals for one value into its state. Returns true when
  /// a dimension gained axes.
  bool merge(TensorState &s, ArrayRef<SmallVector<Proposal>> perDim) {
    llvm::SmallDenseSet<StringAttr> used;
    for (const DimState &d : s.dims)
      used.insert(d.axes.begin(), d.axes.end());
    bool changed = false;
    for (auto [d, props] : llvm::enumerate(perDim)) {
      DimState &dim = s.dims[d];
      if (dim.closed || props.empty())
        continue;
      // Only proposals that extend what the dimension has count; among
      // them the highest priority decides.
      int64_t best = kNoPriority;
      for (const Proposal &prop : props)
        if (prop.axes.size() > dim.axes.size() && isPrefix(dim.axes, prop.axes))
          best = std::min(best, prop.priority);
      SmallVector<Axes> top;
      for (const Proposal &prop : props)
        if (prop.priority == best && prop.axes.size() > dim.axes.size() &&
            isPrefix(dim.axes, prop.axes))
          top.push_back(prop.axes);
      if (top.empty())
        continue;
      Axes chosen = pickAgreed(top);
      // Axes another dimension of this value already has are cut off.
      size_t keep = dim.axes.size();
      while (keep < chosen.size() && !used.count(chosen[keep]))
        used.insert(chosen[keep++]);
      if (keep == dim.axes.size())
        continue;
      chosen.resize(keep);
      dim.axes = std::move(chosen);
      dim.priority = std::min(dim.priority, best);
      changed = true;
    }
    return changed;
  }

  MeshAxes mesh;
  FlatSymbolRefAttr meshRef;
  llvm::MapVector<Value, TensorState> states;
  SmallVector<std::pair<Value, TensorState>> results;
  std::vector<RuleOp> ops;
  /// The ops (indices into `ops`) each value is a tensor of.
  llvm::DenseMap<Value, SmallVector<unsigned>> opsOf;
  /// The function results (indices into `results`) returning each value.
  llvm::DenseMap<Value, SmallVector<unsigned>> resultsOf;
  std::set<int64_t> priorities;
};

struct PropagateShardingPass
    : ::cleave::impl::PropagateShardingPassBase<PropagateShardingPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        funcs.push_back(func);

    // The mesh: the one the program's shardings name, else the only one.
    FlatSymbolRefAttr meshRef;
    bool ok = true;
    auto noteMesh = [&](TensorShardingAttr s, Operation *where) {
      if (!s)
        return;
      if (!meshRef)
        meshRef = s.getMesh();
      else if (meshRef != s.getMesh()) {
        mlir::emitError(where->getLoc())
            << "sharding propagation works over one mesh, but "
               "shardings name "
            << meshRef << " and " << s.getMesh();
        ok = false;
      }
    };
    for (func::FuncOp func : funcs) {
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        noteMesh(
            func.getArgAttrOfType<TensorShardingAttr>(i, kShardingAttrName),
            func);
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        noteMesh(getResultSharding(func, i), func);
      func.walk([&](Operation *op) {
        for (Value r : op->getResults())
          noteMesh(getSharding(r), op);
      });
    }
    if (!ok)
      return signalPassFailure();
    if (!meshRef) {
      auto meshes = llvm::to_vector(module.getOps<MeshOp>());
      if (meshes.size() != 1)
        return; // Nothing sharded and no single mesh: nothing to do.
      meshRef = FlatSymbolRefAttr::get(meshes.front().getSymNameAttr());
    }
    MeshOp mesh = lookupMesh(module, meshRef);
    if (!mesh) {
      mlir::emitError(module.getLoc())
          << "shardings name mesh " << meshRef << ", which is not declared";
      return signalPassFailure();
    }

    // States from the stated shardings, checked first.
    Propagator prop(mesh, meshRef);
    auto stated = [&](TensorShardingAttr s, Type type, Operation *where,
                      const Twine &what) -> TensorShardingAttr {
      if (s &&
          failed(verifySharding(
              s, type, mesh, [&] { return mlir::emitError(where->getLoc()); },
              what.str())))
        ok = false;
      return s;
    };
    for (func::FuncOp func : funcs) {
      for (BlockArgument arg : func.getArguments())
        prop.addValue(arg, stated(getSharding(arg), arg.getType(), func,
                                  "argument " + Twine(arg.getArgNumber())));
      func.walk([&](Operation *op) {
        if (op->getNumRegions() == 0)
          prop.addOp(op);
        for (Value r : op->getResults())
          prop.addValue(
              r,
              stated(getSharding(r), r.getType(), op,
                     "result " + Twine(cast<OpResult>(r).getResultNumber())));
      });
      auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        prop.addResult(v, stated(getResultSharding(func, i), v.getType(), func,
                                 "function result " + Twine(i)));
    }
    if (!ok)
      return signalPassFailure();

    prop.run();
    prop.writeConflicts();

    // Write every state back.
    size_t resultIndex = 0;
    auto results = prop.getResults();
    for (func::FuncOp func : funcs) {
      for (BlockArgument arg : func.getArguments())
        if (const TensorState *s = prop.lookup(arg))
          setSharding(arg, prop.toAttr(*s, keepOpen));
      func.walk([&](Operation *op) {
        if (isa<func::ReturnOp>(op))
          return;
        for (Value r : op->getResults())
          if (const TensorState *s = prop.lookup(r))
            setSharding(r, prop.toAttr(*s, keepOpen));
      });
      auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        if (!isa<RankedTensorType>(v.getType()))
          continue;
        // A stated result sharding stays; the others take the returned
        // value's.
        const auto &[returned, s] = results[resultIndex++];
        TensorShardingAttr own = getResultSharding(func, i);
        TensorShardingAttr out = own ? prop.toAttr(s, keepOpen)
                                     : prop.toAttr(*prop.lookup(v), keepOpen);
        func.setResultAttr(i, kShardingAttrName, out);
      }
    }
  }
};

} // namespace
