// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(cleave-elide-expert-sums))' | FileCheck %s

// The expert MLP on one rank of ep=2 (2 of 4 experts, ids already shifted
// to this rank's): the gate/up GEMM's partial sum is read through the
// SwiGLU only by the down GEMM and its weight gradient, with the same
// ids and experts: dropped. The down GEMM's sum reaches other ops: kept.
cleave.mesh @mesh axes = ["ep"] shape = [2]
// CHECK-LABEL: func.func @mlp
// CHECK: %[[H:.*]] = cleave.grouped_matmul %arg0, %arg1, %arg3
// CHECK-NOT: cleave.all_reduce sum %[[H]]
// CHECK: cleave.slice %[[H]]
// CHECK: %[[Y:.*]] = cleave.grouped_matmul
// CHECK: cleave.all_reduce sum %[[Y]] over @mesh ["ep"]
func.func @mlp(%x: tensor<8x4xf32>, %w1: tensor<2x4x16xf32>, %w2: tensor<2x8x4xf32>, %ids: tensor<8xi64>) -> (tensor<8x4xf32>, tensor<2x8x4xf32>) {
  %h = cleave.grouped_matmul %x, %w1, %ids {cleave.experts_over = ["ep"]} : (tensor<8x4xf32>, tensor<2x4x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  %s = cleave.all_reduce sum %h over @mesh ["ep"] : tensor<8x16xf32>
  %gate = cleave.slice %s start = [0, 0] limit = [8, 8] strides = [1, 1] : tensor<8x16xf32> -> tensor<8x8xf32>
  %up = cleave.slice %s start = [0, 8] limit = [8, 16] strides = [1, 1] : tensor<8x16xf32> -> tensor<8x8xf32>
  %g = cleave.unary silu %gate : tensor<8x8xf32>
  %a = cleave.binary mul %g, %up : tensor<8x8xf32>
  %y = cleave.grouped_matmul %a, %w2, %ids {cleave.experts_over = ["ep"]} : (tensor<8x8xf32>, tensor<2x8x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  %dw = cleave.grouped_matmul_weight_grad %a, %y, %ids {cleave.experts_over = ["ep"]} : (tensor<8x8xf32>, tensor<8x4xf32>, tensor<8xi64>) -> tensor<2x8x4xf32>
  %ys = cleave.all_reduce sum %y over @mesh ["ep"] : tensor<8x4xf32>
  return %ys, %dw : tensor<8x4xf32>, tensor<2x8x4xf32>
}

// -----

// Kept: a reduction over the rows mixes other ranks' rows in; another
// routing's GEMM; a GEMM whose experts are not split the sum's way.
cleave.mesh @mesh axes = ["ep", "tp"] shape = [2, 2]
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: cleave.all_reduce sum
func.func @kept(%x: tensor<8x4xf32>, %w1: tensor<2x4x16xf32>, %w2: tensor<2x16x4xf32>, %ids: tensor<8xi64>, %other: tensor<8xi64>) -> (tensor<16xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %h1 = cleave.grouped_matmul %x, %w1, %ids {cleave.experts_over = ["ep"]} : (tensor<8x4xf32>, tensor<2x4x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  %s1 = cleave.all_reduce sum %h1 over @mesh ["ep"] : tensor<8x16xf32>
  %r = cleave.reduce sum %s1 dims = [0] : tensor<8x16xf32> -> tensor<16xf32>
  %h2 = cleave.grouped_matmul %x, %w1, %ids {cleave.experts_over = ["ep"]} : (tensor<8x4xf32>, tensor<2x4x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  %s2 = cleave.all_reduce sum %h2 over @mesh ["ep"] : tensor<8x16xf32>
  %y2 = cleave.grouped_matmul %s2, %w2, %other {cleave.experts_over = ["ep"]} : (tensor<8x16xf32>, tensor<2x16x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  %h3 = cleave.grouped_matmul %x, %w1, %ids {cleave.experts_over = ["ep"]} : (tensor<8x4xf32>, tensor<2x4x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  %s3 = cleave.all_reduce sum %h3 over @mesh ["ep"] : tensor<8x16xf32>
  %y3 = cleave.grouped_matmul %s3, %w2, %ids {cleave.experts_over = ["ep", "tp"]} : (tensor<8x16xf32>, tensor<2x16x4xf32>, tensor<8xi64>) -> tensor<8x4xf32>
  return %r, %y2, %y3 : tensor<16xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}
