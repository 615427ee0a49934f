// RUN: cleave-opt %s --cleave-cpu-kernel-pipeline | FileCheck %s

// A kernel whose results fold to the same value, and one returning its own
// argument, still write every out-parameter (no crash, no aliasing).
// CHECK-LABEL: llvm.func @same_twice
func.func @same_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %one = cleave.constant dense<1.0> : tensor<4xf32>
  %y = cleave.binary add %x, %x : tensor<4xf32>
  %z = cleave.binary mul %one, %y : tensor<4xf32>
  return %y, %y : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: llvm.func @returns_argument
func.func @returns_argument(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
