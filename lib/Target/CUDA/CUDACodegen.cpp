//===- CUDACodegen.cpp - Compile cleave kernels to PTX and a cubin --------===//
//
// buildCUDAKernelPipeline on a clone, then the host side of each kernel
// function is read off as a list of launches (constant grid/block sizes,
// arguments that are whole buffers: inputs, results or static temporaries),
// and gpu-module-to-binary turns `gpu.module @cleave_kernels` into PTX
// (format=isa) and a cubin (format=bin, ptxas from the options' toolkit).
//
// With `hostLaunches`, the module as the launch mapping left it (before
// outlining) also gives every launch a host function of its own, named after
// the launch's symbol and taking the launch's arguments in the plan's order,
// for the CUDA host doubles: their driver runs these where a GPU would run
// the cubin's kernels (see test/doubles/DeviceDouble.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CUDA/CUDACodegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;

namespace {

/// Bytes of a static memref buffer (sub-byte elements take a byte each).
std::optional<int64_t> bufferBytes(MemRefType type) {
  if (!type.hasStaticShape())
    return std::nullopt;
  unsigned bits = type.getElementTypeBitWidth();
  return type.getNumElements() * int64_t((bits + 7) / 8);
}

LogicalResult readHostFunction(func::FuncOp func, unsigned numInputs,
                               unsigned numResults, cleave::CUDAKernel &out) {
  llvm::DenseMap<Value, int64_t> temporaries;
  int64_t firstTemp = numInputs + numResults;
  if (func.getNumArguments() != firstTemp || func.getNumResults() != 0)
    return func.emitError("cuda: kernel '")
           << func.getSymName() << "' lowered to " << func.getNumArguments()
           << " buffers, expected " << firstTemp;
  for (Operation &op : func.getBody().front()) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      std::optional<int64_t> bytes = bufferBytes(alloc.getType());
      if (!bytes || !alloc.getType().getLayout().isIdentity())
        return alloc.emitError("cuda: temporaries must be static, dense "
                               "buffers");
      temporaries[alloc.getResult()] = out.temporaryBytes.size();
      out.temporaryBytes.push_back(*bytes);
      continue;
    }
    if (isa<memref::DeallocOp, func::ReturnOp>(op) ||
        op.hasTrait<OpTrait::ConstantLike>())
      continue;
    auto launch = dyn_cast<gpu::LaunchFuncOp>(op);
    if (!launch)
      return op.emitError("cuda: kernel '")
             << func.getSymName()
             << "' keeps host computation between launches: " << op.getName();
    cleave::CUDALaunch l;
    l.symbol = launch.getKernelName().getValue().str();
    Value sizes[6] = {launch.getGridSizeX(),  launch.getGridSizeY(),
                      launch.getGridSizeZ(),  launch.getBlockSizeX(),
                      launch.getBlockSizeY(), launch.getBlockSizeZ()};
    for (int i = 0; i < 6; ++i) {
      std::optional<int64_t> c = getConstantIntValue(sizes[i]);
      if (!c)
        return launch.emitError("cuda: launch sizes must be constant");
      (i < 3 ? l.grid[i] : l.block[i - 3]) = *c;
    }
    if (Value shared = launch.getDynamicSharedMemorySize()) {
      std::optional<int64_t> c = getConstantIntValue(shared);
      if (!c)
        return launch.emitError("cuda: dynamic shared memory must be constant");
      l.sharedBytes = *c;
    }
    for (Value arg : launch.getKernelOperands()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || !type.getLayout().isIdentity())
        return launch.emitError("cuda: launch argument is not a whole "
                                "buffer: ")
               << arg.getType();
      if (auto blockArg = dyn_cast<BlockArgument>(arg)) {
        l.args.push_back(blockArg.getArgNumber());
        continue;
      }
      auto it = temporaries.find(arg);
      if (it == temporaries.end())
        return launch.emitError("cuda: launch argument is neither a kernel "
                                "buffer nor a temporary");
      l.args.push_back(firstTemp + it->second);
    }
    out.launches.push_back(std::move(l));
  }
  return success();
}

