// RUN: cleave-opt %s | cleave-opt | FileCheck %s

// Elementwise ops, explicit broadcast and selection round-trip.
// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: cleave.broadcast_in_dim %{{.*}} dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %0 = cleave.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: cleave.binary add
  %1 = cleave.binary add %a, %0 : tensor<4x8xf32>
  // CHECK: cleave.unary exp
  %2 = cleave.unary exp %1 : tensor<4x8xf32>
  // CHECK: cleave.compare lt {{.*}} : tensor<4x8xf32> -> tensor<4x8xi1>
  %c = cleave.compare lt %1, %2 : tensor<4x8xf32> -> tensor<4x8xi1>
  // CHECK: cleave.select
  %3 = cleave.select %c, %1, %2 : tensor<4x8xi1>, tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}
