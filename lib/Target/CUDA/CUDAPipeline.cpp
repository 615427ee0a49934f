//===- CUDAPipeline.cpp - cleave kernels -> gpu.launch_func + NVVM --------===//
//
// The shared front half (buildKernelBufferizationPipeline) leaves linalg on
// memrefs with results as out-parameters. Then:
//   linalg -> scf.parallel (reduction dims stay scf.for inside: one thread
//   per output element, i.e. one thread per row for row reductions)
//   -> cleave-cuda-parallel-to-launch: every top-level scf.parallel (static
//      bounds) becomes a gpu.launch over the linearized iteration space,
//      `blockSize` threads per block, a bounds guard, delinearized indices;
//      any other run of top-level compute becomes a 1-thread launch
//   -> gpu-kernel-outlining, all kernels merged into `gpu.module
//      @cleave_kernels` with `nvvm.maxntid` launch bounds
//   -> #nvvm.target<chip> -> NVVM/LLVM (bare-pointer kernel parameters).
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/Target/CUDA/CUDACodegen.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;

namespace {

/// Ops that may stay in the host function: they allocate or describe
/// buffers, or are constants the launches capture.
bool isHostOp(Operation *op) {
  return isa<memref::AllocOp, memref::DeallocOp, func::ReturnOp,
             gpu::LaunchOp>(op) ||
         op->hasTrait<OpTrait::ConstantLike>() ||
         isa<ViewLikeOpInterface, memref::CollapseShapeOp,
             memref::ExpandShapeOp, memref::CastOp>(op);
}

bool isViewOp(Operation *op) {
  return op && isa<ViewLikeOpInterface, memref::CollapseShapeOp,
                   memref::ExpandShapeOp, memref::CastOp>(op) &&
         !isa<memref::AllocOp>(op);
}

/// Clones into the start of `launch` the view ops (subview, reshape, cast)
/// defined outside it whose results it uses, so that kernels take whole
/// buffers (one device pointer each) and compute views themselves.
void sinkViews(gpu::LaunchOp launch) {
  Region &body = launch.getBody();
  bool changed = true;
  while (changed) {
    changed = false;
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(body, above);
    for (Value v : above) {
      Operation *def = v.getDefiningOp();
      if (!isViewOp(def) && !(def && def->hasTrait<OpTrait::ConstantLike>()))
        continue;
      OpBuilder b(&body.front(), body.front().begin());
      Operation *clone = b.clone(*def);
      for (auto [from, to] : llvm::zip(def->getResults(), clone->getResults()))
        replaceAllUsesInRegionWith(from, to, body);
      changed = true;
    }
  }
}

struct ParallelToLaunchPass
    : PassWrapper<ParallelToLaunchPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ParallelToLaunchPass)
  ParallelToLaunchPass(int64_t blockSize = 256) : blockSize(blockSize) {}
  ParallelToLaunchPass(const ParallelToLaunchPass &other)
      : PassWrapper(other), blockSize(other.blockSize) {}
  StringRef getArgument() const override {
    return "cleave-cuda-parallel-to-launch";
  }
  StringRef getDescription() const override {
    return "Map top-level scf.parallel loops (and other host compute) of "
           "cleave kernel functions to gpu.launch";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, arith::ArithDialect, scf::SCFDialect>();
  }

  gpu::LaunchOp createLaunch(OpBuilder &b, Location loc, int64_t grid,
                             int64_t block) {
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    Value g = arith::ConstantIndexOp::create(b, loc, grid);
    Value t = arith::ConstantIndexOp::create(b, loc, block);
    auto launch = gpu::LaunchOp::create(b, loc, g, one, one, t, one, one);
    OpBuilder inner(&launch.getBody().front(),
                    launch.getBody().front().end());
    gpu::TerminatorOp::create(inner, loc);
    return launch;
  }

  LogicalResult convertParallel(scf::ParallelOp loop) {
    SmallVector<int64_t> lbs, extents, steps;
    int64_t total = 1;
    for (auto [lb, ub, step] : llvm::zip(loop.getLowerBound(),
                                         loop.getUpperBound(),
                                         loop.getStep())) {
      std::optional<int64_t> l = getConstantIntValue(lb),
                             u = getConstantIntValue(ub),
                             s = getConstantIntValue(step);
      if (!l || !u || !s || *s <= 0)
        return loop.emitError("cuda: parallel loop bounds must be constant");
      int64_t n = *u > *l ? (*u - *l + *s - 1) / *s : 0;
      lbs.push_back(*l);
      extents.push_back(n);
      steps.push_back(*s);
      total *= n;
    }
    if (!loop.getInitVals().empty())
      return loop.emitError("cuda: parallel loops with reductions are not "
                            "supported");
    if (total == 0) {
      loop.erase();
      return success();
    }
    int64_t block = std::min<int64_t>(blockSize, total);
    int64_t grid = (total + block - 1) / block;
    if (grid > (int64_t(1) << 31) - 1)
      return loop.emitError("cuda: iteration space too large for one grid");
    Location loc = loop.getLoc();
    OpBuilder b(loop);
    gpu::LaunchOp launch = createLaunch(b, loc, grid, block);
    b.setInsertionPointToStart(&launch.getBody().front());
    Value bid = launch.getBlockIds().x, tid = launch.getThreadIds().x;
    Value linear = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, bid,
                              arith::ConstantIndexOp::create(b, loc, block)),
        tid);
    if (total % block != 0) {
      Value inBounds = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ult, linear,
          arith::ConstantIndexOp::create(b, loc, total));
      auto guard = scf::IfOp::create(b, loc, inBounds, /*withElse=*/false);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
    }
    IRMapping map;
    Value rem = linear;
    SmallVector<Value> ivs(extents.size());
    for (int64_t d = extents.size() - 1; d >= 0; --d) {
      Value idx = rem;
      if (d > 0) {
        Value ext = arith::ConstantIndexOp::create(b, loc, extents[d]);
        idx = arith::RemUIOp::create(b, loc, rem, ext);
        rem = arith::DivUIOp::create(b, loc, rem, ext);
      }
      if (steps[d] != 1)
        idx = arith::MulIOp::create(
            b, loc, idx, arith::ConstantIndexOp::create(b, loc, steps[d]));
      if (lbs[d] != 0)
        idx = arith::AddIOp::create(
            b, loc, idx, arith::ConstantIndexOp::create(b, loc, lbs[d]));
      ivs[d] = idx;
    }
    map.map(loop.getInductionVars(), ivs);
    for (Operation &op : loop.getBody()->without_terminator())
      b.clone(op, map);
    loop.erase();
    sinkViews(launch);
    return success();
  }

  /// Moves a run of top-level compute ops into a one-thread launch.
  LogicalResult wrapSerial(ArrayRef<Operation *> ops) {
    Location loc = ops.front()->getLoc();
    llvm::SmallPtrSet<Operation *, 8> inRun(ops.begin(), ops.end());
    for (Operation *op : ops)
      for (Value r : op->getResults())
        for (Operation *user : r.getUsers())
          if (!inRun.contains(user))
            return op->emitError("cuda: a value computed on the device is "
                                 "used on the host");
    OpBuilder b(ops.front());
    gpu::LaunchOp launch = createLaunch(b, loc, 1, 1);
    Operation *terminator = launch.getBody().front().getTerminator();
    for (Operation *op : ops)
      op->moveBefore(terminator);
    sinkViews(launch);
    return success();
  }

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      SmallVector<Operation *> ops;
      for (Operation &op : func.getBody().front())
        ops.push_back(&op);
      SmallVector<Operation *> run;
      auto flush = [&]() -> LogicalResult {
        if (run.empty())
          return success();
        LogicalResult r = wrapSerial(run);
        run.clear();
        return r;
      };
      for (Operation *op : ops) {
        if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
          if (failed(flush()) || failed(convertParallel(loop)))
            return signalPassFailure();
          continue;
        }
        if (isHostOp(op)) {
          // Constants and views used only by the serial run go with it.
          if (!run.empty() && !isa<memref::AllocOp, memref::DeallocOp,
                                   func::ReturnOp>(op))
            continue;
          if (failed(flush()))
            return signalPassFailure();
          continue;
        }
        run.push_back(op);
      }
      if (failed(flush()))
        return signalPassFailure();
      // Views only the launches used are now dead on the host.
      SmallVector<Operation *> dead;
      for (Operation &op : llvm::reverse(func.getBody().front()))
        if (isViewOp(&op) && op.use_empty())
          dead.push_back(&op);
      for (Operation *op : dead)
        if (op->use_empty())
          op->erase();
    }
  }

  int64_t blockSize;
};