/// Whether the ops in a launch body may write through `buffer` (a kernel
/// argument): a use by an op that declares a write to it, by an op that
/// declares nothing, or through a view of it that is so used.
bool mayWrite(Value buffer) {
  SmallVector<Value> work{buffer};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
        if (view.getViewSource() == v) {
          for (Value r : user->getResults())
            work.push_back(r);
          continue;
        }
      }
      if (isa<memref::CastOp, memref::ReinterpretCastOp,
              memref::CollapseShapeOp, memref::ExpandShapeOp>(user)) {
        for (Value r : user->getResults())
          work.push_back(r);
        continue;
      }
      auto effects = dyn_cast<MemoryEffectOpInterface>(user);
      if (!effects)
        return true;
      SmallVector<MemoryEffects::EffectInstance> list;
      effects.getEffectsOnValue(v, list);
      for (const MemoryEffects::EffectInstance &e : list)
        if (isa<MemoryEffects::Write>(e.getEffect()))
          return true;
    }
  }
  return false;
}

/// Clones into `b` the op defining `v` and, first, those defining its
/// operands (unless `map` has them already), when all of them are free of
/// memory effects and hold no regions; maps the results in `map`. Fails on
/// anything else (a block argument not in `map`, a load, a call).
LogicalResult cloneDefinition(OpBuilder &b, Value v, IRMapping &map) {
  if (map.contains(v))
    return success();
  Operation *def = v.getDefiningOp();
  if (!def || def->getNumRegions() != 0 || !isMemoryEffectFree(def))
    return failure();
  for (Value operand : def->getOperands())
    if (failed(cloneDefinition(b, operand, map)))
      return failure();
  b.clone(*def, map);
  return success();
}

/// Fills program.hostLaunches from `launched`, the kernels module as
/// buildCUDALaunchPipeline left it, and program.kernels (read from the same
/// module after outlining): the i-th gpu.launch of kernel function F is the
/// i-th launch of F's CUDAKernel, whose argument list (kernel buffers and
/// temporaries by position) says which values of F become the host
/// function's parameters.
LogicalResult buildHostLaunches(ModuleOp launched,
                                ArrayRef<unsigned> numBuffers,
                                cleave::CUDAProgram &program) {
  MLIRContext *ctx = launched.getContext();
  Location loc = launched.getLoc();
  program.hostLaunches = ModuleOp::create(loc);
  (*program.hostLaunches)->setAttrs(launched->getAttrDictionary());
  OpBuilder top = OpBuilder::atBlockEnd(program.hostLaunches->getBody());
  for (auto [kernel, buffers] : llvm::zip_equal(program.kernels, numBuffers)) {
    auto func = launched.lookupSymbol<func::FuncOp>(kernel.name);
    if (!func)
      return emitError(loc) << "cuda host launches: kernel '" << kernel.name
                            << "' is missing",
             failure();
    SmallVector<Value> temporaries;
    SmallVector<gpu::LaunchOp> launches;
    for (Operation &op : func.getBody().front()) {
      if (auto alloc = dyn_cast<memref::AllocOp>(op))
        temporaries.push_back(alloc);
      else if (auto launch = dyn_cast<gpu::LaunchOp>(op))
        launches.push_back(launch);
    }
    if (launches.size() != kernel.launches.size() ||
        temporaries.size() != kernel.temporaryBytes.size())
      return func.emitError("cuda host launches: kernel '")
                 << kernel.name << "' has " << launches.size()
                 << " launches and " << temporaries.size()
                 << " temporaries before outlining, " << kernel.launches.size()
                 << " and " << kernel.temporaryBytes.size() << " after",
             failure();
    for (auto [launch, desc] : llvm::zip_equal(launches, kernel.launches)) {
      SmallVector<Value> params;
      for (int64_t arg : desc.args)
        params.push_back(arg < int64_t(buffers) ? Value(func.getArgument(arg))
                                                : temporaries[arg - buffers]);
      SmallVector<Type> types;
      for (Value p : params)
        types.push_back(p.getType());
      auto host = func::FuncOp::create(top, launch.getLoc(), desc.symbol,
                                       FunctionType::get(ctx, types, {}));
      OpBuilder b = OpBuilder::atBlockEnd(host.addEntryBlock());
      IRMapping map;
      for (auto [p, a] : llvm::zip_equal(params, host.getArguments()))
        map.map(p, a);
      // What the launch reads from above besides its arguments (its sizes,
      // constants) must be recomputable without memory.
      SetVector<Value> above;
      getUsedValuesDefinedAbove(launch->getRegions(), above);
      for (Value v : launch->getOperands())
        above.insert(v);
      for (Value v : above)
        if (failed(cloneDefinition(b, v, map)))
          return launch.emitError("cuda host launches: launch '")
                     << desc.symbol
                     << "' uses a value from outside that is neither one of "
                        "its "
                        "arguments nor computable from constants",
                 failure();
      b.clone(*launch, map);
      func::ReturnOp::create(b, launch.getLoc());
      std::vector<cleave::CUDALaunchArg> &args =
          program.hostLaunchArgs[desc.symbol];
      for (BlockArgument a : host.getArguments()) {
        std::optional<int64_t> bytes =
            bufferBytes(cast<MemRefType>(a.getType()));
        if (!bytes)
          return launch.emitError("cuda host launches: argument of dynamic "
                                  "size"),
                 failure();
        args.push_back({*bytes, mayWrite(a)});
      }
    }
  }
  return success();
}

