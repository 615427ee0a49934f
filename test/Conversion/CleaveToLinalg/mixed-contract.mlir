// RUN: cleave-opt --cleave-convert-cleave-to-linalg %s | FileCheck %s

// bf16 operands with an f32 result: products and sums in f32, no rounding of
// the result.
// CHECK-LABEL: func.func @bf16_f32_contract
// CHECK: linalg.fill ins(%{{.*}} : f32)
// CHECK: linalg.generic
// CHECK: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[C:.*]]: f32):
// CHECK-DAG: arith.extf %[[A]] : bf16 to f32
// CHECK-DAG: arith.extf %[[B]] : bf16 to f32
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK-NOT: arith.truncf
// CHECK: return %{{.*}} : tensor<3x7xf32>
func.func @bf16_f32_contract(%m: tensor<3x5xbf16>, %n: tensor<5x7xbf16>) -> tensor<3x7xf32> {
  %0 = cleave.contract %m, %n batch = [] x [] contract = [1] x [0]
      : tensor<3x5xbf16>, tensor<5x7xbf16> -> tensor<3x7xf32>
  return %0 : tensor<3x7xf32>
}

// CHECK-LABEL: func.func @f16_f32_contract
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK-NOT: arith.truncf
func.func @f16_f32_contract(%m: tensor<3x5xf16>, %n: tensor<5x7xf16>) -> tensor<3x7xf32> {
  %0 = cleave.contract %m, %n batch = [] x [] contract = [1] x [0]
      : tensor<3x5xf16>, tensor<5x7xf16> -> tensor<3x7xf32>
  return %0 : tensor<3x7xf32>
}
