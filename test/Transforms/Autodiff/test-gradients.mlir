// RUN: cleave-opt %s --cleave-test-gradients | FileCheck %s

// Fan-out: the cotangents of %x's two uses are summed.
// CHECK-LABEL: func.func @exp_times_x
// CHECK-SAME: -> (tensor<f64>, tensor<3xf64>)
// CHECK: %[[E:.*]] = cleave.unary exp %[[X:.*]] : tensor<3xf64>
// CHECK: %[[ONE:.*]] = cleave.broadcast_in_dim %{{.*}} dims = [] : tensor<f64> -> tensor<3xf64>
// CHECK-DAG: %[[GE:.*]] = cleave.binary mul %[[ONE]], %[[X]]
// CHECK-DAG: %[[GX1:.*]] = cleave.binary mul %[[ONE]], %[[E]]
// CHECK: %[[GX2:.*]] = cleave.binary mul %[[GE]], %[[E]]
// CHECK: %[[SUM:.*]] = cleave.binary add %[[GX1]], %[[GX2]]
// CHECK: return %{{.*}}, %[[SUM]]
func.func @exp_times_x(%x: tensor<3xf64>) -> tensor<f64> {
  %0 = cleave.unary exp %x : tensor<3xf64>
  %1 = cleave.binary mul %0, %x : tensor<3xf64>
  %2 = cleave.reduce sum %1 dims = [0] : tensor<3xf64> -> tensor<f64>
  return %2 : tensor<f64>
}

// Functions whose result is not a 0-d float tensor are left alone.
// CHECK-LABEL: func.func @not_scalar
// CHECK-SAME: -> tensor<3xf64>
func.func @not_scalar(%x: tensor<3xf64>) -> tensor<3xf64> {
  return %x : tensor<3xf64>
}

// A broadcast bias gets the sum over the broadcast dimension; reduce max
// splits the cotangent among the elements equal to the maximum.
// CHECK-LABEL: func.func @bias_max
// CHECK-SAME: -> (tensor<f64>, tensor<2x3xf64>, tensor<3xf64>)
// CHECK: %[[MASK:.*]] = cleave.compare eq
// CHECK: %[[M:.*]] = cleave.convert %[[MASK]] : tensor<2x3xi1> -> tensor<2x3xf64>
// CHECK: %[[COUNT:.*]] = cleave.reduce sum %[[M]] dims = [0, 1]
// CHECK: cleave.binary div %{{.*}}, %[[COUNT]] : tensor<f64>
// CHECK: %[[GX:.*]] = cleave.binary mul %[[M]], %{{.*}} : tensor<2x3xf64>
// CHECK: %[[GB:.*]] = cleave.reduce sum %[[GX]] dims = [0] : tensor<2x3xf64> -> tensor<3xf64>
// CHECK: return %{{.*}}, %[[GX]], %[[GB]]
func.func @bias_max(%x: tensor<2x3xf64>, %b: tensor<3xf64>) -> tensor<f64> {
  %0 = cleave.broadcast_in_dim %b dims = [1] : tensor<3xf64> -> tensor<2x3xf64>
  %1 = cleave.binary add %x, %0 : tensor<2x3xf64>
  %2 = cleave.reduce max %1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %2 : tensor<f64>
}

// A contraction's operands get contractions of the cotangent with the other
// operand, transposed back into their layout.
// CHECK-LABEL: func.func @matmul_lhs_transposed
// CHECK: %[[G:.*]] = cleave.broadcast_in_dim %{{.*}} dims = [] : tensor<f64> -> tensor<3x5xf64>
// CHECK: %[[GA:.*]] = cleave.contract %[[G]], %[[B:.*]] batch = [] x [] contract = [1] x [1] : tensor<3x5xf64>, tensor<4x5xf64> -> tensor<3x4xf64>
// CHECK: %[[GAT:.*]] = cleave.transpose %[[GA]] perm = [1, 0] : tensor<3x4xf64> -> tensor<4x3xf64>
// CHECK: %[[GB:.*]] = cleave.contract %[[G]], %[[A:.*]] batch = [] x [] contract = [0] x [1] : tensor<3x5xf64>, tensor<4x3xf64> -> tensor<5x4xf64>
// CHECK: %[[GBT:.*]] = cleave.transpose %[[GB]] perm = [1, 0] : tensor<5x4xf64> -> tensor<4x5xf64>
// CHECK: return %{{.*}}, %[[GAT]], %[[GBT]]
func.func @matmul_lhs_transposed(%a: tensor<4x3xf64>, %b: tensor<4x5xf64>) -> tensor<f64> {
  %0 = cleave.contract %a, %b batch = [] x [] contract = [0] x [0] : tensor<4x3xf64>, tensor<4x5xf64> -> tensor<3x5xf64>
  %1 = cleave.reduce sum %0 dims = [0, 1] : tensor<3x5xf64> -> tensor<f64>
  return %1 : tensor<f64>
}

// A strided slice interleaves zeros (concat + reshape), trims and pads.
// CHECK-LABEL: func.func @strided_slice
// CHECK: %[[Z:.*]] = cleave.constant dense<0.000000e+00> : tensor<3x1xf64>
// CHECK: %[[R:.*]] = cleave.reshape %{{.*}} : tensor<3xf64> -> tensor<3x1xf64>
// CHECK: %[[C:.*]] = cleave.concat %[[R]], %[[Z]] dim = 1
// CHECK: %[[F:.*]] = cleave.reshape %[[C]] : tensor<3x2xf64> -> tensor<6xf64>
// CHECK: %[[T:.*]] = cleave.slice %[[F]] start = [0] limit = [5] strides = [1]
// CHECK: %[[P:.*]] = cleave.pad %[[T]], %{{.*}} low = [1] high = [1] mode = constant
// CHECK: return %{{.*}}, %[[P]]
func.func @strided_slice(%x: tensor<7xf64>) -> tensor<f64> {
  %0 = cleave.slice %x start = [1] limit = [7] strides = [2] : tensor<7xf64> -> tensor<3xf64>
  %1 = cleave.reduce sum %0 dims = [0] : tensor<3xf64> -> tensor<f64>
  return %1 : tensor<f64>
}

// A gather's table gets a scatter-add into zeros; the indices get nothing.
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: -> (tensor<f64>, tensor<5x3xf64>)
// CHECK: %[[I:.*]] = cleave.broadcast_in_dim %{{.*}} dims = [1] : tensor<2xi64> -> tensor<1x2x3xi64>
// CHECK: %[[Z:.*]] = cleave.constant dense<0.000000e+00> : tensor<1x5x3xf64>
// CHECK: %[[S:.*]] = cleave.scatter add %[[Z]], %[[I]], %{{.*}} axis = 1
// CHECK: %[[G:.*]] = cleave.reshape %[[S]] : tensor<1x5x3xf64> -> tensor<5x3xf64>
// CHECK: return %{{.*}}, %[[G]]
func.func @embedding(%t: tensor<5x3xf64>, %i: tensor<2xi64>) -> tensor<f64> {
  %0 = cleave.gather %t, %i axis = 0 : (tensor<5x3xf64>, tensor<2xi64>) -> tensor<2x3xf64>
  %1 = cleave.reduce sum %0 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %1 : tensor<f64>
}
