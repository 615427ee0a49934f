//===- OutlineKernelsPass.cpp - The kernels phase as passes ---------------===//
//
// `--cleave-outline-kernels`: the plan builder's grouping of @main into
// commands, and the fused kernels outlined into a nested `module @kernels`
// (outlineKernels in PlanBuilder.cpp). buildPlan reads the grouping back.
// `--cleave-kernel-modules`: a pipeline run on those kernel modules alone.
//
//===----------------------------------------------------------------------===//

#include "cleave/Plan/Passes.h"
#include "cleave/Plan/PlanBuilder.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <optional>

#define DEBUG_TYPE "cleave-outline-kernels"

namespace cleave {
#define GEN_PASS_DEF_OUTLINEKERNELSPASS
#define GEN_PASS_DEF_KERNELMODULESPASS
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
    if (failed(cleave::outlineKernels(getOperation(), options, entry)))
      signalPassFailure();
  }
};

struct KernelModulesPass
    : public cleave::impl::KernelModulesPassBase<KernelModulesPass> {
  using Base::Base;
  /// From C++: the pipeline itself (its passes need not be registered, as
  /// they are not in cleave-compile); the option holds its text, for the
  /// printed pipeline.
  explicit KernelModulesPass(OpPassManager given) {
    llvm::raw_string_ostream os(pipeline);
    given.printAsTextualPipeline(os);
    kernelPipeline = std::move(given);
    fromCode = true;
  }

  /// The pipeline option parsed; errors name it.
  FailureOr<OpPassManager> parsed(llvm::raw_ostream &errors) const {
    FailureOr<OpPassManager> pm = parsePassPipeline(pipeline, errors);
    if (failed(pm))
      return failure();
    if (pm->getOpName() != ModuleOp::getOperationName()) {
      errors << "expected a builtin.module(...) pipeline";
      return failure();
    }
    return pm;
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    if (fromCode)
      return kernelPipeline->getDependentDialects(registry);
    std::string ignored;
    llvm::raw_string_ostream os(ignored);
    if (FailureOr<OpPassManager> pm = parsed(os); succeeded(pm))
      pm->getDependentDialects(registry);
  }

  LogicalResult initialize(MLIRContext *context) override {
    if (fromCode)
      return success();
    std::string errors;
    llvm::raw_string_ostream os(errors);
    FailureOr<OpPassManager> pm = parsed(os);
    if (failed(pm))
      return emitError(UnknownLoc::get(context))
             << "cleave-kernel-modules: the pipeline option '" << pipeline
             << "' does not parse: " << errors;
    kernelPipeline = std::move(*pm);
    return success();
  }

  void runOnOperation() override {
    SmallVector<ModuleOp> kernels;
    getOperation()->walk([&](ModuleOp module) {
      if (module != getOperation() &&
          module.getSymName() == cleave::kKernelModuleName)
        kernels.push_back(module);
    });
    for (ModuleOp module : kernels)
      if (failed(runPipeline(*kernelPipeline, module)))
        return signalPassFailure();
  }

  std::optional<OpPassManager> kernelPipeline;
  bool fromCode = false;
};

} // namespace

std::unique_ptr<Pass> cleave::createKernelModulesPass(OpPassManager pipeline) {
  return std::make_unique<KernelModulesPass>(std::move(pipeline));
}
