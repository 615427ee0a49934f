// RUN: cleave-opt --cleave-convert-cleave-to-linalg %s | FileCheck %s

// Grouped convolution: pad with zeros, input channel (o floordiv O/g) * C/g + c.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, (d1 floordiv 2) * 2 + d4, d2 * 2 + d5, d3 + d6 * 2)>
// CHECK-DAG: #[[W:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>
// CHECK-DAG: #[[COLS_IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d4, d0 * 2 + d1, d5 * 2 + d2, d6 + d3 * 2)>
// CHECK-DAG: #[[COLS_OUT:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d4, d5, d6)>
// CHECK-LABEL: func.func @conv
// CHECK: tensor.pad %{{.*}} low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[W]], {{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
func.func @conv(%x: tensor<1x4x5x5xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %0 = cleave.conv %x, %w strides = [2, 1] pad_low = [1, 1] pad_high = [1, 1]
      dilations = [1, 2] groups = 2
      : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// Max pooling pads with -inf and reduces over window loops.
// CHECK-LABEL: func.func @max_pool
// CHECK: %[[NEG:.*]] = arith.constant 0xFF800000 : f32
// CHECK: tensor.pad
// CHECK: tensor.yield %[[NEG]]
// CHECK: tensor.empty() : tensor<1x1x3x3xf32>
// CHECK: linalg.generic
// CHECK: arith.maximumf
func.func @max_pool(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  %0 = cleave.reduce_window max %x window = [1, 1, 3, 3] strides = [1, 1, 2, 2]
      pad_low = [0, 0, 1, 1] pad_high = [0, 0, 0, 0] dilations = [1, 1, 1, 1]
      : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// im2col: pad with zeros, then copy result[g, c, k0, k1, n, s0, s1] =
// padded[n, g * C/G + c, s0 * 2 + k0, s1 + k1 * 2] (maps COLS_IN and
// COLS_OUT, checked at the top where they are printed).
// CHECK-LABEL: func.func @im2col
// CHECK: tensor.pad %{{.*}} low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK: linalg.generic {indexing_maps = [#[[COLS_IN]], #[[COLS_OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]}
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: linalg.yield %[[IN]] : f32
func.func @im2col(%x: tensor<1x4x5x5xf32>) -> tensor<2x2x3x3x1x3x3xf32> {
  %0 = cleave.im2col %x kernel = [3, 3] strides = [2, 1] pad_low = [1, 1]
      pad_high = [1, 1] dilations = [1, 2] groups = 2
      : (tensor<1x4x5x5xf32>) -> tensor<2x2x3x3x1x3x3xf32>
  return %0 : tensor<2x2x3x3x1x3x3xf32>
}
