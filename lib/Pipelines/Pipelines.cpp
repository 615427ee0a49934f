//===- Pipelines.cpp - Cleave's compiler phases as pass pipelines ----------===//

#include "cleave/Pipelines/Pipelines.h"

#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Transforms/Passes.h"
#include "cleave/Transforms/Training/Recompute.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace cleave {

void buildPreparePipeline(OpPassManager &pm) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
  fn.addPass(createCanonicalizeContractionsPass());
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createCSEPass());
}

void registerPipelines() {
  PassPipelineRegistration<>(
      "cleave-prepare-pipeline",
      "Clean up an imported program and put contractions in GEMM form",
      buildPreparePipeline);
}

FailureOr<plan::Plan> compileToPlan(ModuleOp module,
                                    const CompileOptions &options) {
  auto stopHere = [&](CompilePhase phase, Operation *op) {
    if (options.stopAfter != phase)
      return false;
    if (options.dump)
      options.dump(op);
    return true;
  };
  if (stopHere(CompilePhase::Import, module))
    return plan::Plan();

  std::optional<RecomputeStats> recomputeStats;
  if (options.train) {
    PassManager train(module.getContext());
    BuildTrainStepPassOptions trainOptions = *options.train;
    bool mixed = options.precision != "fp32";
    trainOptions.markFp32Ops |= mixed;
    trainOptions.markBackward = true;
    train.addPass(createBuildTrainStepPass(trainOptions));
    if (mixed)
      train.addPass(createApplyMixedPrecisionPass(
          ApplyMixedPrecisionPassOptions{options.precision}));
    train.addPass(
        createInsertRecomputePass(InsertRecomputePassOptions{options.recompute}));
    if (failed(train.run(module)))
      return failure();
    recomputeStats = takeRecomputeStats(module);
    // The backward tags have done their job; without them CSE treats
    // forward and backward ops alike, as it did before recompute existed.
    stripAttribute(module, kBackwardAttr);
  } else if (options.precision != "fp32") {
    // A forward model: contractions and activations in the low type.
    PassManager mixed(module.getContext());
    mixed.addPass(createApplyMixedPrecisionPass(
        ApplyMixedPrecisionPassOptions{options.precision}));
    if (failed(mixed.run(module)))
      return failure();
  }
  if (stopHere(CompilePhase::TrainStep, module))
    return plan::Plan();

  PassManager pm(module.getContext());
  buildPreparePipeline(pm);
  if (failed(pm.run(module)))
    return failure();
  // Recomputed clones are tagged so that CSE above leaves them apart from
  // the forward ops they copy; the tag would only split identical kernels.
  stripAttribute(module, kRecomputeAttr);
  if (stopHere(CompilePhase::Prepared, module))
    return plan::Plan();

  FailureOr<PartitionedProgram> program =
      partitionProgram(module, options.plan);
  if (failed(program))
    return failure();
  if (stopHere(CompilePhase::Kernels, program->kernels.get()))
    return plan::Plan();

  if (options.stopAfter == CompilePhase::LLVM) {
    PassManager lower(module.getContext());
    buildCPUKernelPipeline(lower);
    if (failed(lower.run(program->kernels.get())))
      return failure();
    stopHere(CompilePhase::LLVM, program->kernels.get());
    return plan::Plan();
  }

  CPUCodegenOptions codegen;
  FailureOr<std::vector<uint8_t>> object =
      compileCPUKernels(program->kernels.get(), codegen);
  if (failed(object))
    return failure();
  program->plan.kernelObject = std::move(*object);
  if (recomputeStats) {
    auto &meta = program->plan.metadata;
    meta.push_back({"recompute_policy", recomputeStats->policy});
    meta.push_back({"saved_activation_bytes_before",
                    std::to_string(recomputeStats->savedBytesBefore)});
    meta.push_back({"saved_activation_bytes_after",
                    std::to_string(recomputeStats->savedBytesAfter)});
    meta.push_back({"recompute_flops",
                    std::to_string(recomputeStats->recomputeFlops)});
    meta.push_back({"recompute_extra_flops",
                    std::to_string(recomputeStats->extraFlops)});
  }
  return std::move(program->plan);
}

} // namespace cleave
