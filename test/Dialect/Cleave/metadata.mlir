// Round-trip of every cleave.* metadata attribute in a place it belongs.
// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

// The module's own.
// CHECK: module attributes {cleave.recompute_stats = {policy = "full"}}
module attributes {cleave.recompute_stats = {policy = "full"}} {

// Function arguments and results: the enums print as #cleave.state<...>
// and #cleave.role<...>; a unit cleave.state marks an input updated in place.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %arg0: tensor<4xf32> {cleave.external_data = {file = "w.bin", offset = 0 : i64}, cleave.initial_value = dense<1.000000e+00> : tensor<4xf32>, cleave.name = "w", cleave.parameter = "w", cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>, cleave.state = #cleave.state<parameter>, cleave.untied_from = "u", cleave.untied_node = "fc", cleave.varying = ["dp"]}
// CHECK-SAME: %arg1: tensor<4xf32> {cleave.name = "w.m", cleave.parameter = "w", cleave.slot = "m", cleave.state = #cleave.state<optimizer_state>}
// CHECK-SAME: %arg2: tensor<4xf32> {cleave.name = "mean", cleave.state = #cleave.state<buffer>}
// CHECK-SAME: %arg3: tensor<4xf32> {cleave.name = "s", cleave.state}
// CHECK-SAME: %arg4: tensor<4xi64> {cleave.name = "x", cleave.role = #cleave.role<data>, cleave.valid_range = array<i64: 0, 8, -1>}
// CHECK-SAME: %arg5: tensor<f32> {cleave.role = #cleave.role<lr>}
// CHECK-SAME: %arg6: tensor<f32> {cleave.role = #cleave.role<step>}
// CHECK-SAME: -> (tensor<4xf32> {cleave.name = "w", cleave.updates = 0 : i64}
// CHECK-SAME: tensor<f32> {cleave.role = #cleave.role<loss>}
// CHECK-SAME: tensor<f32> {cleave.role = #cleave.role<grad_norm>}
// CHECK-SAME: tensor<f32> {cleave.role = #cleave.role<loss_scale>}
// CHECK-SAME: tensor<f32> {cleave.role = #cleave.role<found_inf>}
// CHECK-SAME: tensor<4xf32> {cleave.role = #cleave.role<gradient>}
// CHECK-SAME: tensor<4xf32> {cleave.role = #cleave.role<probe>}
// CHECK-SAME: tensor<4xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}]>, cleave.updates_initializer = "mean"}
// CHECK-SAME: attributes {cleave.microbatches = 2 : i64, cleave.pipeline_ranks = 2 : i64, cleave.sync_every = 4 : i64}
func.func @main(%w: tensor<4xf32> {cleave.name = "w", cleave.state = #cleave.state<parameter>, cleave.parameter = "w", cleave.initial_value = dense<1.0> : tensor<4xf32>, cleave.external_data = {file = "w.bin", offset = 0 : i64}, cleave.untied_from = "u", cleave.untied_node = "fc", cleave.varying = ["dp"], cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>},
                %m: tensor<4xf32> {cleave.name = "w.m", cleave.state = #cleave.state<optimizer_state>, cleave.parameter = "w", cleave.slot = "m"},
                %mean: tensor<4xf32> {cleave.name = "mean", cleave.state = #cleave.state<buffer>},
                %s: tensor<4xf32> {cleave.name = "s", cleave.state},
                %x: tensor<4xi64> {cleave.name = "x", cleave.role = #cleave.role<data>, cleave.valid_range = array<i64: 0, 8, -1>},
                %lr: tensor<f32> {cleave.role = #cleave.role<lr>},
                %step: tensor<f32> {cleave.role = #cleave.role<step>})
    -> (tensor<4xf32> {cleave.name = "w", cleave.updates = 0 : i64},
        tensor<f32> {cleave.role = #cleave.role<loss>},
        tensor<f32> {cleave.role = #cleave.role<grad_norm>},
        tensor<f32> {cleave.role = #cleave.role<loss_scale>},
        tensor<f32> {cleave.role = #cleave.role<found_inf>},
        tensor<4xf32> {cleave.role = #cleave.role<gradient>},
        tensor<4xf32> {cleave.role = #cleave.role<probe>},
        tensor<4xf32> {cleave.updates_initializer = "mean", cleave.sharding = #cleave.sharding<@mesh, [{}]>})
    attributes {cleave.microbatches = 2 : i64, cleave.pipeline_ranks = 2 : i64, cleave.sync_every = 4 : i64} {
  // Ops: an imported initializer and the tags passes add.
  // CHECK: cleave.constant {cleave.batch_norm_statistic, cleave.initializer = "mean", cleave.initializer_kind = #cleave.initializer_kind<buffer>}
  %c = cleave.constant {cleave.initializer = "mean", cleave.initializer_kind = #cleave.initializer_kind<buffer>, cleave.batch_norm_statistic} dense<0.0> : tensor<4xf32>
  // CHECK: cleave.constant {cleave.initializer = "k", cleave.initializer_kind = #cleave.initializer_kind<constant>}
  %k = cleave.constant {cleave.initializer = "k", cleave.initializer_kind = #cleave.initializer_kind<constant>} dense<2.0> : tensor<4xf32>
  // CHECK: cleave.unary neg %{{.*}} {cleave.backward, cleave.fp32, cleave.gradient_of = "w", cleave.layer = "h0", cleave.phase = "optimizer update", cleave.pipeline_rank = 1 : i64, cleave.recompute, cleave.stage = 0 : i64}
  %0 = cleave.unary neg %w {cleave.backward, cleave.fp32, cleave.gradient_of = "w", cleave.layer = "h0", cleave.phase = "optimizer update", cleave.pipeline_rank = 1 : i64, cleave.recompute, cleave.stage = 0 : i64} : tensor<4xf32>
  // CHECK: cleave.unary neg %{{.*}} {cleave.message = 3 : i64, cleave.reshard_once = #cleave.sharding<@mesh, [{}]>, cleave.row_kernel, cleave.scratch_bytes = 64 : i64, cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}]>], cleave.sharding_conflicts = ["dp on dimension 0"]}
  %1 = cleave.unary neg %0 {cleave.message = 3 : i64, cleave.reshard_once = #cleave.sharding<@mesh, [{}]>, cleave.row_kernel, cleave.scratch_bytes = 64 : i64, cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}]>], cleave.sharding_conflicts = ["dp on dimension 0"]} : tensor<4xf32>
  // An op's result without a sharding is a unit in its array.
  // CHECK: cleave.top_k %{{.*}} k = 2 dim = 0 largest = true sorted = true {cleave.sharding = [unit, #cleave.sharding<@mesh, [{}]>]}
  %v, %j = cleave.top_k %1 k = 2 dim = 0 largest = true sorted = true {cleave.sharding = [unit, #cleave.sharding<@mesh, [{}]>]}
      : tensor<4xf32> -> tensor<2xf32>, tensor<2xi64>
  %l = cleave.reduce sum %1 dims = [0] : tensor<4xf32> -> tensor<f32>
  return %1, %l, %lr, %step, %l, %k, %c, %mean : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
}
