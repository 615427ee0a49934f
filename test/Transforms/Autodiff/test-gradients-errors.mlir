// Ops without a VJP rule (or a configuration without one) make
// --cleave-test-gradients fail with an error naming the op.
// RUN: cleave-opt %s --cleave-test-gradients -split-input-file -verify-diagnostics

// Product windows have no rule (conv, reduce_window sum/max/min, every pad
// mode and every scatter kind do: gradcheck-nn.mlir).
func.func @window_prod(%x: tensor<6xf64>) -> tensor<f64> {
  // expected-error @+1 {{no VJP rule for 'cleave.reduce_window' with kind prod}}
  %0 = cleave.reduce_window prod %x window = [3] strides = [1] pad_low = [0] pad_high = [0] dilations = [1] : tensor<6xf64> -> tensor<4xf64>
  %1 = cleave.reduce sum %0 dims = [0] : tensor<4xf64> -> tensor<f64>
  return %1 : tensor<f64>
}
