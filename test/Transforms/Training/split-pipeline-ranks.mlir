// RUN: cleave-opt %s --split-input-file --cleave-split-pipeline-ranks --verify-diagnostics | FileCheck %s

// Two ranks: rank 0 keeps w0 and sends its activation to rank 1; rank 1
// keeps w1, receives it, and sends its part of the reported sum back; each
// rank keeps only the states it reads, renumbering cleave.updates.
// CHECK-LABEL: module @rank0 {
// CHECK-NEXT: cleave.mesh @mesh axes = ["pp"] shape = [2]
// CHECK-NEXT: func.func @main(%arg0: tensor<4x4xf32> {cleave.name = "w0", {{.*}}}, %arg1: tensor<2x4xf32> {cleave.name = "x", {{.*}}}) -> (tensor<4x4xf32> {cleave.name = "w0", cleave.updates = 0 : i64}, tensor<2x4xf32> {cleave.name = "y"}) attributes {cleave.pipeline_rank = 0 : i64}
// CHECK-NEXT: %[[H:.*]] = cleave.contract %arg1, %arg0
// CHECK-NEXT: cleave.send %[[H]] over @mesh ["pp"] from = 0 to = 1 {cleave.message = 0 : i64}
// CHECK-NEXT: %[[Y:.*]] = cleave.recv over @mesh ["pp"] from = 1 to = 0 {cleave.message = 3 : i64}
// CHECK-NEXT: %[[W:.*]] = cleave.binary mul %arg0, %arg0
// CHECK-NEXT: return %[[W]], %[[Y]]
// CHECK-LABEL: module @rank1 {
// CHECK-NEXT: cleave.mesh @mesh axes = ["pp"] shape = [2]
// CHECK-NEXT: func.func @main(%arg0: tensor<4x4xf32> {cleave.name = "w1", {{.*}}}, %arg1: tensor<2x4xf32> {cleave.name = "x", {{.*}}}) -> (tensor<4x4xf32> {cleave.name = "w1", cleave.updates = 0 : i64}, tensor<2x4xf32> {cleave.name = "y"}) attributes {cleave.pipeline_rank = 1 : i64}
// CHECK-NEXT: %[[T:.*]] = cleave.recv over @mesh ["pp"] from = 0 to = 1 {cleave.message = 0 : i64}
// CHECK-NEXT: %[[Y1:.*]] = cleave.contract %[[T]], %arg0
// CHECK-NEXT: cleave.send %[[Y1]] over @mesh ["pp"] from = 1 to = 0 {cleave.message = 3 : i64}
// CHECK-NEXT: %[[W1:.*]] = cleave.binary mul %arg0, %arg0
// CHECK-NEXT: return %[[W1]], %[[Y1]]
// CHECK-NOT: pipeline_transfer
// CHECK-NOT: pipeline_sum
cleave.mesh @mesh axes = ["pp"] shape = [2]
func.func @main(%w0: tensor<4x4xf32> {cleave.name = "w0", cleave.parameter = "w0", cleave.state = #cleave.state<parameter>},
                %w1: tensor<4x4xf32> {cleave.name = "w1", cleave.parameter = "w1", cleave.state = #cleave.state<parameter>},
                %x: tensor<2x4xf32> {cleave.name = "x", cleave.role = #cleave.role<data>})
    -> (tensor<4x4xf32> {cleave.name = "w0", cleave.updates = 0 : i64},
        tensor<4x4xf32> {cleave.name = "w1", cleave.updates = 1 : i64},
        tensor<2x4xf32> {cleave.name = "y"})
    attributes {cleave.pipeline_ranks = 2 : i64} {
  %h = cleave.contract %x, %w0 batch = [] x [] contract = [1] x [0] {cleave.pipeline_rank = 0 : i64} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %t = cleave.pipeline_transfer %h from = 0 to = 1 : tensor<2x4xf32>
  %y = cleave.contract %t, %w1 batch = [] x [] contract = [1] x [0] {cleave.pipeline_rank = 1 : i64} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %s = cleave.pipeline_sum %y ranks = [1] : tensor<2x4xf32>
  %w0n = cleave.binary mul %w0, %w0 {cleave.pipeline_rank = 0 : i64} : tensor<4x4xf32>
  %w1n = cleave.binary mul %w1, %w1 {cleave.pipeline_rank = 1 : i64} : tensor<4x4xf32>
  return %w0n, %w1n, %s : tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>
}

// -----

// A step that is not pipelined.
// expected-error @below {{expected a pipelined training step in @main}}
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// -----

// No mesh axis pp of the step's pipeline ranks.
// expected-error @below {{a pipelined step of 2 ranks needs a cleave.mesh with an axis pp=2}}
module {
  cleave.mesh @mesh axes = ["dp"] shape = [2]
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32>
      attributes {cleave.pipeline_ranks = 2 : i64} {
    return %x : tensor<2xf32>
  }
}

// -----

// Rank 1 reads rank 0's value without a transfer.
cleave.mesh @mesh axes = ["pp"] shape = [2]
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32>
    attributes {cleave.pipeline_ranks = 2 : i64} {
  %a = cleave.binary add %x, %x {cleave.pipeline_rank = 0 : i64} : tensor<2xf32>
  // expected-error @below {{reads 'cleave.binary' of pipeline rank 0 on pipeline rank 1 without a cleave.pipeline_transfer}}
  %b = cleave.binary mul %a, %a {cleave.pipeline_rank = 1 : i64} : tensor<2xf32>
  %s = cleave.pipeline_sum %b ranks = [1] : tensor<2xf32>
  return %s : tensor<2xf32>
}
