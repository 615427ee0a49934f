//===- CUDACodegen.h - Compile cleave kernels to NVPTX / cubin --*- C++ -*-===//
//
// The GPU counterpart of CPUCodegen.h: the same module of kernel functions
// (one func.func per fused kernel group, cleave ops on static tensors,
// results returned) is lowered through linalg, bufferization, parallel loops,
// gpu.launch and NVVM to PTX and, with ptxas, to one cubin.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_CUDA_CUDACODEGEN_H
#define CLEAVE_TARGET_CUDA_CUDACODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cleave {

struct CUDACodegenOptions {
  /// The SM the code is compiled for (`sm_90a`: H100/H200, `sm_80`: A100).
  std::string chip = "sm_90a";
  /// The CUDA toolkit: ptxas (cubin) and libdevice (math functions).
  std::string toolkit = "/usr/local/cuda";
  /// Threads per block of the elementwise / row-parallel launches.
  int blockSize = 256;
  /// Also build CUDAProgram::hostLaunches: every launch as a host function,
  /// for the CUDA host doubles (`--cuda-host-kernels`).
  bool hostLaunches = false;
};

/// One launch of a compiled kernel: its symbol, grid/block sizes, dynamic
/// shared memory, and its arguments as indices: k < numInputs+numResults
/// refers to the kernel function's inputs then results; larger values refer
/// to temporaries[k - numInputs - numResults]. Every argument is passed as
/// one device pointer (bare-pointer convention: the kernel's parameter list is
/// `(T *arg0, T *arg1, ...)` in `args` order). Every pointer must be 16-byte
/// aligned: elementwise kernels use 16-byte vector loads and stores (plan
/// buffers and temporaries are placed at multiples of the plan alignment).
/// For tests of the launch mapping on the CPU: the CUDA pipeline up to its
/// gpu.launch ops (row kernels, vector accesses, block reductions), then
/// `cleave-cuda-emulate-launches`, leaving loops that
/// buildCPULoweringPasses compiles for the host.
void buildCUDAEmulationPipeline(mlir::OpPassManager &pm,
                                const CUDACodegenOptions &options);

struct CUDALaunch {
  std::string symbol;
  int64_t grid[3], block[3];
  int64_t sharedBytes = 0;
  std::vector<int64_t> args;
};

/// One kernel function of the input module: the launches that implement it,
/// in order, on one stream, and the device temporaries they share (sizes in
/// bytes; the caller places them, e.g. in the plan's arena).
struct CUDAKernel {
  std::string name;
  std::vector<CUDALaunch> launches;
  std::vector<int64_t> temporaryBytes;
};

/// One argument of a launch as the host version of its kernel sees it.
struct CUDALaunchArg {
  int64_t bytes = 0;    ///< The whole buffer the argument points at.
  bool written = false; ///< Whether the kernel may write it.
};

/// All kernels of a module: their launch descriptions, one cubin holding
/// every launched symbol, and the PTX it was assembled from.
struct CUDAProgram {
  std::vector<CUDAKernel> kernels;
  std::vector<uint8_t> cubin;
  std::string ptx;
  /// With CUDACodegenOptions::hostLaunches: one func.func per launch symbol,
  /// named after it, taking the launch's arguments in order (static
  /// memrefs) and holding the launch itself as a gpu.launch; lowered for the
  /// host by buildCUDAHostLaunchPasses, then the CPU back half, it computes
  /// what the GPU kernel computes, block by block and thread by thread.
  mlir::OwningOpRef<mlir::ModuleOp> hostLaunches;
  /// Per launch symbol of hostLaunches: its arguments.
  std::map<std::string, std::vector<CUDALaunchArg>> hostLaunchArgs;
};

/// Compiles every func.func of `kernels` (same contract as compileCPUKernels)
/// for the GPU. Fails with a diagnostic when a kernel does not reduce to
/// launches with constant sizes (plus static temporaries) or when ptxas fails.
/// `kernels` is not modified (a clone is lowered).
mlir::FailureOr<CUDAProgram>
compileCUDAKernels(mlir::ModuleOp kernels, const CUDACodegenOptions &options);

/// The launch mapping alone: kernel functions to host functions of
/// gpu.launch ops (bufferized, row kernels, parallel loops mapped to blocks
/// and threads), not outlined.
void buildCUDALaunchPipeline(mlir::OpPassManager &pm,
                             const CUDACodegenOptions &options);

/// What follows buildCUDALaunchPipeline in buildCUDAKernelPipeline:
/// outlining into `gpu.module @cleave_kernels` and its lowering to NVVM.
void buildCUDADevicePasses(mlir::OpPassManager &pm,
                           const CUDACodegenOptions &options);

/// The front half that compiles CUDAProgram::hostLaunches for the host
/// with compileCPUKernels: each gpu.launch becomes loops over blocks, phases
/// and threads (`--cleave-cuda-emulate-launches`).
void buildCUDAHostLaunchPasses(mlir::OpPassManager &pm);

/// Adds the passes that lower a module of cleave kernels to host functions
/// of `gpu.launch_func`s (plus memref.alloc/dealloc of temporaries) and one
/// `gpu.module @cleave_kernels` in the NVVM/LLVM dialect with an
/// `#nvvm.target` (`--cleave-cuda-kernel-pipeline`, without `format`).
void buildCUDAKernelPipeline(mlir::OpPassManager &pm,
                             const CUDACodegenOptions &options);

/// Adds `gpu-module-to-binary` with `format` ("isa": PTX, "bin": cubin via
/// ptxas, "llvm": LLVM IR) and the options' toolkit.
void buildCUDABinaryPasses(mlir::OpPassManager &pm,
                           const CUDACodegenOptions &options,
                           llvm::StringRef format);

/// Dialects and interfaces the pipeline needs (the CPU ones, gpu, nvvm, the
/// NVVM target and the LLVM IR translations gpu-module-to-binary uses).
void registerCUDACodegenDialects(mlir::DialectRegistry &registry);

/// Registers `--cleave-cuda-kernel-pipeline` for cleave-opt, with options
/// `chip`, `toolkit`, `block-size` and `format` (none|llvm|isa|bin).
void registerCUDAPipelines();

} // namespace cleave

#endif // CLEAVE_TARGET_CUDA_CUDACODEGEN_H
