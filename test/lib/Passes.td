//===- Passes.td - Passes for testing Cleave's libraries ---*- tablegen -*-===//
//
// Test-only passes: registered in cleave-opt (cleave::test::registerTestPasses)
// and nowhere else, so cleave-compile and the Python module do not carry them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_LIB_PASSES_TD
#define CLEAVE_TEST_LIB_PASSES_TD

include "mlir/Pass/PassBase.td"

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

def TestShardingRulesPass : Pass<"cleave-test-sharding-rules", "::mlir::func::FuncOp"> {
  let summary = "Print the sharding rule of every op as a remark";
  let description = [{
    For each op, emits a remark with its factor-based sharding rule
    (`cleave::ShardingRule`), and an error when the rule does not match the
    op's types (a dimension whose size differs from its factors' product).
    For testing the rules.

    ```mlir
    %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0]
        : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
    // remark: ([i, k], [k, j]) -> ([i, j]) {i=8, j=32, k=16} reduction={k}
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

#endif // CLEAVE_TEST_LIB_PASSES_TD
