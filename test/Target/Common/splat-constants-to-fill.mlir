// RUN: cleave-opt --cleave-splat-constants-to-fill %s | FileCheck %s

// A splat tensor constant becomes a fill of an empty tensor with its scalar.
// CHECK-LABEL: func.func @splat(
// CHECK-DAG: %[[CST:.*]] = arith.constant 1.500000e+00 : f32
// CHECK-DAG: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK: %[[F:.*]] = linalg.fill ins(%[[CST]] : f32) outs(%[[E]] : tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: return %[[F]]
// CHECK-NOT: dense<
func.func @splat() -> tensor<4x8xf32> {
  %c = arith.constant dense<1.5> : tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// Integer splats too.
// CHECK-LABEL: func.func @splat_int(
// CHECK-DAG: %[[CST:.*]] = arith.constant 7 : i32
// CHECK-DAG: %[[E:.*]] = tensor.empty() : tensor<16xi32>
// CHECK: linalg.fill ins(%[[CST]] : i32) outs(%[[E]] : tensor<16xi32>)
func.func @splat_int() -> tensor<16xi32> {
  %c = arith.constant dense<7> : tensor<16xi32>
  return %c : tensor<16xi32>
}

// One-element tensors, scalars and constants that are not splats stay.
// CHECK-LABEL: func.func @kept(
// CHECK-DAG: arith.constant dense<2.000000e+00> : tensor<1xf32>
// CHECK-DAG: arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-DAG: arith.constant 3.000000e+00 : f32
// CHECK-NOT: linalg.fill
func.func @kept() -> (tensor<1xf32>, tensor<2xf32>, f32) {
  %a = arith.constant dense<2.0> : tensor<1xf32>
  %b = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %c = arith.constant 3.0 : f32
  return %a, %b, %c : tensor<1xf32>, tensor<2xf32>, f32
}
