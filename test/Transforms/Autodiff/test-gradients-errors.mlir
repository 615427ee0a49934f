// Ops without a VJP rule (or a configuration without one) make
// --cleave-test-gradients fail with an error naming the op.
// RUN: cleave-opt %s --cleave-test-gradients -split-input-file -verify-diagnostics

// No rule for convolutions yet.
func.func @conv(%x: tensor<1x1x4x4xf64>, %w: tensor<1x1x2x2xf64>) -> tensor<f64> {
  // expected-error @+1 {{no VJP rule for 'cleave.conv'}}
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] groups = 1 : (tensor<1x1x4x4xf64>, tensor<1x1x2x2xf64>) -> tensor<1x1x3x3xf64>
  %1 = cleave.reduce sum %0 dims = [0, 1, 2, 3] : tensor<1x1x3x3xf64> -> tensor<f64>
  return %1 : tensor<f64>
}

// -----

// Reflect padding has no rule yet.
func.func @pad_reflect(%x: tensor<4xf64>, %v: tensor<f64>) -> tensor<f64> {
  // expected-error @+1 {{no VJP rule for 'cleave.pad' with mode reflect}}
  %0 = cleave.pad %x, %v low = [1] high = [1] mode = reflect : (tensor<4xf64>, tensor<f64>) -> tensor<6xf64>
  %1 = cleave.reduce sum %0 dims = [0] : tensor<6xf64> -> tensor<f64>
  return %1 : tensor<f64>
}

// -----

// Only the accumulating scatter kinds none and add have rules.
func.func @scatter_max(%x: tensor<4xf64>, %i: tensor<2xi64>, %u: tensor<2xf64>) -> tensor<f64> {
  // expected-error @+1 {{no VJP rule for 'cleave.scatter' with kind max}}
  %0 = cleave.scatter max %x, %i, %u axis = 0 : (tensor<4xf64>, tensor<2xi64>, tensor<2xf64>) -> tensor<4xf64>
  %1 = cleave.reduce sum %0 dims = [0] : tensor<4xf64> -> tensor<f64>
  return %1 : tensor<f64>
}
