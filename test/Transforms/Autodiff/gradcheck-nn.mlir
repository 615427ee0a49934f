// Checks the VJP rules of conv (input and filter gradients with strides,
// padding, dilations and groups), reduce_window (sum, max, min), pad
// (reflect, edge) and scatter (mul, max, min) against finite differences.
// RUN: cleave-gradcheck %s | FileCheck %s
// RUN: cleave-gradcheck %s --hostile --rtol 1e-4 | FileCheck %s
// RUN: cleave-gradcheck %s --direct-convolutions | FileCheck %s

// CHECK: PASS f_conv_same max rel err
func.func @f_conv_same(%x: tensor<2x3x5x5xf64>, %w: tensor<4x3x3x3xf64>) -> tensor<2x4x5x5xf64> {
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 1 : (tensor<2x3x5x5xf64>, tensor<4x3x3x3xf64>) -> tensor<2x4x5x5xf64>
  return %0 : tensor<2x4x5x5xf64>
}

// Strides, asymmetric padding and a dilation at once.
// CHECK: PASS f_conv_strided_dilated max rel err
func.func @f_conv_strided_dilated(%x: tensor<1x2x7x8xf64>, %w: tensor<3x2x3x2xf64>) -> tensor<1x3x3x4xf64> {
  %0 = cleave.conv %x, %w strides = [2, 2] pad_low = [1, 0] pad_high = [0, 1] dilations = [1, 2] groups = 1 : (tensor<1x2x7x8xf64>, tensor<3x2x3x2xf64>) -> tensor<1x3x3x4xf64>
  return %0 : tensor<1x3x3x4xf64>
}

// Two groups of two input and three output channels.
// CHECK: PASS f_conv_groups max rel err
func.func @f_conv_groups(%x: tensor<2x4x6x6xf64>, %w: tensor<6x2x3x3xf64>) -> tensor<2x6x2x6xf64> {
  %0 = cleave.conv %x, %w strides = [2, 1] pad_low = [0, 1] pad_high = [1, 1] dilations = [2, 1] groups = 2 : (tensor<2x4x6x6xf64>, tensor<6x2x3x3xf64>) -> tensor<2x6x2x6xf64>
  return %0 : tensor<2x6x2x6xf64>
}

// Wide enough that the convolution and both of its gradients go through
// im2col and a GEMM (at least 4 outputs per group; see
// --cleave-convolutions-to-gemm): strides, uneven padding and a dilation.
// CHECK: PASS f_conv_gemm_strided_dilated max rel err
func.func @f_conv_gemm_strided_dilated(%x: tensor<1x4x7x8xf64>, %w: tensor<4x4x3x2xf64>) -> tensor<1x4x3x4xf64> {
  %0 = cleave.conv %x, %w strides = [2, 2] pad_low = [1, 0] pad_high = [0, 1] dilations = [1, 2] groups = 1 : (tensor<1x4x7x8xf64>, tensor<4x4x3x2xf64>) -> tensor<1x4x3x4xf64>
  return %0 : tensor<1x4x3x4xf64>
}

// Two groups of four input and four output channels, through GEMMs.
// CHECK: PASS f_conv_gemm_groups max rel err
func.func @f_conv_gemm_groups(%x: tensor<2x8x6x6xf64>, %w: tensor<8x4x3x3xf64>) -> tensor<2x8x2x6xf64> {
  %0 = cleave.conv %x, %w strides = [2, 1] pad_low = [0, 1] pad_high = [1, 1] dilations = [2, 1] groups = 2 : (tensor<2x8x6x6xf64>, tensor<8x4x3x3xf64>) -> tensor<2x8x2x6xf64>
  return %0 : tensor<2x8x2x6xf64>
}

// 1-d depthwise; the stride skips the last input element.
// CHECK: PASS f_conv_depthwise_1d max rel err
func.func @f_conv_depthwise_1d(%x: tensor<1x2x10xf64>, %w: tensor<2x1x3xf64>) -> tensor<1x2x3xf64> {
  %0 = cleave.conv %x, %w strides = [3] pad_low = [0] pad_high = [0] dilations = [1] groups = 2 : (tensor<1x2x10xf64>, tensor<2x1x3xf64>) -> tensor<1x2x3xf64>
  return %0 : tensor<1x2x3xf64>
}

// CHECK: PASS f_reduce_window_sum max rel err
func.func @f_reduce_window_sum(%x: tensor<2x6xf64>) -> tensor<2x4xf64> {
  %0 = cleave.reduce_window sum %x window = [1, 3] strides = [1, 1] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] : tensor<2x6xf64> -> tensor<2x4xf64>
  return %0 : tensor<2x4xf64>
}

// Strides, padding and a dilation (average pooling's numerator).
// CHECK: PASS f_reduce_window_sum_strided max rel err
func.func @f_reduce_window_sum_strided(%x: tensor<1x2x5x6xf64>) -> tensor<1x2x3x3xf64> {
  %0 = cleave.reduce_window sum %x window = [1, 1, 3, 2] strides = [1, 1, 2, 2] pad_low = [0, 0, 1, 0] pad_high = [0, 0, 1, 1] dilations = [1, 1, 1, 2] : tensor<1x2x5x6xf64> -> tensor<1x2x3x3xf64>
  return %0 : tensor<1x2x3x3xf64>
}

