//===- SplitPipeline.cpp - One program per pipeline rank ------------------===//
//
// Splits a pipelined training step (every op tagged with the pipeline rank
// that runs it, values crossing ranks through cleave.pipeline_transfer and
// cleave.pipeline_sum) into the program of each rank. See Pipeline.h.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Training/Passes.h"
#include "cleave/Transforms/Training/Pipeline.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <map>

#define DEBUG_TYPE "cleave-split-pipeline-ranks"

namespace cleave {
#define GEN_PASS_DEF_SPLITPIPELINERANKSPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

std::optional<int64_t> taggedRank(Operation *op) {
  if (auto attr = op->getAttrOfType<IntegerAttr>(::cleave::kPipelineRankAttr))
    return attr.getInt();
  return std::nullopt;
}

/// Which ops each rank runs: the closure of its tagged ops, its transfers
/// and its results over the ops they read.
class Needs {
public:
  explicit Needs(int64_t ranks) : ops(ranks), args(ranks) {}

  /// Adds `op` (and what it reads) to rank r's program.
  LogicalResult add(Operation *op, int64_t r) {
    worklist.push_back({op, r});
    while (!worklist.empty()) {
      auto [next, rank] = worklist.pop_back_val();
      if (auto sum = dyn_cast<PipelineSumOp>(next)) {
        // Read on `rank`: every participant makes its operand and sends
        // it there.
        if (!sumReaders[sum].insert(rank))
          continue;
        ops[rank].insert(sum);
        for (auto [x, q] : llvm::zip(sum.getOperands(), sum.getRanks())) {
          ops[q].insert(sum);
          if (auto arg = dyn_cast<BlockArgument>(x))
            args[q].insert(arg.getArgNumber());
          else
            worklist.push_back({x.getDefiningOp(), q});
        }
        continue;
      }
      if (!ops[rank].insert(next).second)
        continue;
      if (failed(visitOperands(next, rank)))
        return failure();
    }
    return success();
  }
  /// Adds the value `v` read on rank r.
  LogicalResult read(Value v, int64_t r) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      args[r].insert(arg.getArgNumber());
      return success();
    }
    return add(v.getDefiningOp(), r);
  }

  bool runs(int64_t r, Operation *op) const { return ops[r].contains(op); }
  bool reads(int64_t r, unsigned arg) const { return args[r].contains(arg); }
  /// The ranks that read a pipeline_sum's result.
  const llvm::SmallSetVector<int64_t, 4> &readersOf(Operation *sum) {
    return sumReaders[sum];
  }

private:
  LogicalResult visitOperands(Operation *op, int64_t r) {
    if (auto transfer = dyn_cast<PipelineTransferOp>(op)) {
      // A receive on its target; its operand is made on its source.
      if (transfer.getFromAttr().getInt() != r &&
          transfer.getToAttr().getInt() != r)
        return transfer.emitError()
               << "a value sent from pipeline rank "
               << transfer.getFromAttr().getInt() << " to "
               << transfer.getToAttr().getInt() << " is read on rank " << r;
      if (transfer.getFromAttr().getInt() != r)
        return success();
      Value x = transfer.getOperand();
      if (auto arg = dyn_cast<BlockArgument>(x)) {
        args[r].insert(arg.getArgNumber());
        return success();
      }
      worklist.push_back({x.getDefiningOp(), r});
      return success();
    }
    for (Value x : op->getOperands()) {
      if (auto arg = dyn_cast<BlockArgument>(x)) {
        args[r].insert(arg.getArgNumber());
        continue;
      }
      Operation *def = x.getDefiningOp();
      if (auto q = taggedRank(def); q && *q != r)
        return op->emitError()
               << "reads '" << def->getName() << "' of pipeline rank " << *q
               << " on pipeline rank " << r
               << " without a cleave.pipeline_transfer";
      if (auto transfer = dyn_cast<PipelineTransferOp>(def);
          transfer && transfer.getToAttr().getInt() != r)
        return op->emitError()
               << "reads a value sent from pipeline rank "
               << transfer.getFromAttr().getInt() << " to "
               << transfer.getToAttr().getInt() << " on rank " << r;
      if (!isa<PipelineSumOp>(def) || !sumReaders[def].contains(r))
        worklist.push_back({def, r});
    }
    return success();
  }

  std::vector<DenseSet<Operation *>> ops;
  std::vector<DenseSet<unsigned>> args;
  DenseMap<Operation *, llvm::SmallSetVector<int64_t, 4>> sumReaders;
  SmallVector<std::pair<Operation *, int64_t>> worklist;
};

