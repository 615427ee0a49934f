// RUN: cleave-opt --cleave-test-sharding-rules --mlir-print-op-on-diagnostic=false %s -o /dev/null 2>&1 | FileCheck %s

// The factor-based sharding rule of every cleave op, in the notation of
// Shardy: each tensor lists a factor per dimension (several for a
// dimension a reshape merges, `_` for none), then the factor sizes and
// the factors that are reductions or need replication.

// Elementwise ops and index generation share one factor per dimension.
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %c: tensor<4x8xi1>) {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j]) -> ([i, j]) {i=4, j=8}
  %0 = cleave.unary exp %a : tensor<4x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}
  %1 = cleave.binary add %a, %b : tensor<4x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j], [i, j]) -> ([i, j]) {i=4, j=8}
  %2 = cleave.compare lt %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j], [i, j], [i, j]) -> ([i, j]) {i=4, j=8}
  %3 = cleave.select %c, %a, %b : tensor<4x8xi1>, tensor<4x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j]) -> ([i, j]) {i=4, j=8}
  %4 = cleave.convert %a : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: () -> ([i, j]) {i=4, j=8}
  %5 = cleave.constant dense<1.0> : tensor<4x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: () -> ([i, j]) {i=4, j=8}
  %6 = cleave.iota dim = 1 : tensor<4x8xi64>
  return
}

// A broadcast operand dimension of size 1 has no factor (`_`).
func.func @broadcast(%v: tensor<8xf32>, %r: tensor<1x8xf32>) {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([j]) -> ([i, j]) {i=4, j=8}
  %0 = cleave.broadcast_in_dim %v dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([_, k]) -> ([i, j, k]) {i=4, j=3, k=8}
  %1 = cleave.broadcast_in_dim %r dims = [0, 2] : tensor<1x8xf32> -> tensor<4x3x8xf32>
  return
}

// Reshapes split and merge factors (or need replication when sizes do not divide); a slice, reverse, concat or pad dimension needs replication; a gathered axis is a reduction (ranks that do not hold a row read zero).
func.func @data_movement(%x: tensor<4x8x16xf32>, %y: tensor<2x8x16xf32>, %six: tensor<2x6xf32>, %z: tensor<f32>, %t: tensor<100x16xf32>, %ids: tensor<2x8xi64>, %id: tensor<i64>, %e: tensor<4x8xf32>, %ei: tensor<4x3xi64>, %eu: tensor<4x3xf32>) {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([ij, k]) {i=4, j=8, k=16}
  %0 = cleave.reshape %x : tensor<4x8x16xf32> -> tensor<32x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, kl]) -> ([i, j, k, l]) {i=4, j=8, k=4, l=4}
  %1 = cleave.reshape %x : tensor<4x8x16xf32> -> tensor<4x8x4x4xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j]) -> ([k, l]) {i=2, j=6, k=3, l=4} need_replication={i, j, k, l}
  %2 = cleave.reshape %six : tensor<2x6xf32> -> tensor<3x4xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([i, _, jk]) {i=4, j=8, k=16}
  %3 = cleave.reshape %x : tensor<4x8x16xf32> -> tensor<4x1x128xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([j, k, i]) -> ([i, j, k]) {i=16, j=4, k=8}
  %4 = cleave.transpose %x perm = [2, 0, 1] : tensor<4x8x16xf32> -> tensor<16x4x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, l]) -> ([i, k, m]) {i=4, j=8, k=4, l=16, m=8} need_replication={j, k, l, m}
  %5 = cleave.slice %x start = [0, 2, 0] limit = [4, 6, 16] strides = [1, 1, 2] : tensor<4x8x16xf32> -> tensor<4x4x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([i, j, k]) {i=4, j=8, k=16} need_replication={j}
  %6 = cleave.reverse %x dims = [1] : tensor<4x8x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, l, m], [j, l, m]) -> ([k, l, m]) {i=4, j=2, k=6, l=8, m=16} need_replication={i, j, k}
  %7 = cleave.concat %x, %y dim = 0 : (tensor<4x8x16xf32>, tensor<2x8x16xf32>) -> tensor<6x8x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, l], []) -> ([i, k, l]) {i=4, j=8, k=10, l=16} need_replication={j, k}
  %8 = cleave.pad %x, %z low = [0, 1, 0] high = [0, 1, 0] mode = constant : (tensor<4x8x16xf32>, tensor<f32>) -> tensor<4x10x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, l], [j, k]) -> ([j, k, l]) {i=100, j=2, k=8, l=16} reduction={i}
  %9 = cleave.gather %t, %ids axis = 0 : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j], []) -> ([i]) {i=100, j=16} reduction={j}
  %10 = cleave.gather %t, %id axis = 1 : (tensor<100x16xf32>, tensor<i64>) -> tensor<100xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, k], [i, j]) -> ([i, j]) {i=4, j=3, k=8} need_replication={k}
  %11 = cleave.gather_elements %e, %ei axis = 1 : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j], [i, k], [i, k]) -> ([i, j]) {i=4, j=8, k=3} need_replication={j, k}
  %12 = cleave.scatter add %e, %ei, %eu axis = 1 : (tensor<4x8xf32>, tensor<4x3xi64>, tensor<4x3xf32>) -> tensor<4x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j]) -> ([i, k], [i, k]) {i=4, j=8, k=3} need_replication={j, k}
  %13:2 = cleave.top_k %e k = 3 dim = 1 largest = true sorted = true : tensor<4x8xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
  return
}

