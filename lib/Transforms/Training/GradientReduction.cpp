//===- GradientReduction.cpp - Gradients averaged over replicas -----------===//
//
// Data parallelism in --cleave-build-train-step: each rank holds the same
// parameters and 1/N of the batch; the mean over the global batch is the
// mean of the ranks' means (equal shards), so the gradients and the
// reported loss are averaged over dp before anything reads them (see
// averageOverReplicas in TrainStep.h).
//
//===----------------------------------------------------------------------===//

#include "TrainStep.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveOps.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::train_step;

LogicalResult train_step::averageOverReplicas(ModuleOp module, Location loc,
                                              ReplicaAverage &r) {
  OpBuilder &b = r.b;
  Block *body = r.body;
  const bool localSGD = r.sync == ::cleave::SyncMode::Local;
  const bool delayed = r.sync == ::cleave::SyncMode::Delayed;
  if (!module.getOps<MeshOp>().empty()) {
    mlir::emitError(module.getLoc()) << "data-parallel=" << r.dataParallel
                                     << " needs a module without a cleave.mesh";
    return failure();
  }
  OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
  MeshOp::create(mb, loc, "mesh", mb.getStrArrayAttr({"dp"}),
                 mb.getDenseI64ArrayAttr({r.dataParallel}));
  auto mesh = FlatSymbolRefAttr::get(b.getContext(), "mesh");
  ArrayAttr axes = b.getStrArrayAttr({"dp"});
  auto average = [&](Value v, StringRef what) -> Value {
    OperationState state(loc, AllReduceOp::getOperationName());
    state.addOperands(v);
    state.addTypes(v.getType());
    state.addAttribute("kind", CollectiveReduceKindAttr::get(
                                   b.getContext(), CollectiveReduceKind::avg));
    state.addAttribute("mesh", mesh);
    state.addAttribute("mesh_axes", axes);
    Operation *op = b.create(state);
    setPhase(op, what);
    return op->getResult(0);
  };
  if (delayed) {
    // Each step applies the previous step's gradients, averaged by an
    // all-reduce that starts before this step's forward pass and is
    // waited for after its backward pass; this step's own gradients
    // become the pending ones (zeros before step 0).
    Operation *first = &body->front();
    for (auto [g, p] : llvm::zip(r.grads, r.params)) {
      Value pending = body->addArgument(g.getType(), p->getLoc());
      r.pendingArgs.push_back(pending);
      r.newPending.push_back(g);
      Value started;
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(first);
        started = average(pending, "delayed gradient");
      }
      started.getDefiningOp()->setAttr("async", b.getUnitAttr());
      g = DoneOp::create(b, loc, started).getResult();
    }
  }
  for (auto [g, p] : llvm::zip(r.grads, r.params)) {
    if (localSGD || delayed)
      break;
    auto name = getInitializerName(p);
    g = average(
        g, ("gradient of " + (name ? name.getValue() : "a parameter")).str());
  }
  // Local SGD reports each replica's own loss (rank 0's is logged): the
  // step communicates nothing.
  if (!localSGD)
    r.loss = average(r.loss, "loss");
  // Delayed: the loss is reduced behind the gradients too (a blocking
  // reduction would wait on the communication stream for all of them
  // between the forward and the backward pass), waited for at the end.
  if (delayed) {
    r.loss.getDefiningOp()->setAttr("async", b.getUnitAttr());
    r.loss = DoneOp::create(b, loc, r.loss).getResult();
  }
  return success();
}
