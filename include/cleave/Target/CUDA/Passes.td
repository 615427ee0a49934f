//===- Passes.td - Passes of the CUDA kernel pipeline ------*- tablegen -*-===//
//
// The passes buildCUDAKernelPipeline adds after the shared front half
// (include/cleave/Target/Common/Passes.td): the launch mapping (row kernels
// and parallel loops to gpu.launch), the device lowering, and the host
// emulation of launches that tests the mapping on the CPU.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_CUDA_PASSES_TD
#define CLEAVE_TARGET_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def RowsToLaunchPass : Pass<"cleave-cuda-rows-to-launch", "::mlir::ModuleOp"> {
  let summary = "Map cleave.row_kernel loops to gpu.launch, one block per row";
  let description = [{
    Maps every `cleave.row_kernel` scf.parallel (from `--cleave-row-kernels`)
    to a gpu.launch with one block per row. The block's threads stride over
    each phase (inner scf.parallel) of the row body; a reduction phase ends
    in a uniform `gpu.all_reduce` of the threads' partial results, other
    phases in a `gpu.barrier`; row-level stores run on thread 0. Blocks have
    the smallest multiple of 32 threads covering the widest phase, at most
    `max-block-size`. Fails on row loops with non-constant bounds and on
    combiners gpu.all_reduce cannot express.

    ```mlir
    // Before:
    scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
      %s = scf.parallel (%c) = (%c0) to (%c8) step (%c1) init (%zero) -> f32 {
        ... scf.reduce(%v : f32) { addf }
      }
      memref.store %s, %out[%r] : memref<4xf32>
      scf.reduce
    } {cleave.row_kernel}
    // After: 4 blocks of 32 threads.
    gpu.launch blocks(%bx, ...) in (%gx = %c4, ...) threads(%tx, ...) in (%bs = %c32, ...) {
      %first = arith.cmpi eq, %tx, %c0 : index
      %p = scf.for %i = %tx to %c8 step %c32 iter_args(%acc = %zero) -> (f32) { ... }
      %s = gpu.all_reduce %p uniform { ... arith.addf ... } : (f32) -> f32
      scf.if %first { memref.store %s, %out[%bx] : memref<4xf32> }
      gpu.barrier
      gpu.terminator
    }
    ```
  }];
  let options = [
    Option<"maxBlockSize", "max-block-size", "int64_t", /*default=*/"512",
           "The most threads of a row's block">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"
  ];
}

