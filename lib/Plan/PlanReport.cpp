//===- PlanReport.cpp - What each plan buffer holds -----------------------===//
//
// For --report and --print-memory-plan: follows each parameter's gradient
// from its cleave.gradient_of tag, marks the forward pass, classifies each
// buffer (parameters, gradients, activations, ...) and fills the step
// report with the memory classes, the peak and the collectives.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilderInternal.h"

#include "cleave/Analysis/TrainingTags.h"

#include "llvm/ADT/DenseSet.h"

#include <functional>

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::plan_builder;
using ::cleave::BufferInterval;
using ::cleave::BuiltPlan;
namespace plan = ::cleave::plan;

/// The change of float width a conversion makes (to bits minus from
/// bits), or 0 for anything else.
static int floatWidening(Operation *op) {
  auto convert = dyn_cast_or_null<ConvertOp>(op);
  if (!convert)
    return 0;
  auto to = dyn_cast<FloatType>(getElementTypeOrSelf(convert.getType()));
  auto from =
      dyn_cast<FloatType>(getElementTypeOrSelf(convert.getOperand().getType()));
  return to && from ? int(to.getWidth()) - int(from.getWidth()) : 0;
}
/// A conversion to a narrower float type (f32 -> bf16/f16).
static bool isLoweringConvert(Operation *op) { return floatWidening(op) < 0; }

/// Reads (and removes, so that identical kernels stay identical) the
/// cleave.gradient_of tags the train step put on each parameter's gradient,
/// follows each gradient through what reduces, reshapes, converts, packs
/// and unpacks it, and marks the forward pass (the ops the loss depends
/// on), for the report.
void PlanBuilder::takeGradientTags() {
  Block &body = main.getBody().front();
  for (Operation &op : body) {
    // A low-precision parameter copy gathered once and kept (ZeRO-1/2).
    if (op.hasAttr(kReshardOnceAttr)) {
      op.removeAttr(kReshardOnceAttr);
      keptCopies.insert(&op);
    }
    if (auto of = op.getAttrOfType<StringAttr>(attr::kGradientOf)) {
      op.removeAttr(attr::kGradientOf);
      for (Value r : op.getResults())
        gradientOf[r].push_back(of);
      // The tag sits on the last op autodiff built. The reductions and
      // layout changes before it (all_reduce, transpose, ...) hold the same
      // gradient, an add sums contributions to it (a tied weight), and the
      // values they start from are gradients too.
      SmallVector<Operation *> up = {&op};
      while (!up.empty()) {
        Operation *def = up.pop_back_val();
        auto add = dyn_cast<BinaryOp>(def);
        if (!isa<CollectiveOpInterface, DoneOp, ReshapeOp, ConvertOp,
                 TransposeOp>(def) &&
            !(add && add.getKind() == BinaryKind::add))
          continue;
        for (Value in :
             add ? def->getOperands() : def->getOperands().take_front()) {
          if (!in.hasOneUse() || gradientOf.count(in) || !in.getDefiningOp())
            continue;
          gradientOf[in].push_back(of);
          up.push_back(in.getDefiningOp());
        }
      }
      continue;
    }
    if (!(options.report || options.reportMemory) || op.getNumOperands() == 0)
      continue;
    auto of = [&](Value v) { return gradientOf.lookup(v); };
    SmallVector<StringAttr, 1> names;
    // A low-precision gradient widened back to f32 is the optimizer's
    // transient view of it, not another gradient (--low-precision-gradients).
    if (isa<CollectiveOpInterface, DoneOp, ReshapeOp, ConvertOp, SliceOp>(op) &&
        floatWidening(&op) <= 0) {
      names = of(op.getOperand(0));
    } else if (isa<ConcatOp>(op) &&
               llvm::all_of(op.getOperands(), [&](Value v) {
                 return gradientOf.count(v) != 0;
               })) {
      for (Value v : op.getOperands())
        llvm::append_range(names, of(v));
    }
    if (!names.empty())
      for (Value r : op.getResults())
        gradientOf[r] = names;
  }
  if (!(options.report || options.reportMemory))
    return;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Operation *> work;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (getResultRole(main, i) == Role::loss)
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
}

int64_t PlanBuilder::nodeFlops(Node &node) {
  int64_t flops = 0;
  if (node.kind == Node::Gemm)
    flops = cast<CostOpInterface>(node.contract.getOperation()).getFlops();
  for (Operation *op : node.ops)
    if (auto cost = dyn_cast<CostOpInterface>(op))
      flops += cost.getFlops();
  return flops;
}

