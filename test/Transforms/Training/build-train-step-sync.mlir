// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=delayed" | FileCheck %s --check-prefix=DELAYED
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd sync=delayed" 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=often" 2>&1 | FileCheck %s --check-prefix=BAD

// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=local:4" | FileCheck %s --check-prefix=LOCAL-STEP
// delayed: the pending gradients are zeroed optimizer state that varies
// over dp; their all-reduces start before the forward pass (the first
// contraction) and are waited for after the backward pass (the last), the
// update reads the waited values and the new pending values are this
// step's own gradients. The reported loss is reduced behind them, waited
// for last.
// DELAYED-LABEL: func.func @main(
// DELAYED-SAME: %arg6: tensor<4x4xf32> {cleave.name = "w.pending_grad", cleave.parameter = "w", cleave.slot = "pending_grad", cleave.state = #cleave.state<optimizer_state>, cleave.varying = ["dp"]}
// DELAYED-SAME: %arg7: tensor<4xf32> {cleave.name = "b.pending_grad", cleave.parameter = "b", cleave.slot = "pending_grad", cleave.state = #cleave.state<optimizer_state>, cleave.varying = ["dp"]}
// DELAYED-SAME: tensor<4x4xf32> {cleave.name = "w.pending_grad", cleave.updates = 6 : i64}, tensor<4xf32> {cleave.name = "b.pending_grad", cleave.updates = 7 : i64})
// DELAYED-NEXT: %[[W:.*]] = cleave.all_reduce avg %arg6 over @mesh ["dp"] async {cleave.phase = "delayed gradient"}
// DELAYED-NEXT: %[[B:.*]] = cleave.all_reduce avg %arg7 over @mesh ["dp"] async {cleave.phase = "delayed gradient"}
// DELAYED: cleave.contract %arg2, %arg0
// DELAYED: %[[LOSS:.*]] = cleave.all_reduce avg %{{.*}} over @mesh ["dp"] async {cleave.phase = "loss"} : tensor<f32>
// DELAYED: %[[GB:.*]] = cleave.reduce sum %{{.*}} dims = [0] : tensor<2x4xf32> -> tensor<4xf32>
// DELAYED: cleave.contract
// DELAYED: cleave.contract
// DELAYED-NEXT: %[[GW:.*]] = cleave.transpose
// DELAYED-NEXT: %[[RW:.*]] = cleave.done %[[W]]
// DELAYED-NOT: cleave.contract
// DELAYED: cleave.binary mul %[[RW]], %[[RW]]
// DELAYED: %[[RB:.*]] = cleave.done %[[B]]
// DELAYED: cleave.binary mul %[[RB]], %[[RB]]
// DELAYED: %[[L:.*]] = cleave.done %[[LOSS]]
// DELAYED-NEXT: return %{{.*}}, %{{.*}}, %[[L]], %{{.*}}, %[[GW]], %[[GB]] :

// local:4 alone: the step reduces nothing (--cleave-build-local-sgd adds
// @sync; see build-local-sgd.mlir).
// LOCAL-STEP-LABEL: func.func @main(
// LOCAL-STEP-NOT: cleave.all_reduce
// LOCAL-STEP-NOT: cleave.sync_every
// LOCAL-STEP-NOT: func.func @sync

// NODP: error: --sync=delayed: it needs data-parallel replicas (--data-parallel=N, N > 1)
// BAD: error: unknown --sync 'often' (expected step, local:<H> or delayed)

func.func @main(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<2x4xf32> {cleave.name = "y"}) {
  %w = cleave.constant {cleave.initializer = "w"} dense<0.5> : tensor<4x4xf32>
  %b = cleave.constant {cleave.initializer = "b"} dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>
  %h = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %y = cleave.binary add %h, %bb : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
