// RUN: cleave-opt %s --cleave-apply-mixed-precision=precision=bf16 | FileCheck %s

// A forward block: layer_norm and reductions stay f32, the MLP's contraction
// takes bf16 operands and accumulates in f32, GELU-like elementwise ops on
// its result are bf16, and the function result keeps its f32 type.
// CHECK-LABEL: func.func @block
func.func @block(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>,
                 %w: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>) {
  // CHECK: %[[WL:.*]] = cleave.convert %{{.*}} : tensor<8x16xf32> -> tensor<8x16xbf16>
  // CHECK: %[[N:.*]] = cleave.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis = 1 {{.*}} -> tensor<4x8xf32>
  %n = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[NL:.*]] = cleave.convert %[[N]] : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK: %[[H:.*]] = cleave.contract %[[NL]], %[[WL]] {{.*}} -> tensor<4x16xf32>
  %h = cleave.contract %n, %w batch = [] x [] contract = [1] x [0]
      : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  // CHECK: cleave.unary tanh %{{.*}} : tensor<4x16xbf16>
  %t = cleave.unary tanh %h : tensor<4x16xf32>
  // CHECK: %[[M:.*]] = cleave.binary mul %{{.*}}, %{{.*}} : tensor<4x16xbf16>
  %m = cleave.binary mul %t, %h : tensor<4x16xf32>
  // CHECK: %[[MF:.*]] = cleave.convert %[[M]] : tensor<4x16xbf16> -> tensor<4x16xf32>
  // CHECK: cleave.reduce sum %[[MF]] dims = [1] : tensor<4x16xf32> -> tensor<4xf32>
  %r = cleave.reduce sum %m dims = [1] : tensor<4x16xf32> -> tensor<4xf32>
  // CHECK: return %[[MF]], %{{.*}} : tensor<4x16xf32>, tensor<4xf32>
  return %m, %r : tensor<4x16xf32>, tensor<4xf32>
}