/// Runs gpu-module-to-binary with `format` on a clone of `module` and returns
/// the bytes of @cleave_kernels' single object.
FailureOr<std::string> serialize(ModuleOp module,
                                 const cleave::CUDACodegenOptions &options,
                                 StringRef format) {
  OwningOpRef<ModuleOp> clone(cast<ModuleOp>(module->clone()));
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  cleave::buildCUDABinaryPasses(pm, options, format);
  if (failed(pm.run(*clone)))
    return emitError(module.getLoc())
               << "cuda: gpu-module-to-binary (format=" << format << ") failed",
           failure();
  for (auto binary : clone->getOps<gpu::BinaryOp>()) {
    if (binary.getSymName() != "cleave_kernels" ||
        binary.getObjects().size() != 1)
      continue;
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    return object.getObject().getValue().str();
  }
  return emitError(module.getLoc()) << "cuda: no binary for @cleave_kernels",
         failure();
}

} // namespace

FailureOr<cleave::CUDAProgram>
cleave::compileCUDAKernels(ModuleOp kernels,
                           const CUDACodegenOptions &options) {
  MLIRContext *ctx = kernels.getContext();
  Location loc = kernels.getLoc();
  {
    DialectRegistry registry;
    registerCUDACodegenDialects(registry);
    ctx->appendDialectRegistry(registry);
  }
  struct Signature {
    std::string name;
    unsigned numInputs, numResults;
  };
  SmallVector<Signature> signatures;
  for (auto func : kernels.getOps<func::FuncOp>())
    if (!func.isDeclaration())
      signatures.push_back({func.getSymName().str(), func.getNumArguments(),
                            func.getNumResults()});

  OwningOpRef<ModuleOp> module(cast<ModuleOp>(kernels->clone()));
  for (auto func : module->getOps<func::FuncOp>())
    if (!func.isDeclaration())
      func.setPublic();
  OwningOpRef<ModuleOp> launched;
  {
    PassManager pm(ctx, ModuleOp::getOperationName());
    buildCUDALaunchPipeline(pm, options);
    bool ok = succeeded(pm.run(*module));
    if (ok && options.hostLaunches)
      launched = cast<ModuleOp>((*module)->clone());
    PassManager device(ctx, ModuleOp::getOperationName());
    buildCUDADevicePasses(device, options);
    if (!ok || failed(device.run(*module)))
      return emitError(loc) << "lowering the CUDA kernels to NVVM failed",
             failure();
  }

  CUDAProgram program;
  for (const Signature &sig : signatures) {
    auto func = module->lookupSymbol<func::FuncOp>(sig.name);
    if (!func)
      return emitError(loc) << "cuda: kernel '" << sig.name
                            << "' is missing after lowering",
             failure();
    CUDAKernel kernel;
    kernel.name = sig.name;
    if (failed(readHostFunction(func, sig.numInputs, sig.numResults, kernel)))
      return failure();
    program.kernels.push_back(std::move(kernel));
  }
  if (launched) {
    SmallVector<unsigned> numBuffers;
    for (const Signature &sig : signatures)
      numBuffers.push_back(sig.numInputs + sig.numResults);
    if (failed(buildHostLaunches(*launched, numBuffers, program)))
      return failure();
  }
  if (module->getOps<gpu::GPUModuleOp>().empty())
    return program;

  FailureOr<std::string> ptx = serialize(*module, options, "isa");
  if (failed(ptx))
    return failure();
  program.ptx = std::move(*ptx);
  FailureOr<std::string> cubin = serialize(*module, options, "bin");
  if (failed(cubin))
    return failure();
  program.cubin.assign(cubin->begin(), cubin->end());
  return program;
}
