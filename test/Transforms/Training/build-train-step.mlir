// RUN: cleave-opt %s --split-input-file --cleave-build-train-step="loss=mse:y,target optimizer=sgd" | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-build-train-step="loss=mse:y,target optimizer=adamw weight-decay=0.5 no-decay=b return-gradients=true" | FileCheck %s --check-prefix=DECAY
// RUN: cleave-opt %s --split-input-file --cleave-build-train-step="loss=mse:y,target optimizer=sgd trainable=w|s|u|z.*" | FileCheck %s --check-prefix=EXPLICIT
// RUN: cleave-opt %s --split-input-file --cleave-build-train-step="loss=mse:y,target optimizer=sgd untie=u" 2>&1 | FileCheck %s --check-prefix=UNTIE
// RUN: cleave-opt %s --split-input-file --cleave-build-train-step="loss=mse:y,target optimizer=sgd" 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN
// RUN: not cleave-opt %s --split-input-file --cleave-build-train-step="loss=mse:y,target optimizer=sgd untie=(" 2>&1 | FileCheck %s --check-prefix=BADRE
// RUN: cleave-opt %s --split-input-file --cleave-build-train-step="loss=mse:y,target optimizer=sgd data-parallel=2" | FileCheck %s --check-prefix=DP

// data-parallel=2: a mesh dp=2, the data inputs sharded over dp on dim 0,
// each gradient averaged over dp before the gradient norm and the update,
// and the reported loss averaged too.
// DP: cleave.mesh @mesh axes = ["dp"] shape = [2]
// DP-LABEL: func.func @main(
// DP-SAME: %arg2: tensor<2x4xf32> {cleave.name = "x", cleave.role = #cleave.role<data>, cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}
// DP-SAME: %arg3: tensor<2x4xf32> {cleave.name = "target", cleave.role = #cleave.role<data>, cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}
// DP-DAG: cleave.all_reduce avg %{{.*}} over @mesh ["dp"] {cleave.phase = "gradient of w"} : tensor<4x4xf32>
// DP-DAG: cleave.all_reduce avg %{{.*}} over @mesh ["dp"] {cleave.phase = "gradient of b"} : tensor<4xf32>
// DP-DAG: cleave.all_reduce avg %{{.*}} over @mesh ["dp"] {cleave.phase = "loss"} : tensor<f32>

// The default parameters: float initializers of more than one element. The
// scalar exponent %s is a constant. Parameters come first, then data, lr
// and step; the updated parameters, the loss and the gradient norm return.
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %arg0: tensor<4x4xf32> {cleave.initial_value = {{.*}}, cleave.name = "w", cleave.parameter = "w", cleave.state = #cleave.state<parameter>}
// CHECK-SAME: %arg1: tensor<4xf32> {cleave.initial_value = {{.*}}, cleave.name = "b", cleave.parameter = "b", cleave.state = #cleave.state<parameter>}
// CHECK-SAME: %arg2: tensor<2x4xf32> {cleave.name = "x", cleave.role = #cleave.role<data>}
// CHECK-SAME: %arg3: tensor<2x4xf32> {cleave.name = "target", cleave.role = #cleave.role<data>}
// CHECK-SAME: -> (tensor<4x4xf32> {cleave.name = "w", cleave.updates = 0 : i64}, tensor<4xf32> {cleave.name = "b", cleave.updates = 1 : i64}, tensor<f32> {cleave.name = "loss", cleave.role = #cleave.role<loss>}, tensor<f32> {cleave.name = "grad_norm", cleave.role = #cleave.role<grad_norm>})
// CHECK: cleave.constant {cleave.initializer = "s"} dense<3.000000e+00>

// AdamW with b exempt from weight decay: only w's update adds 0.5 * w.
// return-gradients adds grad.w and grad.b.
// DECAY-LABEL: func.func @main(
// DECAY-SAME: tensor<4x4xf32> {cleave.name = "grad.w", cleave.role = #cleave.role<gradient>}, tensor<4xf32> {cleave.name = "grad.b", cleave.role = #cleave.role<gradient>})
// DECAY: %[[WD:.*]] = cleave.constant dense<5.000000e-01> : tensor<4x4xf32>
// DECAY: cleave.binary mul %arg0, %[[WD]] : tensor<4x4xf32>
// DECAY-NOT: dense<5.000000e-01> : tensor<4xf32>
// DECAY: return

// --trainable names parameters explicitly; a scalar then trains too.
// EXPLICIT-LABEL: func.func @main(
// EXPLICIT-SAME: %arg0: tensor<4x4xf32> {{{.*}}cleave.name = "w"{{.*}}}, %arg1: tensor<f32> {{{.*}}cleave.name = "s"{{.*}}}, %arg2: tensor<2x4xf32> {cleave.name = "x"
func.func @main(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<2x4xf32> {cleave.name = "y"}) {
  %w = cleave.constant {cleave.initializer = "w"} dense<0.5> : tensor<4x4xf32>
  %b = cleave.constant {cleave.initializer = "b"} dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>
  %s = cleave.constant {cleave.initializer = "s"} dense<3.0> : tensor<f32>
  %h = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %h1 = cleave.binary add %h, %bb : tensor<2x4xf32>
  %sb = cleave.broadcast_in_dim %s dims = [] : tensor<f32> -> tensor<2x4xf32>
  %y = cleave.binary pow %h1, %sb : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// One weight %u used by two layer norms: a warning, unless untied; untied,
// each use has its own parameter.
// UNTIE-NOT: warning
// UNTIE: func.func @main(%arg0: tensor<4xf32> {{{.*}}cleave.name = "u.untied1", cleave.parameter = "u.untied1", cleave.state = #cleave.state<parameter>, cleave.untied_from = "u"}, %arg1: tensor<4xf32> {{{.*}}cleave.name = "u", cleave.parameter = "u", cleave.state = #cleave.state<parameter>}
// UNTIE: cleave.layer_norm %arg4, %arg1, %arg2
// UNTIE: cleave.layer_norm %0, %arg0, %arg3
// WARN: warning: initializer 'u' is used by 2 'cleave.layer_norm' ops and trains as one tied parameter
// WARN-NOT: warning
// BADRE: error: invalid --untie regex: parentheses not balanced
func.func @main(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<2x4xf32> {cleave.name = "y"}) {
  %u = cleave.constant {cleave.initializer = "u"} dense<1.0> : tensor<4xf32>
  %z = cleave.constant {cleave.initializer = "z"} dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>
  %z2 = cleave.constant {cleave.initializer = "z2"} dense<[0.4, 0.3, 0.2, 0.1]> : tensor<4xf32>
  %h = cleave.layer_norm %x, %u, %z axis = 1 epsilon = 1.0e-05 : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %y = cleave.layer_norm %h, %u, %z2 axis = 1 epsilon = 1.0e-05 : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

