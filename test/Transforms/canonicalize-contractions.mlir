// RUN: cleave-opt %s --cleave-canonicalize-contractions | FileCheck %s

// A matmul already in GEMM layout is left alone.
// CHECK-LABEL: func.func @plain_matmul
func.func @plain_matmul(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  // CHECK-NOT: cleave.transpose
  // CHECK: cleave.contract %arg0, %arg1 batch = [] x [] contract = [1] x [0]
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// Q K^T contracts the last dimension of both operands: a transposed-B GEMM, no copy.
// CHECK-LABEL: func.func @attention_scores
func.func @attention_scores(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32> {
  // CHECK-NOT: cleave.transpose
  // CHECK: cleave.contract %arg0, %arg1 batch = [0, 1] x [0, 1] contract = [3] x [3]
  %0 = cleave.contract %q, %k batch = [0, 1] x [0, 1] contract = [3] x [3] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// A weight broadcast over the batch becomes one GEMM with the batch folded into M.
// CHECK-LABEL: func.func @broadcast_weight
func.func @broadcast_weight(%x: tensor<4x8x16xf32>, %w: tensor<16x32xf32>) -> tensor<4x8x32xf32> {
  // CHECK-NOT: cleave.broadcast_in_dim
  // CHECK: cleave.contract %arg0, %arg1 batch = [] x [] contract = [2] x [0] : tensor<4x8x16xf32>, tensor<16x32xf32> -> tensor<4x8x32xf32>
  %wb = cleave.broadcast_in_dim %w dims = [1, 2] : tensor<16x32xf32> -> tensor<4x16x32xf32>
  %0 = cleave.contract %x, %wb batch = [0] x [0] contract = [2] x [1] : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
}

// A batch dimension that is not leading is transposed to the front.
// CHECK-LABEL: func.func @inner_batch
func.func @inner_batch(%a: tensor<8x2x16xf32>, %b: tensor<2x16x4xf32>) -> tensor<2x8x4xf32> {
  // CHECK: %[[T:.*]] = cleave.transpose %arg0 perm = [1, 0, 2] : tensor<8x2x16xf32> -> tensor<2x8x16xf32>
  // CHECK: cleave.contract %[[T]], %arg1 batch = [0] x [0] contract = [2] x [1]
  %0 = cleave.contract %a, %b batch = [1] x [0] contract = [2] x [1] : tensor<8x2x16xf32>, tensor<2x16x4xf32> -> tensor<2x8x4xf32>
  return %0 : tensor<2x8x4xf32>
}

// Contracting pairs in a different order on each side transpose the rhs.
// CHECK-LABEL: func.func @crossed_pairs
func.func @crossed_pairs(%a: tensor<3x4x5xf32>, %b: tensor<5x4x6xf32>) -> tensor<3x6xf32> {
  // CHECK: %[[T:.*]] = cleave.transpose %arg1 perm = [1, 0, 2] : tensor<5x4x6xf32> -> tensor<4x5x6xf32>
  // CHECK: cleave.contract %arg0, %[[T]] batch = [] x [] contract = [1, 2] x [0, 1]
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1, 2] x [1, 0] : tensor<3x4x5xf32>, tensor<5x4x6xf32> -> tensor<3x6xf32>
  return %0 : tensor<3x6xf32>
}

// A transposed weight (the tied lm_head: logits = h wte^T) folds into a
// transposed-B GEMM: no transpose is left to materialize.
// CHECK-LABEL: func.func @fold_transposed_rhs
func.func @fold_transposed_rhs(%h: tensor<2x8x16xf32>, %w: tensor<32x16xf32>) -> tensor<2x8x32xf32> {
  // CHECK-NOT: cleave.transpose
  // CHECK: cleave.contract %arg0, %arg1 batch = [] x [] contract = [2] x [1] : tensor<2x8x16xf32>, tensor<32x16xf32> -> tensor<2x8x32xf32>
  %wt = cleave.transpose %w perm = [1, 0] : tensor<32x16xf32> -> tensor<16x32xf32>
  %0 = cleave.contract %h, %wt batch = [] x [] contract = [2] x [0] : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
  return %0 : tensor<2x8x32xf32>
}

// A transposed lhs folds into a transposed-A GEMM.
// CHECK-LABEL: func.func @fold_transposed_lhs
func.func @fold_transposed_lhs(%a: tensor<16x8xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  // CHECK-NOT: cleave.transpose
  // CHECK: cleave.contract %arg0, %arg1 batch = [] x [] contract = [0] x [0] : tensor<16x8xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %at = cleave.transpose %a perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  %0 = cleave.contract %at, %b batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// Attention's K^T (transpose [0, 2, 3, 1] of the [b, t, h, d] heads) still
// needs the heads in front, but as a row copy ([0, 2, 1, 3], d innermost)
// read by a transposed-B GEMM instead of a gather with t innermost.
// CHECK-LABEL: func.func @attention_key_transpose
func.func @attention_key_transpose(%q: tensor<2x4x8x16xf32>, %k: tensor<2x8x4x16xf32>) -> tensor<2x4x8x8xf32> {
  // CHECK: %[[T:.*]] = cleave.transpose %arg1 perm = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  // CHECK-NOT: cleave.transpose
  // CHECK: cleave.contract %arg0, %[[T]] batch = [0, 1] x [0, 1] contract = [3] x [3]
  %kt = cleave.transpose %k perm = [0, 2, 3, 1] : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
  %0 = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// A transpose that already copies rows (Q heads to the front) stays.
// CHECK-LABEL: func.func @keep_row_transpose
func.func @keep_row_transpose(%q: tensor<2x8x4x16xf32>, %k: tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32> {
  // CHECK: %[[T:.*]] = cleave.transpose %arg0 perm = [0, 2, 1, 3]
  // CHECK: cleave.contract %[[T]], %arg1 batch = [0, 1] x [0, 1] contract = [3] x [3]
  %qt = cleave.transpose %q perm = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %0 = cleave.contract %qt, %k batch = [0, 1] x [0, 1] contract = [3] x [3] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// A transpose that reorders free dimensions would change the result layout:
// it stays.
// CHECK-LABEL: func.func @keep_free_reorder
func.func @keep_free_reorder(%a: tensor<3x2x16xf32>, %b: tensor<16x5xf32>) -> tensor<2x3x5xf32> {
  // CHECK: %[[T:.*]] = cleave.transpose %arg0 perm = [1, 0, 2]
  // CHECK: cleave.contract %[[T]], %arg1 batch = [] x [] contract = [2] x [0]
  %at = cleave.transpose %a perm = [1, 0, 2] : tensor<3x2x16xf32> -> tensor<2x3x16xf32>
  %0 = cleave.contract %at, %b batch = [] x [] contract = [2] x [0] : tensor<2x3x16xf32>, tensor<16x5xf32> -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// An operand out of GEMM layout with its innermost dimension contracted is
// transposed with that dimension kept innermost (transposed-B GEMM).
// CHECK-LABEL: func.func @inner_contract_kept_inner
func.func @inner_contract_kept_inner(%a: tensor<2x8x16xf32>, %b: tensor<4x2x16xf32>) -> tensor<2x8x4xf32> {
  // CHECK: %[[T:.*]] = cleave.transpose %arg1 perm = [1, 0, 2] : tensor<4x2x16xf32> -> tensor<2x4x16xf32>
  // CHECK: cleave.contract %arg0, %[[T]] batch = [0] x [0] contract = [2] x [2]
  %0 = cleave.contract %a, %b batch = [0] x [1] contract = [2] x [2] : tensor<2x8x16xf32>, tensor<4x2x16xf32> -> tensor<2x8x4xf32>
  return %0 : tensor<2x8x4xf32>
}

// A product transposed, reshaped and then rounded to bf16 (attention's
// context merged back into [b, s, h]) is rounded first, so that the GEMM
// writes bf16 and the transpose moves bf16.
// CHECK-LABEL: func.func @narrow_before_data_movement
func.func @narrow_before_data_movement(%p: tensor<2x4x8x8xbf16>, %v: tensor<2x4x8x16xbf16>) -> tensor<2x8x64xbf16> {
  // CHECK: %[[C:.*]] = cleave.contract %arg0, %arg1 {{.*}} -> tensor<2x4x8x16xf32>
  // CHECK-NEXT: %[[R:.*]] = cleave.convert %[[C]] : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xbf16>
  // CHECK-NEXT: %[[T:.*]] = cleave.transpose %[[R]] perm = [0, 2, 1, 3] : tensor<2x4x8x16xbf16> -> tensor<2x8x4x16xbf16>
  // CHECK-NEXT: %[[S:.*]] = cleave.reshape %[[T]] : tensor<2x8x4x16xbf16> -> tensor<2x8x64xbf16>
  // CHECK-NEXT: return %[[S]]
  %0 = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x4x8x8xbf16>, tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xf32>
  %1 = cleave.transpose %0 perm = [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %2 = cleave.reshape %1 : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
  %3 = cleave.convert %2 : tensor<2x8x64xf32> -> tensor<2x8x64xbf16>
  return %3 : tensor<2x8x64xbf16>
}

// Not when the rearranged f32 product has another reader.
// CHECK-LABEL: func.func @narrow_not_shared
func.func @narrow_not_shared(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> (tensor<32x8xbf16>, tensor<32x8xf32>) {
  // CHECK: cleave.transpose %{{.*}} : tensor<8x32xf32> -> tensor<32x8xf32>
  // CHECK: cleave.convert %{{.*}} : tensor<32x8xf32> -> tensor<32x8xbf16>
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0] : tensor<8x16xbf16>, tensor<16x32xbf16> -> tensor<8x32xf32>
  %1 = cleave.transpose %0 perm = [1, 0] : tensor<8x32xf32> -> tensor<32x8xf32>
  %2 = cleave.convert %1 : tensor<32x8xf32> -> tensor<32x8xbf16>
  return %2, %1 : tensor<32x8xbf16>, tensor<32x8xf32>
}