/// The values that share `root`'s buffer: itself, and the reshapes and
/// waits that read it, transitively.
static SmallVector<Value> aliasesOf(Value root) {
  SmallVector<Value> aliases = {root};
  for (size_t i = 0; i < aliases.size(); ++i)
    for (Operation *user : aliases[i].getUsers())
      if (isa<ReshapeOp, DoneOp>(user))
        llvm::append_range(aliases, user->getResults());
  return aliases;
}

/// What a buffer holds (see ::cleave::MemoryClass).
::cleave::MemoryClass PlanBuilder::classify(Value root, bool &finalGradient) {
  using ::cleave::MemoryClass;
  finalGradient = false;
  if (auto arg = dyn_cast<BlockArgument>(root)) {
    std::optional<StateKind> state = getArgState(main, arg.getArgNumber());
    if (!state)
      return MemoryClass::Inputs;
    if (state == StateKind::parameter)
      return llvm::any_of(arg.getUsers(), isLoweringConvert)
                 ? MemoryClass::MasterParameters
                 : MemoryClass::Parameters;
    if (state == StateKind::optimizer_state)
      return MemoryClass::OptimizerStates;
    return MemoryClass::StateBuffers;
  }
  if (root.getDefiningOp<ConstantOp>())
    return MemoryClass::Constants;
  // Low-precision parameter copies: a master's conversion (at ZeRO-1/2 only
  // the shard on its way to the gather that keeps the copy for the step).
  Operation *def = root.getDefiningOp();
  auto isCopy = [&](Operation *op) {
    return op && isLoweringConvert(op) &&
           isa<BlockArgument>(op->getOperand(0)) &&
           isParameterArg(
               main, cast<BlockArgument>(op->getOperand(0)).getArgNumber());
  };
  if (isCopy(def))
    return keptCopies.contains(def) ? MemoryClass::Temporaries
                                    : MemoryClass::Parameters;
  if (isa_and_nonnull<DoneOp>(def))
    def = def->getOperand(0).getDefiningOp();
  if (def && isa<CollectiveOpInterface>(def) && def->getNumOperands() &&
      keptCopies.contains(def->getOperand(0).getDefiningOp()))
    return MemoryClass::Parameters;
  // The readers of the buffer: users, through the reshapes and waits that
  // share it.
  SmallVector<Operation *> readers;
  bool gradient = false;
  for (Value v : aliasesOf(root)) {
    gradient |= gradientOf.count(v) != 0;
    for (Operation *user : v.getUsers())
      if (!isa<ReshapeOp, DoneOp>(user))
        readers.push_back(user);
  }
  if (gradient) {
    // Final unless it is reduced, converted, packed or sliced further
    // into another buffer.
    // (Through values that a kernel computes without a buffer of their
    // own: a transpose fused with a rounding to bf16.)
    std::function<bool(Value, int)> reachesBuffered = [&](Value r, int depth) {
      if (gradientOf.count(r) == 0)
        return false;
      if (buffered.contains(r))
        return true;
      return depth < 8 &&
             llvm::any_of(
                 r.getUsers(),
                 [&](Operation *user) {
                   return llvm::any_of(user->getResults(), [&](Value next) {
                     return reachesBuffered(next, depth + 1);
                   });
                 });
    };
    finalGradient = llvm::none_of(readers, [&](Operation *user) {
      return llvm::any_of(user->getResults(),
                          [&](Value r) { return reachesBuffered(r, 0); });
    });
    return MemoryClass::Gradients;
  }
  if (forward.contains(root.getDefiningOp()) &&
      llvm::any_of(readers, [&](Operation *user) {
        return !forward.contains(user) && !isa<func::ReturnOp>(user);
      }))
    return MemoryClass::Activations;
  return MemoryClass::Temporaries;
}

