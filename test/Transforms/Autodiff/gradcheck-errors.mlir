// A function with an op that has no VJP rule fails with an error naming the
// op, and the other functions are still checked; the exit code is 1.
// RUN: not cleave-gradcheck %s 2>&1 | FileCheck %s

// CHECK: error: no VJP rule for 'cleave.conv'
// CHECK: FAIL f_conv: cannot build the gradients
func.func @f_conv(%x: tensor<1x1x4x4xf64>, %w: tensor<1x1x2x2xf64>) -> tensor<1x1x3x3xf64> {
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] groups = 1 : (tensor<1x1x4x4xf64>, tensor<1x1x2x2xf64>) -> tensor<1x1x3x3xf64>
  return %0 : tensor<1x1x3x3xf64>
}

// CHECK: PASS f_exp max rel err
func.func @f_exp(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = cleave.unary exp %x : tensor<3xf64>
  return %0 : tensor<3xf64>
}
