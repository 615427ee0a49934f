//===- CPUCodegen.cpp - Compile cleave kernels to an x86-64 shared object -===//
//
// Each kernel is compiled on its own, on a pool of threads (one per core by
// default): printed into a module of its own, parsed into the worker's
// context, lowered to the LLVM dialect (buildCPUKernelPipeline), translated
// to LLVM IR with a `void name(void **args)` wrapper, optimized for the
// target CPU and emitted as a PIC object file. With a kernel cache, the
// object of a kernel whose printed module, target and compiler are unchanged
// is read from disk instead. `ld.lld -shared` links the objects into the
// bytes of one shared object.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CPU/CPUCodegen.h"
#include "cleave/PlanFormat.h"

#include "Cleave/IR/CleaveMetadata.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CachePruning.h"
#include "llvm/Support/Caching.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <limits>
#include <mutex>
#include <sys/stat.h>

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

/// The kernel object's slot `name` (a pointer the runtime sets after
/// loading it, null until then), shared by every kernel's object.
llvm::GlobalVariable *runtimeSlot(llvm::Module &module, StringRef name) {
  llvm::Type *ptrType = llvm::PointerType::getUnqual(module.getContext());
  if (llvm::GlobalVariable *g = module.getGlobalVariable(name))
    return g;
  auto *g = new llvm::GlobalVariable(
      module, ptrType, /*isConstant=*/false, llvm::GlobalValue::WeakAnyLinkage,
      llvm::ConstantPointerNull::get(
          llvm::PointerType::getUnqual(module.getContext())),
      name);
  g->setVisibility(llvm::GlobalValue::DefaultVisibility);
  g->setAlignment(llvm::Align(8));
  return g;
}

/// Defines each `X$launch(args..., i64 n)` that --cleave-cpu-parallel-loops
/// declared: it stores the arguments in a frame on its stack and calls
///   cleave_parallel_for(cleave_parallel_runtime, &X$range, frame, n)
/// whose contract (plan::kParallelForSymbol in PlanFormat.h) is to call
/// X$range(frame, begin, end) on ranges that cover [0, n) once and to return
/// when all have run. X$range loads the arguments and calls the outlined
/// `X(args..., begin, end)`. Before the runtime sets the slot, X$launch calls
/// X$range(frame, 0, n) itself.
LogicalResult emitLaunches(llvm::Module &module, Location loc) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Type *ptrType = llvm::PointerType::getUnqual(ctx);
  llvm::Type *i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type *voidType = llvm::Type::getVoidTy(ctx);
  SmallVector<llvm::Function *> launches;
  for (llvm::Function &f : module)
    if (f.isDeclaration() && f.getName().ends_with("$launch"))
      launches.push_back(&f);
  if (launches.empty())
    return success();
  llvm::GlobalVariable *forSlot =
      runtimeSlot(module, ::cleave::plan::kParallelForSymbol);
  llvm::GlobalVariable *runtimeSlotVar =
      runtimeSlot(module, ::cleave::plan::kParallelRuntimeSymbol);
  for (llvm::Function *launch : launches) {
    StringRef name = launch->getName().drop_back(strlen("$launch"));
    llvm::Function *body = module.getFunction(name);
    unsigned numArgs = launch->arg_size() - 1;
    if (!body || body->isDeclaration() || body->arg_size() != numArgs + 2 ||
        launch->arg_size() == 0 ||
        !launch->getArg(numArgs)->getType()->isIntegerTy(64))
      return emitError(loc) << "parallel launch '" << launch->getName()
                            << "' has no matching loop body";
    SmallVector<llvm::Type *> fields;
    for (unsigned i = 0; i < numArgs; ++i)
      fields.push_back(launch->getArg(i)->getType());
    llvm::StructType *frameType = llvm::StructType::get(ctx, fields);

    // X$range(frame, begin, end)
    auto *rangeType =
        llvm::FunctionType::get(voidType, {ptrType, i64, i64}, false);
    auto *range = llvm::Function::Create(
        rangeType, llvm::GlobalValue::InternalLinkage, name + "$range", module);
    {
      llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", range));
      SmallVector<llvm::Value *> args;
      for (unsigned i = 0; i < numArgs; ++i)
        args.push_back(b.CreateLoad(
            fields[i], b.CreateStructGEP(frameType, range->getArg(0), i)));
      args.push_back(range->getArg(1));
      args.push_back(range->getArg(2));
      b.CreateCall(body, args);
      b.CreateRetVoid();
    }

    // X$launch(args..., n)
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", launch));
    llvm::Value *frame = b.CreateAlloca(frameType);
    for (unsigned i = 0; i < numArgs; ++i)
      b.CreateStore(launch->getArg(i), b.CreateStructGEP(frameType, frame, i));
    llvm::Value *n = launch->getArg(numArgs);
    llvm::Value *parallelFor = b.CreateLoad(ptrType, forSlot);
    auto *serial = llvm::BasicBlock::Create(ctx, "serial", launch);
    auto *parallel = llvm::BasicBlock::Create(ctx, "parallel", launch);
    b.CreateCondBr(b.CreateIsNull(parallelFor), serial, parallel);
    b.SetInsertPoint(serial);
    b.CreateCall(range, {frame, b.getInt64(0), n});
    b.CreateRetVoid();
    b.SetInsertPoint(parallel);
    auto *forType = llvm::FunctionType::get(
        voidType, {ptrType, ptrType, ptrType, i64}, false);
    b.CreateCall(forType, parallelFor,
                 {b.CreateLoad(ptrType, runtimeSlotVar), range, frame, n});
    b.CreateRetVoid();
    launch->setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  return success();
}

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
      return emitError(loc)
             << "kernel '" << kernel.name << "' is missing after lowering";
    if (impl->arg_size() != kernel.numArgs ||
        !impl->getReturnType()->isVoidTy())
      return emitError(loc)
             << "kernel '" << kernel.name << "' lowered to " << impl->arg_size()
             << " parameters, expected " << kernel.numArgs
             << " buffer pointers and no results";
    impl->setName(kernel.name + ".impl");
    auto *wrapperType =
        llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptrType}, false);
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
  if (failed(emitLaunches(module, loc)))
    return failure();
  // Everything but the wrappers (and the runtime's parallel-for slots)
  // stays inside the shared object.
  for (llvm::Function &f : module)
    if (!f.isDeclaration() && !exported.contains(f.getName()))
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::GlobalVariable &g : module.globals())
    if (!g.isDeclaration() &&
        g.getName() != ::cleave::plan::kParallelForSymbol &&
        g.getName() != ::cleave::plan::kParallelRuntimeSymbol)
      g.setLinkage(llvm::GlobalValue::InternalLinkage);
  return success();
}

