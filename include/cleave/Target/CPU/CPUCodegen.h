//===- CPUCodegen.h - Kernels into an x86-64 shared object ------*- C++ -*-===//

#ifndef CLEAVE_TARGET_CPU_CPUCODEGEN_H
#define CLEAVE_TARGET_CPU_CPUCODEGEN_H

#include "cleave/Target/CPU/Passes.h"
#include "cleave/Target/Common/KernelPipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cleave {

struct CPUCodegenOptions {
  /// The linker that turns the object file into a shared object. Empty:
  /// the ld.lld found when Cleave was built, else `ld.lld` on PATH.
  std::string lldPath;
  /// LLVM optimization level (0-3). 2 by measurement: the same step times
  /// as 3 on the GPT and ResNet-18 training steps, compiled 1.3-3x faster
  /// (3's full unrolling of short loops makes blocks that instruction
  /// scheduling takes seconds over).
  int optLevel = 2;
  /// Threads that compile kernels (0: one per core).
  unsigned threads = 0;
  /// Loop nests of at least this many scalar iterations run on the
  /// runtime's threads (`--cleave-cpu-parallel-loops`); 0: every kernel runs
  /// on the thread that calls it.
  int64_t parallelMinWork = kDefaultParallelMinWork;
  /// The kernel cache's directory (defaultKernelCacheDir()); empty: no
  /// cache. A kernel's object is stored under a key hashing its printed
  /// module, the target CPU and features, these options and the compiler
  /// (its binary and the LLVM libraries), and read back by a later compile
  /// that would produce the same object.
  std::string cacheDir;
  /// The cache is pruned to this many bytes, and of entries unused for 30
  /// days, after a compile that stored something.
  uint64_t cacheMaxBytes = uint64_t(1) << 30;
  /// Prints the LLVM dialect module and the optimized LLVM IR to stderr.
  bool dumpIR = false;
  /// Also produce each kernel's assembly (CPUKernelObject::assembly); the
  /// cache is not used.
  bool emitAssembly = false;
  /// Target CPU (`-mcpu`). Empty means the host CPU (with its features):
  /// the code then runs only on machines with the same instruction sets, so
  /// plans compiled this way are host-specific. `x86-64` is portable.
  std::string cpu = "";
  /// Lower reduction kernels through `--cleave-row-kernels` (one loop over
  /// rows running every op on the row), the form the CUDA target uses.
  bool rowKernels = false;
  /// Set: replaces the passes before buildCPULoweringPasses (the front half
  /// and rowKernels), e.g. with the CUDA launch mapping run on the host
  /// (buildCUDAEmulationPipeline) to test it.
  std::function<void(mlir::OpPassManager &)> frontHalf;
  /// Names what `frontHalf` builds, for the cache key; a frontHalf without
  /// one is not cached.
  std::string pipelineKey;
};

/// Where compileCPUKernels' time went.
struct CPUCodegenStats {
  size_t kernels = 0;
  /// Whether the cache was used (see CPUCodegenOptions::cacheDir).
  bool cached = false;
  /// Kernels read from the cache instead of compiled.
  size_t fromCache = 0;
  /// Threads that compiled the others (0 when all came from the cache).
  unsigned threads = 0;
  /// Printing, reading the cache and compiling (wall time).
  double compileSeconds = 0;
  /// Linking the objects into the shared object.
  double linkSeconds = 0;
};

/// The kernel cache's directory: $CLEAVE_CACHE_DIR/kernels, else
/// `cleave/kernels` in the user's cache directory ($XDG_CACHE_HOME or
/// ~/.cache); empty when there is none.
std::string defaultKernelCacheDir();

/// Alignment of each temporary in a kernel's scratch buffer (and of the
/// buffer's size).
constexpr uint64_t kCPUScratchAlignment = 64;

/// CPU kernels compiled into one shared object.
struct CPUKernelObject {
  /// The x86-64 ELF shared object.
  std::vector<uint8_t> object;
  /// Per kernel that has temporaries: the bytes of the scratch buffer it
  /// takes as its last argument. Kernels not listed take none.
  std::map<std::string, uint64_t> scratchBytes;
  /// With CPUCodegenOptions::emitAssembly: every kernel's x86-64 assembly,
  /// in order, each after a `# kernel <name>` line.
  std::string assembly;
  CPUCodegenStats stats;
};

/// Compiles every func.func in `kernels` into one x86-64 ELF shared object,
/// each kernel on its own (in parallel, or from the cache; see
/// CPUCodegenOptions), the objects linked in the kernels' order, so the
/// bytes do not depend on the thread count or on the cache.
/// Each function takes ranked static tensors and returns tensors; its symbol
/// `@name` is exported with the ABI `void name(void **args)`, where args holds
/// one pointer per input followed by one pointer per result, each pointing at
/// the first element of a dense row-major buffer the caller owns (results are
/// written in place; no result aliases an input), then, for a kernel with
/// temporaries, a pointer to its scratch buffer (64-byte aligned, of
/// scratchBytes bytes; its contents need not survive between calls). Without
/// `frontHalf`, kernels allocate nothing on the heap. On failure emits
/// diagnostics and returns failure. `kernels` is not modified (a clone is
/// lowered).
mlir::FailureOr<CPUKernelObject>
compileCPUKernels(mlir::ModuleOp kernels, const CPUCodegenOptions &options);

/// Adds the passes that lower a module of cleave kernels to the LLVM
/// dialect (`--cleave-cpu-kernel-pipeline`): buildCPUKernelFrontHalf, then
/// buildCPULoweringPasses.
void buildCPUKernelPipeline(mlir::OpPassManager &pm, bool rowKernels = false);

/// The CPU front half: buildKernelBufferizationPipeline, `rowKernels` runs
/// `--cleave-row-kernels` (as the CUDA pipeline does; tests use it to check
/// that rewrite on the CPU), then `--cleave-cpu-temporaries-to-scratch`.
void buildCPUKernelFrontHalf(mlir::OpPassManager &pm, bool rowKernels = false);

/// The back half of buildCPUKernelPipeline: memrefs, loops (scf, and 1-D
/// vector loads and stores) and math to the LLVM dialect. Loop nests of at
/// least `parallelMinWork` scalar iterations are outlined for the runtime's
/// threads (`--cleave-cpu-parallel-loops`; 0: none).
void buildCPULoweringPasses(mlir::OpPassManager &pm,
                            int64_t parallelMinWork = kDefaultParallelMinWork);

/// Adds the dialects and interface models (bufferization, deallocation,
/// LLVM translation) the pipeline needs (registerKernelCodegenDialects);
/// compileCPUKernels adds them to the kernels' context itself.
void registerCPUCodegenDialects(mlir::DialectRegistry &registry);

/// Registers `--cleave-cpu-kernel-pipeline` (cleave -> LLVM dialect) and the
/// passes of the CPU pipeline (include/cleave/Target/CPU/Passes.td and the
/// shared ones of include/cleave/Target/Common/Passes.td) for cleave-opt.
void registerCPUPipelines();

} // namespace cleave

#endif // CLEAVE_TARGET_CPU_CPUCODEGEN_H
