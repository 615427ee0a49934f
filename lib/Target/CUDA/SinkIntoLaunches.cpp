//===- SinkIntoLaunches.cpp - Constants and views into gpu.launch bodies -===//
//
// `--cleave-cuda-sink-into-launches`: canonicalization and CSE hoist
// constants out of the launches made earlier; this puts them (and views)
// back, so that outlined kernels take only whole buffers.
//
//===----------------------------------------------------------------------===//

#include "LaunchUtils.h"
#include "cleave/Target/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#define DEBUG_TYPE "cleave-cuda-sink-into-launches"

namespace cleave {
#define GEN_PASS_DEF_SINKINTOLAUNCHESPASS
#include "cleave/Target/CUDA/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct SinkIntoLaunchesPass
    : ::cleave::impl::SinkIntoLaunchesPassBase<SinkIntoLaunchesPass> {
  void runOnOperation() override {
    getOperation().walk(
        [](gpu::LaunchOp launch) { ::cleave::sinkViewsIntoLaunch(launch); });
  }
};

} // namespace
