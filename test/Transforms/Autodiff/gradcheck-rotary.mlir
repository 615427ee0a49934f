// Checks the rotary embedding's VJP (the rotation by the opposite angle for
// x; the angles' gradients summed over heads and, when the angles are
// shared, over the batch) against finite differences: halves and
// interleaved pairs, a partial rotary dimension, angles per batch.
// RUN: cleave-gradcheck %s | FileCheck %s
// RUN: cleave-gradcheck %s --hostile --rtol 1e-4 | FileCheck %s

// CHECK: PASS f_halves max rel err
func.func @f_halves(%x: tensor<2x3x4x6xf64>, %c: tensor<1x4x2xf64>, %s: tensor<1x4x2xf64>) -> tensor<2x3x4x6xf64>
    attributes {gradcheck.hostile = [-3.0, 3.0]} {
  %0 = cleave.rotary %x, %c, %s : (tensor<2x3x4x6xf64>, tensor<1x4x2xf64>, tensor<1x4x2xf64>) -> tensor<2x3x4x6xf64>
  return %0 : tensor<2x3x4x6xf64>
}

// CHECK: PASS f_interleaved max rel err
func.func @f_interleaved(%x: tensor<2x2x3x4xf64>, %c: tensor<2x3x2xf64>, %s: tensor<2x3x2xf64>) -> tensor<2x2x3x4xf64>
    attributes {gradcheck.hostile = [-3.0, 3.0]} {
  %0 = cleave.rotary %x, %c, %s interleaved : (tensor<2x2x3x4xf64>, tensor<2x3x2xf64>, tensor<2x3x2xf64>) -> tensor<2x2x3x4xf64>
  return %0 : tensor<2x2x3x4xf64>
}
