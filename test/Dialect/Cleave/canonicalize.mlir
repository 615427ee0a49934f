// Folders and canonicalization patterns of the cleave dialect.
// RUN: cleave-opt %s -canonicalize | FileCheck %s

//===----------------------------------------------------------------------===//
// Unary constant folding
//===----------------------------------------------------------------------===//

// neg and abs of float constants fold, per element and on splats.
// CHECK-LABEL: func.func @unary_float_fold
func.func @unary_float_fold() -> (tensor<3xf32>, tensor<3xf32>, tensor<2xbf16>) {
  // CHECK-DAG: %[[NEG:.*]] = cleave.constant dense<[-1.000000e+00, 2.000000e+00, -0.000000e+00]> : tensor<3xf32>
  // CHECK-DAG: %[[ABS:.*]] = cleave.constant dense<[1.000000e+00, 2.000000e+00, 0.000000e+00]> : tensor<3xf32>
  // CHECK-DAG: %[[SPLAT:.*]] = cleave.constant dense<-1.500000e+00> : tensor<2xbf16>
  // CHECK-NOT: cleave.unary
  // CHECK: return %[[NEG]], %[[ABS]], %[[SPLAT]]
  %c = cleave.constant dense<[1.0, -2.0, 0.0]> : tensor<3xf32>
  %0 = cleave.unary neg %c : tensor<3xf32>
  %1 = cleave.unary abs %c : tensor<3xf32>
  %s = cleave.constant dense<1.5> : tensor<2xbf16>
  %2 = cleave.unary neg %s : tensor<2xbf16>
  return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<2xbf16>
}

// neg and not of integer constants fold; not on i1 is logical negation.
// CHECK-LABEL: func.func @unary_int_fold
func.func @unary_int_fold() -> (tensor<2xi64>, tensor<2xi8>, tensor<2xi1>, tensor<2xui8>) {
  // CHECK-DAG: %[[NEG:.*]] = cleave.constant dense<[-3, 4]> : tensor<2xi64>
  // CHECK-DAG: %[[NOT:.*]] = cleave.constant dense<[-1, -16]> : tensor<2xi8>
  // CHECK-DAG: %[[LNOT:.*]] = cleave.constant dense<[false, true]> : tensor<2xi1>
  // CHECK-DAG: %[[UNOT:.*]] = cleave.constant dense<[255, 0]> : tensor<2xui8>
  // CHECK-NOT: cleave.unary
  // CHECK: return %[[NEG]], %[[NOT]], %[[LNOT]], %[[UNOT]]
  %a = cleave.constant dense<[3, -4]> : tensor<2xi64>
  %0 = cleave.unary neg %a : tensor<2xi64>
  %b = cleave.constant dense<[0, 15]> : tensor<2xi8>
  %1 = cleave.unary not %b : tensor<2xi8>
  %c = cleave.constant dense<[true, false]> : tensor<2xi1>
  %2 = cleave.unary not %c : tensor<2xi1>
  %d = cleave.constant dense<[0, 255]> : tensor<2xui8>
  %3 = cleave.unary not %d : tensor<2xui8>
  return %0, %1, %2, %3 : tensor<2xi64>, tensor<2xi8>, tensor<2xi1>, tensor<2xui8>
}

// Transcendental kinds, and abs on integers, are not folded.
// CHECK-LABEL: func.func @unary_no_fold
func.func @unary_no_fold() -> (tensor<2xf32>, tensor<2xi32>) {
  // CHECK: cleave.unary exp
  // CHECK: cleave.unary abs
  %c = cleave.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = cleave.unary exp %c : tensor<2xf32>
  %i = cleave.constant dense<[-1, 2]> : tensor<2xi32>
  %1 = cleave.unary abs %i : tensor<2xi32>
  return %0, %1 : tensor<2xf32>, tensor<2xi32>
}

// A non-constant operand is left alone.
// CHECK-LABEL: func.func @unary_not_constant
func.func @unary_not_constant(%x: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: %[[R:.*]] = cleave.unary neg %{{.*}} : tensor<2xf32>
  // CHECK: return %[[R]]
  %0 = cleave.unary neg %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}

