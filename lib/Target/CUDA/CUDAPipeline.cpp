//===- CUDAPipeline.cpp - cleave kernels -> gpu.launch_func + NVVM --------===//
//
// The shared front half (buildKernelBufferizationPipeline) leaves linalg on
// memrefs with results as out-parameters. Then:
//   reduction kernels -> one block per row (--cleave-row-kernels,
//   --cleave-cuda-rows-to-launch)
//   -> linalg -> scf.parallel (reduction dims stay scf.for inside: one
//   thread per output element)
//   -> --cleave-cuda-parallel-to-launch: every top-level scf.parallel
//      (static bounds) becomes a gpu.launch over the linearized iteration
//      space, `blockSize` threads per block; any other run of top-level
//      compute becomes a 1-thread launch
//   -> gpu-kernel-outlining, all kernels merged into `gpu.module
//      @cleave_kernels` (--cleave-cuda-merge-gpu-modules) with
//      `nvvm.maxntid` launch bounds
//   -> #nvvm.target<chip> -> NVVM/LLVM (bare-pointer kernel parameters).
//
//===----------------------------------------------------------------------===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Target/CUDA/CUDACodegen.h"
#include "cleave/Target/CUDA/Passes.h"
#include "cleave/Target/Common/KernelPipeline.h"
#include "cleave/Target/Common/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {

struct CUDAPipelineOptions : public PassPipelineOptions<CUDAPipelineOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("SM (sm_90a, sm_80)"),
                           llvm::cl::init("sm_90a")};
  Option<std::string> toolkit{*this, "toolkit",
                              llvm::cl::desc("CUDA toolkit path"),
                              llvm::cl::init("/usr/local/cuda")};
  Option<int> blockSize{*this, "block-size",
                        llvm::cl::desc("threads per block"),
                        llvm::cl::init(256)};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("none (NVVM dialect), llvm, isa (PTX) or bin (cubin)"),
      llvm::cl::init("none")};
};

} // namespace

void ::cleave::buildCUDALaunchPipeline(OpPassManager &pm,
                                       const CUDACodegenOptions &options) {
  ::cleave::buildKernelBufferizationPipeline(pm);
  // Reduction kernels: one block per row (before canonicalization, which
  // would fold the single-iteration phases of the row loops).
  pm.addPass(::cleave::createRowKernelsPass());
  pm.addPass(::cleave::createRowsToLaunchPass());
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(::cleave::createParallelToLaunchPass(
      ::cleave::ParallelToLaunchPassOptions{options.blockSize}));
  pm.addPass(::cleave::createSinkIntoLaunchesPass());
}

void ::cleave::buildCUDAEmulationPipeline(OpPassManager &pm,
                                          const CUDACodegenOptions &options) {
  buildCUDALaunchPipeline(pm, options);
  pm.addPass(::cleave::createEmulateLaunchesPass());
}

void ::cleave::buildCUDAHostLaunchPasses(OpPassManager &pm) {
  pm.addPass(::cleave::createEmulateLaunchesPass());
}

void ::cleave::buildCUDAKernelPipeline(OpPassManager &pm,
                                       const CUDACodegenOptions &options) {
  buildCUDALaunchPipeline(pm, options);
  buildCUDADevicePasses(pm, options);
}

void ::cleave::buildCUDADevicePasses(OpPassManager &pm,
                                     const CUDACodegenOptions &options) {
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(::cleave::createMergeGPUModulesPass());

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &gpu = pm.nest<gpu::GPUModuleOp>();
  gpu.addPass(::cleave::createLowerAllReducePass());
  gpu.addPass(createLowerAffinePass());
  gpu.addPass(createSCFToControlFlowPass());
  gpu.addPass(memref::createExpandStridedMetadataPass());
  gpu.addPass(createLowerAffinePass());
  gpu.addPass(mlir::cleave::createExpandNarrowFloatsPass());
  gpu.addPass(arith::createArithExpandOpsPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  nvvm.useBarePtrCallConv = true;
  gpu.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  gpu.addPass(createCanonicalizerPass());
  gpu.addPass(createCSEPass());
  gpu.addPass(createReconcileUnrealizedCastsPass());
}

void ::cleave::buildCUDABinaryPasses(OpPassManager &pm,
                                     const CUDACodegenOptions &options,
                                     StringRef format) {
  pm.addPass(::cleave::createLoadTranslationsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = options.toolkit;
  binary.compilationTarget = format.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void ::cleave::registerCUDACodegenDialects(DialectRegistry &registry) {
  registerKernelCodegenDialects(registry);
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect, affine::AffineDialect,
                  vector::VectorDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  // convert-gpu-to-nvvm lowers the other dialects through their
  // ConvertToLLVMPatternInterface models.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void ::cleave::registerCUDAPipelines() {
  registerCleaveTargetCommonPasses();
  registerCleaveTargetCUDAPasses();
  PassPipelineRegistration<CUDAPipelineOptions>(
      "cleave-cuda-kernel-pipeline",
      "Lower a module of cleave kernel functions to host functions of "
      "gpu.launch_func and one NVVM gpu.module (format=isa|bin: to PTX/cubin)",
      [](OpPassManager &pm, const CUDAPipelineOptions &o) {
        CUDACodegenOptions options;
        options.chip = o.chip;
        options.toolkit = o.toolkit;
        options.blockSize = o.blockSize;
        buildCUDAKernelPipeline(pm, options);
        if (o.format != "none")
          buildCUDABinaryPasses(pm, options, o.format);
      });
}
