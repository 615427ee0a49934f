//===- ExpandArith.cpp - arith-expand that keeps float min/max ------------===//
//
// `--cleave-cpu-expand-arith`: arith-expand-ops without its float min/max
// expansion. maximumf/maxnumf (and the min forms) stay ops and become
// llvm.maximum/maxnum intrinsics, which LLVM's loop vectorizer recognizes
// as reductions; the expanded compare-and-select form is not recognized, so
// row maxima (softmax) stayed scalar. Ceil/floor division and the
// bf16/scaling conversions are expanded as arith-expand-ops does.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CPU/Passes.h"

#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "cleave-cpu-expand-arith"

namespace cleave {
#define GEN_PASS_DEF_EXPANDARITHPASS
#include "cleave/Target/CPU/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct ExpandArithPass : ::cleave::impl::ExpandArithPassBase<ExpandArithPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateCeilFloorDivExpandOpsPatterns(patterns);
    arith::populateExpandBFloat16Patterns(patterns);
    arith::populateExpandScalingExtTruncPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
