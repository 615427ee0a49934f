// RUN: cleave-opt --cleave-propagate-sharding --cleave-partition="exchange-axes=cp" %s --split-input-file | FileCheck %s
// RUN: cleave-opt --cleave-propagate-sharding --cleave-partition %s --split-input-file | FileCheck %s --check-prefix=GATHER
// RUN: not cleave-opt --cleave-propagate-sharding --cleave-partition="exchange-axes=cp require-exchange=true" %s --split-input-file 2>&1 | FileCheck %s --check-prefix=REFUSED

// All-to-all context parallelism: an attention whose sequence is split over
// an exchange axis moves that axis to its key/value heads (its rule's
// exchange), attends over the whole sequence for its heads, and moves the
// axis back: one all_to_all per operand and result, no gather.

cleave.mesh @mesh axes = ["dp", "cp"] shape = [2, 2]

// CHECK-LABEL: func.func @causal(
// CHECK-COUNT-3: cleave.all_to_all {{.*}} over @mesh ["cp"] split = 1 concat = 2 {{.*}} : tensor<1x4x4x8xf32> -> tensor<1x2x8x8xf32>
// CHECK: cleave.attention {{.*}} causal {{.*}} -> tensor<1x2x8x8xf32>
// CHECK: cleave.all_to_all {{.*}} over @mesh ["cp"] split = 2 concat = 1 {{.*}} : tensor<1x2x8x8xf32> -> tensor<1x4x4x8xf32>
// CHECK-NOT: cleave.all_gather
// GATHER-LABEL: func.func @causal(
// GATHER-COUNT-3: cleave.all_gather {{.*}} over @mesh ["cp"] dim = 2
// GATHER-NOT: cleave.all_to_all
func.func @causal(
    %q: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %k: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %v: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>})
    -> (tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>}) {
  %0 = cleave.attention %q, %k, %v scale = 0.5 causal : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// Grouped queries: the key/value heads carry the axis, each group's query
// heads with their key/value head.
// CHECK-LABEL: func.func @grouped(
// CHECK: cleave.all_to_all %arg0 {{.*}} : tensor<1x4x4x8xf32> -> tensor<1x2x8x8xf32>
// CHECK: cleave.all_to_all %arg1 {{.*}} : tensor<1x2x4x8xf32> -> tensor<1x1x8x8xf32>
// CHECK: cleave.attention {{.*}} : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
func.func @grouped(
    %q: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %k: tensor<2x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %v: tensor<2x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>})
    -> (tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>}) {
  %0 = cleave.attention %q, %k, %v scale = 0.5 causal : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

// The gradient exchanges too: five operands in, three results back.
// CHECK-LABEL: func.func @gradient(
// CHECK-COUNT-5: cleave.all_to_all {{.*}} split = 1 concat = 2
// CHECK: cleave.attention_grad
// CHECK-COUNT-3: cleave.all_to_all {{.*}} split = 2 concat = 1
func.func @gradient(
    %q: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %k: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %v: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %o: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
    %d: tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>})
    -> (tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
        tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>},
        tensor<2x4x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"cp"}, {}]>}) {
  %0:3 = cleave.attention_grad %q, %k, %v, %o, %d scale = 0.5 causal : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>)
  return %0#0, %0#1, %0#2 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// One key/value head cannot be split over cp: gathered by default (above,
// @grouped's layout without exchange-axes), refused when the exchange is
// required.
cleave.mesh @mesh axes = ["cp"] shape = [2]
// REFUSED: error: cannot be partitioned all-to-all over mesh axis 'cp' (2 ranks): the dimension it would split instead, dimension 1 of operand 1 (size 1, split 1-way already), does not divide over them; --context-parallel=auto gathers the sequence instead
func.func @one_head(
    %q: tensor<2x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>},
    %k: tensor<2x1x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>},
    %v: tensor<2x1x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>})
    -> (tensor<2x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>}) {
  %0 = cleave.attention %q, %k, %v scale = 0.5 causal : (tensor<2x2x8x8xf32>, tensor<2x1x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  return %0 : tensor<2x2x8x8xf32>
}
