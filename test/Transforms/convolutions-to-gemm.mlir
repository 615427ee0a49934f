// RUN: cleave-opt %s --cleave-convolutions-to-gemm | FileCheck %s
// RUN: cleave-opt %s --cleave-convolutions-to-gemm="min-group-outputs=32" | FileCheck %s --check-prefix=MIN

// A 3x3 convolution: columns G x C x K x K x N x S', one GEMM of M = 16,
// K = 4 * 9, N = 2 * 64 batched over one group, a view as O x N x S' and a
// transpose back to NCHW.
// CHECK-LABEL: func.func @conv3x3
// CHECK: %[[COLS:.*]] = cleave.im2col %arg0 kernel = [3, 3] strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>) -> tensor<1x4x3x3x2x8x8xf32>
// CHECK: %[[W:.*]] = cleave.reshape %arg1 : tensor<16x4x3x3xf32> -> tensor<1x16x4x3x3xf32>
// CHECK: %[[P:.*]] = cleave.contract %[[W]], %[[COLS]] batch = [0] x [0] contract = [2, 3, 4] x [1, 2, 3] : tensor<1x16x4x3x3xf32>, tensor<1x4x3x3x2x8x8xf32> -> tensor<1x16x2x8x8xf32>
// CHECK: %[[R:.*]] = cleave.reshape %[[P]] : tensor<1x16x2x8x8xf32> -> tensor<16x2x8x8xf32>
// CHECK: %[[Y:.*]] = cleave.transpose %[[R]] perm = [1, 0, 2, 3] : tensor<16x2x8x8xf32> -> tensor<2x16x8x8xf32>
// CHECK-NOT: cleave.conv
// CHECK: return %[[Y]]
// MIN-LABEL: func.func @conv3x3
// MIN: cleave.conv
func.func @conv3x3(%x: tensor<2x4x8x8xf32>, %w: tensor<16x4x3x3xf32>) -> tensor<2x16x8x8xf32> {
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>, tensor<16x4x3x3xf32>) -> tensor<2x16x8x8xf32>
  return %0 : tensor<2x16x8x8xf32>
}

// Two groups of 8 outputs, strided, dilated and padded unevenly in 1-d:
// the columns and the filter carry the group as the GEMM batch.
// CHECK-LABEL: func.func @grouped_strided_1d
// CHECK: cleave.im2col %arg0 kernel = [3] strides = [2] pad_low = [2] pad_high = [1] dilations = [2] groups = 2 : (tensor<3x6x11xbf16>) -> tensor<2x3x3x3x5xbf16>
// CHECK: cleave.reshape %arg1 : tensor<16x3x3xbf16> -> tensor<2x8x3x3xbf16>
// CHECK: cleave.contract {{.*}} batch = [0] x [0] contract = [2, 3] x [1, 2] : tensor<2x8x3x3xbf16>, tensor<2x3x3x3x5xbf16> -> tensor<2x8x3x5xbf16>
// CHECK: cleave.reshape {{.*}} : tensor<2x8x3x5xbf16> -> tensor<16x3x5xbf16>
// CHECK: cleave.transpose {{.*}} perm = [1, 0, 2] : tensor<16x3x5xbf16> -> tensor<3x16x5xbf16>
func.func @grouped_strided_1d(%x: tensor<3x6x11xbf16>, %w: tensor<16x3x3xbf16>) -> tensor<3x16x5xbf16> {
  %0 = cleave.conv %x, %w strides = [2] pad_low = [2] pad_high = [1] dilations = [2] groups = 2 : (tensor<3x6x11xbf16>, tensor<16x3x3xbf16>) -> tensor<3x16x5xbf16>
  return %0 : tensor<3x16x5xbf16>
}

// Depthwise: one output per group is a GEMM of one row; it stays a direct
// kernel.
// CHECK-LABEL: func.func @depthwise
// CHECK-NOT: cleave.im2col
// CHECK: cleave.conv
func.func @depthwise(%x: tensor<1x8x6x6xf32>, %w: tensor<8x1x3x3xf32>) -> tensor<1x8x6x6xf32> {
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 8 : (tensor<1x8x6x6xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}
