// RUN: cleave-opt %s --cleave-prepare-pipeline | FileCheck %s

// The clean-up cleave-compile runs on every imported program: the two
// identical adds become one (CSE), the convolution becomes im2col and one
// GEMM-form contraction, and attention is spelled out into contractions
// and a softmax (no fused kernel is kept by default).
// CHECK-LABEL: func.func @prepare
// CHECK: %[[A:.*]] = cleave.binary add %arg0, %arg0
// CHECK-NEXT: %[[C:.*]] = cleave.binary mul %[[A]], %[[A]]
// CHECK-NEXT: %[[COLS:.*]] = cleave.im2col %[[C]] kernel = [3, 3]
// CHECK: cleave.contract %{{.*}}, %[[COLS]]
// CHECK: %[[Y:.*]] = cleave.transpose
// CHECK: cleave.contract
// CHECK: %[[P:.*]] = cleave.softmax
// CHECK: %[[O:.*]] = cleave.contract %[[P]], %arg2
// CHECK: %[[Z:.*]] = cleave.reshape %[[O]]
// CHECK-NOT: cleave.conv
// CHECK-NOT: cleave.attention
// CHECK: return %[[Y]], %[[Z]]
func.func @prepare(%x: tensor<2x4x8x8xf32>, %w: tensor<16x4x3x3xf32>,
                   %q: tensor<1x2x8x4xf32>)
    -> (tensor<2x16x8x8xf32>, tensor<1x2x8x4xf32>) {
  %a = cleave.binary add %x, %x : tensor<2x4x8x8xf32>
  %b = cleave.binary add %x, %x : tensor<2x4x8x8xf32>
  %c = cleave.binary mul %a, %b : tensor<2x4x8x8xf32>
  %y = cleave.conv %c, %w strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>, tensor<16x4x3x3xf32>) -> tensor<2x16x8x8xf32>
  %z = cleave.attention %q, %q, %q scale = 0.5 causal : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %y, %z : tensor<2x16x8x8xf32>, tensor<1x2x8x4xf32>
}
