//===- CUDAPipeline.cpp - cleave kernels -> gpu.launch_func + NVVM --------===//
//
// The shared front half (buildKernelBufferizationPipeline) leaves linalg on
// memrefs with results as out-parameters. Then:
//   linalg -> scf.parallel (reduction dims stay scf.for inside: one thread
//   per output element, i.e. one thread per row for row reductions)
//   -> cleave-cuda-parallel-to-launch: every top-level scf.parallel (static
//      bounds) becomes a gpu.launch over the linearized iteration space,
//      `blockSize` threads per block, a bounds guard, delinearized indices;
//      elementwise loops run V consecutive innermost iterations per thread
//      and move each operand with one 16-byte vector.load/store (see
//      getVectorWidth);
//      any other run of top-level compute becomes a 1-thread launch
//   -> gpu-kernel-outlining, all kernels merged into `gpu.module
//      @cleave_kernels` with `nvvm.maxntid` launch bounds
//   -> #nvvm.target<chip> -> NVVM/LLVM (bare-pointer kernel parameters).
//
//===----------------------------------------------------------------------===//

#include "CUDAPasses.h"
#include "cleave/Conversion/Passes.h"
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
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
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
#include "mlir/Dialect/Vector/IR/VectorOps.h"
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

/// Bytes a thread of a vectorized launch moves per operand and access.
constexpr int64_t kVectorBytes = 16;

/// The size in bytes of `type`'s elements when they are 1, 2, 4 or 8-byte
/// integers or floats.
std::optional<int64_t> getElementBytes(MemRefType type) {
  Type element = type.getElementType();
  if (!element.isIntOrFloat())
    return std::nullopt;
  unsigned bits = element.getIntOrFloatBitWidth();
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    return std::nullopt;
  return bits / 8;
}

/// Whether `memref` starts at a kernel argument or temporary (func argument
/// or memref.alloc) through views that keep its base pointer and spell the
/// offset in the type (subview, reshapes, cast, reinterpret_cast). Kernel
/// arguments and temporaries are kVectorBytes-aligned (see CUDALaunch).
bool hasAlignedBase(Value memref) {
  while (Operation *def = memref.getDefiningOp()) {
    if (isa<memref::AllocOp>(def))
      return true;
    if (!isa<memref::SubViewOp, memref::CollapseShapeOp, memref::ExpandShapeOp,
             memref::CastOp, memref::ReinterpretCastOp>(def))
      return false;
    memref = def->getOperand(0);
  }
  return isa<func::FuncOp>(memref.getParentBlock()->getParentOp());
}

/// The element size in bytes of the memref that `access` (a memref.load or
/// memref.store) reads or writes, when any V consecutive elements along its
/// last dimension that start at an index multiple of V are contiguous and
/// V * elementBytes-aligned, for every V dividing kVectorBytes /
/// elementBytes. That holds when the base is kVectorBytes-aligned
/// (hasAlignedBase), the last stride is 1, and the offset and the other
/// strides are static multiples of kVectorBytes in bytes: the address is
/// then base + elementBytes * (offset + sum(index * stride) + last index),
/// a multiple of V * elementBytes.
std::optional<int64_t> getVectorAccessBytes(Operation *access) {
  Value memref = isa<memref::LoadOp>(access)
                     ? cast<memref::LoadOp>(access).getMemRef()
                     : cast<memref::StoreOp>(access).getMemRef();
  auto type = cast<MemRefType>(memref.getType());
  std::optional<int64_t> bytes = getElementBytes(type);
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!bytes || !hasAlignedBase(memref) ||
      failed(type.getStridesAndOffset(strides, offset)) || strides.empty() ||
      strides.back() != 1 || ShapedType::isDynamic(offset) ||
      offset * *bytes % kVectorBytes != 0)
    return std::nullopt;
  for (int64_t stride : ArrayRef(strides).drop_back())
    if (ShapedType::isDynamic(stride) || stride * *bytes % kVectorBytes != 0)
      return std::nullopt;
  return bytes;
}

/// Whether `op` is a memref.load or memref.store whose last index is `iv`.
/// (Both ops list their indices last among their operands.)
bool isIndexedLastBy(Operation *op, Value iv) {
  if (auto load = dyn_cast<memref::LoadOp>(op))
    return !load.getIndices().empty() && load.getIndices().back() == iv;
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return !store.getIndices().empty() && store.getIndices().back() == iv;
  return false;
}