/// The CPU name and feature string code is generated for: the requested CPU
/// (no extra features), or the host's with every feature it has.
std::pair<std::string, std::string>
resolveCPU(const ::cleave::CPUCodegenOptions &options) {
  if (!options.cpu.empty())
    return {options.cpu, ""};
  llvm::SmallVector<std::string> featureList;
  for (const auto &feature : llvm::sys::getHostCPUFeatures())
    featureList.push_back((feature.second ? "+" : "-") + feature.first().str());
  llvm::sort(featureList);
  return {llvm::sys::getHostCPUName().str(), llvm::join(featureList, ",")};
}

/// Creates the TargetMachine for `cpu` with `features`.
std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const std::pair<std::string, std::string> &cpu,
                    int optLevel, std::string &error) {
  static std::once_flag initFlag;
  std::call_once(initFlag, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    error = "cannot find the x86-64 LLVM target: " + error;
    return nullptr;
  }
  llvm::CodeGenOptLevel level = llvm::CodeGenOptLevel::Aggressive;
  if (optLevel <= 0)
    level = llvm::CodeGenOptLevel::None;
  else if (optLevel == 1)
    level = llvm::CodeGenOptLevel::Less;
  else if (optLevel == 2)
    level = llvm::CodeGenOptLevel::Default;
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, cpu.first, cpu.second, targetOptions,
                                  llvm::Reloc::PIC_, std::nullopt, level));
  if (!machine)
    error = "cannot create an LLVM target machine for cpu '" + cpu.first + "'";
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
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                    ? pb.buildO0DefaultPipeline(level)
                                    : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

/// Emits `module` as an object file (or assembly text) into `out`; false
/// when the target machine cannot emit that kind of file.
bool emitObject(
    llvm::Module &module, llvm::TargetMachine &machine,
    SmallVector<char, 0> &out,
    llvm::CodeGenFileType type = llvm::CodeGenFileType::ObjectFile) {
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, os, nullptr, type))
    return false;
  codegen.run(module);
  return true;
}

