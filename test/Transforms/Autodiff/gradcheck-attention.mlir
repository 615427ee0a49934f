// Checks the attention VJP (probabilities recomputed from q and k) against
// finite differences: multi-head, grouped-query, a bias broadcast over
// heads and queries, a causal mask with an offset, a softcap, and a
// negative offset that leaves the first query row with no key (its output
// and gradients are zeros).
// RUN: cleave-gradcheck %s | FileCheck %s
// Hostile inputs: the scores are products of two of them, so the range is
// narrower than the default (scores of 1e8 saturate the softmax past what
// finite differences resolve).
// RUN: cleave-gradcheck %s --hostile --rtol 1e-4 | FileCheck %s

// CHECK: PASS f_mha max rel err
func.func @f_mha(%q: tensor<2x2x3x4xf64>, %k: tensor<2x2x5x4xf64>, %v: tensor<2x2x5x3xf64>) -> tensor<2x2x3x3xf64>
    attributes {gradcheck.hostile = [-3.0, 3.0]} {
  %0 = cleave.attention %q, %k, %v scale = 0.5 : (tensor<2x2x3x4xf64>, tensor<2x2x5x4xf64>, tensor<2x2x5x3xf64>) -> tensor<2x2x3x3xf64>
  return %0 : tensor<2x2x3x3xf64>
}

// CHECK: PASS f_gqa_bias_causal_softcap max rel err
func.func @f_gqa_bias_causal_softcap(%q: tensor<1x4x3x4xf64>, %k: tensor<1x2x5x4xf64>, %v: tensor<1x2x5x2xf64>, %m: tensor<1x4x1x5xf64>) -> tensor<1x4x3x2xf64>
    attributes {gradcheck.hostile = [-3.0, 3.0]} {
  %0 = cleave.attention %q, %k, %v bias %m scale = 0.7 causal {causal_offset = 1 : i64, softcap = 2.0 : f64} : (tensor<1x4x3x4xf64>, tensor<1x2x5x4xf64>, tensor<1x2x5x2xf64>, tensor<1x4x1x5xf64>) -> tensor<1x4x3x2xf64>
  return %0 : tensor<1x4x3x2xf64>
}

// CHECK: PASS f_masked_row max rel err
func.func @f_masked_row(%q: tensor<2x2x3x4xf64>, %k: tensor<2x1x3x4xf64>, %v: tensor<2x1x3x4xf64>, %m: tensor<2x1x3x3xf64>) -> tensor<2x2x3x4xf64>
    attributes {gradcheck.hostile = [-3.0, 3.0]} {
  %0 = cleave.attention %q, %k, %v bias %m scale = 0.5 causal {causal_offset = -1 : i64} : (tensor<2x2x3x4xf64>, tensor<2x1x3x4xf64>, tensor<2x1x3x4xf64>, tensor<2x1x3x3xf64>) -> tensor<2x2x3x4xf64>
  return %0 : tensor<2x2x3x4xf64>
}

// The row with no key: its query gets no gradient, and the last key, which
// no query sees, gets none either (q, k: 3 rows of 2; v: likewise).
// CHECK: GRAD f_dead_row #0: 0 0 0 0 {{-?[0-9.]+(e-?[0-9]+)?}} {{-?[0-9.]+(e-?[0-9]+)?}}{{$}}
// CHECK: GRAD f_dead_row #1: {{-?[0-9.]+(e-?[0-9]+)?}} {{-?[0-9.]+(e-?[0-9]+)?}} {{-?[0-9.]+(e-?[0-9]+)?}} {{-?[0-9.]+(e-?[0-9]+)?}} 0 0{{$}}
// CHECK: GRAD f_dead_row #2: {{-?[0-9.]+(e-?[0-9]+)?}} {{-?[0-9.]+(e-?[0-9]+)?}} {{-?[0-9.]+(e-?[0-9]+)?}} {{-?[0-9.]+(e-?[0-9]+)?}} 0 0{{$}}
func.func @f_dead_row(%q: tensor<1x1x3x2xf64>, %k: tensor<1x1x3x2xf64>, %v: tensor<1x1x3x2xf64>) -> tensor<1x1x3x2xf64>
    attributes {gradcheck.print} {
  %0 = cleave.attention %q, %k, %v scale = 0.5 causal {causal_offset = -1 : i64} : (tensor<1x1x3x2xf64>, tensor<1x1x3x2xf64>, tensor<1x1x3x2xf64>) -> tensor<1x1x3x2xf64>
  return %0 : tensor<1x1x3x2xf64>
}