/// Where a rank receives a transfer's value, and the ops between steps that
/// only carry it to the step that reads it (a convert of the message, say),
/// which move with the receive.
struct ReceivePoint {
  Operation *point = nullptr;
  SmallVector<Operation *> carried;
};

/// The begin marker of the step `op` runs in on this rank, or null when it
/// runs between steps. Ops of other ranks (`dead`) are skipped.
Operation *stepOf(Operation *op, const DenseSet<Operation *> &dead) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode())
    if (auto marker = dyn_cast<PipelineMarkerOp>(prev);
        marker && !dead.contains(prev))
      return marker.getBegin() ? prev : nullptr;
  return nullptr;
}

/// Before the begin marker of the step holding the first reader of
/// `transfer`'s value, where a reader between steps that only computes from
/// the value without side effects (converts, reshapes) is carried along
/// rather than read there: placing the receive at such a reader would make
/// this rank wait for a message its steps need only later, a step early in
/// every schedule that sends the next microbatch before the step that reads
/// it. Any other reader between steps is received for right before it.
ReceivePoint receivePoint(PipelineTransferOp transfer,
                          const DenseSet<Operation *> &dead) {
  ReceivePoint result;
  llvm::SmallSetVector<Operation *, 8> carried;
  auto carriesOnly = [&](Operation *op) {
    return op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
           op->getNumResults() > 0 &&
           llvm::all_of(op->getOperands(), [&](Value v) {
             Operation *def = v.getDefiningOp();
             return def == transfer.getOperation() || carried.contains(def);
           });
  };
  Operation *first = nullptr;
  auto consider = [&](Operation *op) {
    if (!first || op->isBeforeInBlock(first))
      first = op;
  };
  SmallVector<Operation *> worklist(transfer->getUsers().begin(),
                                    transfer->getUsers().end());
  while (!worklist.empty()) {
    Operation *user = worklist.pop_back_val();
    if (carried.contains(user) || dead.contains(user))
      continue;
    if (Operation *step = stepOf(user, dead)) {
      consider(step);
    } else if (carriesOnly(user)) {
      carried.insert(user);
      llvm::append_range(worklist, user->getUsers());
    } else {
      consider(user);
    }
  }
  result.point = first ? first : transfer.getOperation();
  // Those before the point move there, in their order.
  for (Operation *op : carried)
    if (op->isBeforeInBlock(result.point))
      result.carried.push_back(op);
  llvm::sort(result.carried,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return result;
}

} // namespace

namespace cleave {

FailureOr<SmallVector<OwningOpRef<ModuleOp>>>
splitPipelineRanks(ModuleOp module) {
  auto main = module.lookupSymbol<func::FuncOp>("main");
  auto ranksAttr =
      main ? main->getAttrOfType<IntegerAttr>(kPipelineRanksAttr) : nullptr;
  if (!ranksAttr || !main.getBody().hasOneBlock())
    return emitError(module.getLoc())
           << "expected a pipelined training step in @main";
  const int64_t p = ranksAttr.getInt();
  MeshOp mesh;
  for (MeshOp candidate : module.getOps<MeshOp>())
    for (auto [name, size] :
         llvm::zip(candidate.getAxisNames(), candidate.getShape()))
      if (cast<StringAttr>(name).getValue() == "pp" && size == p)
        mesh = candidate;
  if (!mesh)
    return emitError(module.getLoc())
           << "a pipelined step of " << p
           << " ranks needs a cleave.mesh with an axis pp=" << p;

  Block &block = main.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  Needs needs(p);
  // 1. What each rank computes: its tagged ops and its transfers.
  for (Operation &op : block.without_terminator()) {
    if (auto transfer = dyn_cast<PipelineTransferOp>(op)) {
      if (failed(needs.add(&op, transfer.getFromAttr().getInt())) ||
          failed(needs.add(&op, transfer.getToAttr().getInt())))
        return failure();
    } else if (auto r = taggedRank(&op)) {
      if (*r < 0 || *r >= p)
        return op.emitError() << "pipeline rank " << *r << " of " << p;
      if (failed(needs.add(&op, *r)))
        return failure();
    }
  }
  // 2. The states each rank keeps: those of the parameters it reads (a
  // parameter's optimizer state goes with it), and the step's own.
  auto parameterOf = [&](unsigned i) -> StringRef {
    auto name = getArgParameter(main, i);
    return name ? name.getValue() : StringRef();
  };
  std::vector<llvm::StringSet<>> keptParameters(p);
  for (int64_t r = 0; r < p; ++r)
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      if (mlir::cleave::isParameterArg(main, i) && needs.reads(r, i))
        keptParameters[r].insert(parameterOf(i));
  auto keeps = [&](int64_t r, unsigned arg) {
    if (!hasArgState(main, arg))
      return true; // Data, learning rate, step: every rank has them.
    StringRef parameter = parameterOf(arg);
    return parameter == "__trainer__" || keptParameters[r].contains(parameter);
  };
  auto updatedArg = [&](unsigned result) -> std::optional<unsigned> {
    if (std::optional<int64_t> a = getResultUpdates(main, result))
      return *a;
    return std::nullopt;
  };
  // 3. Each rank's results: its states' new values and every reported
  // scalar (loss, gradient norm).
  for (int64_t r = 0; r < p; ++r)
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      std::optional<unsigned> arg = updatedArg(i);
      if (arg && !keeps(r, *arg))
        continue;
      if (failed(needs.read(v, r)))
        return failure();
    }
  for (int64_t r = 0; r < p; ++r)
    for (unsigned i = 0; i < main.getNumArguments(); ++i)
      if (needs.reads(r, i) && !keeps(r, i))
        return main.emitError() << "pipeline rank " << r << " reads the state '"
                                << parameterOf(i) << "' without its parameter";