/// One kernel: the module it is compiled from and what compiling it gave.
struct KernelJob {
  std::string name;
  /// A module holding only this kernel, printed (what is compiled and what
  /// the cache key hashes).
  std::string source;
  /// The cache key, empty when the kernel is not cached.
  std::string key;
  /// The object file.
  SmallVector<char, 0> object;
  uint64_t scratchBytes = 0;
  bool fromCache = false;
  std::string error;
  /// With CPUCodegenOptions::emitAssembly: the object's assembly text.
  SmallVector<char, 0> assembly;
};

/// Compiles kernels one at a time in a context of its own (one per thread:
/// MLIR contexts and LLVM target machines are not shared across threads).
class KernelCompiler {
public:
  KernelCompiler(const DialectRegistry &registry,
                 const ::cleave::CPUCodegenOptions &options,
                 const std::pair<std::string, std::string> &cpu)
      : context(registry, MLIRContext::Threading::DISABLED), options(options) {
    machine = createTargetMachine(cpu, options.optLevel, machineError);
  }

  void compile(KernelJob &job);

private:
  MLIRContext context;
  const ::cleave::CPUCodegenOptions &options;
  std::unique_ptr<llvm::TargetMachine> machine;
  std::string machineError;
};

void KernelCompiler::compile(KernelJob &job) {
  if (!machine) {
    job.error = machineError;
    return;
  }
  std::string diagnostics;
  llvm::raw_string_ostream diagOS(diagnostics);
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      diagOS << (diagnostics.empty() ? "" : "; ") << diag.str();
    return success();
  });
  auto fail = [&](StringRef what) {
    job.error = what.str();
    if (!diagnostics.empty())
      job.error += ": " + diagnostics;
  };

  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(job.source, &context);
  if (!module)
    return fail("cannot parse the kernel's module");
  auto func = module->lookupSymbol<func::FuncOp>(job.name);
  if (!func)
    return fail("the kernel's module has no function '" + job.name + "'");
  func.setPublic();
  KernelSignature signature{job.name,
                            func.getNumArguments() + func.getNumResults()};

  PassManager front(&context, ModuleOp::getOperationName());
  if (options.frontHalf)
    options.frontHalf(front);
  else
    ::cleave::buildCPUKernelFrontHalf(front, options.rowKernels);
  if (failed(front.run(*module)))
    return fail("lowering to LLVM failed");
  // A kernel with temporaries takes its scratch buffer as a last argument.
  func = module->lookupSymbol<func::FuncOp>(job.name);
  if (auto bytes = func ? func->getAttrOfType<IntegerAttr>(
                              mlir::cleave::attr::kScratchBytes)
                        : IntegerAttr()) {
    job.scratchBytes = bytes.getUInt();
    func->removeAttr(mlir::cleave::attr::kScratchBytes);
    ++signature.numArgs;
  }
  PassManager back(&context, ModuleOp::getOperationName());
  ::cleave::buildCPULoweringPasses(back, options.parallelMinWork);
  if (failed(back.run(*module)))
    return fail("lowering to LLVM failed");
  if (options.dumpIR)
    module->print(llvm::errs());

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, job.name);
  if (!llvmModule)
    return fail("translating to LLVM IR failed");
  if (failed(emitWrappers(*llvmModule, signature, module->getLoc())))
    return fail("emitting the kernel's entry point failed");
  llvmModule->setTargetTriple(machine->getTargetTriple());
  llvmModule->setDataLayout(machine->createDataLayout());
  std::string verifierErrors;
  llvm::raw_string_ostream verifierOS(verifierErrors);
  if (llvm::verifyModule(*llvmModule, &verifierOS))
    return fail("its LLVM IR is invalid: " + verifierErrors);
  optimize(*llvmModule, *machine, options.optLevel);
  if (options.dumpIR)
    llvmModule->print(llvm::errs(), nullptr);

  if (options.emitAssembly) {
    // Code generation changes the module: the text comes from a copy.
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*llvmModule);
    if (!emitObject(*copy, *machine, job.assembly,
                    llvm::CodeGenFileType::AssemblyFile))
      return fail("the target machine cannot emit assembly");
  }
  if (!emitObject(*llvmModule, *machine, job.object))
    return fail("the target machine cannot emit object files");
}

//===----------------------------------------------------------------------===//
// The kernel cache
//===----------------------------------------------------------------------===//