/// Moves every outlined gpu.func into one `gpu.module @cleave_kernels` (one
/// cubin for the whole program) and retargets the launches. Launch bounds:
/// outlining records the constant block size as `gpu.known_block_size`,
/// which convert-gpu-to-nvvm turns into `nvvm.maxntid`.
struct MergeGPUModulesPass
    : PassWrapper<MergeGPUModulesPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(MergeGPUModulesPass)
  StringRef getArgument() const override {
    return "cleave-cuda-merge-gpu-modules";
  }
  StringRef getDescription() const override {
    return "Merge outlined gpu.modules into @cleave_kernels";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, NVVM::NVVMDialect>();
  }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    OpBuilder b(module.getContext());
    b.setInsertionPoint(modules.front());
    auto merged = gpu::GPUModuleOp::create(b, module.getLoc(), "cleave_kernels");
    SymbolTable mergedTable(merged);
    llvm::StringMap<std::string> renamed; // "module::func" -> new name
    for (gpu::GPUModuleOp m : modules) {
      for (Operation &op : llvm::make_early_inc_range(*m.getBody())) {
        auto sym = dyn_cast<SymbolOpInterface>(op);
        std::string oldName = sym ? sym.getName().str() : "";
        op.moveBefore(merged.getBody(), merged.getBody()->end());
        if (sym) {
          mergedTable.insert(&op); // renames on collision
          renamed[(m.getName() + "::" + oldName).str()] = sym.getName().str();
        }
      }
      m.erase();
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      std::string key = (launch.getKernelModuleName().getValue() + "::" +
                         launch.getKernelName().getValue())
                            .str();
      auto it = renamed.find(key);
      if (it == renamed.end())
        return;
      launch.setKernelAttr(SymbolRefAttr::get(
          b.getStringAttr("cleave_kernels"),
          {FlatSymbolRefAttr::get(b.getStringAttr(it->second))}));
    });
  }
};

