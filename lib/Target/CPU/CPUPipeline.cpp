//===- CPUPipeline.cpp - cleave kernels -> LLVM dialect pass pipeline -----===//

#include "cleave/Conversion/Passes.h"
#include "cleave/Target/CPU/CPUCodegen.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {
/// Rewrites `memref.copy` as `linalg.copy` so that copies between strided
/// buffers become loops instead of calls to MLIR's C runner `memrefCopy`,
/// which kernels cannot link against.
struct CopyToLinalgPass
    : PassWrapper<CopyToLinalgPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CopyToLinalgPass)
  StringRef getArgument() const override { return "cleave-cpu-copy-to-linalg"; }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<linalg::LinalgDialect>();
  }
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp op) { copies.push_back(op); });
    for (memref::CopyOp op : copies) {
      OpBuilder b(op);
      linalg::CopyOp::create(b, op.getLoc(), op.getSource(), op.getTarget());
      op.erase();
    }
  }
};

/// Rewrites splat tensor constants (other than scalars) into
/// `linalg.fill` of an empty tensor, so they bufferize to a filled buffer
/// instead of a global of the full size in the kernel object (for CUDA, host
/// memory the device cannot read).
struct SplatConstantsToFillPass
    : PassWrapper<SplatConstantsToFillPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SplatConstantsToFillPass)
  StringRef getArgument() const override {
    return "cleave-splat-constants-to-fill";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<linalg::LinalgDialect, tensor::TensorDialect,
                    arith::ArithDialect>();
  }
  void runOnOperation() override {
    SmallVector<arith::ConstantOp> splats;
    getOperation().walk([&](arith::ConstantOp op) {
      auto type = dyn_cast<RankedTensorType>(op.getType());
      auto value = dyn_cast<SplatElementsAttr>(op.getValue());
      if (type && value && type.getNumElements() > 1)
        splats.push_back(op);
    });
    for (arith::ConstantOp op : splats) {
      OpBuilder b(op);
      auto type = cast<RankedTensorType>(op.getType());
      Value scalar = arith::ConstantOp::create(
          b, op.getLoc(), type.getElementType(),
          cast<TypedAttr>(cast<SplatElementsAttr>(op.getValue())
                              .getSplatValue<Attribute>()));
      Value empty = tensor::EmptyOp::create(b, op.getLoc(), type.getShape(),
                                            type.getElementType());
      op.replaceAllUsesWith(
          linalg::FillOp::create(b, op.getLoc(), scalar, empty).getResult(0));
      op.erase();
    }
  }
};

/// Makes every kernel result a tensor of its own: a result that is a kernel
/// argument, or the same value as an earlier result (folding can make
/// `mul(ones, x)` return x), is copied. Results become out-parameters the
/// caller owns, so they may alias neither an input nor each other.
struct DistinctResultsPass
    : PassWrapper<DistinctResultsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DistinctResultsPass)
  StringRef getArgument() const override {
    return "cleave-cpu-distinct-results";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<bufferization::BufferizationDialect>();
  }
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      OpBuilder b(ret);
      llvm::SmallPtrSet<Value, 8> seen;
      for (OpOperand &operand : ret->getOpOperands()) {
        Value v = operand.get();
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type || (!isa<BlockArgument>(v) && seen.insert(v).second))
          continue;
        // alloc_tensor with `copy` always bufferizes to a fresh buffer.
        operand.set(bufferization::AllocTensorOp::create(
            b, ret.getLoc(), type, ValueRange{}, v));
      }
    });
  }
};

/// Replaces f32 transcendentals (exp, log, tanh, erf, ...) by MLIR's
/// polynomial approximations: plain arithmetic that LLVM vectorizes, instead
/// of one libm call per element. Other element types keep libm/intrinsics.
struct ApproximateMathPass
    : PassWrapper<ApproximateMathPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ApproximateMathPass)
  StringRef getArgument() const override {
    return "cleave-cpu-approximate-math";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, math::MathDialect>();
  }
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // pow by a constant 1, 2, 3, -1, -2, 0.5, -0.5 or 0.75 as products and
    // square roots (GELU's x^3 and its derivative's x^2; a libm powf per
    // element took a fifth of a small GPT's training step).
    populateMathAlgebraicSimplificationPatterns(patterns);
    populateMathPolynomialApproximationPatterns(
        patterns, [](StringRef name) {
          // Names are operation names ("math.exp").
          name.consume_front("math.");
          return llvm::is_contained({"exp", "expm1", "log", "log1p", "log2",
                                     "tanh", "erf", "erfc"},
                                    name);
        });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

/// arith-expand-ops without its float min/max expansion: maximumf/maxnumf
/// (and the min forms) stay ops and become llvm.maximum/maxnum intrinsics,
/// which LLVM's loop vectorizer recognizes as reductions; the expanded
/// compare-and-select form is not recognized, so row maxima (softmax) stayed
/// scalar. Ceil/floor division and the bf16/scaling conversions are expanded
/// as before.
struct ExpandArithPass
    : PassWrapper<ExpandArithPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ExpandArithPass)
  StringRef getArgument() const override { return "cleave-cpu-expand-arith"; }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect>();
  }
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

void ::cleave::buildKernelBufferizationPipeline(OpPassManager &pm) {
  pm.addPass(mlir::cleave::createConvertCleaveToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createLinalgElementwiseOpFusionPass());
  pm.addPass(createCSEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(std::make_unique<SplatConstantsToFillPass>());
  pm.addPass(std::make_unique<DistinctResultsPass>());
  pm.addPass(bufferization::createEmptyTensorEliminationPass());

  bufferization::OneShotBufferizePassOptions bufferizeOptions;
  bufferizeOptions.bufferizeFunctionBoundaries = true;
  bufferizeOptions.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferizeOptions));
  bufferization::BufferResultsToOutParamsPassOptions outParamOptions;
  outParamOptions.hoistStaticAllocs = true;
  outParamOptions.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParamOptions));
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createCanonicalizerPass());

  pm.addPass(std::make_unique<CopyToLinalgPass>());
}

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
  pm.addPass(std::make_unique<ApproximateMathPass>());
  pm.addPass(createConvertMathToFuncs());
  // Parallel dimensions become scf.parallel (lowered as nested loops by
  // scf-to-cf), the outermost of which run on the runtime's threads.
  if (parallelMinWork > 0)
    pm.addPass(createSplitOuterReductionsPass(parallelMinWork));
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  if (parallelMinWork > 0)
    pm.addPass(createParallelLoopsPass(parallelMinWork));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(mlir::cleave::createExpandNarrowFloatsPass());
  pm.addPass(std::make_unique<ExpandArithPass>());
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
  registry.insert<arith::ArithDialect, bufferization::BufferizationDialect,
                  cf::ControlFlowDialect, func::FuncDialect,
                  linalg::LinalgDialect, LLVM::LLVMDialect, math::MathDialect,
                  memref::MemRefDialect, scf::SCFDialect,
                  tensor::TensorDialect, ub::UBDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  arith::registerBufferDeallocationOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  cf::registerBufferizableOpInterfaceExternalModels(registry);
  cf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  memref::registerAllocationOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
}

void ::cleave::registerCPUPipelines() {
  PassPipelineRegistration<>(
      "cleave-cpu-kernel-pipeline",
      "Lower a module of cleave kernel functions to the LLVM dialect "
      "(results become out-parameters, bare-pointer calling convention)",
      [](OpPassManager &pm) { buildCPUKernelPipeline(pm); });
  registerRowKernelsPass();
  registerTemporariesToScratchPass();
  registerParallelLoopsPass();
  registerSplitOuterReductionsPass();
}
