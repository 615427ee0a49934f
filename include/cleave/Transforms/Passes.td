//===- Passes.td - Cleave transformation passes -----------*- tablegen -*-===//

#ifndef CLEAVE_TRANSFORMS_PASSES_TD
#define CLEAVE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CanonicalizeContractionsPass : Pass<"cleave-canonicalize-contractions", "::mlir::func::FuncOp"> {
  let summary = "Put every contraction in batched-GEMM form";
  let description = [{
    Rewrites each `cleave.contract` so that its operands are laid out as a
    row-major batched GEMM: batch dimensions lead in both operands, in the
    same order; the lhs is `[batch..., M..., K...]` or `[batch..., K...,
    M...]` and the rhs `[batch..., K..., N...]` or `[batch..., N..., K...]`,
    with the contracting dimensions paired in order. Operands that are not
    are transposed. A batch dimension that the rhs only has because of a
    `cleave.broadcast_in_dim` is turned into an lhs free dimension, so a
    weight shared over the batch is not copied.

    ```mlir
    // Before: the weight is broadcast over the batch.
    %wb = cleave.broadcast_in_dim %w dims = [1, 2] : tensor<16x32xf32> -> tensor<4x16x32xf32>
    %0 = cleave.contract %x, %wb batch = [0] x [0] contract = [2] x [1]
        : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
    // After: one GEMM with M = 4 * 8.
    %0 = cleave.contract %x, %w batch = [] x [] contract = [2] x [0]
        : tensor<4x8x16xf32>, tensor<16x32xf32> -> tensor<4x8x32xf32>
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def TestGradientsPass : Pass<"cleave-test-gradients", "::mlir::func::FuncOp"> {
  let summary = "Append the gradients of a scalar function to its results";
  let description = [{
    For each function whose single result is a 0-d float tensor, emits the
    reverse-mode gradients of that result with respect to every float
    argument (`cleave::buildGradients`, from the ops' VJP rules) and returns
    them after the result. Other functions are left alone. For testing the
    VJP rules.

    ```mlir
    // Before:
    func.func @f(%x: tensor<f64>) -> tensor<f64> {
      %0 = cleave.unary exp %x : tensor<f64>
      return %0 : tensor<f64>
    }
    // After: d exp(x) / dx = exp(x) * 1.
    func.func @f(%x: tensor<f64>) -> (tensor<f64>, tensor<f64>) {
      %0 = cleave.unary exp %x : tensor<f64>
      %1 = cleave.constant dense<1.0> : tensor<f64>
      %2 = cleave.binary mul %1, %0 : tensor<f64>
      return %0, %2 : tensor<f64>, tensor<f64>
    }
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

#endif // CLEAVE_TRANSFORMS_PASSES_TD
