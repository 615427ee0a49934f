// A function with an op that has no VJP rule fails with an error naming the
// op, and the other functions are still checked; the exit code is 1.
// RUN: not cleave-gradcheck %s 2>&1 | FileCheck %s
// RUN: not cleave-gradcheck %s --hostile 2>&1 | FileCheck %s --check-prefix=HOSTILE

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

// A range that is not [lo, hi] with lo <= hi is an error naming the
// argument, not a silent default.
// CHECK: FAIL f_bad_range: gradcheck.range of argument #0 is not [lo, hi] with finite lo <= hi
func.func @f_bad_range(%x: tensor<3xf64> {gradcheck.range = [2.0, 1.0]}) -> tensor<3xf64> {
  %0 = cleave.unary exp %x : tensor<3xf64>
  return %0 : tensor<3xf64>
}

// --hostile fails on a NaN gradient where the loss is finite: sqrt of a
// negative x hidden by a select still has a NaN derivative (0 * NaN), as in
// PyTorch's where.
// HOSTILE: FAIL f_where_trap: NaN gradient of argument #0 at element {{[0-9]+}} (x = -{{.*}}) where the loss is finite
func.func @f_where_trap(%x: tensor<8xf64> {gradcheck.hostile = [-10.0, 10.0], gradcheck.nonzero}) -> tensor<8xf64> {
  %z = cleave.constant dense<0.0> : tensor<8xf64>
  %c = cleave.compare gt %x, %z : tensor<8xf64> -> tensor<8xi1>
  %s = cleave.unary sqrt %x : tensor<8xf64>
  %0 = cleave.select %c, %s, %z : tensor<8xi1>, tensor<8xf64>
  return %0 : tensor<8xf64>
}
