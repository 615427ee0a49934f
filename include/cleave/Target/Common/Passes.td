//===- Passes.td - Kernel passes both targets share --------*- tablegen -*-===//
//
// The passes of the target-independent front half
// (buildKernelBufferizationPipeline) and the row-kernel rewrite, which both
// kernel pipelines run on kernel functions (one func.func per fused kernel
// group).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_COMMON_PASSES_TD
#define CLEAVE_TARGET_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def SplatConstantsToFillPass : Pass<"cleave-splat-constants-to-fill", "::mlir::ModuleOp"> {
  let summary = "Rewrite splat tensor constants as linalg.fill of an empty tensor";
  let description = [{
    Rewrites every splat `arith.constant` of a tensor with more than one
    element into a `linalg.fill` of a `tensor.empty`, so that it bufferizes
    to a filled buffer instead of a global of the full size in the kernel
    object (for CUDA, host memory the device cannot read). Scalars and
    one-element tensors stay constants.

    ```mlir
    // Before:
    %c = arith.constant dense<1.0> : tensor<4x8xf32>
    // After:
    %cst = arith.constant 1.0 : f32
    %e = tensor.empty() : tensor<4x8xf32>
    %c = linalg.fill ins(%cst : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def CopyAliasedResultsPass : Pass<"cleave-copy-aliased-results", "::mlir::ModuleOp"> {
  let summary = "Copy kernel results that are an argument or an earlier result";
  let description = [{
    Makes every tensor a function returns a tensor of its own: a result that
    is a function argument, or the same value as an earlier result (folding
    can make `mul(ones, x)` return `x`), is copied with a
    `bufferization.alloc_tensor ... copy(...)`, which always bufferizes to a
    fresh buffer. Results become out-parameters the caller owns, so they may
    alias neither an input nor each other.

    ```mlir
    // Before:
    func.func @k(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
      %y = arith.addf %x, %x : tensor<4xf32>
      return %y, %y : tensor<4xf32>, tensor<4xf32>
    }
    // After: the second result is a copy.
    %c = bufferization.alloc_tensor() copy(%y) : tensor<4xf32>
    return %y, %c : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def LowerMemRefCopyPass : Pass<"cleave-lower-memref-copy", "::mlir::ModuleOp"> {
  let summary = "Rewrite memref.copy as linalg.copy";
  let description = [{
    Rewrites every `memref.copy` as `linalg.copy`, so that copies between
    strided buffers become loops instead of calls to MLIR's C runner
    function `memrefCopy`, which kernels cannot link against.

    ```mlir
    // Before:
    memref.copy %a, %b : memref<4xf32, strided<[2]>> to memref<4xf32>
    // After:
    linalg.copy ins(%a : memref<4xf32, strided<[2]>>) outs(%b : memref<4xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def RowKernelsPass : Pass<"cleave-row-kernels", "::mlir::ModuleOp"> {
  let summary = "Rewrite reduction kernels as one scf.parallel over rows";
  let description = [{
    Rewrites a kernel function whose linalg ops (on memrefs) all share the
    parallel "row" space of a reduction into one `scf.parallel` over the
    rows, tagged `cleave.row_kernel`, whose body runs the ops one after
    another on that row: inner `scf.parallel` loops for elementwise ops,
    `scf.parallel ... init(...)` with `scf.reduce` for reductions, then the
    row's result combined into the output. Softmax, layer norm and
    cross-entropy then touch a row in one place instead of sweeping the whole
    tensor once per op. The CUDA target maps the outer loop to blocks
    (`--cleave-cuda-rows-to-launch`); on the CPU the nest lowers like any
    scf.parallel. Functions the rewrite does not apply to (views of written
    buffers, reductions without a neutral element, ops of different row
    spaces) are left unchanged.

    ```mlir
    // Before: a row sum (linalg.fill, then a linalg.generic reduction).
    linalg.fill ins(%zero : f32) outs(%out : memref<4xf32>)
    linalg.generic {iterator_types = ["parallel", "reduction"], ...}
        ins(%x : memref<4x8xf32>) outs(%out : memref<4xf32>) { addf }
    // After: the fill, the reduction and its combination, row by row.
    scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
      scf.parallel (%i) = (%c0) to (%c1) step (%c1) {
        memref.store %zero, %out[%r] : memref<4xf32>
      }
      %s = scf.parallel (%c) = (%c0) to (%c8) step (%c1) init (%zero) -> f32 {
        %v = memref.load %x[%r, %c] : memref<4x8xf32>
        scf.reduce(%v : f32) { ... arith.addf ... }
      }
      %old = memref.load %out[%r] : memref<4xf32>
      %new = arith.addf %old, %s : f32
      memref.store %new, %out[%r] : memref<4xf32>
    } {cleave.row_kernel}
    ```
  }];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"
  ];
}

#endif // CLEAVE_TARGET_COMMON_PASSES_TD
