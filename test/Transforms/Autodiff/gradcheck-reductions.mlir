// Checks the VJP rules of contractions, reductions and composites against
// finite differences: plain, transposed, batched and multi-dimension
// contractions, every reduce kind over one and several dimensions, every
// cumsum variant, softmax, log_softmax, layer_norm and rms_norm.
// RUN: cleave-gradcheck %s | FileCheck %s
// RUN: cleave-gradcheck %s --hostile --rtol 1e-4 | FileCheck %s

// CHECK: PASS f_matmul max rel err
func.func @f_matmul(%a: tensor<3x4xf64>, %b: tensor<4x5xf64>) -> tensor<3x5xf64> {
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0] : tensor<3x4xf64>, tensor<4x5xf64> -> tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// Both operands transposed (A^T B^T).
// CHECK: PASS f_matmul_transposed max rel err
func.func @f_matmul_transposed(%a: tensor<4x3xf64>, %b: tensor<5x4xf64>) -> tensor<3x5xf64> {
  %0 = cleave.contract %a, %b batch = [] x [] contract = [0] x [1] : tensor<4x3xf64>, tensor<5x4xf64> -> tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_batch_matmul max rel err
func.func @f_batch_matmul(%a: tensor<2x3x4xf64>, %b: tensor<2x4x5xf64>) -> tensor<2x3x5xf64> {
  %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1] : tensor<2x3x4xf64>, tensor<2x4x5xf64> -> tensor<2x3x5xf64>
  return %0 : tensor<2x3x5xf64>
}

// A batch dimension in the middle, two contracting dimensions paired out of
// order.
// CHECK: PASS f_contract_general max rel err
func.func @f_contract_general(%a: tensor<3x2x4x5xf64>, %b: tensor<5x2x6x3xf64>) -> tensor<2x4x6xf64> {
  %0 = cleave.contract %a, %b batch = [1] x [1] contract = [3, 0] x [0, 3] : tensor<3x2x4x5xf64>, tensor<5x2x6x3xf64> -> tensor<2x4x6xf64>
  return %0 : tensor<2x4x6xf64>
}

// CHECK: PASS f_outer_product max rel err
func.func @f_outer_product(%a: tensor<3xf64>, %b: tensor<4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.contract %a, %b batch = [] x [] contract = [] x [] : tensor<3xf64>, tensor<4xf64> -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_dot max rel err
func.func @f_dot(%a: tensor<6xf64>, %b: tensor<6xf64>) -> tensor<f64> {
  %0 = cleave.contract %a, %b batch = [] x [] contract = [0] x [0] : tensor<6xf64>, tensor<6xf64> -> tensor<f64>
  return %0 : tensor<f64>
}

// CHECK: PASS f_reduce_sum max rel err
func.func @f_reduce_sum(%x: tensor<2x3x4xf64>) -> tensor<3xf64> {
  %0 = cleave.reduce sum %x dims = [0, 2] : tensor<2x3x4xf64> -> tensor<3xf64>
  return %0 : tensor<3xf64>
}

// CHECK: PASS f_reduce_sum_all max rel err
func.func @f_reduce_sum_all(%x: tensor<3x4xf64>) -> tensor<f64> {
  %0 = cleave.reduce sum %x dims = [0, 1] : tensor<3x4xf64> -> tensor<f64>
  return %0 : tensor<f64>
}

// CHECK: PASS f_reduce_max max rel err
func.func @f_reduce_max(%x: tensor<3x5xf64>) -> tensor<3xf64> {
  %0 = cleave.reduce max %x dims = [1] : tensor<3x5xf64> -> tensor<3xf64>
  return %0 : tensor<3xf64>
}

// CHECK: PASS f_reduce_max_two_dims max rel err
func.func @f_reduce_max_two_dims(%x: tensor<2x3x4xf64>) -> tensor<3xf64> {
  %0 = cleave.reduce max %x dims = [0, 2] : tensor<2x3x4xf64> -> tensor<3xf64>
  return %0 : tensor<3xf64>
}

// CHECK: PASS f_reduce_min max rel err
func.func @f_reduce_min(%x: tensor<2x3x4xf64>) -> tensor<2xf64> {
  %0 = cleave.reduce min %x dims = [1, 2] : tensor<2x3x4xf64> -> tensor<2xf64>
  return %0 : tensor<2xf64>
}

// CHECK: PASS f_reduce_prod max rel err
func.func @f_reduce_prod(%x: tensor<3x4xf64>) -> tensor<3xf64> attributes {gradcheck.range = [0.5, 1.5]} {
  %0 = cleave.reduce prod %x dims = [1] : tensor<3x4xf64> -> tensor<3xf64>
  return %0 : tensor<3xf64>
}

// CHECK: PASS f_cumsum max rel err
func.func @f_cumsum(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
  %0 = cleave.cumsum %x dim = 1 : tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_cumsum_exclusive max rel err
func.func @f_cumsum_exclusive(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
  %0 = cleave.cumsum %x dim = 1 exclusive : tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_cumsum_reverse max rel err
func.func @f_cumsum_reverse(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
  %0 = cleave.cumsum %x dim = 0 reverse : tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_cumsum_exclusive_reverse max rel err
func.func @f_cumsum_exclusive_reverse(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
  %0 = cleave.cumsum %x dim = 1 exclusive reverse : tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_softmax max rel err
func.func @f_softmax(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
  %0 = cleave.softmax %x dim = 1 : tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_softmax_dim0 max rel err
func.func @f_softmax_dim0(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
  %0 = cleave.softmax %x dim = 0 : tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_log_softmax max rel err
func.func @f_log_softmax(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
  %0 = cleave.log_softmax %x dim = 1 : tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_layer_norm max rel err
func.func @f_layer_norm(%x: tensor<4x6xf64>, %g: tensor<6xf64>, %b: tensor<6xf64>) -> tensor<4x6xf64> {
  %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05 : (tensor<4x6xf64>, tensor<6xf64>, tensor<6xf64>) -> tensor<4x6xf64>
  return %0 : tensor<4x6xf64>
}

// Normalized over two dimensions.
// CHECK: PASS f_layer_norm_two_dims max rel err
func.func @f_layer_norm_two_dims(%x: tensor<2x3x4xf64>, %g: tensor<3x4xf64>, %b: tensor<3x4xf64>) -> tensor<2x3x4xf64> {
  %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05 : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
  return %0 : tensor<2x3x4xf64>
}

// CHECK: PASS f_rms_norm max rel err
func.func @f_rms_norm(%x: tensor<4x6xf64>, %g: tensor<6xf64>) -> tensor<4x6xf64> {
  %0 = cleave.rms_norm %x, %g axis = 1 epsilon = 1.0e-05 : (tensor<4x6xf64>, tensor<6xf64>) -> tensor<4x6xf64>
  return %0 : tensor<4x6xf64>
}

// Normalized over two dimensions.
// CHECK: PASS f_rms_norm_two_dims max rel err
func.func @f_rms_norm_two_dims(%x: tensor<2x3x4xf64>, %g: tensor<3x4xf64>) -> tensor<2x3x4xf64> {
  %0 = cleave.rms_norm %x, %g axis = 1 epsilon = 1.0e-05 : (tensor<2x3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
  return %0 : tensor<2x3x4xf64>
}
