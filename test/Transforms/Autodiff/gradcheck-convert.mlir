// Checks the VJP of convert through f32, with a larger step and tolerance
// for f32 rounding.
// RUN: cleave-gradcheck %s --step 1e-3 --rtol 1e-3 | FileCheck %s
// RUN: cleave-gradcheck %s --hostile --step 1e-3 --rtol 1e-3 | FileCheck %s

// CHECK: PASS f_convert max rel err
func.func @f_convert(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.hostile = [-10.0, 10.0]} {
  %0 = cleave.convert %x : tensor<3x4xf64> -> tensor<3x4xf32>
  %1 = cleave.binary mul %0, %0 : tensor<3x4xf32>
  %2 = cleave.convert %1 : tensor<3x4xf32> -> tensor<3x4xf64>
  return %2 : tensor<3x4xf64>
}
