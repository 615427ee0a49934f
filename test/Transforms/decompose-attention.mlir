// RUN: cleave-opt %s --cleave-decompose-attention | FileCheck %s
// RUN: cleave-opt %s --cleave-decompose-attention=keep-fused | FileCheck %s --check-prefix=FUSED

// Grouped-query attention with a bias and a causal mask: q is viewed by
// key/value head (2 x 4 query heads), both products are contractions
// batched over (batch, key/value head), the mask is a select of -inf, and
// rows with every key masked are zeroed after the softmax. The mask is
// built before the scores, so that the scale, the bias, the mask and the
// softmax can run as one kernel after the product.
// CHECK-LABEL: func.func @gqa
func.func @gqa(%q: tensor<2x8x16x4xf32>, %k: tensor<2x2x12x4xf32>, %v: tensor<2x2x12x6xf32>, %m: tensor<2x1x1x12xf32>) -> tensor<2x8x16x6xf32> {
  // CHECK: %[[Q:.*]] = cleave.reshape %{{.*}} : tensor<2x8x16x4xf32> -> tensor<2x2x4x16x4xf32>
  // CHECK: %[[MASK:.*]] = cleave.compare gt {{.*}} : tensor<16x12xi64> -> tensor<16x12xi1>
  // CHECK: %[[S:.*]] = cleave.contract %[[Q]], %{{.*}} batch = [0, 1] x [0, 1] contract = [4] x [3] : tensor<2x2x4x16x4xf32>, tensor<2x2x12x4xf32> -> tensor<2x2x4x16x12xf32>
  // CHECK: cleave.binary mul %[[S]]
  // CHECK: cleave.broadcast_in_dim %{{.*}} dims = [0, 1, 2, 3, 4] : tensor<2x1x1x1x12xf32> -> tensor<2x2x4x16x12xf32>
  // CHECK: cleave.broadcast_in_dim %[[MASK]] dims = [3, 4]
  // CHECK: %[[MASKED:.*]] = cleave.select
  // CHECK: %[[P:.*]] = cleave.softmax %[[MASKED]] dim = 4
  // CHECK: cleave.reduce max %[[MASKED]] dims = [4]
  // CHECK: %[[P0:.*]] = cleave.select %{{.*}}, %[[P]], %{{.*}}
  // CHECK: %[[Y:.*]] = cleave.contract %[[P0]], %{{.*}} batch = [0, 1] x [0, 1] contract = [4] x [2] : tensor<2x2x4x16x12xf32>, tensor<2x2x12x6xf32> -> tensor<2x2x4x16x6xf32>
  // CHECK: cleave.reshape %[[Y]] : tensor<2x2x4x16x6xf32> -> tensor<2x8x16x6xf32>
  // CHECK-NOT: cleave.attention
  %0 = cleave.attention %q, %k, %v bias %m scale = 0.5 causal : (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>, tensor<2x1x1x12xf32>) -> tensor<2x8x16x6xf32>
  return %0 : tensor<2x8x16x6xf32>
}

// bf16 operands: the scores accumulate in f32 and are rounded to bf16 (as a
// mixed-precision library GEMM writes them), the softmax widens them and
// computes in f32, and the probabilities are rounded to bf16 for the second
// product, which accumulates in f32 and is rounded to bf16 once. Without a
// bias or a negative offset no row can lose every key, so there is no
// zeroing select.
// CHECK-LABEL: func.func @bf16
func.func @bf16(%q: tensor<1x2x8x4xbf16>) -> tensor<1x2x8x4xbf16> {
  // CHECK: %[[S:.*]] = cleave.contract {{.*}} : tensor<1x2x1x8x4xbf16>, tensor<1x2x8x4xbf16> -> tensor<1x2x1x8x8xf32>
  // CHECK: %[[SL:.*]] = cleave.convert %[[S]] : tensor<1x2x1x8x8xf32> -> tensor<1x2x1x8x8xbf16>
  // CHECK: cleave.convert %[[SL]] : tensor<1x2x1x8x8xbf16> -> tensor<1x2x1x8x8xf32>
  // CHECK: %[[P:.*]] = cleave.softmax %{{.*}} dim = 4 : tensor<1x2x1x8x8xf32>
  // CHECK-NOT: cleave.reduce
  // CHECK: %[[PL:.*]] = cleave.convert %[[P]] : tensor<1x2x1x8x8xf32> -> tensor<1x2x1x8x8xbf16>
  // CHECK: %[[Y:.*]] = cleave.contract %[[PL]], %{{.*}} {{.*}} -> tensor<1x2x1x8x4xf32>
  // CHECK: cleave.convert %[[Y]] : tensor<1x2x1x8x4xf32> -> tensor<1x2x1x8x4xbf16>
  %0 = cleave.attention %q, %q, %q scale = 0.5 causal : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>) -> tensor<1x2x8x4xbf16>
  return %0 : tensor<1x2x8x4xbf16>
}

