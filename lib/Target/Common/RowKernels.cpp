//===- RowKernels.cpp - Reduction kernels as one loop over rows -----------===//
//
// `--cleave-row-kernels` rewrites a kernel function whose linalg ops (on
// memrefs) all share the parallel "row" space of a reduction into one
// `scf.parallel` over the rows, tagged `cleave.row_kernel`, whose body runs
// the ops one after another on that row:
//
//   scf.parallel (%r0, ...) = (0, ...) to (R0, ...) {       // one row
//     scf.parallel (%c...) = ... { elementwise op on the row }
//     %s = scf.parallel (%c...) init(%identity) {           // a reduction
//       scf.reduce(%x) { combiner }
//     }
//     %old = memref.load %out[%r...]; store combiner(%old, %s)
//     ...
//   } {cleave.row_kernel}
//
// Softmax, layer norm and cross-entropy, forward and backward, then touch a
// row in one place instead of sweeping the whole tensor once per op. The
// CUDA target maps the outer loop to blocks and each inner loop to the
// block's threads (cleave-cuda-rows-to-launch); on the CPU the nest lowers
// like any scf.parallel, which is how the rewrite itself is tested.
//
// Row space: the parallel loops of the first reduction, in the order of its
// output buffer's dimensions. The rewrite is legal when every op iterates
// that space with parallel loops of the same extents and every buffer the
// function writes is indexed by the row loops at the same positions in all
// of its accesses, so rows never read what another row writes. Anything
// else (views of written buffers, accesses from inside op regions to written
// buffers, reductions whose result is not exactly one value per row,
// combiners without a neutral element) leaves the function unchanged.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/Common/Passes.h"

#include "Cleave/IR/CleaveMetadata.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/Pass.h"

#define DEBUG_TYPE "cleave-row-kernels"

namespace cleave {
#define GEN_PASS_DEF_ROWKERNELSPASS
#include "cleave/Target/Common/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

/// The buffer a memref value views (a function argument or an allocation).
Value rootBuffer(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      v = view.getViewSource();
    else if (isa<memref::CollapseShapeOp, memref::ExpandShapeOp,
                 memref::CastOp>(def))
      v = def->getOperand(0);
    else
      break;
  }
  return v;
}

/// Bounds (0, extent, step 1) of a loop nest over `extents`.
struct LoopBounds {
  SmallVector<Value> lbs, ubs, steps;
};
LoopBounds zeroBasedBounds(OpBuilder &b, Location loc,
                           ArrayRef<int64_t> extents) {
  LoopBounds bounds;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t e : extents) {
    bounds.lbs.push_back(zero);
    bounds.ubs.push_back(arith::ConstantIndexOp::create(b, loc, e));
    bounds.steps.push_back(one);
  }
  return bounds;
}

/// Whether the body of `op` stores to memory or loads from a buffer for
/// which `isWritten(root buffer)` holds.
bool touchesFromRegion(linalg::GenericOp op,
                       function_ref<bool(Value)> isWritten) {
  return op.getRegion()
      .walk([&](Operation *inner) {
        if (isa<memref::StoreOp>(inner))
          return WalkResult::interrupt();
        if (auto load = dyn_cast<memref::LoadOp>(inner))
          if (isWritten(rootBuffer(load.getMemRef())))
            return WalkResult::interrupt();
        return WalkResult::advance();
      })
      .wasInterrupted();
}

/// What the analysis knows about one linalg.generic.
struct OpPlan {
  linalg::GenericOp op;
  SmallVector<int64_t> ranges;   ///< Static loop extents.
  SmallVector<int64_t> rowLoop;  ///< Loop of each row dimension, -1: unknown.
  Operation *combiner = nullptr; ///< Reductions: the combining op.
  Value reduced;                 ///< Reductions: the value combined in.
  TypedAttr neutral;             ///< Reductions: the combiner's identity.
  /// Split reductions whose output a fill set just before: the fill value
  /// (the fill is folded in: the output is written, not combined into).
  Value initValue;
};

/// Fills plan.combiner/reduced/neutral when `plan.op` is a reduction with
/// one output, combined by one op that has a neutral element.
bool matchCombiner(OpPlan &plan) {
  linalg::GenericOp op = plan.op;
  if (op.getNumReductionLoops() == 0 || op.getNumDpsInits() != 1)
    return false;
  SmallVector<Operation *> combiners;
  BlockArgument outArg = op.getRegionOutputArgs()[0];
  Value reduced = matchReduction(op.getRegionOutputArgs(), 0, combiners);
  if (!reduced || combiners.size() != 1 || !outArg.hasOneUse() ||
      !isa<IntegerType, FloatType>(outArg.getType()))
    return false;
  std::optional<TypedAttr> neutral = arith::getNeutralElement(combiners[0]);
  if (!neutral)
    return false;
  plan.combiner = combiners[0];
  plan.reduced = reduced;
  plan.neutral = *neutral;
  return true;
}

