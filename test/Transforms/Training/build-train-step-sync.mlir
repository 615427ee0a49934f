// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=delayed" | FileCheck %s --check-prefix=DELAYED
// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=local:4" | FileCheck %s --check-prefix=LOCAL
// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=momentum data-parallel=2 sync=local:4 outer-optimizer=nesterov outer-lr=0.5 outer-momentum=0.8" | FileCheck %s --check-prefix=DILOCO
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd sync=delayed" 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=often" 2>&1 | FileCheck %s --check-prefix=BAD

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

// local:4: the step reduces nothing and reports its own loss; its states
// vary over dp; @sync averages the parameters, every 4 steps.
// LOCAL: func.func @main(%arg0: tensor<4x4xf32> {cleave.initial_value = dense<5.000000e-01> : tensor<4x4xf32>, cleave.name = "w", cleave.parameter = "w", cleave.state = #cleave.state<parameter>, cleave.varying = ["dp"]}
// LOCAL-SAME: cleave.sync_every = 4 : i64
// LOCAL-NOT: cleave.all_reduce
// LOCAL-LABEL: func.func @sync(
// LOCAL-SAME: %arg0: tensor<4x4xf32> {cleave.initial_value = dense<5.000000e-01> : tensor<4x4xf32>, cleave.name = "w", cleave.parameter = "w", cleave.state = #cleave.state<parameter>, cleave.varying = ["dp"]}
// LOCAL-SAME: -> (tensor<4x4xf32> {cleave.name = "w", cleave.updates = 0 : i64}, tensor<4xf32> {cleave.name = "b", cleave.updates = 1 : i64})
// LOCAL-NEXT: cleave.all_reduce avg %arg0 over @mesh ["dp"] {cleave.phase = "local SGD averaging"} : tensor<4x4xf32>
// LOCAL-NEXT: cleave.all_reduce avg %arg1 over @mesh ["dp"] {cleave.phase = "local SGD averaging"} : tensor<4xf32>

// DiLoCo: the step holds the outer states (the global copy starts from the
// parameter's initial value), split over dp on dimension 0 and the same on
// every rank of a shard; @sync reduce-scatters the average, takes the
// Nesterov step (mu = 0.8, lr = 0.5) on its block of the global copy and
// all-gathers it into the parameter.
// DILOCO-LABEL: func.func @main(
// DILOCO-SAME: %arg8: tensor<2x4xf32> {cleave.initial_value = dense<5.000000e-01> : tensor<4x4xf32>, cleave.name = "w.outer_params", cleave.parameter = "w", cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>, cleave.slot = "outer_params", cleave.state = #cleave.state<optimizer_state>}
// DILOCO-SAME: %arg9: tensor<2x4xf32> {cleave.name = "w.outer_momentum", cleave.parameter = "w", cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>, cleave.slot = "outer_momentum", cleave.state = #cleave.state<optimizer_state>}
// DILOCO-LABEL: func.func @sync(
// DILOCO-SAME: %arg0: tensor<4x4xf32>
// DILOCO-SAME: %arg2: tensor<2x4xf32> {cleave.initial_value = dense<5.000000e-01> : tensor<4x4xf32>, cleave.name = "w.outer_params"
// DILOCO-SAME: %arg3: tensor<2x4xf32> {cleave.name = "w.outer_momentum"
// DILOCO-SAME: -> (tensor<4x4xf32> {cleave.name = "w", cleave.updates = 0 : i64}, tensor<2x4xf32> {cleave.name = "w.outer_params", cleave.updates = 2 : i64}, tensor<2x4xf32> {cleave.name = "w.outer_momentum", cleave.updates = 3 : i64}
// DILOCO-NEXT: %[[AVG:.*]] = cleave.reduce_scatter avg %arg0 over @mesh ["dp"] dim = 0 {cleave.phase = "DiLoCo outer step"} : tensor<4x4xf32> -> tensor<2x4xf32>
// DILOCO-NEXT: %[[DELTA:.*]] = cleave.binary sub %arg2, %[[AVG]]
// DILOCO-NEXT: %[[MU:.*]] = cleave.constant dense<8.000000e-01> : tensor<2x4xf32>
// DILOCO-NEXT: %[[MM:.*]] = cleave.binary mul %[[MU]], %arg3
// DILOCO-NEXT: %[[M:.*]] = cleave.binary add %[[MM]], %[[DELTA]]
// DILOCO-NEXT: %[[NM:.*]] = cleave.binary mul %[[MU]], %[[M]]
// DILOCO-NEXT: %[[DIR:.*]] = cleave.binary add %[[DELTA]], %[[NM]]
// DILOCO-NEXT: %[[LR:.*]] = cleave.constant dense<5.000000e-01> : tensor<2x4xf32>
// DILOCO-NEXT: %[[STEP:.*]] = cleave.binary mul %[[LR]], %[[DIR]]
// DILOCO-NEXT: %[[G:.*]] = cleave.binary sub %arg2, %[[STEP]]
// DILOCO-NEXT: %[[P:.*]] = cleave.all_gather %[[G]] over @mesh ["dp"] dim = 0 {cleave.phase = "DiLoCo outer step"} : tensor<2x4xf32> -> tensor<4x4xf32>

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