// A negative causal offset (queries behind the keys) can leave a row with
// no key: the frontier moves by the offset and the zeroing select appears.
// CHECK-LABEL: func.func @offset
func.func @offset(%q: tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32> {
  // CHECK: %[[I:.*]] = cleave.iota dim = 0 : tensor<4x4xi64>
  // CHECK: %[[OFF:.*]] = cleave.constant dense<-2> : tensor<4x4xi64>
  // CHECK: cleave.binary add %[[I]], %[[OFF]] : tensor<4x4xi64>
  // CHECK: cleave.softmax
  // CHECK: cleave.reduce max
  // CHECK: cleave.select
  %0 = cleave.attention %q, %q, %q scale = 0.5 causal {causal_offset = -2 : i64} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32>
  return %0 : tensor<1x1x4x2xf32>
}

// The gradient is spelled out from recomputed probabilities: dv, dp, the
// softmax's backward and dq, dk as contractions. With bf16 operands the
// products read P, dY and dS rounded to bf16 and accumulate in f32 (mixed-
// precision GEMMs, as the forward's second product); dP is rounded to bf16
// as its GEMM writes it; the softmax's backward reads P and dP in bf16 and
// computes in f32, and the gradients stay f32.
// CHECK-LABEL: func.func @grad
func.func @grad(%q: tensor<1x2x8x4xbf16>, %dy: tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) {
  // CHECK: cleave.softmax
  // CHECK: %[[P:.*]] = cleave.softmax
  // CHECK: %[[PL:.*]] = cleave.convert %[[P]] : tensor<1x2x1x8x8xf32> -> tensor<1x2x1x8x8xbf16>
  // CHECK: %[[PW:.*]] = cleave.convert %[[PL]] : tensor<1x2x1x8x8xbf16> -> tensor<1x2x1x8x8xf32>
  // CHECK: %[[DV:.*]] = cleave.contract %[[PL]], %{{.*}} batch = [0, 1] x [0, 1] contract = [2, 3] x [2, 3] : tensor<1x2x1x8x8xbf16>, tensor<1x2x1x8x4xbf16> -> tensor<1x2x8x4xf32>
  // CHECK: %[[DP:.*]] = cleave.contract {{.*}} : tensor<1x2x1x8x4xbf16>, tensor<1x2x8x4xbf16> -> tensor<1x2x1x8x8xf32>
  // CHECK: %[[DPL:.*]] = cleave.convert %[[DP]] : tensor<1x2x1x8x8xf32> -> tensor<1x2x1x8x8xbf16>
  // CHECK: %[[DPW:.*]] = cleave.convert %[[DPL]] : tensor<1x2x1x8x8xbf16> -> tensor<1x2x1x8x8xf32>
  // CHECK: cleave.binary mul %[[DPW]], %[[PW]]
  // CHECK: cleave.reduce sum {{.*}} : tensor<1x2x1x8x8xf32>
  // CHECK: %[[DS:.*]] = cleave.convert %{{.*}} : tensor<1x2x1x8x8xf32> -> tensor<1x2x1x8x8xbf16>
  // CHECK: cleave.contract %[[DS]], {{.*}} -> tensor<1x2x1x8x4xf32>
  // CHECK: %[[DK:.*]] = cleave.contract %[[DS]], {{.*}} -> tensor<1x2x8x4xf32>
  // CHECK: return %{{.*}}, %[[DV]] : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
  // CHECK-NOT: cleave.attention_grad
  %y = cleave.attention %q, %q, %q scale = 0.5 causal : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>) -> tensor<1x2x8x4xbf16>
  %dq, %dk, %dv = cleave.attention_grad %q, %q, %q, %y, %dy scale = 0.5 causal : (tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xbf16>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
  return %dq, %dv : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// With keep-fused, f32, bf16 and f16 attention stays whole for the CPU's
// fused kernel; f64 has none and is spelled out.
// FUSED-LABEL: func.func @fused
func.func @fused(%q: tensor<1x2x8x4xf32>, %d: tensor<1x2x8x4xf64>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf64>) {
  // FUSED: %[[Y:.*]] = cleave.attention %{{.*}}, %{{.*}}, %{{.*}} scale
  // FUSED: cleave.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[Y]], %{{.*}} scale
  // FUSED: cleave.softmax
  // FUSED-NOT: cleave.attention
  %y = cleave.attention %q, %q, %q scale = 0.5 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  %dq, %dk, %dv = cleave.attention_grad %q, %q, %q, %y, %y scale = 0.5 : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
  %z = cleave.attention %d, %d, %d scale = 0.5 : (tensor<1x2x8x4xf64>, tensor<1x2x8x4xf64>, tensor<1x2x8x4xf64>) -> tensor<1x2x8x4xf64>
  return %y, %dq, %z : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf64>
}