//===----------------------------------------------------------------------===//
// Binary constant folding
//===----------------------------------------------------------------------===//

// Signed integer add, sub, mul, div (truncating), max and min fold.
// CHECK-LABEL: func.func @binary_int_fold
func.func @binary_int_fold() -> (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) {
  // CHECK-DAG: %[[ADD:.*]] = cleave.constant dense<[9, -4]> : tensor<2xi64>
  // CHECK-DAG: %[[SUB:.*]] = cleave.constant dense<[5, -10]> : tensor<2xi64>
  // CHECK-DAG: %[[MUL:.*]] = cleave.constant dense<[14, -21]> : tensor<2xi64>
  // CHECK-DAG: %[[DIV:.*]] = cleave.constant dense<[3, -2]> : tensor<2xi64>
  // CHECK-DAG: %[[MAX:.*]] = cleave.constant dense<[7, 3]> : tensor<2xi64>
  // CHECK-DAG: %[[MIN:.*]] = cleave.constant dense<[2, -7]> : tensor<2xi64>
  // CHECK-NOT: cleave.binary
  // CHECK: return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]], %[[MAX]], %[[MIN]]
  %a = cleave.constant dense<[7, -7]> : tensor<2xi64>
  %b = cleave.constant dense<[2, 3]> : tensor<2xi64>
  %0 = cleave.binary add %a, %b : tensor<2xi64>
  %1 = cleave.binary sub %a, %b : tensor<2xi64>
  %2 = cleave.binary mul %a, %b : tensor<2xi64>
  %3 = cleave.binary div %a, %b : tensor<2xi64>
  %4 = cleave.binary max %a, %b : tensor<2xi64>
  %5 = cleave.binary min %a, %b : tensor<2xi64>
  return %0, %1, %2, %3, %4, %5 : tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>
}

// Integer folding wraps at the element width.
// CHECK-LABEL: func.func @binary_int_wraps
func.func @binary_int_wraps() -> tensor<i8> {
  // CHECK: %[[R:.*]] = cleave.constant dense<-128> : tensor<i8>
  // CHECK: return %[[R]]
  %a = cleave.constant dense<127> : tensor<i8>
  %b = cleave.constant dense<1> : tensor<i8>
  %0 = cleave.binary add %a, %b : tensor<i8>
  return %0 : tensor<i8>
}

// Unsigned div, max and min use unsigned arithmetic.
// CHECK-LABEL: func.func @binary_unsigned_fold
func.func @binary_unsigned_fold() -> (tensor<2xui8>, tensor<2xui8>, tensor<2xui8>) {
  // CHECK-DAG: %[[DIV:.*]] = cleave.constant dense<[66, 0]> : tensor<2xui8>
  // CHECK-DAG: %[[MAX:.*]] = cleave.constant dense<[200, 100]> : tensor<2xui8>
  // CHECK-DAG: %[[MIN:.*]] = cleave.constant dense<[3, 1]> : tensor<2xui8>
  // CHECK-NOT: cleave.binary
  // CHECK: return %[[DIV]], %[[MAX]], %[[MIN]]
  %a = cleave.constant dense<[200, 1]> : tensor<2xui8>
  %b = cleave.constant dense<[3, 100]> : tensor<2xui8>
  %0 = cleave.binary div %a, %b : tensor<2xui8>
  %1 = cleave.binary max %a, %b : tensor<2xui8>
  %2 = cleave.binary min %a, %b : tensor<2xui8>
  return %0, %1, %2 : tensor<2xui8>, tensor<2xui8>, tensor<2xui8>
}

// Signed max and min of the same bits as above take the signed order.
// CHECK-LABEL: func.func @binary_signed_i8_fold
func.func @binary_signed_i8_fold() -> (tensor<2xi8>, tensor<2xi8>) {
  // CHECK-DAG: %[[DIV:.*]] = cleave.constant dense<[-18, 0]> : tensor<2xi8>
  // CHECK-DAG: %[[MAX:.*]] = cleave.constant dense<[3, 100]> : tensor<2xi8>
  // CHECK: return %[[DIV]], %[[MAX]]
  %a = cleave.constant dense<[-56, 1]> : tensor<2xi8>
  %b = cleave.constant dense<[3, 100]> : tensor<2xi8>
  %0 = cleave.binary div %a, %b : tensor<2xi8>
  %1 = cleave.binary max %a, %b : tensor<2xi8>
  return %0, %1 : tensor<2xi8>, tensor<2xi8>
}