/// Emits the copies of `access`, a memref.load or memref.store whose last
/// index is the innermost induction variable, for the iterations `maps`
/// describe (copy k: last index + k), as one vector.load or vector.store of
/// `maps.size()` elements at copy 0's indices, aligned to its size (which
/// getVectorWidth checked). A load maps copy k's result to element k.
void createVectorAccess(OpBuilder &b, Operation *access,
                        MutableArrayRef<IRMapping> maps) {
  int64_t width = maps.size();
  Location loc = access->getLoc();
  auto lookup = [&](int64_t k, Value v) { return maps[k].lookupOrDefault(v); };
  auto firstIndices = [&](ValueRange indices) {
    return llvm::map_to_vector(indices, [&](Value v) { return lookup(0, v); });
  };
  llvm::Align align(width * *getVectorAccessBytes(access));
  if (auto load = dyn_cast<memref::LoadOp>(access)) {
    auto type = VectorType::get({width}, load.getType());
    Value vector = vector::LoadOp::create(
        b, loc, type, lookup(0, load.getMemRef()),
        firstIndices(load.getIndices()), /*nontemporal=*/false, align);
    for (int64_t k = 0; k < width; ++k)
      maps[k].map(load.getResult(),
                  vector::ExtractOp::create(b, loc, vector, k).getResult());
    return;
  }
  auto store = cast<memref::StoreOp>(access);
  SmallVector<Value> elements;
  for (int64_t k = 0; k < width; ++k)
    elements.push_back(lookup(k, store.getValueToStore()));
  auto type = VectorType::get({width}, store.getValueToStore().getType());
  Value vector = vector::FromElementsOp::create(b, loc, type, elements);
  vector::StoreOp::create(b, loc, vector, lookup(0, store.getMemRef()),
                          firstIndices(store.getIndices()),
                          /*nontemporal=*/false, align);
}

/// How many consecutive iterations of the innermost dimension one thread
/// runs, V, or 1 when the loop does not qualify. V = kVectorBytes / the
/// widest element accessed through the innermost induction variable, so that
/// every such access moves at most kVectorBytes (the widest exactly that). A
/// loop qualifies when:
///  - its innermost dimension starts at 0 with step 1 and V divides its
///    extent, and V >= 2;
///  - its body is straight-line: memref.load, memref.store and ops without
///    memory effects or regions;
///  - every use of the innermost induction variable is the last index of a
///    load or store whose memref satisfies getVectorAccessBytes (so the V
///    elements are contiguous and their first one is V * elementBytes
///    aligned), and whose memref and other indices do not depend on it (so
///    the V iterations access one vector); every store is such a store (each
///    iteration writes its own elements). Loads indexed by the other
///    variables only (broadcast operands) may stay.
int64_t getVectorWidth(scf::ParallelOp loop, int64_t innerLb,
                       int64_t innerExtent, int64_t innerStep) {
  if (innerLb != 0 || innerStep != 1)
    return 1;
  Value iv = loop.getInductionVars().back();
  // Values computed from the innermost variable (through loaded values too).
  llvm::SmallPtrSet<Value, 16> varying;
  int64_t widest = 0;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (op.getNumRegions() != 0)
      return 1;
    bool isAccess = isa<memref::LoadOp, memref::StoreOp>(op);
    if (!isAccess && !isMemoryEffectFree(&op))
      return 1;
    if (isAccess && isIndexedLastBy(&op, iv)) {
      std::optional<int64_t> bytes = getVectorAccessBytes(&op);
      if (!bytes)
        return 1;
      // The memref and the other indices: all operands but the stored value
      // and the last index.
      unsigned first = isa<memref::StoreOp>(op) ? 1 : 0;
      for (Value v : op.getOperands().drop_front(first).drop_back())
        if (varying.contains(v))
          return 1;
      widest = std::max(widest, *bytes);
    } else if (isa<memref::StoreOp>(op)) {
      return 1;
    }
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return v == iv || varying.contains(v); }))
      varying.insert(op.result_begin(), op.result_end());
  }
  // Every use is the last index, i.e. the last operand, of an access.
  for (OpOperand &use : iv.getUses()) {
    Operation *user = use.getOwner();
    if (user->getBlock() != loop.getBody() || !isIndexedLastBy(user, iv) ||
        use.getOperandNumber() != user->getNumOperands() - 1)
      return 1;
  }
  if (widest == 0)
    return 1;
  int64_t width = kVectorBytes / widest;
  if (width < 2 || innerExtent % width != 0)
    return 1;
  return width;
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
    registry.insert<gpu::GPUDialect, arith::ArithDialect, scf::SCFDialect,
                    vector::VectorDialect>();
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
    if (failed(::cleave::getStaticLoopSpace(loop, lbs, extents, steps)))
      return loop.emitError("cuda: parallel loop bounds must be constant");
    int64_t total = 1;
    for (int64_t n : extents)
      total *= n;
    if (!loop.getInitVals().empty())
      return loop.emitError("cuda: parallel loops with reductions are not "
                            "supported");
    if (total == 0) {
      loop.erase();
      return success();
    }
    // Each thread runs `width` consecutive iterations of the innermost
    // dimension (width = 1: one iteration per thread). The threads cover
    // the iteration space with the innermost extent divided by `width`.
    int64_t last = extents.size() - 1;
    int64_t width = getVectorWidth(loop, lbs[last], extents[last], steps[last]);
    SmallVector<int64_t> threadExtents(extents);
    threadExtents[last] /= width;
    int64_t threads = total / width;
    int64_t block = std::min<int64_t>(blockSize, threads);
    int64_t grid = (threads + block - 1) / block;
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
    if (threads % block != 0) {
      Value inBounds = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::ult, linear,
          arith::ConstantIndexOp::create(b, loc, threads));
      auto guard = scf::IfOp::create(b, loc, inBounds, /*withElse=*/false);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
    }
    // The thread's (first) iteration: delinearize `linear` over
    // threadExtents; the innermost index then counts groups of `width`.
    SmallVector<int64_t> threadSteps(steps);
    threadSteps[last] *= width;
    SmallVector<Value> ivs = ::cleave::delinearizeIndex(
        b, loc, linear, lbs, threadExtents, threadSteps);
    // Copy k runs iteration ivs[last] + k (getVectorWidth requires lower
    // bound 0 and step 1 when width > 1). As the vector accesses are the
    // only uses of the variable, the `+ k` indices end up unused and folded.
    (void)::cleave::cloneVectorizedBody(b, loc, loop, ivs, width, IRMapping());
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
          // Constants and views used only by the serial run go with it;
          // launches made earlier (row kernels) end the run, which must
          // stay in order with them.
          if (!run.empty() && !isa<memref::AllocOp, memref::DeallocOp,
                                   func::ReturnOp, gpu::LaunchOp>(op))
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
  pm.addPass(std::make_unique<ParallelToLaunchPass>(options.blockSize));
  pm.addPass(::cleave::createSinkIntoLaunchesPass());
}

