// RUN: cleave-opt %s --cleave-mark-index-ranges | FileCheck %s

// Token ids index two tables: the range is the smaller one's rows. The
// positions index one table; the float input and an integer input no gather
// reads as indices stay unmarked.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg0: tensor<8xi64> {cleave.name = "ids", cleave.valid_range = array<i64: -12, 12>}
// CHECK-SAME: %arg1: tensor<8xi64> {cleave.name = "pos", cleave.valid_range = array<i64: -8, 8>}
// CHECK-SAME: %arg2: tensor<8x4xf32> {cleave.name = "x"}
// CHECK-SAME: %arg3: tensor<8xi64> {cleave.name = "other"}
func.func @main(%ids: tensor<8xi64> {cleave.name = "ids"},
                %pos: tensor<8xi64> {cleave.name = "pos"},
                %x: tensor<8x4xf32> {cleave.name = "x"},
                %other: tensor<8xi64> {cleave.name = "other"})
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xi64>) {
  %wte = cleave.constant dense<1.0> : tensor<16x4xf32>
  %small = cleave.constant dense<1.0> : tensor<12x4xf32>
  %wpe = cleave.constant dense<1.0> : tensor<8x4xf32>
  %a = cleave.gather %wte, %ids axis = 0 : (tensor<16x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  %b = cleave.gather %small, %ids axis = 0 : (tensor<12x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  %c = cleave.gather %wpe, %pos axis = 0 : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  return %a, %b, %c, %other : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xi64>
}