// Contracting and reduced dimensions are reductions (with the reduce kind); rows of softmax, cumsum, arg_reduce, layer_norm and rms_norm need replication.
func.func @reductions(%a: tensor<4x8x16xf32>, %b: tensor<4x16x32xf32>, %w: tensor<32x16xf32>, %g: tensor<16xf32>) {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, l], [i, l, k]) -> ([i, j, k]) {i=4, j=8, k=32, l=16} reduction={l}
  %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1] : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, l], [k, l]) -> ([i, j, k]) {i=4, j=8, k=32, l=16} reduction={l}
  %1 = cleave.contract %a, %w batch = [] x [] contract = [2] x [1] : tensor<4x8x16xf32>, tensor<32x16xf32> -> tensor<4x8x32xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([j]) {i=4, j=8, k=16} reduction={i, k}
  %2 = cleave.reduce sum %a dims = [0, 2] : tensor<4x8x16xf32> -> tensor<8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([i, k]) {i=4, j=8, k=16} reduction={j:max}
  %3 = cleave.reduce max %a dims = [1] : tensor<4x8x16xf32> -> tensor<4x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([i, j]) {i=4, j=8, k=16} need_replication={k}
  %4 = cleave.arg_reduce max %a dim = 2 : tensor<4x8x16xf32> -> tensor<4x8xi64>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([i, j, k]) {i=4, j=8, k=16} need_replication={j}
  %5 = cleave.cumsum %a dim = 1 : tensor<4x8x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([i, j, k]) {i=4, j=8, k=16} need_replication={k}
  %6 = cleave.softmax %a dim = 2 : tensor<4x8x16xf32>
  // log_softmax's row may stay split: the partitioner all-reduces its
  // statistics (a vocabulary-parallel cross-entropy).
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k]) -> ([i, j, k]) {i=4, j=8, k=16}{{$}}
  %7 = cleave.log_softmax %a dim = 2 : tensor<4x8x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k], [k], [k]) -> ([i, j, k]) {i=4, j=8, k=16} need_replication={k}
  %8 = cleave.layer_norm %a, %g, %g axis = 2 epsilon = 1.0e-05 : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k], [k]) -> ([i, j, k]) {i=4, j=8, k=16} need_replication={k}
  %9 = cleave.rms_norm %a, %g axis = 2 epsilon = 1.0e-05 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  return
}

// Convolution: batch and output channels parallel, input channels a reduction, groups a parallel factor major in the channel dimensions, spatial dimensions need replication.
func.func @windows(%img: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %wg: tensor<8x2x3x3xf32>, %wd: tensor<4x1x3x3xf32>) {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, k, l, o], [j, k, m, p]) -> ([i, j, n, q]) {i=2, j=6, k=4, l=8, m=3, n=8, o=8, p=3, q=8} reduction={k} need_replication={l, m, n, o, p, q}
  %0 = cleave.conv %img, %w strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 1 : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x8x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, jl, m, p], [jk, l, n, q]) -> ([i, jk, o, r]) {i=2, j=2, k=4, l=2, m=8, n=3, o=8, p=8, q=3, r=8} reduction={l} need_replication={m, n, o, p, q, r}
  %1 = cleave.conv %img, %wg strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 2 : (tensor<2x4x8x8xf32>, tensor<8x2x3x3xf32>) -> tensor<2x8x8x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, jl, m, p], [jk, l, n, q]) -> ([i, jk, o, r]) {i=2, j=4, k=1, l=1, m=8, n=3, o=8, p=8, q=3, r=8} reduction={l} need_replication={m, n, o, p, q, r}
  %2 = cleave.conv %img, %wd strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 4 : (tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k, m]) -> ([i, j, l, n]) {i=2, j=4, k=8, l=4, m=8, n=4} need_replication={k, l, m, n}
  %3 = cleave.reduce_window max %img window = [1, 1, 2, 2] strides = [1, 1, 2, 2] pad_low = [0, 0, 0, 0] pad_high = [0, 0, 0, 0] dilations = [1, 1, 1, 1] : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  return
}

