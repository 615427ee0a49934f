//===- Passes.td - Passes of the plan builder --------------*- tablegen -*-===//
//
// The plan builder's steps that are IR rewrites: the kernels phase.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PLAN_PASSES_TD
#define CLEAVE_PLAN_PASSES_TD

include "mlir/Pass/PassBase.td"

def OutlineKernelsPass : Pass<"cleave-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "Group @main into plan commands and outline the fused kernels "
                "into a nested kernel module";
  let description = [{
    Runs the plan builder's grouping on `func.func @main` of a prepared
    program (contractions in GEMM form): contractions the library runs
    become GEMM commands (absorbing a following bias add and tanh-form GELU
    as their epilogue), attentions the fused command, collectives their
    own commands, and every other op joins a fused kernel. Each kernel
    group is outlined into a `func.func` of a new `module @kernels` at the
    end of the program module; identical kernel bodies (repeated layers)
    are outlined once. Each op of a kernel group is tagged with the kernel
    that holds its code (`cleave.kernel`) and its command
    (`cleave.kernel_group`, one per group), which the plan builder reads
    instead of grouping again. Broadcasts, widening converts and index
    computations that every reader rebuilds stay untagged: each kernel
    reading them recomputes them.

    The options must match the plan's (cleave-compile sets
    `inline-constant-limit=0` for CUDA, whose kernels cannot read host
    constants). Fails when the module already has a `@kernels` symbol or
    when @main cannot be planned.

    ```mlir
    // Before:
    func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
      %0 = cleave.binary add %x, %y : ...
      %1 = cleave.unary exp %0 : ...
      return %1 : tensor<4xf32>
    }
    // After:
    func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
      %0 = cleave.binary add %x, %y {cleave.kernel = "k0_binary",
                                     cleave.kernel_group = 0 : i64} : ...
      %1 = cleave.unary exp %0 {cleave.kernel = "k0_binary",
                                cleave.kernel_group = 0 : i64} : ...
      return %1 : tensor<4xf32>
    }
    module @kernels {
      func.func @k0_binary(%a: tensor<4xf32>, %b: tensor<4xf32>)
          -> tensor<4xf32> {
        %0 = cleave.binary add %a, %b : ...
        %1 = cleave.unary exp %0 : ...
        return %1 : tensor<4xf32>
      }
    }
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let options = [
    Option<"libraryGemm", "library-gemm", "bool", /*default=*/"true",
           "Run f32/f64 contractions (and bf16/f16 ones with an f32 result) "
           "as library GEMM commands">,
    Option<"gemmEpilogues", "gemm-epilogues", "bool", /*default=*/"true",
           "Let library GEMMs absorb a following bias add, tanh-form GELU "
           "or rounding">,
    Option<"inlineConstantLimit", "inline-constant-limit", "int64_t",
           /*default=*/"16",
           "Dense constants with at most this many elements (and splats) "
           "are rebuilt inside the kernels that read them">,
    Option<"entry", "entry", "std::string", /*default=*/"\"main\"",
           "The function to plan (local SGD's `module @sync` holds @sync)">,
  ];
}

def KernelModulesPass : Pass<"cleave-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Run a pipeline on every kernel module of a program";
  let description = [{
    Runs `pipeline` (a `builtin.module` pipeline: the target's kernel
    lowering) on each `module @kernels` that --cleave-outline-kernels made,
    at any depth below the program module: the step's, each pipeline
    rank's, and that of local SGD's `module @sync`. The other nested
    modules (pipeline ranks, `@sync` itself) hold programs, not kernels,
    and are left alone, which nesting the pipeline under `builtin.module`
    would not do.

    ```
    cleave-opt --pass-pipeline='builtin.module(cleave-kernel-modules{pipeline=builtin.module(convert-cleave-to-linalg)})'
    ```
  }];
  let options = [
    Option<"pipeline", "pipeline", "std::string", /*default=*/"",
           "The pipeline to run on each kernel module, as text "
           "(builtin.module(...))">,
  ];
}

#endif // CLEAVE_PLAN_PASSES_TD
