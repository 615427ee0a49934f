//===- Passes.td - Cleave autodiff passes ------------------*- tablegen -*-===//

#ifndef CLEAVE_TRANSFORMS_AUTODIFF_PASSES_TD
#define CLEAVE_TRANSFORMS_AUTODIFF_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExpandGradientsPass : Pass<"cleave-expand-gradients",
                               "::mlir::func::FuncOp"> {
  let summary = "Build the gradients that cleave.gradient markers stand for";
  let description = [{
    Replaces each `cleave.gradient` with the reverse-mode gradients of its
    loss with respect to its wrt values (`cleave::buildGradients`, from the
    ops' VJP rules), built right before it. Markers are expanded in program
    order, so a loss computed from an earlier marker's gradients is
    differentiated through their expansion. An op on the path from a wrt
    value to the loss without a VJP rule is an error. The compile runs it
    first, right after import.

    ```mlir
    // Before:
    %y = cleave.binary mul %x, %x : tensor<f32>
    %g = cleave.gradient %y wrt(%x) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    // After: dy/dx = 1 * x + 1 * x.
    %y = cleave.binary mul %x, %x : tensor<f32>
    %one = cleave.constant dense<1.0> : tensor<f32>
    %0 = cleave.binary mul %one, %x : tensor<f32>
    %1 = cleave.binary mul %one, %x : tensor<f32>
    %g = cleave.binary add %0, %1 : tensor<f32>
    ```
  }];
  let statistics = [
    Statistic<"numExpanded", "expanded", "cleave.gradient markers expanded">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

#endif // CLEAVE_TRANSFORMS_AUTODIFF_PASSES_TD