  // 4. Each rank's program.
  SmallVector<OwningOpRef<ModuleOp>> result;
  SmallVector<Operation *> order;
  for (Operation &op : block)
    order.push_back(&op);
  // Every message gets a tag its receiver checks (cleave.message): a
  // transfer its index, a pipeline_sum's part from rank q to rank r one
  // after all transfers'.
  DenseMap<Operation *, int64_t> messageOf;
  int64_t transfers = 0, sums = 0;
  for (Operation *op : order)
    if (isa<PipelineTransferOp>(op))
      messageOf[op] = transfers++;
  for (Operation *op : order)
    if (isa<PipelineSumOp>(op))
      messageOf[op] = sums++;
  auto sumMessage = [&](Operation *sum, int64_t from, int64_t to) {
    return transfers + (messageOf.lookup(sum) * p + from) * p + to;
  };
  auto tag = [&](Operation *op, int64_t message) {
    op->setAttr(
        attr::kMessage,
        IntegerAttr::get(IntegerType::get(op->getContext(), 64), message));
  };
  auto pp = ArrayAttr::get(module.getContext(),
                           {StringAttr::get(module.getContext(), "pp")});
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  for (int64_t r = 0; r < p; ++r) {
    OwningOpRef<ModuleOp> copy = module.clone();
    auto rankMain = copy->lookupSymbol<func::FuncOp>("main");
    Block &rankBlock = rankMain.getBody().front();
    SmallVector<Operation *> copies;
    for (Operation &op : rankBlock)
      copies.push_back(&op);
    SmallVector<Operation *> dead;
    // Values received from each rank, in the order it sends them.
    std::map<int64_t, SmallVector<std::pair<PipelineTransferOp, int64_t>>>
        incoming;
    for (auto [orig, op] : llvm::zip(order, copies)) {
      if (isa<func::ReturnOp>(op))
        continue;
      if (!needs.runs(r, orig)) {
        dead.push_back(op);
        continue;
      }
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto transfer = dyn_cast<PipelineTransferOp>(op)) {
        int64_t from = transfer.getFromAttr().getInt(),
                to = transfer.getToAttr().getInt();
        if (from == to)
          transfer.replaceAllUsesWith(transfer.getOperand());
        else if (from == r)
          tag(SendOp::create(b, loc, transfer.getOperand(), meshRef, pp,
                             b.getI64IntegerAttr(from),
                             b.getI64IntegerAttr(to)),
              messageOf.lookup(orig));
        else
          incoming[from].push_back({transfer, messageOf.lookup(orig)});
        if (from == to || from == r)
          dead.push_back(op);
        continue;
      }
      if (auto sum = dyn_cast<PipelineSumOp>(op)) {
        const auto &readers = needs.readersOf(orig);
        ArrayRef<int64_t> ranks = sum.getRanks();
        // Send this rank's part to the other readers, then add the parts in
        // rank order.
        for (auto [x, q] : llvm::zip(sum.getOperands(), ranks))
          if (q == r)
            for (int64_t reader : readers)
              if (reader != r)
                tag(SendOp::create(b, loc, x, meshRef, pp,
                                   b.getI64IntegerAttr(r),
                                   b.getI64IntegerAttr(reader)),
                    sumMessage(orig, r, reader));
        if (readers.contains(r)) {
          Value total;
          for (auto [x, q] : llvm::zip(sum.getOperands(), ranks)) {
            Value part = x;
            if (q != r) {
              auto recv = RecvOp::create(b, loc, sum.getType(), meshRef, pp,
                                         b.getI64IntegerAttr(q),
                                         b.getI64IntegerAttr(r));
              tag(recv, sumMessage(orig, q, r));
              part = recv.getResult();
            }
            total = total
                        ? BinaryOp::create(b, loc, BinaryKind::add, total, part)
                              .getResult()
                        : part;
          }
          sum.replaceAllUsesWith(total);
        }
        dead.push_back(op);
        continue;
      }
      op->removeAttr(kPipelineRankAttr);
    }
    // Receives: each where the step that first reads its value begins, but
    // messages from one rank are matched in the order it sends them, so a
    // receive moves no later than any that follows it from the same rank.
    DenseSet<Operation *> deadSet(dead.begin(), dead.end());
    for (auto &[from, messages] : incoming) {
      SmallVector<ReceivePoint> at(messages.size());
      Operation *limit = nullptr;
      for (int64_t i = messages.size() - 1; i >= 0; --i) {
        at[i] = receivePoint(messages[i].first, deadSet);
        if (limit && limit->isBeforeInBlock(at[i].point))
          at[i].point = limit;
        limit = at[i].point;
      }
      for (auto [message, where] : llvm::zip(messages, at)) {
        auto [transfer, id] = message;
        OpBuilder b(where.point);
        auto recv = RecvOp::create(b, transfer.getLoc(), transfer.getType(),
                                   meshRef, pp, b.getI64IntegerAttr(from),
                                   b.getI64IntegerAttr(r));
        tag(recv, id);
        for (Operation *op : where.carried)
          op->moveBefore(where.point);
        transfer.replaceAllUsesWith(recv.getResult());
        dead.push_back(transfer);
      }
    }
    // States this rank does not keep, and their new values.
    llvm::BitVector dropArgs(rankMain.getNumArguments());
    llvm::BitVector dropResults(rankMain.getNumResults());
    for (unsigned i = 0; i < rankMain.getNumArguments(); ++i)
      dropArgs[i] = !keeps(r, i);
    for (unsigned i = 0; i < rankMain.getNumResults(); ++i)
      if (std::optional<unsigned> arg = updatedArg(i))
        dropResults[i] = dropArgs[*arg];
    auto rankRet = cast<func::ReturnOp>(rankBlock.getTerminator());
    for (int i = rankMain.getNumResults() - 1; i >= 0; --i)
      if (dropResults[i])
        rankRet->eraseOperand(i);
    for (Operation *op : llvm::reverse(dead)) {
      if (!op->use_empty())
        return op->emitError()
               << "is read on pipeline rank " << r << " but not run there";
      op->erase();
    }

