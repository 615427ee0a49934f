// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2 sync=local:4" --cleave-build-local-sgd="every=4" --cleave-split-sync-entry | FileCheck %s
// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd" --cleave-split-sync-entry | FileCheck %s --check-prefix=NONE

// @sync moves into `module @sync` with a copy of the mesh; the step stays.
// CHECK-LABEL: module {
// CHECK-NEXT: cleave.mesh @mesh axes = ["dp"] shape = [2]
// CHECK-NEXT: func.func @main(%arg0: tensor<4x4xf32> {{{.*}}cleave.varying = ["dp"]}
// CHECK-SAME: cleave.sync_every = 4 : i64
// CHECK-NOT: func.func @sync
// CHECK: module @sync {
// CHECK-NEXT: cleave.mesh @mesh axes = ["dp"] shape = [2]
// CHECK-NEXT: func.func @sync(%arg0: tensor<4x4xf32> {{{.*}}cleave.varying = ["dp"]}
// CHECK-NEXT: cleave.all_reduce avg %arg0 over @mesh ["dp"] {cleave.phase = "local SGD averaging"}
// CHECK-NOT: func.func

// Without @sync the module is left as it is.
// NONE-NOT: module @sync
// NONE: func.func @main(
// NONE-NOT: module @sync

func.func @main(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<2x4xf32> {cleave.name = "y"}) {
  %w = cleave.constant {cleave.initializer = "w"} dense<0.5> : tensor<4x4xf32>
  %h = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  return %h : tensor<2x4xf32>
}
