// RUN: cleave-opt %s --cleave-expert-capacity=factor=1.0 | FileCheck %s

// An expert MLP: a gate/up grouped matmul, SwiGLU row by row, and a down
// grouped matmul of the same routing (ids computed twice, as exports
// compute them for each gathered weight: the pass sees they compute the
// same). It stays in the slots between its GEMMs: one dispatch (scatter)
// of the rows, the
// SwiGLU on the slots (experts x batch rows x slots, 4 x 2 x 2), and one
// combine (gather_elements) of the results.

// CHECK-LABEL: func.func @main
// CHECK-NOT: cleave.grouped_matmul
// CHECK: cleave.scatter add
// CHECK-NOT: cleave.scatter
// CHECK: cleave.contract %{{.*}}, %arg2 batch = [1] x [0] contract = [3] x [2] : tensor<2x4x2x32xf32>, tensor<4x16x32xf32> -> tensor<4x2x2x16xf32>
// CHECK: cleave.slice %{{.*}} start = [0, 0, 0, 0] limit = [4, 2, 2, 8] strides = [1, 1, 1, 1] : tensor<4x2x2x16xf32> -> tensor<4x2x2x8xf32>
// CHECK: cleave.slice %{{.*}} start = [0, 0, 0, 8] limit = [4, 2, 2, 16] strides = [1, 1, 1, 1] : tensor<4x2x2x16xf32> -> tensor<4x2x2x8xf32>
// CHECK: cleave.unary silu %{{.*}} : tensor<4x2x2x8xf32>
// CHECK: cleave.binary mul %{{.*}} : tensor<4x2x2x8xf32>
// CHECK: cleave.contract %{{.*}}, %arg3 batch = [0] x [0] contract = [3] x [2] : tensor<4x2x2x8xf32>, tensor<4x32x8xf32> -> tensor<4x2x2x32xf32>
// CHECK: cleave.gather_elements
// CHECK-NOT: cleave.gather_elements
// CHECK: return
func.func @main(%tokens: tensor<2x8xi64>, %x: tensor<16x32xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x8xf32>, %ids: tensor<16xi64>) -> tensor<16x32xf32> {
  %ids1 = cleave.reshape %ids : tensor<16xi64> -> tensor<16xi64>
  %ids2 = cleave.reshape %ids : tensor<16xi64> -> tensor<16xi64>
  %h = cleave.grouped_matmul %x, %w1, %ids1 transpose_w : (tensor<16x32xf32>, tensor<4x16x32xf32>, tensor<16xi64>) -> tensor<16x16xf32>
  %gate = cleave.slice %h start = [0, 0] limit = [16, 8] strides = [1, 1] : tensor<16x16xf32> -> tensor<16x8xf32>
  %up = cleave.slice %h start = [0, 8] limit = [16, 16] strides = [1, 1] : tensor<16x16xf32> -> tensor<16x8xf32>
  %g = cleave.unary silu %gate : tensor<16x8xf32>
  %a = cleave.binary mul %g, %up : tensor<16x8xf32>
  %y = cleave.grouped_matmul %a, %w2, %ids2 transpose_w : (tensor<16x8xf32>, tensor<4x32x8xf32>, tensor<16xi64>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}
