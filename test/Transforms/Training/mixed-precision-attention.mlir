// RUN: cleave-opt %s --cleave-apply-mixed-precision=precision=bf16 | FileCheck %s

// Attention takes bf16 q, k and v and gives a bf16 result (its scores and
// softmax are f32 inside the op); the bias stays f32 and the function
// result keeps its type.
// CHECK-LABEL: func.func @attention
func.func @attention(%x: tensor<1x2x8x4xf32>, %m: tensor<1x1x1x8xf32>) -> tensor<1x2x8x4xf32> {
  // CHECK: %[[XL:.*]] = cleave.convert %{{.*}} : tensor<1x2x8x4xf32> -> tensor<1x2x8x4xbf16>
  // CHECK: %[[Y:.*]] = cleave.attention %[[XL]], %[[XL]], %[[XL]] bias %{{.*}} scale = 5.000000e-01 causal : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x1x1x8xf32>) -> tensor<1x2x8x4xbf16>
  // CHECK: cleave.convert %[[Y]] : tensor<1x2x8x4xbf16> -> tensor<1x2x8x4xf32>
  %0 = cleave.attention %x, %x, %x bias %m scale = 0.5 causal : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x8x4xf32>
  return %0 : tensor<1x2x8x4xf32>
}

// Its gradient reads q, k, v and the forward's result in bf16, the
// cotangent as it comes (f32 here), and gives f32 gradients.
// CHECK-LABEL: func.func @attention_grad
func.func @attention_grad(%x: tensor<1x2x8x4xf32>, %dy: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  // CHECK: %[[XL:.*]] = cleave.convert %{{.*}} : tensor<1x2x8x4xf32> -> tensor<1x2x8x4xbf16>
  // CHECK: %[[Y:.*]] = cleave.attention %[[XL]], %[[XL]], %[[XL]] scale
  // CHECK: %[[DQ:.*]], %{{.*}}, %{{.*}} = cleave.attention_grad %[[XL]], %[[XL]], %[[XL]], %[[Y]], %{{.*}} scale = 5.000000e-01 causal : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
  %y = cleave.attention %x, %x, %x scale = 0.5 causal : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  %dq, %dk, %dv = cleave.attention_grad %x, %x, %x, %y, %dy scale = 0.5 causal : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
  return %dq : tensor<1x2x8x4xf32>
}
