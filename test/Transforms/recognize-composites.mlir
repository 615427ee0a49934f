// RUN: cleave-opt %s --split-input-file --cleave-recognize-composites | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-recognize-composites="attention=false rms-norm=false silu=false" | FileCheck %s --check-prefix=OFF

// The form of make_gpt.py and older PyTorch exports: k given as
// B x H x D x S, the scores scaled by a constant, a select of a constant
// lower-triangular mask and -1e9, a softmax over the keys, the product with
// v. The transposed k is read as it was before the transpose.
// CHECK-LABEL: func.func @select_causal
// CHECK-NOT: cleave.softmax
// CHECK: %[[Y:.*]] = cleave.attention %arg0, %arg1, %arg2 scale = 1.250000e-01 causal : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
// OFF-LABEL: func.func @select_causal
// OFF: cleave.softmax
// OFF-NOT: cleave.attention
func.func @select_causal(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %kt = cleave.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %c = cleave.constant dense<0.125> : tensor<f32>
  %cb = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<1x2x4x4xf32>
  %ss = cleave.binary mul %s, %cb : tensor<1x2x4x4xf32>
  %mask = cleave.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %mb = cleave.broadcast_in_dim %mask dims = [2, 3] : tensor<4x4xi1> -> tensor<1x2x4x4xi1>
  %f = cleave.constant dense<-1.0e9> : tensor<f32>
  %fb = cleave.broadcast_in_dim %f dims = [] : tensor<f32> -> tensor<1x2x4x4xf32>
  %m = cleave.select %mb, %ss, %fb : tensor<1x2x4x4xi1>, tensor<1x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<1x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// -----

// The form of today's GPT-2 and Llama exports: the scores divided by a
// constant and an additive constant mask of 0 and the lowest f32, with the
// batch in it (folded by the exporter). q and k come through the usual
// transposes from B x S x H x D.
// CHECK-LABEL: func.func @additive_causal
// CHECK-DAG: %[[Q:.*]] = cleave.transpose %arg0 perm = [0, 2, 1, 3] : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
// CHECK-DAG: %[[K:.*]] = cleave.transpose %arg1 perm = [0, 2, 1, 3] : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
// CHECK: cleave.attention %[[Q]], %[[K]], %arg2 scale = 2.500000e-01 causal :
// CHECK-NOT: cleave.softmax
func.func @additive_causal(%q: tensor<2x4x2x8xf32>, %k: tensor<2x4x2x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %qt = cleave.transpose %q perm = [0, 2, 1, 3] : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %kt = cleave.transpose %k perm = [0, 2, 3, 1] : tensor<2x4x2x8xf32> -> tensor<2x2x8x4xf32>
  %s = cleave.contract %qt, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %c = cleave.constant dense<4.0> : tensor<f32>
  %cb = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<2x2x4x4xf32>
  %ss = cleave.binary div %s, %cb : tensor<2x2x4x4xf32>
  %mask = cleave.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]], [[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x1x4x4xf32>
  %mb = cleave.broadcast_in_dim %mask dims = [0, 1, 2, 3] : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
  %m = cleave.binary add %ss, %mb : tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// PyTorch's SDPA export: sqrt(scale) on q and on k, no mask; and a causal
// mask with queries behind the keys (Sq = 2 of Skv = 4): offset 2, written
// as masked_fill (where(mask, -inf, scores)) of the strictly upper part.
// CHECK-LABEL: func.func @sdpa_offset
// CHECK: cleave.attention %arg0, %arg1, %arg2 scale = 0.1249999{{[0-9]*}} causal {causal_offset = 2 : i64}
// CHECK-NOT: cleave.softmax
func.func @sdpa_offset(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x2x8xf32> {
  %c = cleave.constant dense<0.353553385> : tensor<f32>
  %cq = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<1x1x2x8xf32>
  %qs = cleave.binary mul %q, %cq : tensor<1x1x2x8xf32>
  %kt = cleave.transpose %k perm = [0, 1, 3, 2] : tensor<1x1x4x8xf32> -> tensor<1x1x8x4xf32>
  %ck = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<1x1x8x4xf32>
  %ks = cleave.binary mul %ck, %kt : tensor<1x1x8x4xf32>
  %s = cleave.contract %qs, %ks batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x2x8xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x2x4xf32>
  %mask = cleave.constant dense<[[false, false, false, true], [false, false, false, false]]> : tensor<2x4xi1>
  %mb = cleave.broadcast_in_dim %mask dims = [2, 3] : tensor<2x4xi1> -> tensor<1x1x2x4xi1>
  %f = cleave.constant dense<0xFF800000> : tensor<f32>
  %fb = cleave.broadcast_in_dim %f dims = [] : tensor<f32> -> tensor<1x1x2x4xf32>
  %m = cleave.select %mb, %fb, %s : tensor<1x1x2x4xi1>, tensor<1x1x2x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<1x1x2x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x2x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x2x8xf32>
  return %y : tensor<1x1x2x8xf32>
}

// -----

// An additive mask that is not a constant (padding from the inputs) is the
// op's bias, read before its broadcast over the heads and queries; a mask
// of zeros (an encoder export without padding) is no mask at all.
// CHECK-LABEL: func.func @bias
// CHECK-DAG: %[[K:.*]] = cleave.transpose %arg1 perm = [0, 1, 3, 2]
// CHECK-DAG: %[[B:.*]] = cleave.reshape %arg3 : tensor<2x4xf32> -> tensor<2x1x1x4xf32>
// CHECK: cleave.attention %arg0, %[[K]], %arg2 bias %[[B]] scale = 1.000000e+00 :
// CHECK-LABEL: func.func @zeros
// CHECK: %[[K:.*]] = cleave.transpose %arg1
// CHECK: cleave.attention %arg0, %[[K]], %arg2 scale = 1.000000e+00 :
func.func @bias(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>, %pad: tensor<2x4xf32>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %mb = cleave.broadcast_in_dim %pad dims = [0, 3] : tensor<2x4xf32> -> tensor<2x2x4x4xf32>
  %m = cleave.binary add %mb, %s : tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}
func.func @zeros(%q: tensor<2x2x4x8xf32>, %kt: tensor<2x2x8x4xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32> -> tensor<2x2x4x4xf32>
  %z = cleave.constant dense<0.0> : tensor<2x1x4x4xf32>
  %zb = cleave.broadcast_in_dim %z dims = [0, 1, 2, 3] : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
  %m = cleave.binary add %s, %zb : tensor<2x2x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<2x2x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Grouped-query attention as Llama exports it: k and v have 2 heads,
// repeated to q's 4 (reshape, broadcast, reshape). The op reads the 2 heads.
// CHECK-LABEL: func.func @gqa
// CHECK: cleave.attention %arg0, %arg1, %arg2 scale = 5.000000e-01 : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32>
// CHECK-NOT: cleave.broadcast_in_dim
func.func @gqa(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %k1 = cleave.reshape %k : tensor<1x2x4x8xf32> -> tensor<1x2x1x4x8xf32>
  %k2 = cleave.broadcast_in_dim %k1 dims = [0, 1, 2, 3, 4] : tensor<1x2x1x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %k3 = cleave.reshape %k2 : tensor<1x2x2x4x8xf32> -> tensor<1x4x4x8xf32>
  %v1 = cleave.reshape %v : tensor<1x2x4x8xf32> -> tensor<1x2x1x4x8xf32>
  %v2 = cleave.broadcast_in_dim %v1 dims = [0, 1, 2, 3, 4] : tensor<1x2x1x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %v3 = cleave.reshape %v2 : tensor<1x2x2x4x8xf32> -> tensor<1x4x4x8xf32>
  %kt = cleave.transpose %k3 perm = [0, 1, 3, 2] : tensor<1x4x4x8xf32> -> tensor<1x4x8x4xf32>
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x4x4x8xf32>, tensor<1x4x8x4xf32> -> tensor<1x4x4x4xf32>
  %c = cleave.constant dense<0.5> : tensor<f32>
  %cb = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<1x4x4x4xf32>
  %ss = cleave.binary mul %cb, %s : tensor<1x4x4x4xf32>
  %p = cleave.softmax %ss dim = 3 : tensor<1x4x4x4xf32>
  %y = cleave.contract %p, %v3 batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x4x4x4xf32>, tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf32>
  return %y : tensor<1x4x4x8xf32>
}

// -----

// Left as they are: a constant select mask that is not causal (a band).
// CHECK-LABEL: func.func @not_causal
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @not_causal(%q: tensor<1x1x4x8xf32>, %kt: tensor<1x1x8x4xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x8xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x4x4xf32>
  %mask = cleave.constant dense<[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]> : tensor<4x4xi1>
  %mb = cleave.broadcast_in_dim %mask dims = [2, 3] : tensor<4x4xi1> -> tensor<1x1x4x4xi1>
  %f = cleave.constant dense<0xFF800000> : tensor<f32>
  %fb = cleave.broadcast_in_dim %f dims = [] : tensor<f32> -> tensor<1x1x4x4xf32>
  %m = cleave.select %mb, %s, %fb : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<1x1x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %y : tensor<1x1x4x8xf32>
}

// -----

// Left as they are: a causal mask whose fill (-100) exp does not take to 0
// for every row.
// CHECK-LABEL: func.func @weak_fill
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @weak_fill(%q: tensor<1x1x4x8xf32>, %kt: tensor<1x1x8x4xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x8xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x4x4xf32>
  %mask = cleave.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %mb = cleave.broadcast_in_dim %mask dims = [2, 3] : tensor<4x4xi1> -> tensor<1x1x4x4xi1>
  %f = cleave.constant dense<-100.0> : tensor<f32>
  %fb = cleave.broadcast_in_dim %f dims = [] : tensor<f32> -> tensor<1x1x4x4xf32>
  %m = cleave.select %mb, %s, %fb : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<1x1x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %y : tensor<1x1x4x8xf32>
}

// -----

// Left as they are: a causal mask that masks every key of the first row
// (offset -1): the softmax gives that row NaN, the op zeros.
// CHECK-LABEL: func.func @empty_row
// CHECK-NOT: cleave.attention
// CHECK: cleave.softmax
func.func @empty_row(%q: tensor<1x1x4x8xf32>, %kt: tensor<1x1x8x4xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x8xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x4x4xf32>
  %mask = cleave.constant dense<[[false, false, false, false], [true, false, false, false], [true, true, false, false], [true, true, true, false]]> : tensor<4x4xi1>
  %mb = cleave.broadcast_in_dim %mask dims = [2, 3] : tensor<4x4xi1> -> tensor<1x1x4x4xi1>
  %f = cleave.constant dense<0xFF800000> : tensor<f32>
  %fb = cleave.broadcast_in_dim %f dims = [] : tensor<f32> -> tensor<1x1x4x4xf32>
  %m = cleave.select %mb, %s, %fb : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
  %p = cleave.softmax %m dim = 3 : tensor<1x1x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %y : tensor<1x1x4x8xf32>
}

// -----

// Left as they are: a scale that is not a constant; a softmax over the
// queries; a softmax of a tensor that is not the scores; probabilities
// read elsewhere too; scores accumulated into a wider type than q and k.
// CHECK-LABEL: func.func @scale_not_constant
// CHECK-NOT: cleave.attention
// CHECK-LABEL: func.func @wrong_axis
// CHECK-NOT: cleave.attention
// CHECK-LABEL: func.func @not_scores
// CHECK-NOT: cleave.attention
// CHECK-LABEL: func.func @probabilities_returned
// CHECK-NOT: cleave.attention
// CHECK-LABEL: func.func @mixed_types
// CHECK-NOT: cleave.attention
func.func @scale_not_constant(%q: tensor<1x1x4x8xf32>, %kt: tensor<1x1x8x4xf32>, %v: tensor<1x1x4x8xf32>, %c: tensor<f32>) -> tensor<1x1x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x8xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x4x4xf32>
  %cb = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<1x1x4x4xf32>
  %ss = cleave.binary mul %s, %cb : tensor<1x1x4x4xf32>
  %p = cleave.softmax %ss dim = 3 : tensor<1x1x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %y : tensor<1x1x4x8xf32>
}
func.func @wrong_axis(%q: tensor<1x1x4x8xf32>, %kt: tensor<1x1x8x4xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x8xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x4x4xf32>
  %p = cleave.softmax %s dim = 2 : tensor<1x1x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %y : tensor<1x1x4x8xf32>
}
func.func @not_scores(%x: tensor<1x1x4x4xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %c = cleave.constant dense<0.5> : tensor<f32>
  %cb = cleave.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<1x1x4x4xf32>
  %ss = cleave.binary mul %x, %cb : tensor<1x1x4x4xf32>
  %p = cleave.softmax %ss dim = 3 : tensor<1x1x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %y : tensor<1x1x4x8xf32>
}
func.func @probabilities_returned(%q: tensor<1x1x4x8xf32>, %kt: tensor<1x1x8x4xf32>, %v: tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>) {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x8xf32>, tensor<1x1x8x4xf32> -> tensor<1x1x4x4xf32>
  %p = cleave.softmax %s dim = 3 : tensor<1x1x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %y, %p : tensor<1x1x4x8xf32>, tensor<1x1x4x4xf32>
}
func.func @mixed_types(%q: tensor<1x1x4x8xbf16>, %kt: tensor<1x1x8x4xbf16>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %s = cleave.contract %q, %kt batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x8xbf16>, tensor<1x1x8x4xbf16> -> tensor<1x1x4x4xf32>
  %p = cleave.softmax %s dim = 3 : tensor<1x1x4x4xf32>
  %y = cleave.contract %p, %v batch = [0, 1] x [0, 1] contract = [3] x [2] : tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %y : tensor<1x1x4x8xf32>
}

// -----

// RMS normalization as Llama exports it: pow(x, 2), ReduceMean (a sum and
// a division by the count, the reduced axis kept), eps, Sqrt, Reciprocal,
// times x, times the weight.
// CHECK-LABEL: func.func @rms_llama
// CHECK: %[[Y:.*]] = cleave.rms_norm %arg0, %arg1 axis = 2 epsilon = 9.9999999747524271E-7 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
// OFF-LABEL: func.func @rms_llama
// OFF-NOT: cleave.rms_norm
func.func @rms_llama(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = cleave.constant dense<2.0> : tensor<f32>
  %twob = cleave.broadcast_in_dim %two dims = [] : tensor<f32> -> tensor<2x4x8xf32>
  %sq = cleave.binary pow %x, %twob : tensor<2x4x8xf32>
  %sum = cleave.reduce sum %sq dims = [2] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %keep = cleave.reshape %sum : tensor<2x4xf32> -> tensor<2x4x1xf32>
  %n = cleave.constant dense<8.0> : tensor<f32>
  %nb = cleave.broadcast_in_dim %n dims = [] : tensor<f32> -> tensor<2x4x1xf32>
  %mean = cleave.binary div %keep, %nb : tensor<2x4x1xf32>
  %eps = cleave.constant dense<9.99999997E-7> : tensor<f32>
  %epsb = cleave.broadcast_in_dim %eps dims = [] : tensor<f32> -> tensor<2x4x1xf32>
  %v = cleave.binary add %mean, %epsb : tensor<2x4x1xf32>
  %root = cleave.unary sqrt %v : tensor<2x4x1xf32>
  %inv = cleave.unary reciprocal %root : tensor<2x4x1xf32>
  %invb = cleave.broadcast_in_dim %inv dims = [0, 1, 2] : tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %nx = cleave.binary mul %x, %invb : tensor<2x4x8xf32>
  %wb = cleave.broadcast_in_dim %w dims = [2] : tensor<8xf32> -> tensor<2x4x8xf32>
  %y = cleave.binary mul %wb, %nx : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// x * x, the mean as a product with 1/count over the two trailing axes,
// rsqrt, no weight (a scale of ones).
// CHECK-LABEL: func.func @rms_no_weight
// CHECK: %[[ONES:.*]] = cleave.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK: cleave.rms_norm %arg0, %[[ONES]] axis = 1 epsilon = 9.99999{{[0-9]*}}E-6 : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
func.func @rms_no_weight(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %sq = cleave.binary mul %x, %x : tensor<2x4x8xf32>
  %sum = cleave.reduce sum %sq dims = [1, 2] : tensor<2x4x8xf32> -> tensor<2xf32>
  %n = cleave.constant dense<0.03125> : tensor<f32>
  %nb = cleave.broadcast_in_dim %n dims = [] : tensor<f32> -> tensor<2xf32>
  %mean = cleave.binary mul %nb, %sum : tensor<2xf32>
  %eps = cleave.constant dense<1.0e-5> : tensor<f32>
  %epsb = cleave.broadcast_in_dim %eps dims = [] : tensor<f32> -> tensor<2xf32>
  %v = cleave.binary add %epsb, %mean : tensor<2xf32>
  %inv = cleave.unary rsqrt %v : tensor<2xf32>
  %invb = cleave.broadcast_in_dim %inv dims = [0] : tensor<2xf32> -> tensor<2x4x8xf32>
  %y = cleave.binary mul %invb, %x : tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// x / sqrt(mean + eps), then the weight.
// CHECK-LABEL: func.func @rms_divide
// CHECK: cleave.rms_norm %arg0, %arg1 axis = 1 epsilon = 9.99999{{[0-9]*}}E-7
func.func @rms_divide(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %sq = cleave.binary mul %x, %x : tensor<4x8xf32>
  %sum = cleave.reduce sum %sq dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %keep = cleave.reshape %sum : tensor<4xf32> -> tensor<4x1xf32>
  %n = cleave.constant dense<8.0> : tensor<4x1xf32>
  %mean = cleave.binary div %keep, %n : tensor<4x1xf32>
  %eps = cleave.constant dense<1.0e-6> : tensor<4x1xf32>
  %v = cleave.binary add %mean, %eps : tensor<4x1xf32>
  %root = cleave.unary sqrt %v : tensor<4x1xf32>
  %rootb = cleave.broadcast_in_dim %root dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  %nx = cleave.binary div %x, %rootb : tensor<4x8xf32>
  %wb = cleave.broadcast_in_dim %w dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %y = cleave.binary mul %nx, %wb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Left as they are: a cube instead of a square; a division by another
// count than the reduced elements'; a sum over a leading axis; the inverse
// root multiplying another tensor than x.
// CHECK-LABEL: func.func @rms_cube
// CHECK-NOT: cleave.rms_norm
// CHECK-LABEL: func.func @rms_wrong_count
// CHECK-NOT: cleave.rms_norm
// CHECK-LABEL: func.func @rms_leading_axis
// CHECK-NOT: cleave.rms_norm
// CHECK-LABEL: func.func @rms_other_tensor
// CHECK-NOT: cleave.rms_norm
func.func @rms_cube(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %three = cleave.constant dense<3.0> : tensor<4x8xf32>
  %sq = cleave.binary pow %x, %three : tensor<4x8xf32>
  %sum = cleave.reduce sum %sq dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %n = cleave.constant dense<8.0> : tensor<4xf32>
  %mean = cleave.binary div %sum, %n : tensor<4xf32>
  %eps = cleave.constant dense<1.0e-6> : tensor<4xf32>
  %v = cleave.binary add %mean, %eps : tensor<4xf32>
  %inv = cleave.unary rsqrt %v : tensor<4xf32>
  %invb = cleave.broadcast_in_dim %inv dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %y = cleave.binary mul %x, %invb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @rms_wrong_count(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sq = cleave.binary mul %x, %x : tensor<4x8xf32>
  %sum = cleave.reduce sum %sq dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %n = cleave.constant dense<7.0> : tensor<4xf32>
  %mean = cleave.binary div %sum, %n : tensor<4xf32>
  %eps = cleave.constant dense<1.0e-6> : tensor<4xf32>
  %v = cleave.binary add %mean, %eps : tensor<4xf32>
  %inv = cleave.unary rsqrt %v : tensor<4xf32>
  %invb = cleave.broadcast_in_dim %inv dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %y = cleave.binary mul %x, %invb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @rms_leading_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sq = cleave.binary mul %x, %x : tensor<4x8xf32>
  %sum = cleave.reduce sum %sq dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %n = cleave.constant dense<4.0> : tensor<8xf32>
  %mean = cleave.binary div %sum, %n : tensor<8xf32>
  %eps = cleave.constant dense<1.0e-6> : tensor<8xf32>
  %v = cleave.binary add %mean, %eps : tensor<8xf32>
  %inv = cleave.unary rsqrt %v : tensor<8xf32>
  %invb = cleave.broadcast_in_dim %inv dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %y = cleave.binary mul %x, %invb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @rms_other_tensor(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %sq = cleave.binary mul %x, %x : tensor<4x8xf32>
  %sum = cleave.reduce sum %sq dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %n = cleave.constant dense<8.0> : tensor<4xf32>
  %mean = cleave.binary div %sum, %n : tensor<4xf32>
  %eps = cleave.constant dense<1.0e-6> : tensor<4xf32>
  %v = cleave.binary add %mean, %eps : tensor<4xf32>
  %inv = cleave.unary rsqrt %v : tensor<4xf32>
  %invb = cleave.broadcast_in_dim %inv dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
  %y = cleave.binary mul %z, %invb : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// SiLU as exporters write it, x * sigmoid(x) in either order; a sigmoid of
// something else, or one read elsewhere too, is left (the latter keeps the
// sigmoid for its other reader).
// CHECK-LABEL: func.func @silu
// CHECK: %[[A:.*]] = cleave.unary silu %arg0 : tensor<2x8xf32>
// CHECK: %[[B:.*]] = cleave.unary silu %arg0 : tensor<2x8xf32>
// CHECK: %[[S:.*]] = cleave.unary sigmoid %arg1
// CHECK: %[[C:.*]] = cleave.binary mul %arg0, %[[S]]
// CHECK: %[[S2:.*]] = cleave.unary sigmoid %arg1
// CHECK: %[[D:.*]] = cleave.unary silu %arg1
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]], %[[S2]]
// OFF-LABEL: func.func @silu
// OFF-NOT: silu
func.func @silu(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %s = cleave.unary sigmoid %x : tensor<2x8xf32>
  %a = cleave.binary mul %x, %s : tensor<2x8xf32>
  %s1 = cleave.unary sigmoid %x : tensor<2x8xf32>
  %b = cleave.binary mul %s1, %x : tensor<2x8xf32>
  %t = cleave.unary sigmoid %y : tensor<2x8xf32>
  %c = cleave.binary mul %x, %t : tensor<2x8xf32>
  %u = cleave.unary sigmoid %y : tensor<2x8xf32>
  %d = cleave.binary mul %y, %u : tensor<2x8xf32>
  return %a, %b, %c, %d, %u : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