class RowKernelBuilder {
public:
  explicit RowKernelBuilder(func::FuncOp func) : func(func) {}

  /// Rewrites the function if it qualifies; returns whether it did.
  bool run();

private:
  bool analyze();
  bool analyzePlans();
  bool rowKernelOf(linalg::GenericOp op);
  bool collectOps();
  bool propagate();
  bool verify();
  void emit();
  void emitOp(OpBuilder &b, OpPlan &plan, ValueRange rowIvs);
  void splitFull(OpPlan &plan);
  void splitColumns(OpPlan &plan);
  IRMapping cloneBody(OpBuilder &b, Location loc, OpPlan &plan,
                      ArrayRef<Value> ivs);
  Value combine(OpBuilder &b, OpPlan &plan, Value acc, Value x);
  Value reduceLoop(OpBuilder &b, Location loc, OpPlan &plan,
                   ArrayRef<int64_t> extents,
                   function_ref<Value(OpBuilder &, Location, ValueRange)> body);
  void combineInto(OpBuilder &b, Location loc, OpPlan &plan, ValueRange indices,
                   Value value);
  SmallVector<Value> indicesFor(OpBuilder &b, Location loc, AffineMap map,
                                ArrayRef<Value> ivs);

  func::FuncOp func;
  SmallVector<OpPlan> plans;
  SmallVector<int64_t> rowExtents;
  /// Row positions of each written buffer (root buffer -> dimension index of
  /// row j), and the one SSA value through which it is accessed.
  DenseMap<Value, SmallVector<int64_t>> rowPositions;
  DenseMap<Value, Value> writtenAccess;
};

bool RowKernelBuilder::collectOps() {
  IRRewriter rewriter(func.getContext());
  SmallVector<linalg::LinalgOp> named;
  for (Operation &op : func.getBody().front()) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(&op)) {
      if (!isa<linalg::GenericOp>(&op))
        named.push_back(linalgOp);
      continue;
    }
    if (isa<memref::AllocOp, memref::DeallocOp, func::ReturnOp,
            ViewLikeOpInterface, memref::CollapseShapeOp, memref::ExpandShapeOp,
            memref::CastOp>(&op) ||
        op.hasTrait<OpTrait::ConstantLike>())
      continue;
    return false;
  }
  // Contractions and convolutions are not row kernels; only generalize ops
  // that are elementwise, copies, fills, transposes or reductions.
  for (linalg::LinalgOp op : named)
    if (!isa<linalg::FillOp, linalg::CopyOp, linalg::TransposeOp,
             linalg::BroadcastOp, linalg::MapOp, linalg::ReduceOp,
             linalg::ElementwiseOp>(op.getOperation()))
      return false;
  for (linalg::LinalgOp op : named) {
    rewriter.setInsertionPoint(op);
    if (failed(linalg::generalizeNamedOp(rewriter, op)))
      return false;
  }
  for (auto generic : func.getBody().front().getOps<linalg::GenericOp>()) {
    if (!generic.hasPureBufferSemantics())
      return false;
    OpPlan plan;
    plan.op = generic;
    plan.ranges = generic.getStaticLoopRanges();
    if (llvm::any_of(plan.ranges, ShapedType::isDynamic))
      return false;
    plans.push_back(plan);
  }
  return !plans.empty();
}

bool RowKernelBuilder::analyze() { return collectOps() && analyzePlans(); }

