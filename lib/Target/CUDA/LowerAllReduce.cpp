//===- LowerAllReduce.cpp - gpu.all_reduce as shuffles and shared memory -===//
//
// `--cleave-cuda-lower-all-reduce` applies MLIR's gpu.all_reduce rewrite
// (warp shuffles, one shared-memory word per warp) inside the outlined
// kernels, and fails if a gpu.all_reduce is left.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "cleave-cuda-lower-all-reduce"

namespace cleave {
#define GEN_PASS_DEF_LOWERALLREDUCEPASS
#include "cleave/Target/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct LowerAllReducePass
    : ::cleave::impl::LowerAllReducePassBase<LowerAllReducePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateGpuAllReducePatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult left = getOperation().walk([](gpu::AllReduceOp op) {
      op.emitError("cuda: gpu.all_reduce was not lowered");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