    if (failed(rankMain.eraseResults(dropResults)))
      return failure();
    for (unsigned i = 0; i < rankMain.getNumArguments(); ++i)
      if (dropArgs[i] && !rankMain.getArgument(i).use_empty())
        return rankMain.emitError()
               << "pipeline rank " << r << " reads the state '"
               << parameterOf(i) << "' it does not keep";
    // Renumber the state each result updates.
    SmallVector<unsigned> newIndex(dropArgs.size());
    for (unsigned i = 0, n = 0; i < dropArgs.size(); ++i)
      newIndex[i] = dropArgs[i] ? 0 : n++;
    for (unsigned i = 0; i < rankMain.getNumResults(); ++i)
      if (std::optional<int64_t> a = getResultUpdates(rankMain, i))
        setResultUpdates(rankMain, i, newIndex[*a]);
    if (failed(rankMain.eraseArguments(dropArgs)))
      return failure();
    rankMain->removeAttr(kPipelineRanksAttr);
    rankMain->setAttr(kPipelineRankAttr,
                      Builder(copy->getContext()).getI64IntegerAttr(r));
    result.push_back(std::move(copy));
  }
  return result;
}

namespace {
struct SplitPipelineRanksPass
    : impl::SplitPipelineRanksPassBase<SplitPipelineRanksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<SmallVector<OwningOpRef<ModuleOp>>> ranks =
        splitPipelineRanks(module);
    if (failed(ranks))
      return signalPassFailure();
    // The module keeps its attributes; its body becomes the ranks' modules.
    Block *body = module.getBody();
    while (!body->empty())
      body->back().erase();
    for (auto [r, rank] : llvm::enumerate(*ranks)) {
      ModuleOp op = rank.release();
      op.setSymName(("rank" + llvm::Twine(r)).str());
      body->push_back(op);
    }
  }
};
} // namespace

} // namespace cleave