// Float add, sub, mul and div fold, also on splats and f64.
// CHECK-LABEL: func.func @binary_float_fold
func.func @binary_float_fold() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<3xf64>) {
  // CHECK-DAG: %[[ADD:.*]] = cleave.constant dense<[1.500000e+00, 6.000000e+00]> : tensor<2xf32>
  // CHECK-DAG: %[[SUB:.*]] = cleave.constant dense<[5.000000e-01, 2.000000e+00]> : tensor<2xf32>
  // CHECK-DAG: %[[MUL:.*]] = cleave.constant dense<[5.000000e-01, 8.000000e+00]> : tensor<2xf32>
  // CHECK-DAG: %[[DIV:.*]] = cleave.constant dense<2.000000e+00> : tensor<2xf32>
  // CHECK-DAG: %[[F64:.*]] = cleave.constant dense<7.500000e-01> : tensor<3xf64>
  // CHECK-NOT: cleave.binary
  // CHECK: return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]], %[[F64]]
  %a = cleave.constant dense<[1.0, 4.0]> : tensor<2xf32>
  %b = cleave.constant dense<[0.5, 2.0]> : tensor<2xf32>
  %0 = cleave.binary add %a, %b : tensor<2xf32>
  %1 = cleave.binary sub %a, %b : tensor<2xf32>
  %2 = cleave.binary mul %a, %b : tensor<2xf32>
  %3 = cleave.binary div %a, %b : tensor<2xf32>
  %c = cleave.constant dense<0.5> : tensor<3xf64>
  %d = cleave.constant dense<0.25> : tensor<3xf64>
  %4 = cleave.binary add %c, %d : tensor<3xf64>
  return %0, %1, %2, %3, %4 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<3xf64>
}

// Float division by zero folds to infinity (IEEE), unlike integer division.
// CHECK-LABEL: func.func @binary_float_div_zero
func.func @binary_float_div_zero() -> tensor<f32> {
  // CHECK: %[[R:.*]] = cleave.constant dense<0x7F800000> : tensor<f32>
  // CHECK: return %[[R]]
  %a = cleave.constant dense<1.0> : tensor<f32>
  %z = cleave.constant dense<0.0> : tensor<f32>
  %0 = cleave.binary div %a, %z : tensor<f32>
  return %0 : tensor<f32>
}

