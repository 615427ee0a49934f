//===- CPUCodegen.cpp - Compile cleave kernels to an x86-64 shared object -===//
//
// cleave kernels -> LLVM dialect (buildCPUKernelPipeline) -> LLVM IR with a
// `void name(void **args)` wrapper per kernel -> LLVM O3 for the target CPU
// -> PIC object file -> `ld.lld -shared` -> bytes.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CPU/CPUCodegen.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

using namespace mlir;

#ifndef CLEAVE_LLD_PATH_DEFAULT
#define CLEAVE_LLD_PATH_DEFAULT ""
#endif

/// The linker to run: the one asked for, else the one found when Cleave was
/// built, else ld.lld on PATH.
static std::string resolveLinker(llvm::StringRef requested) {
  if (!requested.empty())
    return requested.str();
  if (llvm::sys::fs::can_execute(CLEAVE_LLD_PATH_DEFAULT))
    return CLEAVE_LLD_PATH_DEFAULT;
  for (const char *name : {"ld.lld-22", "ld.lld"})
    if (auto path = llvm::sys::findProgramByName(name))
      return *path;
  return "ld.lld";
}

namespace {

struct KernelSignature {
  std::string name;
  unsigned numArgs; // inputs + results (+ the scratch buffer)
};

/// Renames each kernel to `name.impl` (internal) and emits the exported
/// `void name(void **args)` wrapper that loads the buffer pointers.
LogicalResult emitWrappers(llvm::Module &module,
                           ArrayRef<KernelSignature> kernels, Location loc) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Type *ptrType = llvm::PointerType::getUnqual(ctx);
  llvm::StringSet<> exported;
  for (const KernelSignature &kernel : kernels) {
    llvm::Function *impl = module.getFunction(kernel.name);
    if (!impl)
      return emitError(loc) << "kernel '" << kernel.name
                            << "' is missing after lowering";
    if (impl->arg_size() != kernel.numArgs ||
        !impl->getReturnType()->isVoidTy())
      return emitError(loc)
             << "kernel '" << kernel.name << "' lowered to "
             << impl->arg_size() << " parameters, expected " << kernel.numArgs
             << " buffer pointers and no results";
    impl->setName(kernel.name + ".impl");
    auto *wrapperType = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                                {ptrType}, false);
    auto *wrapper = llvm::Function::Create(
        wrapperType, llvm::GlobalValue::ExternalLinkage, kernel.name, module);
    wrapper->setVisibility(llvm::GlobalValue::DefaultVisibility);
    wrapper->getArg(0)->setName("args");
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", wrapper));
    SmallVector<llvm::Value *> args;
    for (unsigned i = 0; i < kernel.numArgs; ++i) {
      llvm::Value *slot =
          b.CreateConstInBoundsGEP1_64(ptrType, wrapper->getArg(0), i);
      args.push_back(b.CreateLoad(ptrType, slot));
    }
    b.CreateCall(impl, args);
    b.CreateRetVoid();
    exported.insert(kernel.name);
  }
  // Everything but the wrappers stays inside the shared object.
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && !exported.contains(f.getName()))
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::GlobalVariable &g : module.globals())
    if (!g.isDeclaration())
      g.setLinkage(llvm::GlobalValue::InternalLinkage);
  return success();
}

/// Creates the TargetMachine for `cpu` (host CPU and features when empty).
std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const cleave::CPUCodegenOptions &options, Location loc) {
  static std::once_flag initFlag;
  std::call_once(initFlag, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    emitError(loc) << "cannot find the x86-64 LLVM target: " << error;
    return nullptr;
  }
  std::string cpu = options.cpu;
  std::string features;
  if (cpu.empty()) {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SmallVector<std::string> featureList;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      featureList.push_back((feature.second ? "+" : "-") +
                            feature.first().str());
    features = llvm::join(featureList, ",");
  }
  llvm::CodeGenOptLevel level = llvm::CodeGenOptLevel::Aggressive;
  if (options.optLevel <= 0)
    level = llvm::CodeGenOptLevel::None;
  else if (options.optLevel == 1)
    level = llvm::CodeGenOptLevel::Less;
  else if (options.optLevel == 2)
    level = llvm::CodeGenOptLevel::Default;
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, targetOptions, llvm::Reloc::PIC_, std::nullopt,
      level));
  if (!machine)
    emitError(loc) << "cannot create an LLVM target machine for cpu '" << cpu
                   << "'";
  return machine;
}

void optimize(llvm::Module &module, llvm::TargetMachine &machine,
              int optLevel) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = optLevel > 1;
  tuning.SLPVectorization = optLevel > 1;
  llvm::PassBuilder pb(&machine, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = llvm::OptimizationLevel::O3;
  if (optLevel <= 0)
    level = llvm::OptimizationLevel::O0;
  else if (optLevel == 1)
    level = llvm::OptimizationLevel::O1;
  else if (optLevel == 2)
    level = llvm::OptimizationLevel::O2;
  llvm::ModulePassManager mpm =
      level == llvm::OptimizationLevel::O0
          ? pb.buildO0DefaultPipeline(level)
          : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

/// Creates a temporary file path with `suffix`; empty on failure.
std::string makeTemp(StringRef prefix, StringRef suffix, Location loc) {
  SmallString<128> path;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile(prefix, suffix, path)) {
    emitError(loc) << "cannot create a temporary file: " << ec.message();
    return "";
  }
  return path.str().str();
}

} // namespace