/// A cache entry: this header, then the object file.
struct CacheEntryHeader {
  char magic[8];
  uint64_t scratchBytes;
  uint64_t objectBytes;
};
constexpr char kCacheMagic[8] = {'C', 'L', 'V', 'K', 'R', 'N', '0', '1'};

/// What identifies the code generator: the binary Cleave's code generation
/// is linked into (hashed) and the LLVM and MLIR libraries it calls (their
/// paths, sizes and times). Empty when they cannot be found, which turns
/// the cache off.
const std::string &compilerIdentity() {
  static const std::string identity = []() -> std::string {
    std::string id = "llvm " LLVM_VERSION_STRING;
    auto describe = [&](const void *symbol, bool hashContents) {
      Dl_info info;
      if (!dladdr(symbol, &info) || !info.dli_fname)
        return false;
      // The main executable may be named as it was run (found on PATH).
      std::string path = info.dli_fname;
      if (path.find('/') == std::string::npos)
        path = "/proc/self/exe";
      struct stat st;
      if (stat(path.c_str(), &st) != 0)
        return false;
      id += "|" + path + ":" + std::to_string(st.st_size) + ":" +
            std::to_string(st.st_mtime);
      if (!hashContents)
        return true;
      auto buffer = llvm::MemoryBuffer::getFile(
          path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
      if (!buffer)
        return false;
      id += ":" + llvm::utohexstr(llvm::xxh3_64bits((*buffer)->getBuffer()));
      return true;
    };
    if (!describe(reinterpret_cast<const void *>(&::cleave::compileCPUKernels),
                  /*hashContents=*/true) ||
        !describe(reinterpret_cast<const void *>(&llvm::verifyModule),
                  /*hashContents=*/false) ||
        !describe(reinterpret_cast<const void *>(&translateModuleToLLVMIR),
                  /*hashContents=*/false))
      return "";
    return id;
  }();
  return identity;
}

/// The hex SHA-256 of what decides a kernel's object.
std::string cacheKey(const KernelJob &job,
                     const ::cleave::CPUCodegenOptions &options,
                     const std::pair<std::string, std::string> &cpu) {
  llvm::SHA256 hash;
  for (StringRef part :
       {StringRef("cleave-cpu-kernel 1"), StringRef(compilerIdentity()),
        StringRef(cpu.first), StringRef(cpu.second),
        StringRef(options.rowKernels ? "row" : "norow"),
        StringRef(options.pipelineKey), StringRef(job.source)}) {
    hash.update(part);
    hash.update(StringRef("\0", 1));
  }
  hash.update(std::to_string(options.optLevel));
  hash.update(StringRef("\0", 1));
  hash.update(std::to_string(options.parallelMinWork));
  return llvm::toHex(hash.final(), /*LowerCase=*/true);
}

/// Reads `job`'s entry from `buffer`; false when the entry is damaged.
bool readCacheEntry(KernelJob &job, const llvm::MemoryBuffer &buffer) {
  StringRef bytes = buffer.getBuffer();
  CacheEntryHeader header;
  if (bytes.size() < sizeof(header))
    return false;
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, kCacheMagic, sizeof(kCacheMagic)) != 0 ||
      header.objectBytes != bytes.size() - sizeof(header))
    return false;
  job.scratchBytes = header.scratchBytes;
  job.object.assign(bytes.begin() + sizeof(header), bytes.end());
  job.fromCache = true;
  return true;
}

/// The cache file of `key` in `dir`, as llvm::localCache names it.
std::string cacheFile(StringRef dir, StringRef key) {
  SmallString<256> path(dir);
  llvm::sys::path::append(path, "llvmcache-" + key);
  return path.str().str();
}

/// Creates a temporary file path with `suffix`; empty on failure.
std::string makeTemp(StringRef prefix, StringRef suffix, std::string &error) {
  SmallString<128> path;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile(prefix, suffix, path)) {
    error = "cannot create a temporary file: " + ec.message();
    return "";
  }
  return path.str().str();
}

