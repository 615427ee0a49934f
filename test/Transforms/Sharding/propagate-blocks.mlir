// RUN: cleave-opt --cleave-propagate-sharding %s | FileCheck %s

// Propagation through the rules of whole blocks: from a few seed shardings,
// every tensor gets one. Megatron's layouts come out of the rules, not
// from matching layer names.

// An MLP from one seed: w1 split by columns over tp makes b1 column-split,
// the hidden activations split over (dp, tp), and w2 split by rows (its
// contraction then leaves partial sums, reduced over tp).
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %arg2: tensor<32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}]>}
// CHECK-SAME: %arg3: tensor<32x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>})
// CHECK: cleave.contract {{.*}}cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {"tp"}]>]
// CHECK: cleave.broadcast_in_dim {{.*}}cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {"tp"}]>]
// CHECK: cleave.binary add {{.*}}cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {"tp"}]>]
// CHECK: cleave.unary tanh {{.*}}cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {"tp"}]>]
// CHECK: cleave.contract {{.*}}cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {}]>]
cleave.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
func.func @mlp(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>},
               %b1: tensor<32xf32>,
               %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %0 = cleave.contract %x, %w1 batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %1 = cleave.broadcast_in_dim %b1 dims = [1] : tensor<32xf32> -> tensor<8x32xf32>
  %2 = cleave.binary add %0, %1 : tensor<8x32xf32>
  %3 = cleave.unary tanh %2 : tensor<8x32xf32>
  %4 = cleave.contract %3, %w2 batch = [] x [] contract = [1] x [0] : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
  return %4 : tensor<8x16xf32>
}

// Multi-head attention from wq alone: the heads split over tp (the reshape
// gives tp to the head factor of 4 x 8), wk and wv by columns, wo by rows.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %arg2: tensor<32x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: %arg3: tensor<32x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: %arg4: tensor<32x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-COUNT-3: cleave.reshape {{.*}}[{"dp"}, {}, {"tp"}, {}]
// CHECK: cleave.contract {{.*}}batch = [0, 2] x [0, 2]{{.*}}[{"dp"}, {"tp"}, {}, {}]
// CHECK: cleave.softmax {{.*}}[{"dp"}, {"tp"}, {}, {}]
// CHECK: cleave.contract {{.*}}[{"dp"}, {"tp"}, {}, {}]
// CHECK: cleave.transpose {{.*}}[{"dp"}, {}, {"tp"}, {}]
// CHECK: cleave.reshape {{.*}}[{"dp"}, {}, {"tp"}]
// CHECK: cleave.contract {{.*}}[{"dp"}, {}, {}]
func.func @attention(%x: tensor<4x8x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {}]>},
                     %wq: tensor<32x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>},
                     %wk: tensor<32x32xf32>, %wv: tensor<32x32xf32>,
                     %wo: tensor<32x32xf32>) -> tensor<4x8x32xf32> {
  %q = cleave.contract %x, %wq batch = [] x [] contract = [2] x [0] : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
  %k = cleave.contract %x, %wk batch = [] x [] contract = [2] x [0] : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
  %v = cleave.contract %x, %wv batch = [] x [] contract = [2] x [0] : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
  %qh = cleave.reshape %q : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %kh = cleave.reshape %k : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %vh = cleave.reshape %v : tensor<4x8x32xf32> -> tensor<4x8x4x8xf32>
  %s = cleave.contract %qh, %kh batch = [0, 2] x [0, 2] contract = [3] x [3] : tensor<4x8x4x8xf32>, tensor<4x8x4x8xf32> -> tensor<4x4x8x8xf32>
  %p = cleave.softmax %s dim = 3 : tensor<4x4x8x8xf32>
  %o = cleave.contract %p, %vh batch = [0, 1] x [0, 2] contract = [3] x [1] : tensor<4x4x8x8xf32>, tensor<4x8x4x8xf32> -> tensor<4x4x8x8xf32>
  %ot = cleave.transpose %o perm = [0, 2, 1, 3] : tensor<4x4x8x8xf32> -> tensor<4x8x4x8xf32>
  %om = cleave.reshape %ot : tensor<4x8x4x8xf32> -> tensor<4x8x32xf32>
  %y = cleave.contract %om, %wo batch = [] x [] contract = [2] x [0] : tensor<4x8x32xf32>, tensor<32x32xf32> -> tensor<4x8x32xf32>
  return %y : tensor<4x8x32xf32>
}
// A vocabulary split over tp: the embedding gather leaves partial sums
// (ranks without a row read zero), the tied logits are split over the
// vocabulary, and so is the log-softmax over it (the partitioner
// all-reduces the rows' statistics).
// CHECK-LABEL: func.func @embedding_logits(
// CHECK: cleave.gather {{.*}}[{"dp"}, {}, {}]
// CHECK: cleave.contract {{.*}}[{"dp"}, {}, {"tp"}]
// CHECK: cleave.log_softmax {{.*}}[{"dp"}, {}, {"tp"}]
func.func @embedding_logits(%ids: tensor<4x8xi64> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
                            %table: tensor<96x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>})
    -> tensor<4x8x96xf32> {
  %h = cleave.gather %table, %ids axis = 0 : (tensor<96x32xf32>, tensor<4x8xi64>) -> tensor<4x8x32xf32>
  %t = cleave.unary tanh %h : tensor<4x8x32xf32>
  %logits = cleave.contract %t, %table batch = [] x [] contract = [2] x [1] : tensor<4x8x32xf32>, tensor<96x32xf32> -> tensor<4x8x96xf32>
  %p = cleave.log_softmax %logits dim = 2 : tensor<4x8x96xf32>
  return %p : tensor<4x8x96xf32>
}
// Reshapes that split a sharded dimension: tp goes to the major factor when
// it divides it (32 = 4 x 8, and 32 = 2 x 16 with tp then dp), and stops
// where it does not (6 = 3 x 2 over tp = 2).
// CHECK-LABEL: func.func @split_reshape(
// CHECK: cleave.reshape {{.*}}[{"dp"}, {"tp"}, {}]
// CHECK: cleave.reshape {{.*}}[{}, {}, {}]
// CHECK: cleave.reshape {{.*}}[{}, {"tp"}, {"dp"}]
func.func @split_reshape(%x: tensor<8x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"tp"}]>},
                         %y: tensor<8x6xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>},
                         %z: tensor<8x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp", "dp"}]>})
    -> (tensor<8x4x8xf32>, tensor<8x3x2xf32>, tensor<8x2x16xf32>) {
  %0 = cleave.reshape %x : tensor<8x32xf32> -> tensor<8x4x8xf32>
  %1 = cleave.reshape %y : tensor<8x6xf32> -> tensor<8x3x2xf32>
  %2 = cleave.reshape %z : tensor<8x32xf32> -> tensor<8x2x16xf32>
  return %0, %1, %2 : tensor<8x4x8xf32>, tensor<8x3x2xf32>, tensor<8x2x16xf32>
}
