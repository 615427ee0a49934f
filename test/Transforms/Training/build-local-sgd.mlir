// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=local:4" --cleave-build-local-sgd="every=4" | FileCheck %s --check-prefix=LOCAL
// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=momentum data-parallel=2 sync=local:4" --cleave-build-local-sgd="every=4 outer-optimizer=nesterov outer-lr=0.5 outer-momentum=0.8" | FileCheck %s --check-prefix=DILOCO
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd" --cleave-build-local-sgd="every=4" 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=local:4" --cleave-build-local-sgd="every=0" 2>&1 | FileCheck %s --check-prefix=EVERY
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=local:4" --cleave-build-local-sgd="every=4 outer-optimizer=adam" 2>&1 | FileCheck %s --check-prefix=OUTER
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=local:4" --cleave-build-local-sgd="every=4" --cleave-build-local-sgd="every=4" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not cleave-opt %s --cleave-build-local-sgd="every=4" 2>&1 | FileCheck %s --check-prefix=NOSTEP

// --cleave-build-local-sgd on steps built with --cleave-build-train-step's
// sync=local:4 (which reduce nothing over dp).

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
// DILOCO-NEXT: %[[MM:.*]] = cleave.binary mul %arg3, %[[MU]]
// DILOCO-NEXT: %[[M:.*]] = cleave.binary add %[[MM]], %[[DELTA]]
// DILOCO-NEXT: %[[MU2:.*]] = cleave.constant dense<8.000000e-01> : tensor<2x4xf32>
// DILOCO-NEXT: %[[NM:.*]] = cleave.binary mul %[[M]], %[[MU2]]
// DILOCO-NEXT: %[[DIR:.*]] = cleave.binary add %[[DELTA]], %[[NM]]
// DILOCO-NEXT: %[[LR:.*]] = cleave.constant dense<5.000000e-01> : tensor<2x4xf32>
// DILOCO-NEXT: %[[STEP:.*]] = cleave.binary mul %[[LR]], %[[DIR]]
// DILOCO-NEXT: %[[G:.*]] = cleave.binary sub %arg2, %[[STEP]]
// DILOCO-NEXT: %[[P:.*]] = cleave.all_gather %[[G]] over @mesh ["dp"] dim = 0 {cleave.phase = "DiLoCo outer step"} : tensor<2x4xf32> -> tensor<4x4xf32>

// NODP: error: --cleave-build-local-sgd needs data-parallel replicas: a cleave.mesh with an axis dp > 1
// EVERY: error: --cleave-build-local-sgd: --sync=local:H needs H from 1 to 1000000, got '0'
// OUTER: error: --cleave-build-local-sgd: {{.*}}adam
// TWICE: error: --cleave-build-local-sgd: the module already holds a symbol @sync
// NOSTEP: error: --cleave-build-local-sgd needs data-parallel replicas

func.func @main(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<2x4xf32> {cleave.name = "y"}) {
  %w = cleave.constant {cleave.initializer = "w"} dense<0.5> : tensor<4x4xf32>
  %b = cleave.constant {cleave.initializer = "b"} dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>
  %h = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %y = cleave.binary add %h, %bb : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
