// RUN: cleave-opt %s --split-input-file --cleave-recognize-composites | FileCheck %s

// Attention masks that exports materialize from constants instead of
// folding them: --cleave-recognize-composites evaluates them as the program
// would and gives the attention its causal form when the pattern is causal;
// any other pattern stays the op's bias (additive) or is not recognized
// (select).

// -----

// GPT-2's default export at a length the exporter does not fold: the
// batch and position indices as constants, compared (key <= query, batch ==
// batch), combined with `and`, and a select of 0 and the lowest f32 added
// to the scores. Causal; the mask's ops go with the scores'.
// CHECK-LABEL: func.func @gpt2_materialized
// CHECK-NOT: cleave.compare
// CHECK-NOT: cleave.select
// CHECK: cleave.attention %arg0, %{{.*}}, %arg2 scale = 1.000000e+00 causal :
// CHECK-NOT: cleave.softmax
func.func @gpt2_materialized(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %ones = cleave.constant dense<true> : tensor<i1>
  %onesb = cleave.broadcast_in_dim %ones dims = [] : tensor<i1> -> tensor<2x1x4x4xi1>
  %rows = cleave.constant dense<[[[[0], [1], [2], [3]]], [[[0], [1], [2], [3]]]]> : tensor<2x1x4x1xi64>
  %cols = cleave.constant dense<[[[[0, 1, 2, 3]]], [[[0, 1, 2, 3]]]]> : tensor<2x1x1x4xi64>
  %rowsb = cleave.broadcast_in_dim %rows dims = [0, 1, 2, 3] : tensor<2x1x4x1xi64> -> tensor<2x1x4x4xi64>
  %colsb = cleave.broadcast_in_dim %cols dims = [0, 1, 2, 3] : tensor<2x1x1x4xi64> -> tensor<2x1x4x4xi64>
  %le = cleave.compare le %colsb, %rowsb : tensor<2x1x4x4xi64> -> tensor<2x1x4x4xi1>
  %b0 = cleave.constant dense<[[[[0]]], [[[1]]]]> : tensor<2x1x1x1xi64>
  %b0b = cleave.broadcast_in_dim %b0 dims = [0, 1, 2, 3] : tensor<2x1x1x1xi64> -> tensor<2x1x4x4xi64>
  %eq = cleave.compare eq %b0b, %b0b : tensor<2x1x4x4xi64> -> tensor<2x1x4x4xi1>
  %and0 = cleave.binary and %onesb, %le : tensor<2x1x4x4xi1>
  %and1 = cleave.binary and %and0, %eq : tensor<2x1x4x4xi1>
  %zero = cleave.constant dense<0.0> : tensor<f32>
  %zerob = cleave.broadcast_in_dim %zero dims = [] : tensor<f32> -> tensor<2x1x4x4xf32>
  %min = cleave.constant dense<-3.40282347E+38> : tensor<f32>
  %minb = cleave.broadcast_in_dim %min dims = [] : tensor<f32> -> tensor<2x1x4x4xf32>
  %mask = cleave.select %and1, %zerob, %minb : tensor<2x1x4x4xi1>, tensor<2x1x4x4xf32>
  %mb = cleave.broadcast_in_dim %mask dims = [0, 1, 2, 3] : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
  %m = cleave.binary add %s, %mb : tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// The same with the key indices of the second batch shifted by one (a
// near miss: not one causal pattern): the mask stays the op's bias, its ops
// as they were.
// CHECK-LABEL: func.func @gpt2_materialized_shifted
// CHECK: cleave.compare le
// CHECK: cleave.select
// CHECK: cleave.attention %arg0, %{{.*}}, %arg2 bias %{{.*}} scale = 1.000000e+00 :
func.func @gpt2_materialized_shifted(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %ones = cleave.constant dense<true> : tensor<i1>
  %onesb = cleave.broadcast_in_dim %ones dims = [] : tensor<i1> -> tensor<2x1x4x4xi1>
  %rows = cleave.constant dense<[[[[0], [1], [2], [3]]], [[[0], [1], [2], [3]]]]> : tensor<2x1x4x1xi64>
  %cols = cleave.constant dense<[[[[0, 1, 2, 3]]], [[[1, 2, 3, 4]]]]> : tensor<2x1x1x4xi64>
  %rowsb = cleave.broadcast_in_dim %rows dims = [0, 1, 2, 3] : tensor<2x1x4x1xi64> -> tensor<2x1x4x4xi64>
  %colsb = cleave.broadcast_in_dim %cols dims = [0, 1, 2, 3] : tensor<2x1x1x4xi64> -> tensor<2x1x4x4xi64>
  %le = cleave.compare le %colsb, %rowsb : tensor<2x1x4x4xi64> -> tensor<2x1x4x4xi1>
  %b0 = cleave.constant dense<[[[[0]]], [[[1]]]]> : tensor<2x1x1x1xi64>
  %b0b = cleave.broadcast_in_dim %b0 dims = [0, 1, 2, 3] : tensor<2x1x1x1xi64> -> tensor<2x1x4x4xi64>
  %eq = cleave.compare eq %b0b, %b0b : tensor<2x1x4x4xi64> -> tensor<2x1x4x4xi1>
  %and0 = cleave.binary and %onesb, %le : tensor<2x1x4x4xi1>
  %and1 = cleave.binary and %and0, %eq : tensor<2x1x4x4xi1>
  %zero = cleave.constant dense<0.0> : tensor<f32>
  %zerob = cleave.broadcast_in_dim %zero dims = [] : tensor<f32> -> tensor<2x1x4x4xf32>
  %min = cleave.constant dense<-3.40282347E+38> : tensor<f32>
  %minb = cleave.broadcast_in_dim %min dims = [] : tensor<f32> -> tensor<2x1x4x4xf32>
  %mask = cleave.select %and1, %zerob, %minb : tensor<2x1x4x4xi1>, tensor<2x1x4x4xf32>
  %mb = cleave.broadcast_in_dim %mask dims = [0, 1, 2, 3] : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
  %m = cleave.binary add %s, %mb : tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// A Range/compare/Where mask (Trilu's form): j <= i from two iotas in a
// select with -inf. Causal.
// CHECK-LABEL: func.func @iota_select
// CHECK-NOT: cleave.iota
// CHECK: cleave.attention %arg0, %{{.*}}, %arg2 scale = 1.000000e+00 causal :
// CHECK-NOT: cleave.softmax
func.func @iota_select(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %i = cleave.iota dim = 0 : tensor<4x4xi64>
  %j = cleave.iota dim = 1 : tensor<4x4xi64>
  %le = cleave.compare le %j, %i : tensor<4x4xi64> -> tensor<4x4xi1>
  %mb = cleave.broadcast_in_dim %le dims = [2, 3] : tensor<4x4xi1> -> tensor<2x2x4x4xi1>
  %f = cleave.constant dense<0xFF800000> : tensor<f32>
  %fb = cleave.broadcast_in_dim %f dims = [] : tensor<f32> -> tensor<2x2x4x4xf32>
  %m = cleave.select %mb, %s, %fb : tensor<2x2x4x4xi1>, tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Near miss: j < i masks every key of the first row (offset -1), which
// the softmax and the op treat differently: left as it is.
// CHECK-LABEL: func.func @iota_select_strict
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @iota_select_strict(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %i = cleave.iota dim = 0 : tensor<4x4xi64>
  %j = cleave.iota dim = 1 : tensor<4x4xi64>
  %le = cleave.compare lt %j, %i : tensor<4x4xi64> -> tensor<4x4xi1>
  %mb = cleave.broadcast_in_dim %le dims = [2, 3] : tensor<4x4xi1> -> tensor<2x2x4x4xi1>
  %f = cleave.constant dense<0xFF800000> : tensor<f32>
  %fb = cleave.broadcast_in_dim %f dims = [] : tensor<f32> -> tensor<2x2x4x4xf32>
  %m = cleave.select %mb, %s, %fb : tensor<2x2x4x4xi1>, tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Near miss: j >= i, the transposed (anti-causal) pattern: left as it is.
// CHECK-LABEL: func.func @iota_select_ge
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @iota_select_ge(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %i = cleave.iota dim = 0 : tensor<4x4xi64>
  %j = cleave.iota dim = 1 : tensor<4x4xi64>
  %le = cleave.compare ge %j, %i : tensor<4x4xi64> -> tensor<4x4xi1>
  %mb = cleave.broadcast_in_dim %le dims = [2, 3] : tensor<4x4xi1> -> tensor<2x2x4x4xi1>
  %f = cleave.constant dense<0xFF800000> : tensor<f32>
  %fb = cleave.broadcast_in_dim %f dims = [] : tensor<f32> -> tensor<2x2x4x4xf32>
  %m = cleave.select %mb, %s, %fb : tensor<2x2x4x4xi1>, tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Padding and causal: the mask reads the padding input, so it is not
// computed from constants alone: the op's bias.
// CHECK-LABEL: func.func @padding_and_causal
// CHECK: cleave.attention %arg0, %{{.*}}, %arg2 bias %{{.*}} scale = 1.000000e+00 :
func.func @padding_and_causal(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>, %pad: tensor<2x4xi1>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %i = cleave.iota dim = 0 : tensor<4x4xi64>
  %j = cleave.iota dim = 1 : tensor<4x4xi64>
  %le = cleave.compare le %j, %i : tensor<4x4xi64> -> tensor<4x4xi1>
  %leb = cleave.broadcast_in_dim %le dims = [2, 3] : tensor<4x4xi1> -> tensor<2x1x4x4xi1>
  %padb = cleave.broadcast_in_dim %pad dims = [0, 3] : tensor<2x4xi1> -> tensor<2x1x4x4xi1>
  %both = cleave.binary and %leb, %padb : tensor<2x1x4x4xi1>
  %zero = cleave.constant dense<0.0> : tensor<f32>
  %zerob = cleave.broadcast_in_dim %zero dims = [] : tensor<f32> -> tensor<2x1x4x4xf32>
  %min = cleave.constant dense<-3.40282347E+38> : tensor<f32>
  %minb = cleave.broadcast_in_dim %min dims = [] : tensor<f32> -> tensor<2x1x4x4xf32>
  %mask = cleave.select %both, %zerob, %minb : tensor<2x1x4x4xi1>, tensor<2x1x4x4xf32>
  %mb = cleave.broadcast_in_dim %mask dims = [0, 1, 2, 3] : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
  %m = cleave.binary add %s, %mb : tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Near miss: a causal pattern computed from an initializer that is
// trained: its elements change, so it stays the op's bias.
// CHECK-LABEL: func.func @trained_mask
// CHECK: cleave.attention %arg0, %{{.*}}, %arg2 bias %{{.*}} scale = 1.000000e+00 :
func.func @trained_mask(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %mask = cleave.constant {cleave.initializer = "mask", cleave.initializer_kind = #cleave.initializer_kind<parameter>} dense<[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %neg = cleave.unary neg %mask : tensor<4x4xf32>
  %mask2 = cleave.unary neg %neg : tensor<4x4xf32>
  %mb = cleave.broadcast_in_dim %mask2 dims = [2, 3] : tensor<4x4xf32> -> tensor<2x2x4x4xf32>
  %m = cleave.binary add %s, %mb : tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}