void ::cleave::buildCUDAEmulationPipeline(OpPassManager &pm,
                                          const CUDACodegenOptions &options) {
  buildCUDALaunchPipeline(pm, options);
  pm.addPass(createEmulateLaunchesPass());
}

void ::cleave::buildCUDAHostLaunchPasses(OpPassManager &pm) {
  pm.addPass(createEmulateLaunchesPass());
}

void ::cleave::buildCUDAKernelPipeline(OpPassManager &pm,
                                       const CUDACodegenOptions &options) {
  buildCUDALaunchPipeline(pm, options);
  buildCUDADevicePasses(pm, options);
}

void ::cleave::buildCUDADevicePasses(OpPassManager &pm,
                                     const CUDACodegenOptions &options) {
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(std::make_unique<MergeGPUModulesPass>());

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &gpu = pm.nest<gpu::GPUModuleOp>();
  gpu.addPass(createLowerAllReducePass());
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
  pm.addPass(std::make_unique<LoadTranslationsPass>());
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = options.toolkit;
  binary.compilationTarget = format.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

void ::cleave::registerCUDACodegenDialects(DialectRegistry &registry) {
  registerCPUCodegenDialects(registry);
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

void ::cleave::sinkViewsIntoLaunch(gpu::LaunchOp launch) { sinkViews(launch); }

namespace cleave {

int64_t getVectorWidth(scf::ParallelOp loop, int64_t innerLb,
                       int64_t innerExtent, int64_t innerStep) {
  return ::getVectorWidth(loop, innerLb, innerExtent, innerStep);
}

SmallVector<IRMapping> cloneVectorizedBody(OpBuilder &b, Location loc,
                                           scf::ParallelOp loop,
                                           ArrayRef<Value> ivs, int64_t width,
                                           const IRMapping &base) {
  // Copy k runs iteration ivs.back() + k. The copies are interleaved op by
  // op, which the independence of scf.parallel iterations allows, and the
  // `width` copies of a load or store indexed by the innermost variable are
  // one vector access (createVectorAccess).
  Value iv = loop.getInductionVars().back();
  SmallVector<IRMapping> maps(width, base);
  for (int64_t k = 0; k < width; ++k) {
    maps[k].map(loop.getInductionVars(), ivs);
    if (k > 0)
      maps[k].map(iv, arith::AddIOp::create(
                          b, loc, ivs.back(),
                          arith::ConstantIndexOp::create(b, loc, k)));
  }
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (width > 1 && isIndexedLastBy(&op, iv)) {
      createVectorAccess(b, &op, maps);
      continue;
    }
    for (int64_t k = 0; k < width; ++k)
      b.clone(op, maps[k]);
  }
  return maps;
}

} // namespace cleave

void ::cleave::registerCUDAPipelines() {
  registerRowReductionPasses();
  PassRegistration<ParallelToLaunchPass>();
  PassRegistration<MergeGPUModulesPass>();
  registerEmulateLaunchesPass();
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