// CHECK: PASS f_max_pool max rel err
func.func @f_max_pool(%x: tensor<1x2x6x6xf64>) -> tensor<1x2x3x3xf64> {
  %0 = cleave.reduce_window max %x window = [1, 1, 2, 2] strides = [1, 1, 2, 2] pad_low = [0, 0, 0, 0] pad_high = [0, 0, 0, 0] dilations = [1, 1, 1, 1] : tensor<1x2x6x6xf64> -> tensor<1x2x3x3xf64>
  return %0 : tensor<1x2x3x3xf64>
}

// Overlapping padded windows: an element is the maximum of several.
// CHECK: PASS f_max_pool_overlap max rel err
func.func @f_max_pool_overlap(%x: tensor<1x2x6x6xf64>) -> tensor<1x2x6x6xf64> {
  %0 = cleave.reduce_window max %x window = [1, 1, 3, 3] strides = [1, 1, 1, 1] pad_low = [0, 0, 1, 1] pad_high = [0, 0, 1, 1] dilations = [1, 1, 1, 1] : tensor<1x2x6x6xf64> -> tensor<1x2x6x6xf64>
  return %0 : tensor<1x2x6x6xf64>
}

// CHECK: PASS f_max_pool_dilated max rel err
func.func @f_max_pool_dilated(%x: tensor<1x1x7x7xf64>) -> tensor<1x1x3x4xf64> {
  %0 = cleave.reduce_window max %x window = [1, 1, 2, 2] strides = [1, 1, 2, 1] pad_low = [0, 0, 0, 0] pad_high = [0, 0, 0, 0] dilations = [1, 1, 2, 3] : tensor<1x1x7x7xf64> -> tensor<1x1x3x4xf64>
  return %0 : tensor<1x1x3x4xf64>
}

// CHECK: PASS f_min_window max rel err
func.func @f_min_window(%x: tensor<3x7xf64>) -> tensor<3x3xf64> {
  %0 = cleave.reduce_window min %x window = [1, 3] strides = [1, 2] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] : tensor<3x7xf64> -> tensor<3x3xf64>
  return %0 : tensor<3x3xf64>
}

// CHECK: PASS f_pad_reflect max rel err
func.func @f_pad_reflect(%x: tensor<3x4xf64>, %v: tensor<f64>) -> tensor<6x8xf64> {
  %0 = cleave.pad %x, %v low = [2, 1] high = [1, 3] mode = reflect : (tensor<3x4xf64>, tensor<f64>) -> tensor<6x8xf64>
  return %0 : tensor<6x8xf64>
}

// CHECK: PASS f_pad_reflect_3d max rel err
func.func @f_pad_reflect_3d(%x: tensor<2x3x4xf64>, %v: tensor<f64>) -> tensor<2x6x7xf64> {
  %0 = cleave.pad %x, %v low = [0, 1, 0] high = [0, 2, 3] mode = reflect : (tensor<2x3x4xf64>, tensor<f64>) -> tensor<2x6x7xf64>
  return %0 : tensor<2x6x7xf64>
}

// CHECK: PASS f_pad_edge max rel err
func.func @f_pad_edge(%x: tensor<2x3xf64>, %v: tensor<f64>) -> tensor<6x5xf64> {
  %0 = cleave.pad %x, %v low = [1, 2] high = [3, 0] mode = edge : (tensor<2x3xf64>, tensor<f64>) -> tensor<6x5xf64>
  return %0 : tensor<6x5xf64>
}

// Duplicate indices multiply several updates into one element.
// CHECK: PASS f_scatter_mul max rel err
func.func @f_scatter_mul(%x: tensor<3x5xf64>, %i: tensor<3x4xi64>, %u: tensor<3x4xf64> {gradcheck.range = [0.5, 1.5]}) -> tensor<3x5xf64> {
  %0 = cleave.scatter mul %x, %i, %u axis = 1 : (tensor<3x5xf64>, tensor<3x4xi64>, tensor<3x4xf64>) -> tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_scatter_max max rel err
func.func @f_scatter_max(%x: tensor<3x5xf64>, %i: tensor<3x4xi64>, %u: tensor<3x4xf64>) -> tensor<3x5xf64> {
  %0 = cleave.scatter max %x, %i, %u axis = 1 : (tensor<3x5xf64>, tensor<3x4xi64>, tensor<3x4xf64>) -> tensor<3x5xf64>
  return %0 : tensor<3x5xf64>
}

// CHECK: PASS f_scatter_min max rel err
func.func @f_scatter_min(%x: tensor<4x3xf64>, %i: tensor<2x3xi64>, %u: tensor<2x3xf64>) -> tensor<4x3xf64> {
  %0 = cleave.scatter min %x, %i, %u axis = 0 : (tensor<4x3xf64>, tensor<2x3xi64>, tensor<2x3xf64>) -> tensor<4x3xf64>
  return %0 : tensor<4x3xf64>
}
