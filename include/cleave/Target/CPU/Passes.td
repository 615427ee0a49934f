//===- Passes.td - Passes of the CPU kernel pipeline -------*- tablegen -*-===//
//
// The passes buildCPUKernelPipeline adds after the shared front half
// (include/cleave/Target/Common/Passes.td): kernel temporaries in the plan's
// arena, loop nests on the runtime's threads, and the math and arith
// lowering choices of the x86-64 backend.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_CPU_PASSES_TD
#define CLEAVE_TARGET_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def TemporariesToScratchPass : Pass<"cleave-cpu-temporaries-to-scratch", "::mlir::ModuleOp"> {
  let summary = "Place each kernel's temporary buffers in one scratch argument";
  let description = [{
    After bufferization a kernel still allocates the buffers that are
    neither its inputs nor its results. Left alone they become malloc and
    free calls outside the plan's arena. This pass gives each kernel that
    has such temporaries one more, last argument, a byte buffer of the bytes
    recorded in `cleave.scratch_bytes`, and turns each temporary into a view
    of that buffer at its own 64-byte aligned offset. Allocations with
    dynamic sizes or inside loops stay heap allocations. Fails on a
    deallocation of a buffer placed in the scratch.

    ```mlir
    // Before:
    func.func @k(%x: memref<4x8xf32>, %y: memref<4xf32>) {
      %t = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
      ...
      memref.dealloc %t : memref<4xf32>
    }
    // After:
    func.func @k(%x: memref<4x8xf32>, %y: memref<4xf32>,
                 %scratch: memref<64xi8>) attributes {cleave.scratch_bytes = 64 : i64} {
      %t = memref.view %scratch[%c0][] : memref<64xi8> to memref<4xf32>
      ...
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect"
  ];
}

def SplitOuterReductionsPass : Pass<"cleave-cpu-split-outer-reductions", "::mlir::ModuleOp"> {
  let summary = "Tile linalg ops whose outermost loop is a reduction into an scf.parallel over blocks";
  let description = [{
    A linalg op (on memrefs) whose outermost loop is a reduction (a bias
    gradient summing rows into one value per column) would lower to an
    scf.parallel inside the reduction loop, once per row, which
    `--cleave-cpu-parallel-loops` cannot spread over threads. When the op
    has at least `min-work` scalar iterations, its outermost parallel
    dimension whose extent has a divisor from 8 to 64 is tiled into an
    scf.parallel over that many blocks, each block summing its columns over
    the rows in the original order (so results do not change).

    ```mlir
    // Before: the sum of 1024 rows of 64 columns.
    linalg.generic {iterator_types = ["reduction", "parallel"], ...}
        ins(%x : memref<1024x64xf32>) outs(%y : memref<64xf32>) { addf }
    // After: 8 blocks of 8 columns.
    scf.parallel (%j) = (%c0) to (%c64) step (%c8) {
      %xs = memref.subview %x[0, %j] [1024, 8] [1, 1] : ...
      %ys = memref.subview %y[%j] [8] [1] : ...
      linalg.generic {iterator_types = ["reduction", "parallel"], ...}
          ins(%xs : ...) outs(%ys : ...) { addf }
    }
    ```
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t",
           /*default=*/"::cleave::kDefaultParallelMinWork",
           "Scalar iterations below which an op is left as it is">
  ];
  let dependentDialects = [
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def ParallelLoopsPass : Pass<"cleave-cpu-parallel-loops", "::mlir::ModuleOp"> {
  let summary = "Outline large scf.parallel loop nests for the runtime's threads";
  let description = [{
    Each outermost `scf.parallel` of a kernel with at least `min-work`
    scalar iterations (counted through the nest) is outlined into a function
    over a range of its outer iterations, and the loop is replaced by a call
    of a `$launch` declaration that compileCPUKernels defines: it runs that
    function on the runtime's threads. Values the body uses from outside are
    passed as arguments (constants are cloned in); a loop that uses anything
    but static memrefs, integers, indices and floats, or that yields
    reductions, stays as it is.

    ```mlir
    // Before:
    scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
      body(%i, %j, %a, %b)
    }
    // After:
    func.call @k$par0$launch(%a, %b, %c64) : (...) -> ()
    func.func private @k$par0(%a: ..., %b: ..., %begin: index, %end: index) {
      scf.for %o = %begin to %end step %c1 {
        scf.parallel (%j) = (%c0) to (%c128) step (%c1) { body(%o, %j, %a, %b) }
      }
    }
    func.func private @k$par0$launch(memref<...>, memref<...>, index)
    ```
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t",
           /*default=*/"::cleave::kDefaultParallelMinWork",
           "Scalar iterations below which a loop nest stays on the calling "
           "thread (0: none is split)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::scf::SCFDialect"
  ];
}

def ApproximateMathPass : Pass<"cleave-cpu-approximate-math", "::mlir::ModuleOp"> {
  let summary = "Replace f32 transcendentals by polynomial approximations";
  let description = [{
    Replaces f32 `math.exp`, `expm1`, `log`, `log1p`, `log2`, `tanh`, `erf`
    and `erfc` by MLIR's polynomial approximations: plain arithmetic that
    LLVM vectorizes, instead of one libm call per element. Other element
    types keep libm calls or intrinsics. `math.powf` by a constant 1, 2, 3,
    -1, -2, 0.5, -0.5 or 0.75 becomes products and square roots.

    ```mlir
    // Before:
    %y = math.powf %x, %c2 : f32
    %e = math.erf %x : f32
    // After: no math.powf or math.erf left.
    %y = arith.mulf %x, %x : f32
    %e = ... arith.mulf, arith.addf, arith.select, math.fma ... : f32
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"
  ];
}

def ExpandArithPass : Pass<"cleave-cpu-expand-arith", "::mlir::ModuleOp"> {
  let summary = "Expand the arith ops LLVM lacks, keeping float min/max";
  let description = [{
    `arith-expand` without its float min/max expansion: ceil and floor
    divisions, bf16 conversions and the scaling extensions and truncations
    become plain arith ops, while `arith.maximumf`/`maxnumf` (and the min
    forms) stay ops and become `llvm.maximum`/`maxnum` intrinsics, which
    LLVM's loop vectorizer recognizes as reductions; the expanded
    compare-and-select form is not recognized, so row maxima (softmax)
    would stay scalar.

    ```mlir
    // Before:
    %q = arith.ceildivsi %a, %b : i32
    %m = arith.maximumf %x, %y : f32
    // After: the division is spelled out, the maximum stays.
    %q = ... arith.divsi, arith.select ... : i32
    %m = arith.maximumf %x, %y : f32
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

#endif // CLEAVE_TARGET_CPU_PASSES_TD
