// RUN: cleave-opt %s --split-input-file --cleave-recognize-composites | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-recognize-composites=experts=false | FileCheck %s --check-prefix=OFF

// A mixture of experts' GEMMs as exporters write them (HF "batched_mm"
// experts): each row's expert weights gathered, then a batched
// matrix-vector product. --cleave-recognize-composites makes them one
// cleave.grouped_matmul that reads the weights in place; the gather's
// indices are the op's ids as they are.

// -----

// PyTorch's Linear layout (E x N x K), the rows as K x 1 columns: the
// product contracts the gathered matrices' last dimension (transpose_w).
// CHECK-LABEL: func.func @linear_layout
// CHECK-NOT: cleave.gather
// CHECK: %[[X:.*]] = cleave.reshape %arg0 : tensor<6x8x1xf32> -> tensor<6x8xf32>
// CHECK: %[[Y:.*]] = cleave.grouped_matmul %[[X]], %arg1, %arg2 transpose_w : (tensor<6x8xf32>, tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16xf32>
// CHECK: cleave.reshape %[[Y]] : tensor<6x16xf32> -> tensor<6x16x1xf32>
// OFF-LABEL: func.func @linear_layout
// OFF: cleave.gather
// OFF-NOT: cleave.grouped_matmul
func.func @linear_layout(%x: tensor<6x8x1xf32>, %w: tensor<4x16x8xf32>, %ids: tensor<6xi64>) -> tensor<6x16x1xf32> {
  %g = cleave.gather %w, %ids axis = 0 : (tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16x8xf32>
  %y = cleave.contract %g, %x batch = [0] x [0] contract = [2] x [1] : tensor<6x16x8xf32>, tensor<6x8x1xf32> -> tensor<6x16x1xf32>
  return %y : tensor<6x16x1xf32>
}

// -----

// Weights E x K x N, the rows first as 1 x K rows, ids of two dimensions
// (tokens x top-k): the rows and ids are flattened.
// CHECK-LABEL: func.func @rows_first
// CHECK: %[[X:.*]] = cleave.reshape %arg0 : tensor<3x2x1x8xf32> -> tensor<6x8xf32>
// CHECK: %[[I:.*]] = cleave.reshape %arg2 : tensor<3x2xi64> -> tensor<6xi64>
// CHECK: %[[Y:.*]] = cleave.grouped_matmul %[[X]], %arg1, %[[I]] : (tensor<6x8xf32>, tensor<4x8x16xf32>, tensor<6xi64>) -> tensor<6x16xf32>
// CHECK: cleave.reshape %[[Y]] : tensor<6x16xf32> -> tensor<3x2x1x16xf32>
func.func @rows_first(%x: tensor<3x2x1x8xf32>, %w: tensor<4x8x16xf32>, %ids: tensor<3x2xi64>) -> tensor<3x2x1x16xf32> {
  %g = cleave.gather %w, %ids axis = 0 : (tensor<4x8x16xf32>, tensor<3x2xi64>) -> tensor<3x2x8x16xf32>
  %y = cleave.contract %x, %g batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<3x2x1x8xf32>, tensor<3x2x8x16xf32> -> tensor<3x2x1x16xf32>
  return %y : tensor<3x2x1x16xf32>
}

// -----

// A transpose of the weights' last two dimensions is the other layout.
// CHECK-LABEL: func.func @transposed_weights
// CHECK: cleave.grouped_matmul %{{.*}}, %arg1, %arg2 : (tensor<6x8xf32>, tensor<4x8x16xf32>, tensor<6xi64>) -> tensor<6x16xf32>
func.func @transposed_weights(%x: tensor<6x8x1xf32>, %w: tensor<4x8x16xf32>, %ids: tensor<6xi64>) -> tensor<6x16x1xf32> {
  %t = cleave.transpose %w perm = [0, 2, 1] : tensor<4x8x16xf32> -> tensor<4x16x8xf32>
  %g = cleave.gather %t, %ids axis = 0 : (tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16x8xf32>
  %y = cleave.contract %g, %x batch = [0] x [0] contract = [2] x [1] : tensor<6x16x8xf32>, tensor<6x8x1xf32> -> tensor<6x16x1xf32>
  return %y : tensor<6x16x1xf32>
}

// -----

// Not expert GEMMs: the rows are matrices (two columns each), and a
// product not batched over the ids' dimension.
// CHECK-LABEL: func.func @not_rows
// CHECK-NOT: cleave.grouped_matmul
// CHECK: cleave.contract
// CHECK: cleave.contract
func.func @not_rows(%x: tensor<6x8x2xf32>, %w: tensor<4x16x8xf32>, %ids: tensor<6xi64>, %v: tensor<8x6xf32>) -> (tensor<6x16x2xf32>, tensor<16x8x8xf32>) {
  %g = cleave.gather %w, %ids axis = 0 : (tensor<4x16x8xf32>, tensor<6xi64>) -> tensor<6x16x8xf32>
  %y = cleave.contract %g, %x batch = [0] x [0] contract = [2] x [1] : tensor<6x16x8xf32>, tensor<6x8x2xf32> -> tensor<6x16x2xf32>
  %z = cleave.contract %g, %v batch = [] x [] contract = [0] x [1] : tensor<6x16x8xf32>, tensor<8x6xf32> -> tensor<16x8x8xf32>
  return %y, %z : tensor<6x16x2xf32>, tensor<16x8x8xf32>
}

// -----

// float64, which the grouped GEMM command does not take, stays gathered.
// CHECK-LABEL: func.func @double
// CHECK-NOT: cleave.grouped_matmul
// CHECK: cleave.gather
func.func @double(%x: tensor<6x8x1xf64>, %w: tensor<4x16x8xf64>, %ids: tensor<6xi64>) -> tensor<6x16x1xf64> {
  %g = cleave.gather %w, %ids axis = 0 : (tensor<4x16x8xf64>, tensor<6xi64>) -> tensor<6x16x8xf64>
  %y = cleave.contract %g, %x batch = [0] x [0] contract = [2] x [1] : tensor<6x16x8xf64>, tensor<6x8x1xf64> -> tensor<6x16x1xf64>
  return %y : tensor<6x16x1xf64>
}
