//===- ScheduleCollectives.cpp - Buckets and overlap for collectives ------===//
//
// Two rewrites of a partitioned program, in program order:
//
//   1. Buckets. All-reduces of the same kind, mesh axes and element type
//      are packed into one (operands flattened and concatenated, the result
//      sliced back) until the bucket holds `bucketMB`. The bucket starts
//      where its last member's operand is ready, as DDP's buckets do; ops
//      that read a member before that point (an optimizer update, a
//      gradient-norm term) move after it. Each element is reduced exactly as
//      before, so results are bitwise the same.
//   2. Overlap. Every remaining synchronous all_reduce, reduce_scatter,
//      all_gather and collective_permute (ring attention's blocks) becomes
//      asynchronous, its `cleave.done` placed right
//      before the first op that reads it: the compute in between (the rest
//      of the backward pass, other buckets' updates) runs while it is in
//      flight, and an optimizer update waits only for its own bucket.
//   3. Late waits. The wait of a reduction, and what depends on it, moves
//      to just before the next collective starts (delayReductionWaits).
//   4. Prefetch. A gather of a function argument (a ZeRO-3 parameter)
//      starts right after the previous such gather is waited for.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Sharding/Passes.h"

#include "Cleave/IR/CleaveCollectives.h"
#include "Cleave/IR/CleaveMetadata.h"
#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-schedule-collectives"

