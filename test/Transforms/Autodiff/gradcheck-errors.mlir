// A function with an op that has no VJP rule fails with an error naming the
// op, and the other functions are still checked; the exit code is 1.
// RUN: not cleave-gradcheck %s 2>&1 | FileCheck %s

// CHECK: error: no VJP rule for 'cleave.reduce_window' with kind prod
// CHECK: FAIL f_window_prod: cannot build the gradients
func.func @f_window_prod(%x: tensor<2x6xf64>) -> tensor<2x4xf64> {
  %0 = cleave.reduce_window prod %x window = [1, 3] strides = [1, 1] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] : tensor<2x6xf64> -> tensor<2x4xf64>
  return %0 : tensor<2x4xf64>
}

// CHECK: PASS f_exp max rel err
func.func @f_exp(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = cleave.unary exp %x : tensor<3xf64>
  return %0 : tensor<3xf64>
}