def ParallelToLaunchPass : Pass<"cleave-cuda-parallel-to-launch", "::mlir::ModuleOp"> {
  let summary = "Map top-level scf.parallel loops of kernel functions to gpu.launch";
  let description = [{
    Every top-level scf.parallel of a kernel function (constant bounds, no
    reductions) becomes a gpu.launch over its linearized iteration space,
    `block-size` threads per block, with a bounds guard and delinearized
    indices. Elementwise loops whose accesses allow it run V consecutive
    innermost iterations per thread and move each operand with one 16-byte
    `vector.load`/`vector.store`. Any other run of top-level compute becomes
    a one-thread launch. Views and constants the launches use are cloned
    into them, so kernels take whole buffers. Fails on loops with
    non-constant bounds or reductions, and on values computed on the device
    that the host uses.

    ```mlir
    // Before:
    scf.parallel (%i) = (%c0) to (%c1024) step (%c1) {
      %v = memref.load %x[%i] : memref<1024xf32>
      memref.store %v, %y[%i] : memref<1024xf32>
    }
    // After: 256 threads move 4 floats each.
    gpu.launch blocks(%bx, ...) in (%gx = %c1, ...) threads(%tx, ...) in (%bs = %c256, ...) {
      %i = ... %bx * 256 + %tx, times 4 ...
      %v = vector.load %x[%i] : memref<1024xf32>, vector<4xf32>
      vector.store %v, %y[%i] : memref<1024xf32>, vector<4xf32>
      gpu.terminator
    }
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect",
    "::mlir::scf::SCFDialect", "::mlir::vector::VectorDialect"
  ];
}

def SinkIntoLaunchesPass : Pass<"cleave-cuda-sink-into-launches", "::mlir::ModuleOp"> {
  let summary = "Clone the constants and views launches use into their bodies";
  let description = [{
    Canonicalization and CSE hoist constants out of the launches made
    earlier; this pass clones every constant and view op (subview, reshape,
    cast) defined outside a gpu.launch that the launch uses into the start
    of its body, so that outlined kernels take only whole buffers (one
    device pointer each) and compute their views themselves.

    ```mlir
    // Before:
    %c4 = arith.constant 4 : index
    %v = memref.subview %buf[0] [4] [1] : memref<8xf32> to memref<4xf32>
    gpu.launch ... { memref.store %f, %v[%c4] ... }
    // After:
    gpu.launch ... {
      %c4 = arith.constant 4 : index
      %v = memref.subview %buf[0] [4] [1] : memref<8xf32> to memref<4xf32>
      memref.store %f, %v[%c4] ...
    }
    ```
  }];
}

def MergeGPUModulesPass : Pass<"cleave-cuda-merge-gpu-modules", "::mlir::ModuleOp"> {
  let summary = "Merge the outlined gpu.modules into gpu.module @cleave_kernels";
  let description = [{
    Moves the symbols of every gpu.module (one per outlined kernel) into one
    `gpu.module @cleave_kernels`, so the whole program is one cubin, renames
    a symbol whose name is taken, and retargets the gpu.launch_func ops.

    ```mlir
    // Before:
    gpu.module @k_kernel { gpu.func @k_kernel(...) kernel { ... } }
    gpu.module @k_kernel_0 { gpu.func @k_kernel(...) kernel { ... } }
    gpu.launch_func @k_kernel::@k_kernel ...
    gpu.launch_func @k_kernel_0::@k_kernel ...
    // After:
    gpu.module @cleave_kernels {
      gpu.func @k_kernel(...) kernel { ... }
      gpu.func @k_kernel_0(...) kernel { ... }
    }
    gpu.launch_func @cleave_kernels::@k_kernel ...
    gpu.launch_func @cleave_kernels::@k_kernel_0 ...
    ```
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::NVVM::NVVMDialect"
  ];
}

def LowerAllReducePass : Pass<"cleave-cuda-lower-all-reduce", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Lower gpu.all_reduce to warp shuffles and shared memory";
  let description = [{
    Applies MLIR's gpu.all_reduce rewrite inside the outlined kernels: each
    warp reduces with `gpu.shuffle xor`, writes one value per warp to a
    workgroup (shared-memory) buffer, and the first warp reduces those.
    Fails when a gpu.all_reduce is left (one the rewrite does not take).

    ```mlir
    // Before:
    %s = gpu.all_reduce add %p uniform {} : (f32) -> f32
    // After:
    gpu.func @k(...) workgroup(%shared : memref<32xf32, #gpu.address_space<workgroup>>) kernel {
      ... gpu.shuffle xor %v, %c1, %c32 : f32 ...
      memref.store %warp, %shared[%warp_id] ...
      gpu.barrier
      ...
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::cf::ControlFlowDialect",
    "::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect"
  ];
}

def LoadTranslationsPass : Pass<"cleave-cuda-load-translations", "::mlir::ModuleOp"> {
  let summary = "Load the dialects and LLVM IR translations gpu-module-to-binary needs";
  let description = [{
    Changes nothing: through its dependent dialects it loads the dialects,
    external interface models and LLVM IR translations of
    registerCUDACodegenDialects (NVVM target, GPU, NVVM and LLVM to LLVM IR)
    into the context, which cleave-opt does not register globally, so that
    the `gpu-module-to-binary` that follows it can serialize the kernels.

    ```mlir
    // Before and after: the same module.
    gpu.module @cleave_kernels [#nvvm.target<chip = "sm_90a">] { ... }
    ```
  }];
}

def EmulateLaunchesPass : Pass<"cleave-cuda-emulate-launches", "::mlir::ModuleOp"> {
  let summary = "Run gpu.launch bodies as host loops over blocks, phases and threads";
  let description = [{
    Turns every gpu.launch into loops on the host, so the CPU backend runs
    exactly the index arithmetic, strides, vector accesses, barriers and
    block reductions the GPU would (a test of the CUDA mapping). The body is
    split at its top-level gpu.barrier and gpu.all_reduce ops into phases;
    each block runs its phases in order, each phase for every thread in
    turn. Values a thread carries into a later phase live in a per-thread
    buffer; a gpu.all_reduce combines its threads' operands in thread order.
    Fails on launches with y or z grid or block dimensions and on barriers
    or all-reduces below the top level of the body.

    ```mlir
    // Before:
    gpu.launch blocks(%bx, ...) in (%gx = %c4, ...) threads(%tx, ...) in (%bs = %c32, ...) {
      body(%bx, %tx)
      gpu.terminator
    }
    // After:
    scf.for %bx = %c0 to %c4 step %c1 {
      scf.for %tx = %c0 to %c32 step %c1 { body(%bx, %tx) }
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

#endif // CLEAVE_TARGET_CUDA_PASSES_TD
