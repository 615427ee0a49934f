//===- CUDACodegen.cpp - Compile cleave kernels to PTX and a cubin --------===//
//
// buildCUDAKernelPipeline on a clone, then the host side of each kernel
// function is read off as a list of launches (constant grid/block sizes,
// arguments that are whole buffers: inputs, results or static temporaries),
// and gpu-module-to-binary turns `gpu.module @cleave_kernels` into PTX
// (format=isa) and a cubin (format=bin, ptxas from the options' toolkit).
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CUDA/CUDACodegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

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
               << "cuda: gpu-module-to-binary (format=" << format
               << ") failed",
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
  {
    PassManager pm(ctx, ModuleOp::getOperationName());
    buildCUDAKernelPipeline(pm, options);
    if (failed(pm.run(*module)))
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
