// RUN: cleave-opt --cleave-copy-aliased-results %s | FileCheck %s

// The same value returned twice: the second result is a copy.
// CHECK-LABEL: func.func @same_twice(
// CHECK: %[[Y:.*]] = arith.addf
// CHECK: %[[COPY:.*]] = bufferization.alloc_tensor() copy(%[[Y]]) : tensor<4xf32>
// CHECK: return %[[Y]], %[[COPY]] : tensor<4xf32>, tensor<4xf32>
func.func @same_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y, %y : tensor<4xf32>, tensor<4xf32>
}

// A returned argument is copied, each time it is returned.
// CHECK-LABEL: func.func @returns_argument(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32>
// CHECK: %[[C0:.*]] = bufferization.alloc_tensor() copy(%[[X]]) : tensor<4xf32>
// CHECK: %[[C1:.*]] = bufferization.alloc_tensor() copy(%[[X]]) : tensor<4xf32>
// CHECK: return %[[C0]], %[[C1]]
func.func @returns_argument(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}

// Distinct computed results and non-tensor results stay as they are.
// CHECK-LABEL: func.func @distinct(
// CHECK-NOT: bufferization.alloc_tensor
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>, f32
func.func @distinct(%x: tensor<4xf32>, %s: f32) -> (tensor<4xf32>, tensor<4xf32>, f32) {
  %y = arith.addf %x, %x : tensor<4xf32>
  %z = arith.mulf %x, %x : tensor<4xf32>
  return %y, %z, %s : tensor<4xf32>, tensor<4xf32>, f32
}
