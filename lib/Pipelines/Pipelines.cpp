//===- Pipelines.cpp - Cleave's compiler phases as pass pipelines ----------===//

#include "cleave/Pipelines/Pipelines.h"

#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Transforms/Passes.h"

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

  if (options.train) {
    PassManager train(module.getContext());
    train.addPass(createBuildTrainStepPass(*options.train));
    if (failed(train.run(module)))
      return failure();
  }
  if (stopHere(CompilePhase::TrainStep, module))
    return plan::Plan();

  PassManager pm(module.getContext());
  buildPreparePipeline(pm);
  if (failed(pm.run(module)))
    return failure();
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
  return std::move(program->plan);
}

} // namespace cleave