bool RowKernelBuilder::analyzePlans() {
  // Written buffers: each must be reached through one SSA value only.
  for (OpPlan &plan : plans)
    for (OpOperand &init : plan.op.getDpsInitsMutable())
      writtenAccess[rootBuffer(init.get())] = init.get();
  for (OpPlan &plan : plans)
    for (OpOperand &operand : plan.op->getOpOperands()) {
      if (!isa<MemRefType>(operand.get().getType()))
        continue;
      auto it = writtenAccess.find(rootBuffer(operand.get()));
      if (it != writtenAccess.end() && it->second != operand.get())
        return false;
    }
  // Op regions may read read-only buffers (gathers) but nothing written here.
  for (OpPlan &plan : plans)
    if (touchesFromRegion(plan.op, [&](Value root) {
          return writtenAccess.count(root) != 0;
        }))
      return false;

  // Reductions: one output, combined by one op with a neutral element.
  OpPlan *seed = nullptr;
  for (OpPlan &plan : plans) {
    if (plan.op.getNumReductionLoops() == 0)
      continue;
    if (!matchCombiner(plan))
      return false;
    if (!seed)
      seed = &plan;
  }
  if (!seed)
    return false;
  // Reductions to one value are split over blocks instead (splitFull): a
  // single "row" would put every other op of the function on one block.
  if (seed->op.getMatchingIndexingMap(seed->op.getDpsInitOperand(0))
          .getNumResults() == 0)
    return false;

  // Row space from the first reduction's output.
  AffineMap outMap =
      seed->op.getMatchingIndexingMap(seed->op.getDpsInitOperand(0));
  for (AffineExpr e : outMap.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim)
      return false;
    seed->rowLoop.push_back(dim.getPosition());
    rowExtents.push_back(seed->ranges[dim.getPosition()]);
  }
  for (OpPlan &plan : plans)
    if (&plan != seed)
      plan.rowLoop.assign(rowExtents.size(), -1);
  return propagate() && verify();
}

/// Spreads the row-loop assignment between ops and written buffers until
/// nothing changes: a buffer with known row positions fixes the row loops of
/// every op that accesses it, and an op with known row loops fixes the row
/// positions of every written buffer it accesses.
bool RowKernelBuilder::propagate() {
  size_t k = rowExtents.size();
  bool changed = true;
  while (changed) {
    changed = false;
    for (OpPlan &plan : plans) {
      for (OpOperand &operand : plan.op->getOpOperands()) {
        Value root = rootBuffer(operand.get());
        if (!writtenAccess.count(root))
          continue;
        AffineMap map = plan.op.getMatchingIndexingMap(&operand);
        bool opKnown =
            llvm::all_of(plan.rowLoop, [](int64_t l) { return l >= 0; });
        auto pos = rowPositions.find(root);
        if (pos != rowPositions.end()) {
          for (size_t j = 0; j < k; ++j) {
            auto dim = dyn_cast<AffineDimExpr>(map.getResult(pos->second[j]));
            if (!dim)
              return false;
            if (plan.rowLoop[j] < 0) {
              plan.rowLoop[j] = dim.getPosition();
              changed = true;
            } else if (plan.rowLoop[j] != int64_t(dim.getPosition())) {
              return false;
            }
          }
        } else if (opKnown) {
          SmallVector<int64_t> positions;
          for (size_t j = 0; j < k; ++j) {
            int64_t found = -1;
            for (auto [i, e] : llvm::enumerate(map.getResults()))
              if (e == getAffineDimExpr(plan.rowLoop[j], map.getContext())) {
                if (found >= 0)
                  return false;
                found = i;
              }
            if (found < 0)
              return false;
            positions.push_back(found);
          }
          rowPositions[root] = positions;
          changed = true;
        }
      }
    }
  }
  return true;
}

bool RowKernelBuilder::verify() {
  size_t k = rowExtents.size();
  for (OpPlan &plan : plans) {
    linalg::GenericOp op = plan.op;
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    llvm::SmallDenseSet<int64_t> seen;
    for (size_t j = 0; j < k; ++j) {
      int64_t l = plan.rowLoop[j];
      if (l < 0 || !seen.insert(l).second ||
          iterators[l] != utils::IteratorType::parallel ||
          plan.ranges[l] != rowExtents[j])
        return false;
    }
    for (OpOperand &operand : op->getOpOperands()) {
      Value root = rootBuffer(operand.get());
      if (!writtenAccess.count(root))
        continue;
      auto pos = rowPositions.find(root);
      if (pos == rowPositions.end())
        return false;
      AffineMap map = op.getMatchingIndexingMap(&operand);
      for (size_t j = 0; j < k; ++j)
        if (map.getResult(pos->second[j]) !=
            getAffineDimExpr(plan.rowLoop[j], map.getContext()))
          return false;
    }
    // An op that reads a buffer it writes must read the element it writes.
    for (OpOperand &init : op.getDpsInitsMutable())
      for (OpOperand *input : op.getDpsInputOperands())
        if (rootBuffer(input->get()) == rootBuffer(init.get()) &&
            op.getMatchingIndexingMap(input) !=
                op.getMatchingIndexingMap(&init))
          return false;
    // A row's elements must be contiguous: a buffer swept along the
    // columns but indexed innermost by a row loop would be read with the
    // row count as stride (one block per column of a [rows, C] tensor). Such
    // kernels (bias and norm-weight gradients) keep the flat mapping, their
    // reductions split over columns (splitColumns).
    for (OpOperand &operand : op->getOpOperands()) {
      AffineMap map = op.getMatchingIndexingMap(&operand);
      if (map.getNumResults() == 0)
        continue;
      auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
      bool sweepsColumns = llvm::any_of(map.getResults(), [&](AffineExpr e) {
        auto d = dyn_cast<AffineDimExpr>(e);
        return d && !llvm::is_contained(plan.rowLoop, int64_t(d.getPosition()));
      });
      if (sweepsColumns && last &&
          llvm::is_contained(plan.rowLoop, int64_t(last.getPosition())))
        return false;
    }
    // A reduction yields one value per row: its output is the row space.
    if (plan.combiner &&
        op.getMatchingIndexingMap(op.getDpsInitOperand(0)).getNumResults() != k)
      return false;
  }
  return true;
}