// Attention: batch and heads parallel, the query heads split into the
// key/value heads (major) and each group's query heads (minor); keys and
// the head size need replication, and so do the queries under a causal
// mask. A bias maps only its full-size dimensions.
func.func @attention(%q: tensor<2x8x16x4xf32>, %k: tensor<2x2x12x4xf32>, %v: tensor<2x2x12x6xf32>, %m: tensor<2x1x1x12xf32>, %qm: tensor<2x2x16x4xf32>) {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, jk, l, n], [i, j, m, n], [i, j, m, o], [i, _, _, m]) -> ([i, jk, l, o]) {i=2, j=2, k=4, l=16, m=12, n=4, o=6} need_replication={l, m, n} exchange={l:j, m:j}
  %0 = cleave.attention %q, %k, %v bias %m scale = 5.000000e-01 causal : (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>, tensor<2x1x1x12xf32>) -> tensor<2x8x16x6xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k, m], [i, j, l, m], [i, j, l, n]) -> ([i, j, k, n]) {i=2, j=2, k=16, l=12, m=4, n=6} need_replication={l, m} exchange={l:j}
  %1 = cleave.attention %qm, %k, %v scale = 5.000000e-01 : (tensor<2x2x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>) -> tensor<2x2x16x6xf32>
  // The gradient splits batch and heads only: each of dq, dk and dv sums
  // over what the others keep.
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, jk, l, n], [i, j, m, n], [i, j, m, o], [i, jk, l, o], [i, jk, l, o], [i, _, _, m]) -> ([i, jk, l, n], [i, j, m, n], [i, j, m, o]) {i=2, j=2, k=4, l=16, m=12, n=4, o=6} need_replication={l, m, n, o} exchange={l:j, m:j}
  %2:3 = cleave.attention_grad %q, %k, %v, %0, %0 bias %m scale = 5.000000e-01 causal : (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>, tensor<2x8x16x6xf32>, tensor<2x8x16x6xf32>, tensor<2x1x1x12xf32>) -> (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>)
  return
}

// Rotary embeddings: batch, heads and positions are parallel, the angles
// follow the positions (and the batch when they have one); the features
// need replication.
func.func @rotary(%x: tensor<2x4x16x8xf32>, %c: tensor<1x16x3xf32>, %c2: tensor<2x16x4xf32>) {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k, l], [_, k, m], [_, k, m]) -> ([i, j, k, l]) {i=2, j=4, k=16, l=8, m=3} need_replication={l, m}
  %0 = cleave.rotary %x, %c, %c : (tensor<2x4x16x8xf32>, tensor<1x16x3xf32>, tensor<1x16x3xf32>) -> tensor<2x4x16x8xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, j, k, l], [i, k, m], [i, k, m]) -> ([i, j, k, l]) {i=2, j=4, k=16, l=8, m=4} need_replication={l, m}
  %1 = cleave.rotary %x, %c2, %c2 interleaved : (tensor<2x4x16x8xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x4x16x8xf32>
  return
}


// Grouped matmuls: rows and N parallel; the experts and K summed in the
// forward (a rank holding some experts gives zeros for rows routed to the
// others: expert parallelism), the rows summed in the weight gradient.
func.func @grouped_matmul(%x: tensor<16x32xf32>, %w: tensor<4x64x32xf32>, %ids: tensor<16xi64>, %dy: tensor<16x64xf32>) {
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, k], [j, l, k], [i]) -> ([i, l]) {i=16, j=4, k=32, l=64} reduction={j, k}
  %0 = cleave.grouped_matmul %x, %w, %ids transpose_w : (tensor<16x32xf32>, tensor<4x64x32xf32>, tensor<16xi64>) -> tensor<16x64xf32>
  // CHECK: :[[@LINE+1]]:{{[0-9]+}}: remark: ([i, k], [i, l], [i]) -> ([j, l, k]) {i=16, j=4, k=32, l=64} reduction={i}
  %1 = cleave.grouped_matmul_weight_grad %x, %dy, %ids transpose_w : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<16xi64>) -> tensor<4x64x32xf32>
  return
}
