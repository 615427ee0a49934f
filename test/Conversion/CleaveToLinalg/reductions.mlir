// RUN: cleave-opt --cleave-convert-cleave-to-linalg %s | FileCheck %s

// Batched contraction: loops (batch, m, n, k), accumulator filled with 0.
// CHECK-DAG: #[[LHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[RHS:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @contract
// CHECK: %[[Z:.*]] = arith.constant 0.0
// CHECK: linalg.fill ins(%[[Z]]
// CHECK: linalg.generic {indexing_maps = [#[[LHS]], #[[RHS]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @contract(%a: tensor<4x8x16xf32>, %b: tensor<4x16x32xf32>) -> tensor<4x8x32xf32> {
  %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1]
      : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
}

// Reductions start from the identity: -inf for max, highest for signed min.
// CHECK-LABEL: func.func @reduce
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: arith.constant 2147483647 : i32
// CHECK: arith.minsi
func.func @reduce(%x: tensor<4x8xf32>, %y: tensor<4x8xi32>) -> (tensor<4xf32>, tensor<8xi32>) {
  %0 = cleave.reduce max %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %1 = cleave.reduce min %y dims = [0] : tensor<4x8xi32> -> tensor<8xi32>
  return %0, %1 : tensor<4xf32>, tensor<8xi32>
}

// arg_reduce carries (value, index) and keeps the first maximum.
// CHECK-LABEL: func.func @arg_reduce
// CHECK: linalg.generic
// CHECK: arith.cmpf ogt
// CHECK: linalg.index 1
// CHECK: linalg.yield %{{.*}}, %{{.*}} : f32, i64
func.func @arg_reduce(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  %0 = cleave.arg_reduce max %x dim = 1 : tensor<4x8xf32> -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// Softmax: max-reduce, subtract, exp, sum-reduce, divide. The row max is a
// maxnum and the row sum may reassociate, so LLVM vectorizes both (a NaN in
// a row still gives a NaN row: x - max is NaN).
// CHECK-LABEL: func.func @softmax
// CHECK: arith.maxnumf
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK: arith.divf
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = cleave.softmax %x dim = 1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Layer norm: mean, centered squares, rsqrt(var + eps) * scale + bias.
// CHECK-LABEL: func.func @layer_norm
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK: arith.subf
// CHECK: math.rsqrt
func.func @layer_norm(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// RMS norm: one reduction of squares (no mean, no centring) in f32 for a
// bf16 operand, then rsqrt(mean + eps) * scale with no bias.
// CHECK-LABEL: func.func @rms_norm
// CHECK: arith.extf {{.*}} : bf16 to f32
// CHECK-NOT: arith.subf
// CHECK: arith.mulf %[[IN:.*]], %[[IN]] : f32
// CHECK-NOT: arith.subf
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK-NOT: linalg.generic {{.*}}"reduction"
// CHECK: math.rsqrt
// CHECK-NEXT: %[[N:.*]] = arith.mulf
// CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[N]],
// CHECK-NEXT: linalg.yield %[[Y]] : f32
// CHECK: arith.truncf {{.*}} : f32 to bf16
func.func @rms_norm(%x: tensor<4x8xbf16>, %g: tensor<8xbf16>) -> tensor<4x8xbf16> {
  %0 = cleave.rms_norm %x, %g axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// Cumsum is an scf.for over the scanned dimension adding slices.
// CHECK-LABEL: func.func @cumsum
// CHECK: scf.for
// CHECK: tensor.extract_slice
// CHECK: linalg.generic
// CHECK: tensor.insert_slice
func.func @cumsum(%x: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %0 = cleave.cumsum %x dim = 0 : tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// bf16 reductions accumulate in f32.
// CHECK-LABEL: func.func @bf16_sum
// CHECK: arith.extf
// CHECK: linalg.fill ins(%{{.*}} : f32)
// CHECK: arith.truncf
func.func @bf16_sum(%x: tensor<4x8xbf16>) -> tensor<4xbf16> {
  %0 = cleave.reduce sum %x dims = [1] : tensor<4x8xbf16> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}