void PlanBuilder::fillReport(BuiltPlan &result, ArrayRef<Value> bufferValues,
                             ArrayRef<BufferInterval> intervals,
                             uint64_t arenaBytes) {
  ::cleave::StepReport &report = result.stepReport;
  std::vector<::cleave::ReportBuffer> buffers;
  llvm::SmallDenseSet<StringAttr, 64> found;
  for (auto [v, iv] : llvm::zip(bufferValues, intervals)) {
    bool final = false;
    ::cleave::MemoryClass cls = classify(v, final);
    unsigned elementBytes = 0;
    if (auto type = dyn_cast<RankedTensorType>(v.getType());
        type && type.getElementType().isIntOrFloat())
      elementBytes = type.getElementType().getIntOrFloatBitWidth() / 8;
    buffers.push_back(
        {cls, iv.size, iv.firstUse, iv.lastUse, final, elementBytes});
    if (final)
      for (Value alias : aliasesOf(v))
        for (StringAttr name : gradientOf.lookup(alias))
          found.insert(name);
  }
  ::cleave::summarizeBuffers(buffers, report);
  report.arenaBytes = arenaBytes;
  report.gradientsHeld = found.size();
  llvm::SmallDenseSet<StringAttr, 64> traced;
  for (const auto &entry : gradientOf)
    traced.insert(entry.second.begin(), entry.second.end());
  report.gradientsTraced = traced.size();
  for (const auto &entry : gradientOf)
    if (auto type = dyn_cast<RankedTensorType>(entry.first.getType());
        type && type.getElementType().isIntOrFloat() &&
        type.getElementType().getIntOrFloatBitWidth() == 16)
      report.lowPrecisionGradients = true;
  if (report.peakNode >= 0 &&
      report.peakNode < static_cast<int64_t>(nodes.size())) {
    Node &node = nodes[report.peakNode];
    Operation *op = node.kind == Node::Gemm ? node.contract.getOperation()
                    : node.comm             ? node.comm
                                            : node.ops.front();
    report.peakWhere = node.name;
    if (std::string where = sourceOf(op); !where.empty())
      report.peakWhere += ": " + where;
  } else if (report.peakNode >= 0) {
    report.peakWhere = "the state copies after the last command";
  }
  for (BlockArgument arg : main.getArguments()) {
    if (!isParameterArg(main, arg.getArgNumber()))
      continue;
    ++report.parameterTensors;
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t local = type.getNumElements();
    int64_t elements = local, replica = local;
    bool expert = false;
    if (auto sharding = getSharding(arg); sharding && mesh)
      for (DimShardingAttr dim : sharding.getDims())
        for (auto [k, axis] : llvm::enumerate(dim.getAxes())) {
          int64_t size = getAxesSize(mesh, axis);
          elements *= size;
          // ep splits experts first on their dimension; after dp, it is
          // ZeRO's split of a parameter every ep rank holds.
          bool experts = axis.getValue() == "ep" && k == 0;
          replica *= isReplicaAxis(axis.getValue()) ||
                             (axis.getValue() == "ep" && !experts)
                         ? size
                         : 1;
          expert |= experts;
        }
    if (expert) {
      ++report.expertTensors;
      report.expertElements += elements;
      report.expertLocalElements += local;
    }
    report.parameterElements += elements;
    report.replicaParameterElements += replica;
    if (expert)
      report.replicaExpertElements += replica;
    if (llvm::any_of(arg.getUsers(), isLoweringConvert))
      report.replicaLowPrecisionElements += replica;
  }
  if (!result.plan.mesh.empty())
    report.mesh = result.plan.mesh.str();
  for (auto [name, size] :
       llvm::zip(result.plan.mesh.axisNames, result.plan.mesh.shape))
    if (name == "ep")
      report.epRanks = size;
  DenseMap<Operation *, int64_t> doneNode;
  for (auto [index, node] : llvm::enumerate(nodes))
    if (node.kind == Node::Done)
      doneNode[node.comm->getOperand(0).getDefiningOp()] = index;
  for (auto [index, node] : llvm::enumerate(nodes)) {
    if (node.kind != Node::Collective)
      continue;
    auto op = cast<CollectiveOpInterface>(node.comm);
    ::cleave::ReportCollective c;
    c.kind = node.comm->getName().stripDialect().str();
    llvm::raw_string_ostream axes(c.axes);
    for (auto [i, a] : llvm::enumerate(op.getMeshAxesAttr()))
      axes << (i ? "," : "") << cast<StringAttr>(a).getValue();
    c.bytesSent =
        getCollectiveCost(op, *getGroupSize(op), CollectiveAlgorithm::Ring)
            .bytesSent;
    c.async = op.getAsync();
    if (auto it = doneNode.find(node.comm); it != doneNode.end())
      for (int64_t t = index + 1; t < it->second; ++t)
        if (nodes[t].kind == Node::Kernel || nodes[t].kind == Node::Gemm ||
            nodes[t].kind == Node::Library) {
          ++c.computeCommandsInFlight;
          c.flopsInFlight += nodeFlops(nodes[t]);
        }
    report.collectives.push_back(std::move(c));
  }
}