SmallVector<Value> RowKernelBuilder::indicesFor(OpBuilder &b, Location loc,
                                                AffineMap map,
                                                ArrayRef<Value> ivs) {
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults()) {
    if (auto dim = dyn_cast<AffineDimExpr>(e)) {
      indices.push_back(ivs[dim.getPosition()]);
    } else if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      indices.push_back(arith::ConstantIndexOp::create(b, loc, c.getValue()));
    } else {
      AffineMap single = AffineMap::get(map.getNumDims(), 0, e);
      indices.push_back(affine::AffineApplyOp::create(b, loc, single, ivs));
    }
  }
  return indices;
}

/// Loads the operands `plan`'s op reads at the loop point `ivs` and clones
/// its body there (without the combiner of a reduction); returns the
/// mapping from the body's values to the clones.
IRMapping RowKernelBuilder::cloneBody(OpBuilder &b, Location loc, OpPlan &plan,
                                      ArrayRef<Value> ivs) {
  linalg::GenericOp op = plan.op;
  IRMapping map;
  for (OpOperand &operand : op->getOpOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(&operand);
    if (arg.use_empty())
      continue;
    if (plan.combiner && op.isDpsInit(&operand))
      continue; // the accumulator is combined after the loop
    if (!isa<MemRefType>(operand.get().getType())) {
      map.map(arg, operand.get());
      continue;
    }
    SmallVector<Value> indices =
        indicesFor(b, loc, op.getMatchingIndexingMap(&operand), ivs);
    map.map(arg, memref::LoadOp::create(b, loc, operand.get(), indices));
  }
  for (Operation &inner : op.getRegion().front().without_terminator()) {
    if (&inner == plan.combiner)
      continue;
    if (auto index = dyn_cast<linalg::IndexOp>(&inner)) {
      map.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
  return map;
}

/// `combiner(acc, x)`, with the accumulator on the side the op had it.
Value RowKernelBuilder::combine(OpBuilder &b, OpPlan &plan, Value acc,
                                Value x) {
  BlockArgument outArg = plan.op.getRegionOutputArgs()[0];
  IRMapping map;
  for (Value operand : plan.combiner->getOperands())
    map.map(operand, operand == outArg ? acc : x);
  return b.clone(*plan.combiner, map)->getResult(0);
}

/// An scf.parallel over `extents` reducing the values `body` yields with
/// `plan`'s combiner, from its neutral element.
Value RowKernelBuilder::reduceLoop(
    OpBuilder &b, Location loc, OpPlan &plan, ArrayRef<int64_t> extents,
    function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  LoopBounds bounds = zeroBasedBounds(b, loc, extents);
  Value init = arith::ConstantOp::create(b, loc, plan.neutral);
  auto loop = scf::ParallelOp::create(
      b, loc, bounds.lbs, bounds.ubs, bounds.steps, ValueRange{init},
      [&](OpBuilder &nb, Location nloc, ValueRange ivs, ValueRange) {
        Value x = body(nb, nloc, ivs);
        auto reduce = scf::ReduceOp::create(nb, nloc, ValueRange{x});
        Block &rb = reduce.getReductions()[0].front();
        OpBuilder cb = OpBuilder::atBlockEnd(&rb);
        scf::ReduceReturnOp::create(
            cb, nloc, combine(cb, plan, rb.getArgument(0), rb.getArgument(1)));
      });
  return loop.getResult(0);
}

/// out[indices] = combiner(out[indices], value).
void RowKernelBuilder::combineInto(OpBuilder &b, Location loc, OpPlan &plan,
                                   ValueRange indices, Value value) {
  Value out = plan.op.getDpsInitOperand(0)->get();
  Value old = plan.initValue
                  ? plan.initValue
                  : memref::LoadOp::create(b, loc, out, indices).getResult();
  memref::StoreOp::create(b, loc, combine(b, plan, old, value), out, indices);
}

/// Emits `plan`'s op for the row `rowIvs`: an inner scf.parallel over its
/// other loops (one iteration when there are none).
void RowKernelBuilder::emitOp(OpBuilder &b, OpPlan &plan, ValueRange rowIvs) {
  linalg::GenericOp op = plan.op;
  Location loc = op.getLoc();
  size_t numLoops = plan.ranges.size();
  SmallVector<int64_t> colLoops, colExtents;
  for (size_t l = 0; l < numLoops; ++l)
    if (!llvm::is_contained(plan.rowLoop, int64_t(l))) {
      colLoops.push_back(l);
      colExtents.push_back(plan.ranges[l]);
    }
  if (colLoops.empty())
    colExtents.push_back(1);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  // The loop point of row `rowIvs` and columns `colIvs` (columns at 0 when
  // colIvs is empty: the output of a reduction only uses the row loops).
  auto loopPoint = [&](ValueRange colIvs) {
    SmallVector<Value> ivs(numLoops, zero);
    for (auto [j, l] : llvm::enumerate(plan.rowLoop))
      ivs[l] = rowIvs[j];
    for (auto [i, l] : llvm::enumerate(colLoops))
      if (i < colIvs.size())
        ivs[l] = colIvs[i];
    return ivs;
  };

  if (plan.combiner) {
    Value rowValue =
        reduceLoop(b, loc, plan, colExtents,
                   [&](OpBuilder &nb, Location nloc, ValueRange colIvs) {
                     IRMapping map =
                         cloneBody(nb, nloc, plan, loopPoint(colIvs));
                     return map.lookupOrDefault(plan.reduced);
                   });
    SmallVector<Value> indices =
        indicesFor(b, loc, op.getMatchingIndexingMap(op.getDpsInitOperand(0)),
                   loopPoint({}));
    combineInto(b, loc, plan, indices, rowValue);
    return;
  }

  LoopBounds bounds = zeroBasedBounds(b, loc, colExtents);
  scf::ParallelOp::create(
      b, loc, bounds.lbs, bounds.ubs, bounds.steps,
      [&](OpBuilder &nb, Location nloc, ValueRange colIvs) {
        SmallVector<Value> ivs = loopPoint(colIvs);
        IRMapping map = cloneBody(nb, nloc, plan, ivs);
        auto yield =
            cast<linalg::YieldOp>(op.getRegion().front().getTerminator());
        for (auto [value, init] :
             llvm::zip(yield.getValues(), op.getDpsInitsMutable())) {
          SmallVector<Value> indices =
              indicesFor(nb, nloc, op.getMatchingIndexingMap(&init), ivs);
          memref::StoreOp::create(nb, nloc, map.lookupOrDefault(value),
                                  init.get(), indices);
        }
      });
}

/// Rewrites a reduction of everything to one value as two row loops: G
/// "rows" each reduce a contiguous slice of the iteration space into a
/// temporary, then one row reduces the G partial values into the output.
/// On the GPU that is G blocks and then one (a deterministic two-stage
/// reduction); G grows with the size, each slice at least kSliceElements.
void RowKernelBuilder::splitFull(OpPlan &plan) {
  constexpr int64_t kSliceElements = 8192, kMaxSlices = 1024;
  linalg::GenericOp op = plan.op;
  Location loc = op.getLoc();
  int64_t total = 1;
  for (int64_t r : plan.ranges)
    total *= r;
  int64_t slices = std::clamp<int64_t>(
      (total + kSliceElements - 1) / kSliceElements, 1, kMaxSlices);
  int64_t chunk = (total + slices - 1) / slices;
  Type type = plan.neutral.getType();

  OpBuilder b(op);
  auto makeRows = [&](int64_t n, function_ref<void(OpBuilder &, Value)> body) {
    LoopBounds bounds = zeroBasedBounds(b, loc, {n});
    auto rows = scf::ParallelOp::create(
        b, loc, bounds.lbs, bounds.ubs, bounds.steps,
        [&](OpBuilder &nb, Location, ValueRange ivs) { body(nb, ivs[0]); });
    rows->setAttr(mlir::cleave::attr::kRowKernel, b.getUnitAttr());
  };
  // Loop point of the linear iteration `linear` (row-major over the op's
  // loops).
  auto delinearize = [&](OpBuilder &nb, Value linear) {
    SmallVector<Value> ivs(plan.ranges.size());
    Value rem = linear;
    for (int64_t d = plan.ranges.size() - 1; d >= 0; --d) {
      Value ext = arith::ConstantIndexOp::create(nb, loc, plan.ranges[d]);
      ivs[d] =
          d > 0 ? arith::RemUIOp::create(nb, loc, rem, ext).getResult() : rem;
      if (d > 0)
        rem = arith::DivUIOp::create(nb, loc, rem, ext);
    }
    return ivs;
  };

  if (slices == 1) {
    makeRows(1, [&](OpBuilder &nb, Value) {
      Value all = reduceLoop(
          nb, loc, plan, {total}, [&](OpBuilder &ib, Location, ValueRange i) {
            IRMapping map = cloneBody(ib, loc, plan, delinearize(ib, i[0]));
            return map.lookupOrDefault(plan.reduced);
          });
      combineInto(nb, loc, plan, {}, all);
    });
    op.erase();
    return;
  }

  auto partialType = MemRefType::get({slices}, type);
  Value partials = memref::AllocOp::create(b, loc, partialType);
  makeRows(slices, [&](OpBuilder &nb, Value slice) {
    Value start = arith::MulIOp::create(
        nb, loc, slice, arith::ConstantIndexOp::create(nb, loc, chunk));
    Value part = reduceLoop(
        nb, loc, plan, {chunk}, [&](OpBuilder &ib, Location, ValueRange i) {
          Value linear = arith::AddIOp::create(ib, loc, start, i[0]);
          Value inside = arith::CmpIOp::create(
              ib, loc, arith::CmpIPredicate::ult, linear,
              arith::ConstantIndexOp::create(ib, loc, total));
          auto guard = scf::IfOp::create(
              ib, loc, inside,
              [&](OpBuilder &tb, Location) {
                IRMapping map =
                    cloneBody(tb, loc, plan, delinearize(tb, linear));
                scf::YieldOp::create(tb, loc,
                                     map.lookupOrDefault(plan.reduced));
              },
              [&](OpBuilder &eb, Location) {
                scf::YieldOp::create(
                    eb, loc,
                    arith::ConstantOp::create(eb, loc, plan.neutral)
                        .getResult());
              });
          return guard.getResult(0);
        });
    memref::StoreOp::create(nb, loc, part, partials, ValueRange{slice});
  });
  makeRows(1, [&](OpBuilder &nb, Value) {
    Value all = reduceLoop(
        nb, loc, plan, {slices}, [&](OpBuilder &ib, Location, ValueRange i) {
          return memref::LoadOp::create(ib, loc, partials, i).getResult();
        });
    combineInto(nb, loc, plan, {}, all);
  });
  memref::DeallocOp::create(b, loc, partials);
  op.erase();
}

void RowKernelBuilder::emit() {
  Operation *first = plans.front().op, *last = plans.back().op;
  // Deallocations between the ops move after the loop.
  SmallVector<Operation *> deallocs;
  for (Operation *op = first; op != last; op = op->getNextNode())
    if (isa<memref::DeallocOp>(op))
      deallocs.push_back(op);
  OpBuilder b(last);
  Location loc = first->getLoc();
  LoopBounds bounds = zeroBasedBounds(b, loc, rowExtents);
  auto rows =
      scf::ParallelOp::create(b, loc, bounds.lbs, bounds.ubs, bounds.steps,
                              [&](OpBuilder &nb, Location, ValueRange rowIvs) {
                                for (OpPlan &plan : plans)
                                  emitOp(nb, plan, rowIvs);
                              });
  rows->setAttr(mlir::cleave::attr::kRowKernel, b.getUnitAttr());
  for (Operation *dealloc : deallocs)
    dealloc->moveAfter(rows);
  for (OpPlan &plan : plans)
    plan.op.erase();
}

/// The linalg op right before `op` (host ops such as constants and views in
/// between), when it is a fill of exactly `op`'s output buffer value with a
/// scalar: a generic of parallel loops yielding its scalar input into an
/// identity-indexed output. Nothing reads the buffer in between, and `op`
/// writes all of it, so the fill can become the combiner's first operand.
static linalg::GenericOp precedingFill(linalg::GenericOp op) {
  Operation *prev = op->getPrevNode();
  while (prev && !isa<linalg::LinalgOp>(prev)) {
    if (!isa<ViewLikeOpInterface, memref::AllocOp>(prev) &&
        !prev->hasTrait<OpTrait::ConstantLike>())
      return nullptr;
    prev = prev->getPrevNode();
  }
  auto fill = dyn_cast_or_null<linalg::GenericOp>(prev);
  if (!fill || fill.getNumDpsInputs() != 1 || fill.getNumDpsInits() != 1 ||
      fill.getNumReductionLoops() != 0 ||
      fill.getDpsInitOperand(0)->get() != op.getDpsInitOperand(0)->get() ||
      !fill.getMatchingIndexingMap(fill.getDpsInitOperand(0)).isIdentity())
    return nullptr;
  Value scalar = fill.getDpsInputOperand(0)->get();
  if (isa<ShapedType>(scalar.getType()) ||
      scalar.getType() != op.getRegionOutputArgs()[0].getType())
    return nullptr;
  auto yield = cast<linalg::YieldOp>(fill.getRegion().front().getTerminator());
  if (yield.getValues().size() != 1 ||
      yield.getValues()[0] !=
          fill.getMatchingBlockArgument(fill.getDpsInputOperand(0)))
    return nullptr;
  return fill;
}

/// Makes `op` alone a row kernel (when the function as a whole is not one).
bool RowKernelBuilder::rowKernelOf(linalg::GenericOp op) {
  RowKernelBuilder single(func);
  OpPlan plan;
  plan.op = op;
  plan.ranges = op.getStaticLoopRanges();
  single.plans.push_back(plan);
  if (!single.analyzePlans())
    return false;
  single.emit();
  return true;
}

/// Whether `op` reduces over outer dimensions of an input whose innermost
/// dimension is one of the op's output (parallel) loops, e.g. [N, C] -> [C]:
/// its output map is a projection of all parallel loops, and some input is
/// indexed innermost by a parallel loop.
static bool isColumnReduction(linalg::GenericOp op) {
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (!out.isProjectedPermutation() ||
      out.getNumResults() != op.getNumParallelLoops())
    return false;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  return llvm::any_of(op.getDpsInputOperands(), [&](OpOperand *in) {
    AffineMap map = op.getMatchingIndexingMap(in);
    if (!isa<MemRefType>(in->get().getType()) || map.getNumResults() == 0)
      return false;
    auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
    return last &&
           iterators[last.getPosition()] == utils::IteratorType::parallel;
  });
}

/// Rewrites a column reduction as two flat loops: the reduced space is cut
/// into S slices; loop 1 runs one iteration per (slice, output element),
/// summing its slice sequentially into a temporary [S, outputs]; loop 2 one
/// per output element, combining the S partial values into the output. The
/// output elements are innermost in both, so neighbouring GPU threads read
/// neighbouring elements, and S x outputs threads share the work (instead
/// of one thread walking a whole column). S gives about 64K threads and at
/// least 64 reduced elements each.
void RowKernelBuilder::splitColumns(OpPlan &plan) {
  constexpr int64_t kTargetThreads = 65536, kMinSlice = 64;
  linalg::GenericOp op = plan.op;
  Location loc = op.getLoc();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> parLoops, redLoops, parExtents, redExtents;
  for (auto [l, it] : llvm::enumerate(iterators)) {
    bool parallel = it == utils::IteratorType::parallel;
    (parallel ? parLoops : redLoops).push_back(l);
    (parallel ? parExtents : redExtents).push_back(plan.ranges[l]);
  }
  int64_t outputs = 1, reduced = 1;
  for (int64_t e : parExtents)
    outputs *= e;
  for (int64_t e : redExtents)
    reduced *= e;
  int64_t slices =
      std::clamp<int64_t>((kTargetThreads + outputs - 1) / outputs, 1,
                          std::max<int64_t>(1, reduced / kMinSlice));
  int64_t chunk = (reduced + slices - 1) / slices;
  Type type = plan.neutral.getType();
  OpOperand *outOperand = op.getDpsInitOperand(0);
  AffineMap outMap = op.getMatchingIndexingMap(outOperand);

  OpBuilder b(op);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  // The op's loop point from its parallel ivs and the reduced linear index.
  auto loopPoint = [&](OpBuilder &nb, ValueRange parIvs, Value linear) {
    SmallVector<Value> ivs(plan.ranges.size(), zero);
    for (auto [i, l] : llvm::enumerate(parLoops))
      ivs[l] = parIvs[i];
    Value rem = linear;
    for (int64_t d = redLoops.size() - 1; d >= 0; --d) {
      Value ext = arith::ConstantIndexOp::create(nb, loc, redExtents[d]);
      ivs[redLoops[d]] =
          d > 0 ? arith::RemUIOp::create(nb, loc, rem, ext).getResult() : rem;
      if (d > 0)
        rem = arith::DivUIOp::create(nb, loc, rem, ext);
    }
    return ivs;
  };
  // Output element indices (the output map only uses parallel loops).
  auto outIndices = [&](OpBuilder &nb, ValueRange parIvs) {
    SmallVector<Value> ivs(plan.ranges.size(), zero);
    for (auto [i, l] : llvm::enumerate(parLoops))
      ivs[l] = parIvs[i];
    return indicesFor(nb, loc, outMap, ivs);
  };

  SmallVector<int64_t> partialShape = {slices};
  llvm::append_range(partialShape, parExtents);
  Value partials =
      memref::AllocOp::create(b, loc, MemRefType::get(partialShape, type));
  Value neutral = arith::ConstantOp::create(b, loc, plan.neutral);

  // Loop 1: (slice, outputs...) -> partials[slice, outputs...].
  SmallVector<int64_t> space1 = {slices};
  llvm::append_range(space1, parExtents);
  LoopBounds bounds1 = zeroBasedBounds(b, loc, space1);
  scf::ParallelOp::create(
      b, loc, bounds1.lbs, bounds1.ubs, bounds1.steps,
      [&](OpBuilder &nb, Location, ValueRange ivs) {
        Value slice = ivs[0];
        ValueRange parIvs = ivs.drop_front();
        Value start = arith::MulIOp::create(
            nb, loc, slice, arith::ConstantIndexOp::create(nb, loc, chunk));
        Value end = arith::MinUIOp::create(
            nb, loc,
            arith::AddIOp::create(
                nb, loc, start, arith::ConstantIndexOp::create(nb, loc, chunk)),
            arith::ConstantIndexOp::create(nb, loc, reduced));
        auto loop = scf::ForOp::create(
            nb, loc, start, end, one, ValueRange{neutral},
            [&](OpBuilder &fb, Location, Value r, ValueRange acc) {
              IRMapping map =
                  cloneBody(fb, loc, plan, loopPoint(fb, parIvs, r));
              scf::YieldOp::create(
                  fb, loc,
                  combine(fb, plan, acc[0], map.lookupOrDefault(plan.reduced)));
            });
        SmallVector<Value> at = {slice};
        llvm::append_range(at, parIvs);
        memref::StoreOp::create(nb, loc, loop.getResult(0), partials, at);
      });
  // Loop 2: outputs... -> out[outputs] = comb(out, comb over slices).
  LoopBounds bounds2 = zeroBasedBounds(b, loc, parExtents);
  scf::ParallelOp::create(
      b, loc, bounds2.lbs, bounds2.ubs, bounds2.steps,
      [&](OpBuilder &nb, Location, ValueRange parIvs) {
        auto loop = scf::ForOp::create(
            nb, loc, zero, arith::ConstantIndexOp::create(nb, loc, slices), one,
            ValueRange{neutral},
            [&](OpBuilder &fb, Location, Value s, ValueRange acc) {
              SmallVector<Value> at = {s};
              llvm::append_range(at, parIvs);
              Value v = memref::LoadOp::create(fb, loc, partials, at);
              scf::YieldOp::create(fb, loc, combine(fb, plan, acc[0], v));
            });
        combineInto(nb, loc, plan, outIndices(nb, parIvs), loop.getResult(0));
      });
  memref::DeallocOp::create(b, loc, partials);
  op.erase();
}

bool RowKernelBuilder::run() {
  if (analyze()) {
    emit();
    return true;
  }
  // Otherwise split each reduction of a whole tensor to one value on its
  // own; the function's other ops stay as they are.
  llvm::DenseSet<Value> written;
  SmallVector<linalg::GenericOp> generics;
  for (Operation &op : func.getBody().front()) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(&op))
      for (Value init : linalgOp.getDpsInits())
        written.insert(rootBuffer(init));
    if (auto generic = dyn_cast<linalg::GenericOp>(&op))
      generics.push_back(generic);
  }
  bool changed = false;
  for (linalg::GenericOp generic : generics) {
    OpPlan plan;
    plan.op = generic;
    plan.ranges = generic.getStaticLoopRanges();
    if (!generic.hasPureBufferSemantics() ||
        generic.getNumReductionLoops() == 0 ||
        llvm::any_of(plan.ranges, ShapedType::isDynamic) ||
        !matchCombiner(plan))
      continue;
    if (touchesFromRegion(generic,
                          [&](Value root) { return written.contains(root); }))
      continue;
    bool full = generic.getNumReductionLoops() == generic.getNumLoops() &&
                generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
                        .getNumResults() == 0;
    if (full || isColumnReduction(generic)) {
      // The fill that initializes the output right before: fold it in.
      if (linalg::GenericOp fill = precedingFill(generic)) {
        plan.initValue = fill.getDpsInputOperand(0)->get();
        fill.erase();
      }
      if (full)
        splitFull(plan);
      else
        splitColumns(plan);
    } else if (!rowKernelOf(generic)) {
      continue;
    }
    changed = true;
  }
  return changed;
}

struct RowKernelsPass : ::cleave::impl::RowKernelsPassBase<RowKernelsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isDeclaration())
        RowKernelBuilder(func).run();
  }
};

} // namespace
