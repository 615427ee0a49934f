// Checks the VJP rules of the data movement ops against finite differences:
// broadcast patterns, reshape, transpose, slices (strided too), reverse,
// concat, constant padding, gathers, scatters and top_k.
// RUN: cleave-gradcheck %s | FileCheck %s
// RUN: cleave-gradcheck %s --hostile --rtol 1e-4 | FileCheck %s

// A new leading dimension.
// CHECK: PASS f_broadcast_new_dim max rel err
func.func @f_broadcast_new_dim(%x: tensor<4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.broadcast_in_dim %x dims = [1] : tensor<4xf64> -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// A size-1 dimension repeated.
// CHECK: PASS f_broadcast_size_one max rel err
func.func @f_broadcast_size_one(%x: tensor<3x1xf64>) -> tensor<3x4xf64> {
  %0 = cleave.broadcast_in_dim %x dims = [0, 1] : tensor<3x1xf64> -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// A new leading dimension and a repeated one at once.
// CHECK: PASS f_broadcast_both max rel err
func.func @f_broadcast_both(%x: tensor<1x4xf64>) -> tensor<2x3x4xf64> {
  %0 = cleave.broadcast_in_dim %x dims = [1, 2] : tensor<1x4xf64> -> tensor<2x3x4xf64>
  return %0 : tensor<2x3x4xf64>
}

// A scalar to a matrix.
// CHECK: PASS f_broadcast_scalar max rel err
func.func @f_broadcast_scalar(%x: tensor<f64>) -> tensor<3x4xf64> {
  %0 = cleave.broadcast_in_dim %x dims = [] : tensor<f64> -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// New middle and trailing dimensions.
// CHECK: PASS f_broadcast_middle max rel err
func.func @f_broadcast_middle(%x: tensor<3xf64>) -> tensor<3x2x4xf64> {
  %0 = cleave.broadcast_in_dim %x dims = [0] : tensor<3xf64> -> tensor<3x2x4xf64>
  return %0 : tensor<3x2x4xf64>
}

// CHECK: PASS f_reshape max rel err
func.func @f_reshape(%x: tensor<3x4xf64>) -> tensor<2x6xf64> {
  %0 = cleave.reshape %x : tensor<3x4xf64> -> tensor<2x6xf64>
  return %0 : tensor<2x6xf64>
}

// CHECK: PASS f_transpose max rel err
func.func @f_transpose(%x: tensor<2x3x4xf64>) -> tensor<4x2x3xf64> {
  %0 = cleave.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf64> -> tensor<4x2x3xf64>
  return %0 : tensor<4x2x3xf64>
}

// CHECK: PASS f_slice max rel err
func.func @f_slice(%x: tensor<5x6xf64>) -> tensor<3x3xf64> {
  %0 = cleave.slice %x start = [1, 2] limit = [4, 5] strides = [1, 1] : tensor<5x6xf64> -> tensor<3x3xf64>
  return %0 : tensor<3x3xf64>
}

// Strides 2 and 3; the last stride step runs past the end.
// CHECK: PASS f_slice_strided max rel err
func.func @f_slice_strided(%x: tensor<7x8xf64>) -> tensor<3x3xf64> {
  %0 = cleave.slice %x start = [1, 0] limit = [7, 8] strides = [2, 3] : tensor<7x8xf64> -> tensor<3x3xf64>
  return %0 : tensor<3x3xf64>
}

// A strided slice that stops before the end.
// CHECK: PASS f_slice_strided_inner max rel err
func.func @f_slice_strided_inner(%x: tensor<9xf64>) -> tensor<2xf64> {
  %0 = cleave.slice %x start = [2] limit = [8] strides = [4] : tensor<9xf64> -> tensor<2xf64>
  return %0 : tensor<2xf64>
}

// CHECK: PASS f_reverse max rel err
func.func @f_reverse(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.hostile = [-50.0, 50.0]} {
  %e = cleave.unary exp %x : tensor<3x4xf64>
  %0 = cleave.reverse %e dims = [0, 1] : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_concat max rel err
func.func @f_concat(%a: tensor<2x3xf64>, %b: tensor<2x1xf64>, %c: tensor<2x2xf64>) -> tensor<2x6xf64> {
  %0 = cleave.concat %a, %b, %c dim = 1 : (tensor<2x3xf64>, tensor<2x1xf64>, tensor<2x2xf64>) -> tensor<2x6xf64>
  return %0 : tensor<2x6xf64>
}

// The padding value is an argument too.
// CHECK: PASS f_pad max rel err
func.func @f_pad(%x: tensor<2x3xf64>, %v: tensor<f64>) -> tensor<3x5xf64> {
  %0 = cleave.pad %x, %v low = [1, 0] high = [0, 2] mode = constant : (tensor<2x3xf64>, tensor<f64>) -> tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// Rows of a table (repeated indices accumulate).
// CHECK: PASS f_gather max rel err
func.func @f_gather(%t: tensor<5x3xf64>, %i: tensor<2x4xi64>) -> tensor<2x4x3xf64> {
  %0 = cleave.gather %t, %i axis = 0 : (tensor<5x3xf64>, tensor<2x4xi64>) -> tensor<2x4x3xf64>
  return %0 : tensor<2x4x3xf64>
}

// A middle axis.
// CHECK: PASS f_gather_axis1 max rel err
func.func @f_gather_axis1(%t: tensor<2x5x3xf64>, %i: tensor<4xi64>) -> tensor<2x4x3xf64> {
  %0 = cleave.gather %t, %i axis = 1 : (tensor<2x5x3xf64>, tensor<4xi64>) -> tensor<2x4x3xf64>
  return %0 : tensor<2x4x3xf64>
}

// CHECK: PASS f_gather_elements max rel err
func.func @f_gather_elements(%x: tensor<3x5xf64>, %i: tensor<3x4xi64>) -> tensor<3x4xf64> {
  %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<3x5xf64>, tensor<3x4xi64>) -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_scatter_add max rel err
func.func @f_scatter_add(%x: tensor<3x5xf64>, %i: tensor<3x2xi64>, %u: tensor<3x2xf64>) -> tensor<3x5xf64> {
  %0 = cleave.scatter add %x, %i, %u axis = 1 : (tensor<3x5xf64>, tensor<3x2xi64>, tensor<3x2xf64>) -> tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// Distinct indices (a replacing scatter's VJP assumes no duplicates).
// CHECK: PASS f_scatter_none max rel err
func.func @f_scatter_none(%x: tensor<3x5xf64>, %u: tensor<3x2xf64>) -> tensor<3x5xf64> {
  %i = cleave.constant dense<[[0, 2], [4, 1], [3, 0]]> : tensor<3x2xi64>
  %0 = cleave.scatter none %x, %i, %u axis = 1 : (tensor<3x5xf64>, tensor<3x2xi64>, tensor<3x2xf64>) -> tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_top_k max rel err
func.func @f_top_k(%x: tensor<3x6xf64>) -> tensor<3x2xf64> {
  %v, %i = cleave.top_k %x k = 2 dim = 1 largest = true sorted = true : tensor<3x6xf64> -> tensor<3x2xf64>, tensor<3x2xi64>
  return %v : tensor<3x2xf64>
}
