// RUN: cleave-opt %s --cleave-decompose-rotary | FileCheck %s

// Halves: x1 = x[..., :2], x2 = x[..., 2:4], the angles broadcast over
// heads, (cos x1 - sin x2, sin x1 + cos x2) concatenated with x[..., 4:].
// CHECK-LABEL: func.func @halves
func.func @halves(%x: tensor<2x3x4x6xf32>, %c: tensor<1x4x2xf32>, %s: tensor<1x4x2xf32>) -> tensor<2x3x4x6xf32> {
  // CHECK-DAG: %[[X1:.*]] = cleave.slice %{{.*}} start = [0, 0, 0, 0] limit = [2, 3, 4, 2] strides = [1, 1, 1, 1]
  // CHECK-DAG: %[[X2:.*]] = cleave.slice %{{.*}} start = [0, 0, 0, 2] limit = [2, 3, 4, 4] strides = [1, 1, 1, 1]
  // CHECK-DAG: %[[REST:.*]] = cleave.slice %{{.*}} start = [0, 0, 0, 4] limit = [2, 3, 4, 6] strides = [1, 1, 1, 1]
  // CHECK-DAG: cleave.broadcast_in_dim %{{.*}} dims = [0, 2, 3] : tensor<1x4x2xf32> -> tensor<2x3x4x2xf32>
  // CHECK: %[[Y:.*]] = cleave.concat %{{.*}}, %{{.*}} dim = 3 : (tensor<2x3x4x2xf32>, tensor<2x3x4x2xf32>) -> tensor<2x3x4x4xf32>
  // CHECK: cleave.concat %[[Y]], %[[REST]] dim = 3 : (tensor<2x3x4x4xf32>, tensor<2x3x4x2xf32>) -> tensor<2x3x4x6xf32>
  // CHECK-NOT: cleave.rotary
  %0 = cleave.rotary %x, %c, %s : (tensor<2x3x4x6xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<2x3x4x6xf32>
  return %0 : tensor<2x3x4x6xf32>
}

// Interleaved pairs: x viewed as (..., 2, 2) pairs, the rotated halves
// stacked back into pairs.
// CHECK-LABEL: func.func @interleaved
func.func @interleaved(%x: tensor<1x1x3x4xf32>, %c: tensor<1x3x2xf32>) -> tensor<1x1x3x4xf32> {
  // CHECK: cleave.reshape %{{.*}} : tensor<1x1x3x4xf32> -> tensor<1x1x3x2x2xf32>
  // CHECK: cleave.concat %{{.*}}, %{{.*}} dim = 4 : (tensor<1x1x3x2x1xf32>, tensor<1x1x3x2x1xf32>) -> tensor<1x1x3x2x2xf32>
  // CHECK: cleave.reshape %{{.*}} : tensor<1x1x3x2x2xf32> -> tensor<1x1x3x4xf32>
  %0 = cleave.rotary %x, %c, %c interleaved : (tensor<1x1x3x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<1x1x3x4xf32>
  return %0 : tensor<1x1x3x4xf32>
}
