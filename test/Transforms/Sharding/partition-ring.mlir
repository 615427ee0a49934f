// RUN: cleave-opt --cleave-propagate-sharding --cleave-partition="ring-axes=cp" %s --split-input-file | FileCheck %s
// RUN: cleave-opt --cleave-propagate-sharding --cleave-partition="ring-axes=cp ring-fault=1" %s --split-input-file | FileCheck %s --check-prefix=FAULT

// Ring context parallelism: an attention whose queries' sequence is split
// over a ring axis keeps it split. Rank g attends to its key/value block,
// passes it on to g + 1 (collective_permute) and attends to the block it
// receives; the blocks merge by their rows' log-sum-exp. The keys'
// positions at step s are block g - s's.

cleave.mesh @mesh axes = ["dp", "cp"] shape = [2, 4]

// CHECK-LABEL: func.func @causal(
// The queries' positions: this rank's offset (all_slice of [0, 2, 4, 6])
// plus an iota.
// CHECK: cleave.constant dense<[0, 2, 4, 6]> : tensor<4xi64>
// CHECK: cleave.all_slice {{.*}} over @mesh ["cp"] dim = 0
// CHECK: cleave.iota dim = 0 : tensor<2xi64>
// Step 0: the rank's own block, while the block is already sent on to
// g + 1 (so that an asynchronous permute overlaps the products).
// CHECK: %[[K1:.*]] = cleave.collective_permute %[[K0:[^ ]*]] over @mesh ["cp"] pairs = [0, 1, 1, 2, 2, 3, 3, 0]
// CHECK: %[[V1:.*]] = cleave.collective_permute %[[V0:[^ ]*]] over @mesh ["cp"]
// CHECK: cleave.constant dense<[0, 2, 4, 6]> : tensor<4xi64>
// CHECK: cleave.attention_block %{{.*}}, %[[K0]], %[[V0]] positions {{.*}} scale = 5.000000e-01 causal {{.*}} -> (tensor<1x4x2x8xf32>, tensor<1x4x2xf32>)
// Steps 1-3: the blocks from g - 1, g - 2, g - 3.
// CHECK: cleave.collective_permute %[[K1]]
// CHECK: cleave.constant dense<[6, 0, 2, 4]> : tensor<4xi64>
// CHECK: cleave.attention_block %{{.*}}, %[[K1]], %[[V1]]
// CHECK: cleave.binary max
// CHECK: cleave.constant dense<[4, 6, 0, 2]> : tensor<4xi64>
// CHECK: cleave.attention_block
// CHECK: cleave.constant dense<[2, 4, 6, 0]> : tensor<4xi64>
// CHECK: cleave.attention_block
// CHECK-NOT: cleave.all_gather
// CHECK: return
// The testing fault: step 1 masks with the rank's own block's positions.
// FAULT-LABEL: func.func @causal(
// FAULT: cleave.constant dense<[0, 2, 4, 6]> : tensor<4xi64>
// FAULT: cleave.constant dense<[0, 2, 4, 6]> : tensor<4xi64>
// FAULT: cleave.attention_block
// FAULT: cleave.constant dense<[0, 2, 4, 6]> : tensor<4xi64>
// FAULT: cleave.constant dense<[4, 6, 0, 2]> : tensor<4xi64>
func.func @causal(
    %q: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %k: tensor<2x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %v: tensor<2x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>})
    -> (tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>}) {
  %0 = cleave.attention %q, %k, %v scale = 0.5 causal : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// -----

cleave.mesh @mesh axes = ["cp"] shape = [2]

// The gradient: the forward's rows' log-sum-exp, k, v, dk and dv rotate,
// and a last permute brings dk and dv home.
// CHECK-LABEL: func.func @gradient(
// CHECK: %{{.*}}, %[[LSE:.*]] = cleave.attention_block
// CHECK: cleave.attention_block
// CHECK-COUNT-2: cleave.collective_permute
// CHECK: cleave.attention_block_grad {{.*}} lse %[[LSE2:[^ ]*]]
// CHECK-COUNT-2: cleave.collective_permute
// CHECK: cleave.attention_block_grad
// CHECK-COUNT-2: cleave.collective_permute
// CHECK-NOT: cleave.attention_block
// CHECK: return
func.func @gradient(
    %q: tensor<1x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>},
    %k: tensor<1x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>},
    %v: tensor<1x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>},
    %dout: tensor<1x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>})
    -> (tensor<1x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>},
        tensor<1x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>}) {
  %o = cleave.attention %q, %k, %v scale = 0.5 causal : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %dq, %dk, %dv = cleave.attention_grad %q, %k, %v, %o, %dout scale = 0.5 causal
      : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>)
      -> (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>)
  return %o, %dk : tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>
}

