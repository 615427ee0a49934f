//===- CleaveGradient.td - The gradient marker op ----------*- tablegen -*-===//
//
// cleave.gradient stands for gradients that autodiff has yet to build; it is
// included by CleaveOps.td. Unlike the other cleave ops it has no cost and
// no sharding rule: --cleave-expand-gradients replaces it right after
// import, before anything asks for them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVEGRADIENT_TD
#define CLEAVE_IR_CLEAVEGRADIENT_TD

def Cleave_GradientOp : Op<Cleave_Dialect, "gradient", [Pure]> {
  let summary = "The gradients of a scalar loss, for autodiff to build";
  let description = [{
    Stands for the reverse-mode gradients of `loss`, a 0-d float tensor,
    with respect to each of `wrt`, float tensors of the same block that
    `loss` is computed from: one result per `wrt` value, of its type (zeros
    where `loss` does not depend on it). The ONNX importer makes one for
    each `Gradient` node of ai.onnx.preview.training, so that import does
    not differentiate; `--cleave-expand-gradients` replaces it with the ops
    the VJP rules give.

    ```mlir
    %y = cleave.binary mul %x, %x : tensor<f32>
    %g = cleave.gradient %y wrt(%x) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[AnyFloat]>:$loss,
                       Variadic<RankedTensorOf<[AnyFloat]>>:$wrt);
  let results = (outs Variadic<RankedTensorOf<[AnyFloat]>>:$gradients);
  let assemblyFormat = [{
    $loss `wrt` `(` $wrt `)` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // CLEAVE_IR_CLEAVEGRADIENT_TD