FailureOr<cleave::CPUKernelObject>
cleave::compileCPUKernels(ModuleOp kernels, const CPUCodegenOptions &options) {
  Location loc = kernels.getLoc();
  MLIRContext *ctx = kernels.getContext();

  SmallVector<KernelSignature> signatures;
  for (auto func : kernels.getOps<func::FuncOp>()) {
    if (func.isDeclaration())
      continue;
    signatures.push_back({func.getSymName().str(),
                          func.getNumArguments() + func.getNumResults()});
  }

  // Lower a clone to the LLVM dialect.
  {
    DialectRegistry registry;
    registerCPUCodegenDialects(registry);
    ctx->appendDialectRegistry(registry);
  }
  OwningOpRef<ModuleOp> module(cast<ModuleOp>(kernels->clone()));
  for (auto func : module->getOps<func::FuncOp>())
    if (!func.isDeclaration())
      func.setPublic();
  CPUKernelObject result;
  {
    PassManager front(ctx, ModuleOp::getOperationName());
    if (options.frontHalf)
      options.frontHalf(front);
    else
      buildCPUKernelFrontHalf(front, options.rowKernels);
    if (failed(front.run(*module)))
      return emitError(loc) << "lowering the CPU kernels to LLVM failed",
             failure();
    // Kernels with temporaries take their scratch buffer as a last argument.
    for (auto func : module->getOps<func::FuncOp>()) {
      auto bytes = func->getAttrOfType<IntegerAttr>(kCPUScratchBytesAttr);
      if (!bytes)
        continue;
      result.scratchBytes[func.getSymName().str()] = bytes.getUInt();
      func->removeAttr(kCPUScratchBytesAttr);
      for (KernelSignature &signature : signatures)
        if (signature.name == func.getSymName())
          ++signature.numArgs;
    }
    PassManager back(ctx, ModuleOp::getOperationName());
    buildCPULoweringPasses(back);
    if (failed(back.run(*module)))
      return emitError(loc) << "lowering the CPU kernels to LLVM failed",
             failure();
  }
  if (options.dumpIR)
    module->print(llvm::errs());

  // Translate to LLVM IR and add the `void name(void **)` wrappers.
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, "cleave_cpu_kernels");
  if (!llvmModule)
    return emitError(loc) << "translating the CPU kernels to LLVM IR failed",
           failure();
  if (failed(emitWrappers(*llvmModule, signatures, loc)))
    return failure();

  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options, loc);
  if (!machine)
    return failure();
  llvmModule->setTargetTriple(machine->getTargetTriple());
  llvmModule->setDataLayout(machine->createDataLayout());
  if (llvm::verifyModule(*llvmModule, &llvm::errs()))
    return emitError(loc) << "the LLVM IR of the CPU kernels is invalid",
           failure();
  optimize(*llvmModule, *machine, options.optLevel);
  if (options.dumpIR)
    llvmModule->print(llvm::errs(), nullptr);

  // Emit the object file.
  SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return emitError(loc) << "the target machine cannot emit object files",
             failure();
    codegen.run(*llvmModule);
  }

  // Link with lld in temporary files.
  std::string objPath = makeTemp("cleave-kernels", "o", loc);
  std::string soPath = makeTemp("cleave-kernels", "so", loc);
  std::string logPath = makeTemp("cleave-kernels", "log", loc);
  llvm::scope_exit cleanup([&] {
    for (const std::string &path : {objPath, soPath, logPath})
      if (!path.empty())
        llvm::sys::fs::remove(path);
  });
  if (objPath.empty() || soPath.empty() || logPath.empty())
    return failure();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(objPath, ec);
    if (ec)
      return emitError(loc) << "cannot write '" << objPath
                            << "': " << ec.message(),
             failure();
    os.write(object.data(), object.size());
  }
  std::string lld = resolveLinker(options.lldPath);
  SmallVector<StringRef> args = {lld, "-shared", "--no-undefined-version",
                                 "-O2", "-o", soPath, objPath};
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(logPath),
                                          StringRef(logPath)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(lld, args, std::nullopt,
                                     redirects, /*SecondsToWait=*/0,
                                     /*MemoryLimit=*/0, &execError);
  if (rc != 0) {
    std::string log;
    if (auto buffer = llvm::MemoryBuffer::getFile(logPath))
      log = (*buffer)->getBuffer().str();
    return emitError(loc) << "linking the CPU kernels with '"
                          << lld << "' failed (" << rc
                          << "): " << execError << log,
           failure();
  }
  auto buffer = llvm::MemoryBuffer::getFile(soPath, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return emitError(loc) << "cannot read the linked kernels '" << soPath
                          << "': " << buffer.getError().message(),
           failure();
  StringRef bytes = (*buffer)->getBuffer();
  result.object.assign(bytes.begin(), bytes.end());
  return result;
}
