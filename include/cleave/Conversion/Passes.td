//===- Passes.td - Cleave conversion passes ----------------*- tablegen -*-===//

#ifndef CLEAVE_CONVERSION_PASSES_TD
#define CLEAVE_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertCleaveToLinalgPass : Pass<"cleave-convert-cleave-to-linalg", "ModuleOp"> {
  let summary = "Lower the cleave dialect to linalg, tensor, arith and math";
  let description = [{
    Rewrites every `cleave` op into linalg-on-tensors: elementwise ops,
    broadcasts, transposes, reductions, contractions, convolutions and
    windowed reductions become `linalg.generic` (so elementwise chains fuse
    with `--linalg-fuse-elementwise-ops`); reshapes, slices, pads and
    concatenations become `tensor` ops. Unsigned integer element types are
    converted to signless ones (function signatures included) and select
    the unsigned arith ops. `f16`/`bf16` math is computed in `f32`.

    ```mlir
    %0 = cleave.binary add %a, %b : tensor<4xf32>
    // becomes
    %e = tensor.empty() : tensor<4xf32>
    %0 = linalg.generic {...} ins(%a, %b : ...) outs(%e : ...) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
    } -> tensor<4xf32>
    ```
  }];
  let dependentDialects = [
    "mlir::arith::ArithDialect", "mlir::linalg::LinalgDialect",
    "mlir::math::MathDialect", "mlir::scf::SCFDialect",
    "mlir::tensor::TensorDialect"
  ];
}

#endif // CLEAVE_CONVERSION_PASSES_TD
