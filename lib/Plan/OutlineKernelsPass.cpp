//===- OutlineKernelsPass.cpp - The kernels phase as a pass ---------------===//
//
// `--cleave-outline-kernels`: the plan builder's grouping of @main into
// commands, and the fused kernels outlined into a nested `module @kernels`
// (outlineKernels in PlanBuilder.cpp). buildPlan reads the grouping back.
//
//===----------------------------------------------------------------------===//

#include "cleave/Plan/Passes.h"
#include "cleave/Plan/PlanBuilder.h"

#define DEBUG_TYPE "cleave-outline-kernels"

namespace cleave {
#define GEN_PASS_DEF_OUTLINEKERNELSPASS
#include "cleave/Plan/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct OutlineKernelsPass
    : public cleave::impl::OutlineKernelsPassBase<OutlineKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    cleave::PlanBuildOptions options;
    options.useLibraryGemm = libraryGemm;
    options.useGemmEpilogues = gemmEpilogues;
    options.inlineConstantLimit = inlineConstantLimit;
    if (failed(cleave::outlineKernels(getOperation(), options)))
      signalPassFailure();
  }
};

} // namespace