/// Links `objects` into a shared object with lld; its bytes, or an error.
FailureOr<std::vector<uint8_t>> linkObjects(ArrayRef<KernelJob> objects,
                                            StringRef lldPath,
                                            std::string &error) {
  std::vector<std::string> paths;
  llvm::scope_exit cleanup([&] {
    for (const std::string &path : paths)
      llvm::sys::fs::remove(path);
  });
  std::string soPath = makeTemp("cleave-kernels", "so", error);
  if (soPath.empty())
    return failure();
  paths.push_back(soPath);
  std::string logPath = makeTemp("cleave-kernels", "log", error);
  if (logPath.empty())
    return failure();
  paths.push_back(logPath);
  std::string lld = resolveLinker(lldPath);
  std::vector<std::string> argStorage = {
      lld, "-shared", "--no-undefined-version", "-O2", "-o", soPath};
  for (const KernelJob &job : objects) {
    std::string objPath = makeTemp("cleave-kernel", "o", error);
    if (objPath.empty())
      return failure();
    paths.push_back(objPath);
    std::error_code ec;
    llvm::raw_fd_ostream os(objPath, ec);
    if (!ec)
      os.write(job.object.data(), job.object.size());
    os.close();
    if (ec || os.has_error()) {
      error =
          "cannot write '" + objPath + "': " + (ec ? ec : os.error()).message();
      os.clear_error();
      return failure();
    }
    argStorage.push_back(objPath);
  }
  SmallVector<StringRef> args(argStorage.begin(), argStorage.end());
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(logPath),
                                          StringRef(logPath)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(lld, args, std::nullopt, redirects,
                                     /*SecondsToWait=*/0,
                                     /*MemoryLimit=*/0, &execError);
  if (rc != 0) {
    std::string log;
    if (auto buffer = llvm::MemoryBuffer::getFile(logPath))
      log = (*buffer)->getBuffer().str();
    error = "linking the CPU kernels with '" + lld + "' failed (" +
            std::to_string(rc) + "): " + execError + log;
    return failure();
  }
  auto buffer = llvm::MemoryBuffer::getFile(soPath, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "cannot read the linked kernels '" + soPath +
            "': " + buffer.getError().message();
    return failure();
  }
  StringRef bytes = (*buffer)->getBuffer();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

auto ::cleave::defaultKernelCacheDir() -> std::string {
  SmallString<256> dir;
  if (const char *env = std::getenv("CLEAVE_CACHE_DIR"); env && *env)
    dir = env;
  else if (llvm::sys::path::cache_directory(dir))
    llvm::sys::path::append(dir, "cleave");
  else
    return "";
  llvm::sys::path::append(dir, "kernels");
  return dir.str().str();
}

auto ::cleave::compileCPUKernels(ModuleOp kernels,
                                 const CPUCodegenOptions &options)
    -> FailureOr<CPUKernelObject> {
  Location loc = kernels.getLoc();
  auto start = std::chrono::steady_clock::now();

  // Each kernel alone in a module with the kernels' module attributes.
  std::vector<KernelJob> jobs;
  {
    OpBuilder builder(kernels.getContext());
    for (auto func : kernels.getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      OwningOpRef<ModuleOp> alone = ModuleOp::create(kernels.getLoc());
      (*alone)->setAttrs(kernels->getAttrDictionary());
      builder.setInsertionPointToEnd(alone->getBody());
      builder.clone(*func);
      KernelJob job;
      job.name = func.getSymName().str();
      llvm::raw_string_ostream os(job.source);
      // Whole: the text is compiled, so nothing may be elided whatever the
      // process's printing options say.
      alone->print(
          os,
          OpPrintingFlags()
              .enableDebugInfo(false)
              .elideLargeElementsAttrs(std::numeric_limits<int64_t>::max())
              .elideLargeResourceString(std::numeric_limits<int64_t>::max()));
      jobs.push_back(std::move(job));
    }
  }

  std::pair<std::string, std::string> cpu = resolveCPU(options);
  // The cache: skipped when asked, when IR is dumped (the dump is of what
  // is compiled), for a front half that has no key, and when the compiler
  // cannot be identified.
  bool useCache = !options.cacheDir.empty() && !options.dumpIR &&
                  !options.emitAssembly &&
                  (!options.frontHalf || !options.pipelineKey.empty()) &&
                  !compilerIdentity().empty();
  CPUCodegenStats stats;
  stats.kernels = jobs.size();
  stats.cached = useCache;
  if (useCache) {
    for (KernelJob &job : jobs) {
      job.key = cacheKey(job, options, cpu);
      std::string path = cacheFile(options.cacheDir, job.key);
      auto buffer = llvm::MemoryBuffer::getFile(
          path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
      if (!buffer)
        continue;
      if (readCacheEntry(job, **buffer))
        ++stats.fromCache;
      else
        llvm::sys::fs::remove(path); // damaged: compiled and stored again
    }
  }

  // Compile what the cache did not have, a worker per thread.
  std::vector<KernelJob *> pending;
  for (KernelJob &job : jobs)
    if (!job.fromCache)
      pending.push_back(&job);
  unsigned threads = options.threads
                         ? options.threads
                         : llvm::hardware_concurrency().compute_thread_count();
  if (options.dumpIR)
    threads = 1; // the dumps stay in order
  threads = std::max<unsigned>(1, std::min<unsigned>(threads, pending.size()));
  stats.threads = pending.empty() ? 0 : threads;
  if (!pending.empty()) {
    DialectRegistry registry;
    kernels.getContext()->getDialectRegistry().appendTo(registry);
    registerCPUCodegenDialects(registry);
    registerBuiltinDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    std::atomic<size_t> next{0};
    auto work = [&] {
      KernelCompiler compiler(registry, options, cpu);
      for (size_t i = next++; i < pending.size(); i = next++)
        compiler.compile(*pending[i]);
    };
    if (threads == 1) {
      work();
    } else {
      llvm::DefaultThreadPool pool(llvm::hardware_concurrency(threads));
      for (unsigned t = 0; t < threads; ++t)
        pool.async(work);
      pool.wait();
    }
  }
  bool failedAny = false;
  for (const KernelJob &job : jobs)
    if (!job.error.empty()) {
      emitError(loc) << "compiling CPU kernel '" << job.name
                     << "': " << job.error;
      failedAny = true;
    }
  if (failedAny)
    return failure();
  stats.compileSeconds = secondsSince(start);

  // Store what was compiled. A cache that cannot be written is not an
  // error: the kernels are compiled again next time.
  if (useCache && !pending.empty()) {
    auto cache = llvm::localCache("cleave kernel cache", "cleave-kernel",
                                  options.cacheDir);
    if (!cache) {
      llvm::consumeError(cache.takeError());
    } else {
      for (const KernelJob *job : pending) {
        auto addStream = (*cache)(0, job->key, job->name);
        if (!addStream) {
          llvm::consumeError(addStream.takeError());
          continue;
        }
        if (!*addStream)
          continue; // another compile stored it meanwhile
        auto stream = (*addStream)(0, job->name);
        if (!stream) {
          llvm::consumeError(stream.takeError());
          continue;
        }
        CacheEntryHeader header;
        std::memcpy(header.magic, kCacheMagic, sizeof(kCacheMagic));
        header.scratchBytes = job->scratchBytes;
        header.objectBytes = job->object.size();
        (*stream)->OS->write(reinterpret_cast<const char *>(&header),
                             sizeof(header));
        (*stream)->OS->write(job->object.data(), job->object.size());
        llvm::consumeError((*stream)->commit());
      }
      llvm::CachePruningPolicy policy;
      policy.Expiration = std::chrono::hours(24 * 30);
      policy.MaxSizeBytes = options.cacheMaxBytes;
      llvm::pruneCache(options.cacheDir, policy);
    }
  }

  auto linkStart = std::chrono::steady_clock::now();
  std::string error;
  if (jobs.empty()) {
    // No kernels: the shared object of an empty module.
    std::unique_ptr<llvm::TargetMachine> machine =
        createTargetMachine(cpu, options.optLevel, error);
    if (!machine)
      return emitError(loc) << error, failure();
    llvm::LLVMContext llvmContext;
    llvm::Module empty("cleave_cpu_kernels", llvmContext);
    empty.setTargetTriple(machine->getTargetTriple());
    empty.setDataLayout(machine->createDataLayout());
    KernelJob job;
    if (!emitObject(empty, *machine, job.object))
      return emitError(loc) << "the target machine cannot emit object files",
             failure();
    jobs.push_back(std::move(job));
  }
  FailureOr<std::vector<uint8_t>> linked =
      linkObjects(jobs, options.lldPath, error);
  if (failed(linked))
    return emitError(loc) << error, failure();
  stats.linkSeconds = secondsSince(linkStart);

  CPUKernelObject result;
  result.object = std::move(*linked);
  if (options.emitAssembly)
    for (const KernelJob &job : jobs)
      if (!job.name.empty())
        result.assembly +=
            "# kernel " + job.name + "\n" +
            std::string(job.assembly.begin(), job.assembly.end());
  for (const KernelJob &job : jobs)
    if (job.scratchBytes)
      result.scratchBytes[job.name] = job.scratchBytes;
  result.stats = stats;
  return result;
}
