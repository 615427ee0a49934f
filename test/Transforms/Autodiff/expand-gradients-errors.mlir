// A cleave.gradient whose loss goes through an op without a VJP rule makes
// --cleave-expand-gradients fail with an error naming the op, and one on
// the marker.
// RUN: cleave-opt %s --cleave-expand-gradients -split-input-file -verify-diagnostics

// Product windows have no rule.
func.func @window_prod(%x: tensor<6xf64>) -> tensor<6xf64> {
  // expected-error @+1 {{no VJP rule for 'cleave.reduce_window' with kind prod}}
  %0 = cleave.reduce_window prod %x window = [3] strides = [1] pad_low = [0] pad_high = [0] dilations = [1] : tensor<6xf64> -> tensor<4xf64>
  %1 = cleave.reduce sum %0 dims = [0] : tensor<4xf64> -> tensor<f64>
  // expected-error @+1 {{cannot build the gradients of its loss}}
  %g = cleave.gradient %1 wrt(%x) : (tensor<f64>, tensor<6xf64>) -> tensor<6xf64>
  return %g : tensor<6xf64>
}
