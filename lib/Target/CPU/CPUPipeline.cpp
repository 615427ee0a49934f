//===- CPUPipeline.cpp - cleave kernels -> LLVM dialect pass pipeline -----===//
//
// The shared front half (buildKernelBufferizationPipeline), the CPU's
// kernel temporaries in the arena, then loops, math and memrefs to the LLVM
// dialect. The passes are in ApproximateMath.cpp, ExpandArith.cpp,
// ParallelLoops.cpp, SplitOuterReductions.cpp and TemporariesToScratch.cpp.
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Target/CPU/Passes.h"
#include "cleave/Target/Common/KernelPipeline.h"
#include "cleave/Target/Common/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void ::cleave::buildCPUKernelFrontHalf(OpPassManager &pm, bool rowKernels) {
  buildKernelBufferizationPipeline(pm);
  if (rowKernels)
    pm.addPass(createRowKernelsPass());
  pm.addPass(createTemporariesToScratchPass());
}

void ::cleave::buildCPUKernelPipeline(OpPassManager &pm, bool rowKernels) {
  buildCPUKernelFrontHalf(pm, rowKernels);
  buildCPULoweringPasses(pm);
}

void ::cleave::buildCPULoweringPasses(OpPassManager &pm,
                                      int64_t parallelMinWork) {
  pm.addPass(createApproximateMathPass());
  pm.addPass(createConvertMathToFuncs());
  // Parallel dimensions become scf.parallel (lowered as nested loops by
  // scf-to-cf), the outermost of which run on the runtime's threads.
  if (parallelMinWork > 0)
    pm.addPass(createSplitOuterReductionsPass(
        SplitOuterReductionsPassOptions{parallelMinWork}));
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  if (parallelMinWork > 0)
    pm.addPass(
        createParallelLoopsPass(ParallelLoopsPassOptions{parallelMinWork}));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(mlir::cleave::createExpandNarrowFloatsPass());
  pm.addPass(createExpandArithPass());
  // Math ops with LLVM intrinsics first, the rest (erf, tan, ...) to libm
  // calls, resolved when the runtime dlopens the kernels.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions funcOptions;
  funcOptions.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(funcOptions));
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void ::cleave::registerCPUCodegenDialects(DialectRegistry &registry) {
  registerKernelCodegenDialects(registry);
}

void ::cleave::registerCPUPipelines() {
  PassPipelineRegistration<>(
      "cleave-cpu-kernel-pipeline",
      "Lower a module of cleave kernel functions to the LLVM dialect "
      "(results become out-parameters, bare-pointer calling convention)",
      [](OpPassManager &pm) { buildCPUKernelPipeline(pm); });
  registerCleaveTargetCommonPasses();
  registerCleaveTargetCPUPasses();
}
