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

def ExpandNarrowFloatsPass : Pass<"cleave-expand-narrow-floats"> {
  let summary = "Spell float8/float6/float4 conversions out as integer ops";
  let description = [{
    LLVM has no float8, float6 or float4 types. Arith ops on them other than
    conversions are moved to f32 (upstream's unsupported-float emulation);
    `arith.extf` from them and `arith.truncf` to them become integer
    operations on the bits (round to nearest even, overflow to infinity,
    NaN, or the largest value by the type's encoding). Their constants stay:
    the LLVM dialect takes them as integer constants of their bits. Scalars
    only.

    ```mlir
    %0 = arith.truncf %x : f32 to f8E4M3FN
    // becomes bit operations on arith.bitcast %x : f32 to i32, ending in
    %c = arith.trunci %code : i32 to i8
    %0 = arith.bitcast %c : i8 to f8E4M3FN
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect"];
}

#endif // CLEAVE_CONVERSION_PASSES_TD
