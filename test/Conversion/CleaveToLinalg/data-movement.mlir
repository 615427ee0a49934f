// RUN: cleave-opt --cleave-convert-cleave-to-linalg %s | FileCheck %s

// CHECK-DAG: #[[BCAST:.*]] = affine_map<(d0, d1) -> (0, d1)>
// CHECK-DAG: #[[TRANS:.*]] = affine_map<(d0, d1, d2) -> (d1, d2, d0)>

// A size-1 operand dimension broadcasts through a constant-0 map.
// CHECK-LABEL: func.func @broadcast
// CHECK: linalg.generic {indexing_maps = [#[[BCAST]],
func.func @broadcast(%x: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %0 = cleave.broadcast_in_dim %x dims = [0, 1] : tensor<1x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Transpose: result[i] = operand[perm[i]].
// CHECK-LABEL: func.func @transpose
// CHECK: linalg.generic {indexing_maps = [#[[TRANS]],
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = cleave.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// Reshapes use collapse/expand, through 1-D when no reassociation exists.
// CHECK-LABEL: func.func @reshapes
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]]
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1, 2]]
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [3, 8]
func.func @reshapes(%x: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<3x8xf32>) {
  %0 = cleave.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = cleave.reshape %x : tensor<2x3x4xf32> -> tensor<3x8xf32>
  return %0, %1 : tensor<6x4xf32>, tensor<3x8xf32>
}

// Strided slice.
// CHECK-LABEL: func.func @slice
// CHECK: tensor.extract_slice %{{.*}}[0, 1] [2, 2] [1, 2]
func.func @slice(%x: tensor<2x5xf32>) -> tensor<2x2xf32> {
  %0 = cleave.slice %x start = [0, 1] limit = [2, 5] strides = [1, 2] : tensor<2x5xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// Concat is a chain of insert_slice.
// CHECK-LABEL: func.func @concat
// CHECK: %[[E:.*]] = tensor.empty() : tensor<3x3xf32>
// CHECK: %[[A:.*]] = tensor.insert_slice %{{.*}} into %[[E]][0, 0] [2, 3] [1, 1]
// CHECK: tensor.insert_slice %{{.*}} into %[[A]][2, 0] [1, 3] [1, 1]
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>) -> tensor<3x3xf32> {
  %0 = cleave.concat %a, %b dim = 0 : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// Reverse reads `size - 1 - i` with tensor.extract.
// CHECK-LABEL: func.func @reverse
// CHECK: linalg.index 0
// CHECK: arith.subi
// CHECK: tensor.extract
func.func @reverse(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %0 = cleave.reverse %x dims = [0] : tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// Constant pads use tensor.pad; reflect pads compute mirrored indices.
// CHECK-LABEL: func.func @pads
// CHECK: tensor.pad %{{.*}} low[0, 1] high[0, 1]
// CHECK: linalg.generic
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: tensor.extract
func.func @pads(%x: tensor<2x3xf32>, %v: tensor<f32>) -> (tensor<2x5xf32>, tensor<2x5xf32>) {
  %0 = cleave.pad %x, %v low = [0, 1] high = [0, 1] mode = constant : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x5xf32>
  %1 = cleave.pad %x, %v low = [0, 1] high = [0, 1] mode = reflect : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x5xf32>
  return %0, %1 : tensor<2x5xf32>, tensor<2x5xf32>
}

// Gather wraps negative indices and reads out-of-range ones as zero.
// CHECK-LABEL: func.func @gather
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<2x8xi64>)
// CHECK: arith.index_cast
// CHECK: arith.cmpi slt
// CHECK: tensor.extract
// CHECK: arith.select
func.func @gather(%t: tensor<100x16xf32>, %i: tensor<2x8xi64>) -> tensor<2x8x16xf32> {
  %0 = cleave.gather %t, %i axis = 0 : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @gather_elements
// CHECK: linalg.generic
// CHECK: tensor.extract
func.func @gather_elements(%x: tensor<2x5xf32>, %i: tensor<2x1xi64>) -> tensor<2x1xf32> {
  %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<2x5xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
  return %0 : tensor<2x1xf32>
}
