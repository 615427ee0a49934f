//===- SplitOuterReductions.cpp - Outer reductions tiled for threads ------===//
//
// `--cleave-cpu-split-outer-reductions` runs before linalg becomes loops
// (buildCPULoweringPasses), for `--cleave-cpu-parallel-loops`: a
// linalg op whose outermost loop is a reduction (a bias gradient summing
// rows into one value per column) would give an scf.parallel inside the
// reduction loop, once per row; its outermost parallel dimension is tiled
// into an scf.parallel over 8 to 64 blocks instead, each block summing its
// columns over the rows in the original order.
//
//===----------------------------------------------------------------------===//

#include "LoopWork.h"
#include "cleave/Target/CPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

#define DEBUG_TYPE "cleave-cpu-split-outer-reductions"

namespace cleave {
#define GEN_PASS_DEF_SPLITOUTERREDUCTIONSPASS
#include "cleave/Target/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using ::cleave::mulSat;

namespace {

/// Blocks the parallel dimension of an outer reduction is cut into: the
/// first divisor of its extent from 8 up to 64 (a bias gradient's columns
/// into 8 blocks, so a thread has a few).
std::optional<int64_t> blockCount(int64_t extent) {
  for (int64_t k = 8; k <= 64; ++k)
    if (extent % k == 0 && extent / k >= 1)
      return k;
  return std::nullopt;
}

struct SplitOuterReductionsPass
    : ::cleave::impl::SplitOuterReductionsPassBase<SplitOuterReductionsPass> {
  using SplitOuterReductionsPassBase::SplitOuterReductionsPassBase;

  void runOnOperation() override;
};

void SplitOuterReductionsPass::runOnOperation() {
  if (minWork <= 0)
    return;
  SmallVector<linalg::LinalgOp> ops;
  getOperation().walk([&](linalg::LinalgOp op) {
    if (!op.hasPureBufferSemantics() || op->getParentOfType<scf::ParallelOp>())
      return;
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    if (!iterators.empty() && linalg::isReductionIterator(iterators[0]) &&
        llvm::any_of(iterators, linalg::isParallelIterator))
      ops.push_back(op);
  });
  IRRewriter rewriter(&getContext());
  for (linalg::LinalgOp op : ops) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (llvm::any_of(ranges, ShapedType::isDynamic))
      continue;
    int64_t work = 1;
    for (int64_t n : ranges)
      work = mulSat(work, n);
    if (work < minWork)
      continue;
    // Tile the outermost parallel dimension that divides into blocks; the
    // others stay whole, and every element still sums its reduction in the
    // original order.
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    SmallVector<int64_t> tiles(ranges.size(), 0);
    for (auto [d, it] : llvm::enumerate(iterators)) {
      if (!linalg::isParallelIterator(it))
        continue;
      if (std::optional<int64_t> k = blockCount(ranges[d])) {
        tiles[d] = ranges[d] / *k;
        break;
      }
    }
    if (llvm::all_of(tiles, [](int64_t t) { return t == 0; }))
      continue;
    linalg::LinalgTilingOptions options;
    options.setTileSizes(tiles).setLoopType(
        linalg::LinalgTilingLoopType::ParallelLoops);
    rewriter.setInsertionPoint(op);
    if (failed(linalg::tileLinalgOp(rewriter, op, options)))
      continue;
    rewriter.eraseOp(op);
  }
}

} // namespace