// Integer division by a zero constant is not folded (the runtime decides).
// CHECK-LABEL: func.func @binary_int_div_zero
func.func @binary_int_div_zero() -> tensor<2xi32> {
  // CHECK: %[[R:.*]] = cleave.binary div %{{.*}}, %{{.*}} : tensor<2xi32>
  // CHECK: return %[[R]]
  %a = cleave.constant dense<[6, 8]> : tensor<2xi32>
  %b = cleave.constant dense<[3, 0]> : tensor<2xi32>
  %0 = cleave.binary div %a, %b : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// Kinds without a folder (float max, integer rem and shifts) stay.
// CHECK-LABEL: func.func @binary_no_fold
func.func @binary_no_fold() -> (tensor<2xf32>, tensor<2xi32>, tensor<2xi32>) {
  // CHECK: cleave.binary max
  // CHECK: cleave.binary rem
  // CHECK: cleave.binary shl
  %a = cleave.constant dense<[1.0, 4.0]> : tensor<2xf32>
  %0 = cleave.binary max %a, %a : tensor<2xf32>
  %i = cleave.constant dense<[7, -7]> : tensor<2xi32>
  %1 = cleave.binary rem %i, %i : tensor<2xi32>
  %2 = cleave.binary shl %i, %i : tensor<2xi32>
  return %0, %1, %2 : tensor<2xf32>, tensor<2xi32>, tensor<2xi32>
}

// Binary ops with a non-constant operand are left alone.
// CHECK-LABEL: func.func @binary_not_constant
func.func @binary_not_constant(%x: tensor<2xi64>) -> tensor<2xi64> {
  // CHECK: %[[R:.*]] = cleave.binary add %{{.*}}, %{{.*}} : tensor<2xi64>
  // CHECK: return %[[R]]
  %c = cleave.constant dense<[1, 2]> : tensor<2xi64>
  %0 = cleave.binary add %x, %c : tensor<2xi64>
  return %0 : tensor<2xi64>
}

// Tensors of more than 4096 elements are folded only when both are splats
// (computed once); a large non-splat operand is left to the kernel.
// CHECK-LABEL: func.func @binary_too_large
func.func @binary_too_large() -> (tensor<4097xi32>, tensor<4097xi32>) {
  // CHECK-DAG: %[[TWO:.*]] = cleave.constant dense<2> : tensor<4097xi32>
  // CHECK-DAG: %[[IOTA:.*]] = cleave.iota
  // CHECK: %[[SUM:.*]] = cleave.binary add %[[IOTA]]
  // CHECK: return %[[TWO]], %[[SUM]]
  %c = cleave.constant dense<1> : tensor<4097xi32>
  %0 = cleave.binary add %c, %c : tensor<4097xi32>
  %i = cleave.iota dim = 0 : tensor<4097xi32>
  %1 = cleave.binary add %i, %c : tensor<4097xi32>
  return %0, %1 : tensor<4097xi32>, tensor<4097xi32>
}

//===----------------------------------------------------------------------===//
// Select and convert
//===----------------------------------------------------------------------===//

// Select between equal operands is that operand.
// CHECK-LABEL: func.func @select_same_operands
// CHECK-SAME: (%{{.*}}: tensor<4xi1>, %[[A:.*]]: tensor<4xf32>)
func.func @select_same_operands(%c: tensor<4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NOT: cleave.select
  // CHECK: return %[[A]]
  %0 = cleave.select %c, %a, %a : tensor<4xi1>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// Select on a splat true condition is the true operand, on false the false one.
// CHECK-LABEL: func.func @select_splat_condition
// CHECK-SAME: (%[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>)
func.func @select_splat_condition(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK-NOT: cleave.select
  // CHECK: return %[[A]], %[[B]]
  %t = cleave.constant dense<true> : tensor<4xi1>
  %f = cleave.constant dense<false> : tensor<4xi1>
  %0 = cleave.select %t, %a, %b : tensor<4xi1>, tensor<4xf32>
  %1 = cleave.select %f, %a, %b : tensor<4xi1>, tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// Select on a non-splat constant condition stays.
// CHECK-LABEL: func.func @select_mixed_condition
func.func @select_mixed_condition(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  // CHECK: %[[R:.*]] = cleave.select
  // CHECK: return %[[R]]
  %c = cleave.constant dense<[true, false]> : tensor<2xi1>
  %0 = cleave.select %c, %a, %b : tensor<2xi1>, tensor<2xf32>
  return %0 : tensor<2xf32>
}

// Convert to the same type is the operand.
// CHECK-LABEL: func.func @convert_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
func.func @convert_same_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NOT: cleave.convert
  // CHECK: return %[[X]]
  %0 = cleave.convert %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// Convert between element types stays, also between ui8 and i8.
// CHECK-LABEL: func.func @convert_other_type
func.func @convert_other_type(%x: tensor<4xf32>, %u: tensor<4xui8>) -> (tensor<4xbf16>, tensor<4xi8>) {
  // CHECK: cleave.convert %{{.*}} : tensor<4xf32> -> tensor<4xbf16>
  // CHECK: cleave.convert %{{.*}} : tensor<4xui8> -> tensor<4xi8>
  %0 = cleave.convert %x : tensor<4xf32> -> tensor<4xbf16>
  %1 = cleave.convert %u : tensor<4xui8> -> tensor<4xi8>
  return %0, %1 : tensor<4xbf16>, tensor<4xi8>
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// Broadcast to the operand's own type is the operand.
// CHECK-LABEL: func.func @broadcast_identity
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
func.func @broadcast_identity(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NOT: cleave.broadcast_in_dim
  // CHECK: return %[[X]]
  %0 = cleave.broadcast_in_dim %x dims = [0, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Broadcast of a splat constant is a larger splat constant.
// CHECK-LABEL: func.func @broadcast_splat
func.func @broadcast_splat() -> tensor<4x8xf32> {
  // CHECK: %[[C:.*]] = cleave.constant dense<2.000000e+00> : tensor<4x8xf32>
  // CHECK-NOT: cleave.broadcast_in_dim
  // CHECK: return %[[C]]
  %c = cleave.constant dense<2.0> : tensor<f32>
  %0 = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Broadcast of a non-splat constant stays (it would grow the constant).
// CHECK-LABEL: func.func @broadcast_non_splat
func.func @broadcast_non_splat() -> tensor<4x2xi32> {
  // CHECK: %[[R:.*]] = cleave.broadcast_in_dim %{{.*}} dims = [1] : tensor<2xi32> -> tensor<4x2xi32>
  // CHECK: return %[[R]]
  %c = cleave.constant dense<[1, 2]> : tensor<2xi32>
  %0 = cleave.broadcast_in_dim %c dims = [1] : tensor<2xi32> -> tensor<4x2xi32>
  return %0 : tensor<4x2xi32>
}

// Reshape to the operand's own type is the operand.
// CHECK-LABEL: func.func @reshape_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
func.func @reshape_identity(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-NOT: cleave.reshape
  // CHECK: return %[[X]]
  %0 = cleave.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// Reshape of a constant is a reshaped constant.
// CHECK-LABEL: func.func @reshape_constant
func.func @reshape_constant() -> tensor<2x2xi64> {
  // CHECK: %[[C:.*]] = cleave.constant dense<{{\[\[}}1, 2], [3, 4]]> : tensor<2x2xi64>
  // CHECK-NOT: cleave.reshape
  // CHECK: return %[[C]]
  %c = cleave.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = cleave.reshape %c : tensor<4xi64> -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// A chain of reshapes is one reshape.
// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @reshape_chain(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  // CHECK: %[[R:.*]] = cleave.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<4x6xf32>
  // CHECK-NOT: cleave.reshape
  // CHECK: return %[[R]]
  %0 = cleave.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %1 = cleave.reshape %0 : tensor<24xf32> -> tensor<4x6xf32>
  return %1 : tensor<4x6xf32>
}

// A chain of reshapes back to the start type disappears.
// CHECK-LABEL: func.func @reshape_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
func.func @reshape_round_trip(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-NOT: cleave.reshape
  // CHECK: return %[[X]]
  %0 = cleave.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %1 = cleave.reshape %0 : tensor<6xf32> -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// Arithmetic on two splats folds at any size, to a splat (the exponent
// 3 - 1 of pow(x, 3)'s derivative).
// CHECK-LABEL: func.func @fold_large_splats
func.func @fold_large_splats() -> tensor<8x64x512xf32> {
  // CHECK: %[[C:.*]] = cleave.constant dense<2.000000e+00> : tensor<8x64x512xf32>
  // CHECK-NOT: cleave.binary
  // CHECK: return %[[C]]
  %a = cleave.constant dense<3.0> : tensor<8x64x512xf32>
  %b = cleave.constant dense<1.0> : tensor<8x64x512xf32>
  %0 = cleave.binary sub %a, %b : tensor<8x64x512xf32>
  return %0 : tensor<8x64x512xf32>
}

// The identity permutation is the operand.
// CHECK-LABEL: func.func @transpose_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @transpose_identity(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // CHECK-NOT: cleave.transpose
  // CHECK: return %[[X]]
  %0 = cleave.transpose %x perm = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// A transpose that only moves unit dimensions moves no element: a reshape
// (a view in the plan).
// CHECK-LABEL: func.func @transpose_unit_dims
// CHECK-SAME: (%[[X:.*]]: tensor<4x1x6xf32>)
func.func @transpose_unit_dims(%x: tensor<4x1x6xf32>) -> tensor<1x4x6xf32> {
  // CHECK-NOT: cleave.transpose
  // CHECK: %[[R:.*]] = cleave.reshape %[[X]] : tensor<4x1x6xf32> -> tensor<1x4x6xf32>
  // CHECK: return %[[R]]
  %0 = cleave.transpose %x perm = [1, 0, 2] : tensor<4x1x6xf32> -> tensor<1x4x6xf32>
  return %0 : tensor<1x4x6xf32>
}

// Swapping two dimensions larger than 1 stays a transpose.
// CHECK-LABEL: func.func @transpose_moves_elements
func.func @transpose_moves_elements(%x: tensor<4x1x6xf32>) -> tensor<6x1x4xf32> {
  // CHECK: cleave.transpose %{{.*}} perm = [2, 1, 0]
  %0 = cleave.transpose %x perm = [2, 1, 0] : tensor<4x1x6xf32> -> tensor<6x1x4xf32>
  return %0 : tensor<6x1x4xf32>
}

// A transpose of a transpose is one transpose with the composed permutation.
// CHECK-LABEL: func.func @transpose_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  // [2, 0, 1] then [2, 1, 0]: result dim i reads x dim inner[outer[i]] = [1, 0, 2].
  // CHECK: %[[R:.*]] = cleave.transpose %[[X]] perm = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  // CHECK-NOT: cleave.transpose
  // CHECK: return %[[R]]
  %0 = cleave.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = cleave.transpose %0 perm = [2, 1, 0] : tensor<4x2x3xf32> -> tensor<3x2x4xf32>
  return %1 : tensor<3x2x4xf32>
}

// A transpose and its inverse cancel out.
// CHECK-LABEL: func.func @transpose_inverse
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @transpose_inverse(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // CHECK-NOT: cleave.transpose
  // CHECK: return %[[X]]
  %0 = cleave.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = cleave.transpose %0 perm = [1, 2, 0] : tensor<4x2x3xf32> -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// A unit-stride slice of the whole operand is the operand.
// CHECK-LABEL: func.func @slice_full
// CHECK-SAME: (%[[X:.*]]: tensor<2x4xf32>)
func.func @slice_full(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // CHECK-NOT: cleave.slice
  // CHECK: return %[[X]]
  %0 = cleave.slice %x start = [0, 0] limit = [2, 4] strides = [1, 1] : tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// A partial slice stays.
// CHECK-LABEL: func.func @slice_partial
func.func @slice_partial(%x: tensor<2x4xf32>) -> tensor<2x2xf32> {
  // CHECK: %[[R:.*]] = cleave.slice
  // CHECK: return %[[R]]
  %0 = cleave.slice %x start = [0, 1] limit = [2, 3] strides = [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// Concat of a single input is that input.
// CHECK-LABEL: func.func @concat_single
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
func.func @concat_single(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-NOT: cleave.concat
  // CHECK: return %[[X]]
  %0 = cleave.concat %x dim = 1 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// Concat of two inputs stays.
// CHECK-LABEL: func.func @concat_two
func.func @concat_two(%x: tensor<2x3xf32>) -> tensor<4x3xf32> {
  // CHECK: %[[R:.*]] = cleave.concat
  // CHECK: return %[[R]]
  %0 = cleave.concat %x, %x dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

//===----------------------------------------------------------------------===//
// Folding across ops
//===----------------------------------------------------------------------===//

// Shape arithmetic folds through a chain: reshape, broadcast, then integer math.
// CHECK-LABEL: func.func @shape_arithmetic_chain
func.func @shape_arithmetic_chain() -> tensor<2xi64> {
  // CHECK: %[[C:.*]] = cleave.constant dense<[12, 24]> : tensor<2xi64>
  // CHECK-NOT: cleave.binary
  // CHECK-NOT: cleave.reshape
  // CHECK: return %[[C]]
  %dims = cleave.constant dense<[[3, 6]]> : tensor<1x2xi64>
  %flat = cleave.reshape %dims : tensor<1x2xi64> -> tensor<2xi64>
  %four = cleave.constant dense<4> : tensor<i64>
  %b = cleave.broadcast_in_dim %four dims = [] : tensor<i64> -> tensor<2xi64>
  %0 = cleave.binary mul %flat, %b : tensor<2xi64>
  return %0 : tensor<2xi64>
}

// Unused ops are erased (every cleave op is pure).
// CHECK-LABEL: func.func @dead_ops
func.func @dead_ops(%x: tensor<4xf32>) {
  // CHECK-NEXT: return
  %0 = cleave.unary exp %x : tensor<4xf32>
  %1 = cleave.softmax %x dim = 0 : tensor<4xf32>
  return
}

// Signed INT_MIN / -1 overflows and is not folded.
// CHECK-LABEL: func.func @binary_int_div_overflow
func.func @binary_int_div_overflow() -> tensor<i8> {
  // CHECK: %[[R:.*]] = cleave.binary div %{{.*}}, %{{.*}} : tensor<i8>
  // CHECK: return %[[R]]
  %a = cleave.constant dense<-128> : tensor<i8>
  %b = cleave.constant dense<-1> : tensor<i8>
  %0 = cleave.binary div %a, %b : tensor<i8>
  return %0 : tensor<i8>
}

// A convert of a float splat rounds it (to nearest even): 1/sqrt(2) in
// bf16 is 0.70703125. Non-splat constants and int conversions stay.
// CHECK-LABEL: func.func @convert_splat_fold
func.func @convert_splat_fold() -> (tensor<4x8xbf16>, tensor<2xbf16>, tensor<3xi32>) {
  // CHECK-DAG: %[[S:.*]] = cleave.constant dense<7.070310e-01> : tensor<4x8xbf16>
  // CHECK-DAG: cleave.convert %{{.*}} : tensor<2xf32> -> tensor<2xbf16>
  // CHECK-DAG: cleave.convert %{{.*}} : tensor<3xf32> -> tensor<3xi32>
  %0 = cleave.constant dense<0.707106769> : tensor<4x8xf32>
  %1 = cleave.convert %0 : tensor<4x8xf32> -> tensor<4x8xbf16>
  %2 = cleave.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %3 = cleave.convert %2 : tensor<2xf32> -> tensor<2xbf16>
  %4 = cleave.constant dense<1.5> : tensor<3xf32>
  %5 = cleave.convert %4 : tensor<3xf32> -> tensor<3xi32>
  return %1, %3, %5 : tensor<4x8xbf16>, tensor<2xbf16>, tensor<3xi32>
}

// A widening convert and its rounding back cancel when the wider type holds
// every value of the narrower; f32 -> bf16 -> f32 and f16 -> bf16 -> f16 lose
// bits and stay.
// CHECK-LABEL: func.func @convert_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<4xbf16>, %[[Y:.*]]: tensor<4xf32>, %[[Z:.*]]: tensor<4xf16>)
// CHECK-DAG: %[[Y1:.*]] = cleave.convert %[[Y]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-DAG: %[[Y2:.*]] = cleave.convert %[[Y1]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-DAG: %[[Z1:.*]] = cleave.convert %[[Z]] : tensor<4xf16> -> tensor<4xbf16>
// CHECK-DAG: %[[Z2:.*]] = cleave.convert %[[Z1]] : tensor<4xbf16> -> tensor<4xf16>
// CHECK: return %[[X]], %[[Y2]], %[[Z2]]
func.func @convert_round_trip(%x: tensor<4xbf16>, %y: tensor<4xf32>, %z: tensor<4xf16>) -> (tensor<4xbf16>, tensor<4xf32>, tensor<4xf16>) {
  %0 = cleave.convert %x : tensor<4xbf16> -> tensor<4xf32>
  %1 = cleave.convert %0 : tensor<4xf32> -> tensor<4xbf16>
  %2 = cleave.convert %y : tensor<4xf32> -> tensor<4xbf16>
  %3 = cleave.convert %2 : tensor<4xbf16> -> tensor<4xf32>
  %4 = cleave.convert %z : tensor<4xf16> -> tensor<4xbf16>
  %5 = cleave.convert %4 : tensor<4xbf16> -> tensor<4xf16>
  return %1, %3, %5 : tensor<4xbf16>, tensor<4xf32>, tensor<4xf16>
}
