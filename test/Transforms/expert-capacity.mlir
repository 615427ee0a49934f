// RUN: cleave-opt %s --cleave-expert-capacity=factor=1.0 | FileCheck %s
// RUN: cleave-opt %s --cleave-expert-capacity=factor=0.25 | FileCheck %s --check-prefix=SMALL

// --cleave-expert-capacity: a grouped matmul of 2 batch rows (the first
// input's dimension 0) of 8 routed rows each over 4 experts becomes the
// capacity form: ceil(1.0 * 8 / 4) = 2 slots per expert and batch row
// (factor 0.25: 1). Each row's place among its group's rows routed to the
// same expert is an inclusive cumsum of the experts' one-hot; the kept
// rows are scattered into 2 x (4 experts x 2 slots) x K, contracted with
// the weights batched over the experts, and gathered back, zero where
// dropped.

// CHECK-LABEL: func.func @main
// CHECK-NOT: cleave.grouped_matmul
// CHECK: cleave.reshape %arg3 : tensor<16xi64> -> tensor<2x8xi64>
// CHECK: cleave.iota dim = 2 : tensor<2x8x4xi64>
// CHECK: cleave.cumsum %{{.*}} dim = 1 : tensor<2x8x4xi64>
// CHECK: %[[BUF:.*]] = cleave.scatter add %{{.*}}, %{{.*}}, %{{.*}} axis = 1 : (tensor<2x8x32xf32>, tensor<2x8x32xi64>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
// CHECK: %[[SLOTS:.*]] = cleave.reshape %[[BUF]] : tensor<2x8x32xf32> -> tensor<2x4x2x32xf32>
// CHECK: %[[OUT:.*]] = cleave.contract %[[SLOTS]], %arg2 batch = [1] x [0] contract = [3] x [2] : tensor<2x4x2x32xf32>, tensor<4x64x32xf32> -> tensor<4x2x2x64xf32>
// CHECK: cleave.transpose %[[OUT]] perm = [1, 0, 2, 3] : tensor<4x2x2x64xf32> -> tensor<2x4x2x64xf32>
// CHECK: cleave.gather_elements %{{.*}}, %{{.*}} axis = 1 : (tensor<2x8x64xf32>, tensor<2x8x64xi64>) -> tensor<2x8x64xf32>
// CHECK: %[[Y:.*]] = cleave.reshape %{{.*}} : tensor<2x8x64xf32> -> tensor<16x64xf32>
// CHECK: return %[[Y]]
// SMALL: cleave.contract {{.*}} -> tensor<4x2x1x64xf32>
func.func @main(%tokens: tensor<2x8xi64>, %x: tensor<16x32xf32>, %w: tensor<4x64x32xf32>, %ids: tensor<16xi64>) -> tensor<16x64xf32> {
  %y = cleave.grouped_matmul %x, %w, %ids transpose_w : (tensor<16x32xf32>, tensor<4x64x32xf32>, tensor<16xi64>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
