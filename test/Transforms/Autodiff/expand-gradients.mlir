// RUN: cleave-opt %s --cleave-expand-gradients | FileCheck %s

// The marker becomes the ops of the VJP rules, built right before it, and
// its uses read the gradient: d sum(x * x) / dx = 1 * x + x * 1.
// CHECK-LABEL: func.func @square
// CHECK: %[[SQ:.*]] = cleave.binary mul %[[X:.*]], %[[X]]
// CHECK: %[[LOSS:.*]] = cleave.reduce sum %[[SQ]]
// CHECK: %[[SEED:.*]] = cleave.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[ONE:.*]] = cleave.broadcast_in_dim %[[SEED]] dims = [] : tensor<f32> -> tensor<3xf32>
// CHECK: %[[G1:.*]] = cleave.binary mul %[[ONE]], %[[X]]
// CHECK: %[[G2:.*]] = cleave.binary mul %[[ONE]], %[[X]]
// CHECK: %[[G:.*]] = cleave.binary add %[[G1]], %[[G2]] : tensor<3xf32>
// CHECK-NOT: cleave.gradient
// CHECK: return %[[LOSS]], %[[G]]
func.func @square(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
  %0 = cleave.binary mul %x, %x : tensor<3xf32>
  %1 = cleave.reduce sum %0 dims = [0] : tensor<3xf32> -> tensor<f32>
  %g = cleave.gradient %1 wrt(%x) : (tensor<f32>, tensor<3xf32>) -> tensor<3xf32>
  return %1, %g : tensor<f32>, tensor<3xf32>
}

// A wrt value the loss does not depend on gets zeros.
// CHECK-LABEL: func.func @independent
// CHECK: %[[ZERO:.*]] = cleave.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK-NOT: cleave.gradient
// CHECK: return %{{.*}}, %[[ZERO]]
func.func @independent(%x: tensor<f32>, %y: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>) {
  %0 = cleave.unary exp %x : tensor<f32>
  %g:2 = cleave.gradient %0 wrt(%x, %y) : (tensor<f32>, tensor<f32>, tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>)
  return %g#0, %g#1 : tensor<f32>, tensor<2xf32>
}

// Markers are expanded in program order, so a later one differentiates
// through an earlier one's expansion: d/dx (d exp(x) / dx) = exp(x) again.
// CHECK-LABEL: func.func @second_derivative
// CHECK: %[[E:.*]] = cleave.unary exp
// CHECK: %[[ONE:.*]] = cleave.constant dense<1.000000e+00>
// CHECK: cleave.binary mul %[[ONE]], %[[E]]
// CHECK: %[[SEED:.*]] = cleave.constant dense<1.000000e+00>
// CHECK: %[[D:.*]] = cleave.binary mul %[[SEED]], %[[ONE]]
// CHECK: %[[DD:.*]] = cleave.binary mul %[[D]], %[[E]]
// CHECK-NOT: cleave.gradient
// CHECK: return %[[DD]]
func.func @second_derivative(%x: tensor<f32>) -> tensor<f32> {
  %0 = cleave.unary exp %x : tensor<f32>
  %g = cleave.gradient %0 wrt(%x) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %h = cleave.gradient %g wrt(%x) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %h : tensor<f32>
}

// Functions without markers are left alone.
// CHECK-LABEL: func.func @no_marker
// CHECK-NEXT: cleave.unary exp
// CHECK-NEXT: return
func.func @no_marker(%x: tensor<f32>) -> tensor<f32> {
  %0 = cleave.unary exp %x : tensor<f32>
  return %0 : tensor<f32>
}