namespace cleave {
#define GEN_PASS_DEF_SCHEDULECOLLECTIVESPASS
#include "cleave/Transforms/Sharding/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// What must agree for all-reduces to share a bucket.
static bool sameBucket(AllReduceOp a, AllReduceOp b) {
  return a.getKind() == b.getKind() && a.getMesh() == b.getMesh() &&
         a.getMeshAxes() == b.getMeshAxes() &&
         a.getType().getElementType() == b.getType().getElementType();
}

/// Replaces the members of a bucket by one all-reduce of their flattened,
/// concatenated operands, placed after the last member. Returns the ops that
/// take the members' results back out of it (slices and reshapes), in
/// order; none for a bucket of one, which stays as it is.
static SmallVector<Operation *> packBucket(ArrayRef<AllReduceOp> members) {
  SmallVector<Operation *> unpack;
  if (members.size() < 2)
    return unpack;
  AllReduceOp last = members.back();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  Location loc = last.getLoc();
  Type et = last.getType().getElementType();
  SmallVector<Value> flat;
  int64_t total = 0;
  for (AllReduceOp m : members) {
    int64_t n = m.getType().getNumElements();
    auto flatType = RankedTensorType::get({n}, et);
    flat.push_back(m.getOperand().getType() == flatType
                       ? m.getOperand()
                       : ReshapeOp::create(b, loc, flatType, m.getOperand()));
    total += n;
  }
  auto packedType = RankedTensorType::get({total}, et);
  Value packed = ConcatOp::create(b, loc, packedType, flat, 0);
  auto reduced =
      AllReduceOp::create(b, loc, packedType, last.getKindAttr(), packed,
                          last.getMeshAttr(), last.getMeshAxesAttr());
  setPhase(reduced, "bucket of " + Twine(members.size()) + " all_reduces (" +
                        Twine(total * et.getIntOrFloatBitWidth() / 8) +
                        " bytes)");
  int64_t offset = 0;
  for (AllReduceOp m : members) {
    int64_t n = m.getType().getNumElements();
    Value part = SliceOp::create(
        b, loc, RankedTensorType::get({n}, et), reduced.getResult(),
        b.getDenseI64ArrayAttr({offset}), b.getDenseI64ArrayAttr({offset + n}),
        b.getDenseI64ArrayAttr({1}));
    Value back = m.getType() == part.getType()
                     ? part
                     : ReshapeOp::create(b, loc, m.getType(), part);
    m.getResult().replaceAllUsesWith(back);
    unpack.push_back(part.getDefiningOp());
    if (back != part)
      unpack.push_back(back.getDefiningOp());
    offset += n;
  }
  for (AllReduceOp m : members)
    m->erase();
  return unpack;
}

/// Makes a synchronous collective asynchronous, waiting right before the
/// first op that reads it.
static void overlap(Operation *op) {
  Value result = op->getResult(0);
  if (result.use_empty())
    return;
  Operation *first = nullptr;
  for (Operation *user : result.getUsers()) {
    Operation *inBlock = op->getBlock()->findAncestorOpInBlock(*user);
    if (!inBlock)
      return;
    if (!first || inBlock->isBeforeInBlock(first))
      first = inBlock;
  }
  OpBuilder b(first);
  op->setAttr("async", b.getUnitAttr());
  auto done = DoneOp::create(b, op->getLoc(), result);
  result.replaceAllUsesExcept(done.getResult(), done);
}

/// Moves the wait of each asynchronous reduction (all_reduce,
/// reduce_scatter), with the ops after it that depend on it, to just before
/// the next collective starts. A gradient's reduction then runs while the
/// backward pass computes the next gradient, instead of being waited for by
/// the gradient-norm term right after it; and at most the reductions
/// started since the last collective are in flight, so their buffers stay
/// bounded. Nothing that does not depend on the wait moves, and the moved
/// ops keep their order, so results are bitwise the same.
static void delayReductionWaits(Block &body) {
  SmallVector<DoneOp> waits;
  for (Operation &op : body)
    if (auto done = dyn_cast<DoneOp>(op))
      if (isa_and_nonnull<AllReduceOp, ReduceScatterOp>(
              done.getOperand().getDefiningOp()))
        waits.push_back(done);
  for (DoneOp done : waits) {
    SmallVector<Operation *> moving = {done};
    llvm::SmallPtrSet<Value, 16> tainted(done->result_begin(),
                                         done->result_end());
    Operation *next = nullptr;
    for (Operation *op = done->getNextNode(); op; op = op->getNextNode()) {
      if (isa<CollectiveOpInterface>(op)) {
        next = op;
        break;
      }
      if (!llvm::any_of(op->getOperands(),
                        [&](Value v) { return tainted.contains(v); }))
        continue;
      if (op->hasTrait<OpTrait::IsTerminator>())
        break;
      moving.push_back(op);
      tainted.insert(op->result_begin(), op->result_end());
    }
    if (!next)
      continue;
    for (Operation *op : moving)
      op->moveBefore(next);
  }
}

struct ScheduleCollectivesPass
    : ::cleave::impl::ScheduleCollectivesPassBase<ScheduleCollectivesPass> {
  using Base::Base;

  void runOnOperation() override {
    Block &body = getOperation().getBody().front();
    int64_t limit = static_cast<int64_t>(bucketMB * 1024 * 1024);
    if (limit > 0) {
      // Ops between the members that read a member (directly or through
      // another such op) are deferred: they move after the bucket's
      // all-reduce, so that the bucket can fill. Cleave's compute ops are
      // pure, and every rank moves the same collectives the same way.
      SmallVector<AllReduceOp> bucket;
      SmallVector<Operation *> deferred;
      llvm::SmallPtrSet<Value, 16> tainted;
      int64_t bytes = 0;
      auto flush = [&] {
        // Deferred ops already after the last member stay where they are
        // (they may read values defined after it).
        SmallVector<Operation *> toMove;
        if (!bucket.empty())
          for (Operation *op : deferred)
            if (op->isBeforeInBlock(bucket.back()))
              toMove.push_back(op);
        LLVM_DEBUG(if (bucket.size() > 1) llvm::dbgs()
                   << "bucket of " << bucket.size() << " all-reduces, " << bytes
                   << " bytes\n");
        SmallVector<Operation *> ops = packBucket(bucket);
        if (!ops.empty()) {
          // The unpacking and the deferred readers go right before the
          // first op that needs any of them, so that everything up to it
          // overlaps the bucket's all-reduce.
          llvm::append_range(ops, toMove);
          llvm::SmallPtrSet<Operation *, 16> moving(ops.begin(), ops.end());
          Operation *first = nullptr;
          for (Operation *op : ops)
            for (Operation *user : op->getUsers()) {
              Operation *u = body.findAncestorOpInBlock(*user);
              if (u && !moving.contains(u) &&
                  (!first || u->isBeforeInBlock(first)))
                first = u;
            }
          if (first)
            for (Operation *op : ops)
              op->moveBefore(first);
        }
        bucket.clear();
        deferred.clear();
        tainted.clear();
        bytes = 0;
      };
      auto readsTainted = [&](Operation &op) {
        return llvm::any_of(op.getOperands(),
                            [&](Value v) { return tainted.contains(v); });
      };
      for (Operation &op : llvm::make_early_inc_range(body)) {
        if (op.hasTrait<OpTrait::IsTerminator>() || op.getNumRegions()) {
          flush();
          continue;
        }
        auto ar = dyn_cast<AllReduceOp>(op);
        if (ar && !ar.getAsync()) {
          if (!bucket.empty() &&
              (!sameBucket(bucket.front(), ar) || readsTainted(op)))
            flush();
          bucket.push_back(ar);
          tainted.insert(ar.getResult());
          bytes += mlir::cleave::detail::getSizeInBytes(ar.getType());
          if (bytes >= limit)
            flush();
          continue;
        }
        if (!bucket.empty() && readsTainted(op)) {
          deferred.push_back(&op);
          tainted.insert(op.result_begin(), op.result_end());
        }
      }
      flush();
    }
    if (!async)
      return;
    SmallVector<Operation *> collectives;
    for (Operation &op : body)
      if (isa<AllReduceOp, ReduceScatterOp, AllGatherOp, CollectivePermuteOp>(
              op) &&
          !op.hasAttr("async"))
        collectives.push_back(&op);
    LLVM_DEBUG(llvm::dbgs()
               << collectives.size() << " collectives made asynchronous\n");
    for (Operation *op : collectives)
      overlap(op);
    if (lateWaits)
      delayReductionWaits(body);
    if (!prefetch)
      return;
    // ZeRO-3's parameter gathers (of function arguments, so they can start
    // any time): each starts as soon as the previous one has been waited
    // for, so that the next layer's parameters arrive while this layer
    // computes, with at most two gathered ahead of use.
    SmallVector<AllGatherOp> gathers;
    for (Operation &op : body)
      if (auto g = dyn_cast<AllGatherOp>(op);
          g && g.getAsync() && isa<BlockArgument>(g.getOperand()))
        gathers.push_back(g);
    for (size_t k = 1; k < gathers.size(); ++k) {
      Value prev = gathers[k - 1].getResult();
      if (!prev.hasOneUse())
        continue;
      Operation *done = *prev.getUsers().begin();
      if (done->getBlock() == &body && done->isBeforeInBlock(gathers[k]))
        gathers[k]->moveAfter(done);
    }
  }
};

} // namespace