/// Does nothing but load, through getDependentDialects, the LLVM IR
/// translations gpu-module-to-binary needs (cleave-opt does not register
/// them globally).
struct LoadTranslationsPass
    : PassWrapper<LoadTranslationsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(LoadTranslationsPass)
  StringRef getArgument() const override {
    return "cleave-cuda-load-translations";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    ::cleave::registerCUDACodegenDialects(registry);
  }
  void runOnOperation() override {}
};

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

void ::cleave::buildCUDAKernelPipeline(OpPassManager &pm,
                                       const CUDACodegenOptions &options) {
  buildKernelBufferizationPipeline(pm);
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(std::make_unique<ParallelToLaunchPass>(options.blockSize));
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(std::make_unique<MergeGPUModulesPass>());

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &gpu = pm.nest<gpu::GPUModuleOp>();
  gpu.addPass(createLowerAffinePass());
  gpu.addPass(createSCFToControlFlowPass());
  gpu.addPass(memref::createExpandStridedMetadataPass());
  gpu.addPass(createLowerAffinePass());
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
  pm.addPass(std::make_unique<LoadTranslationsPass>());
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = options.toolkit;
  binary.compilationTarget = format.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void ::cleave::registerCUDACodegenDialects(DialectRegistry &registry) {
  registerCPUCodegenDialects(registry);
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect, affine::AffineDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  // convert-gpu-to-nvvm lowers the other dialects through their
  // ConvertToLLVMPatternInterface models.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void ::cleave::registerCUDAPipelines() {
  PassRegistration<ParallelToLaunchPass>();
  PassRegistration<MergeGPUModulesPass>();
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
