// RUN: cleave-opt %s --cleave-insert-recompute=policy=none | FileCheck %s --check-prefix=NONE
// RUN: cleave-opt %s --cleave-insert-recompute=policy=full | FileCheck %s --check-prefix=FULL
// RUN: cleave-opt %s --cleave-insert-recompute=policy=selective | FileCheck %s --check-prefix=SEL
// RUN: cleave-opt %s --cleave-insert-recompute=policy=budget:256 | FileCheck %s --check-prefix=BUDGET
// RUN: not cleave-opt %s --cleave-insert-recompute=policy=some 2>&1 | FileCheck %s --check-prefix=BADPOLICY
// RUN: not cleave-opt %s --cleave-insert-recompute=policy=budget:lots 2>&1 | FileCheck %s --check-prefix=BADBUDGET

// A hand-written training step of two residual layers (h0, h1: the layer
// comes from the ONNX node-name prefix of each op's location) whose
// backward ops carry `cleave.backward`. Saved activations (forward values
// the backward ops read): %t1, %y0 and %t0, 3 x 128 bytes.
func.func @main(%w0: tensor<4x4xf32>, %w1: tensor<4x4xf32>, %x: tensor<8x4xf32>,
                %dy: tensor<8x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>) {
  %a0 = cleave.contract %x, %w0 batch = [] x [] contract = [1] x [0] : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32> loc("h0.fc")
  %t0 = cleave.unary tanh %a0 : tensor<8x4xf32> loc("h0.act")
  %y0 = cleave.binary add %x, %t0 : tensor<8x4xf32> loc("h0.residual")
  %a1 = cleave.contract %y0, %w1 batch = [] x [] contract = [1] x [0] : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32> loc("/h.1/fc/MatMul")
  %t1 = cleave.unary tanh %a1 : tensor<8x4xf32> loc("/h.1/act/Tanh")
  %y1 = cleave.binary add %y0, %t1 : tensor<8x4xf32> loc("/h.1/Add")
  // Dead already: erased, and not counted as flops recomputation saved.
  %dead = cleave.unary exp %x : tensor<8x4xf32> loc("h0.dead")
  // Backward of h1.
  %s1 = cleave.binary mul %t1, %t1 {cleave.backward} : tensor<8x4xf32>
  %g1 = cleave.binary sub %dy, %s1 {cleave.backward} : tensor<8x4xf32>
  %da1 = cleave.binary mul %dy, %g1 {cleave.backward} : tensor<8x4xf32>
  %dw1 = cleave.contract %y0, %da1 batch = [] x [] contract = [0] x [0] {cleave.backward} : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %dx1 = cleave.contract %da1, %w1 batch = [] x [] contract = [1] x [1] {cleave.backward} : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %dy0 = cleave.binary add %dy, %dx1 {cleave.backward} : tensor<8x4xf32>
  // Backward of h0.
  %s0 = cleave.binary mul %t0, %t0 {cleave.backward} : tensor<8x4xf32>
  %g0 = cleave.binary sub %dy0, %s0 {cleave.backward} : tensor<8x4xf32>
  %da0 = cleave.binary mul %dy0, %g0 {cleave.backward} : tensor<8x4xf32>
  %dw0 = cleave.contract %x, %da0 batch = [] x [] contract = [0] x [0] {cleave.backward} : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  return %dw0, %dw1, %y1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>
}

// none: nothing changes.
// NONE: module attributes {cleave.recompute_stats = {extra_flops = 0 : i64, policy = "none", recompute_flops = 0 : i64, recomputed_ops = 0 : i64, saved_bytes_after = 384 : i64, saved_bytes_before = 384 : i64}}
// NONE-NOT: cleave.recompute}

// full: only the layer boundary %y0 stays saved; each layer's tanh and the
// contraction before it are cloned right before their first backward user.
// FULL: module attributes {cleave.recompute_stats = {extra_flops = 576 : i64, policy = "full", recompute_flops = 576 : i64, recomputed_ops = 4 : i64, saved_bytes_after = 128 : i64, saved_bytes_before = 384 : i64}}
// FULL: func.func @main(%[[W0:.*]]: tensor<4x4xf32>, %[[W1:.*]]: tensor<4x4xf32>, %[[X:.*]]: tensor<8x4xf32>, %[[DY:.*]]: tensor<8x4xf32>)
// FULL: %[[Y0:.*]] = cleave.binary add %[[X]], %{{.*}} : tensor<8x4xf32>
// FULL: %[[Y1:.*]] = cleave.binary add %[[Y0]], %{{.*}} : tensor<8x4xf32>
// FULL-NEXT: %[[A1:.*]] = cleave.contract %[[Y0]], %[[W1]] {{.*}} {cleave.recompute}
// FULL-NEXT: %[[T1:.*]] = cleave.unary tanh %[[A1]] {cleave.recompute}
// FULL-NEXT: cleave.binary mul %[[T1]], %[[T1]] {cleave.backward}
// FULL: %[[DY0:.*]] = cleave.binary add %[[DY]], %{{.*}} {cleave.backward}
// FULL-NEXT: %[[A0:.*]] = cleave.contract %[[X]], %[[W0]] {{.*}} {cleave.recompute}
// FULL-NEXT: %[[T0:.*]] = cleave.unary tanh %[[A0]] {cleave.recompute}
// FULL-NEXT: cleave.binary mul %[[T0]], %[[T0]] {cleave.backward}
// FULL: return

// selective: contraction outputs stay saved; only the tanh is recomputed.
// SEL: recompute_flops = 64 : i64, recomputed_ops = 2 : i64, saved_bytes_after = 384 : i64, saved_bytes_before = 384 : i64
// SEL: %[[A0:.*]] = cleave.contract
// SEL: cleave.binary add %{{.*}}, %{{.*}} {cleave.backward}
// SEL-NEXT: %[[T0:.*]] = cleave.unary tanh %[[A0]] {cleave.recompute}
// SEL-NEXT: cleave.binary mul %[[T0]], %[[T0]] {cleave.backward}

// budget: 256 bytes fit two of the three saved values; the cheapest to
// recompute per byte is the residual add (%y0), though it is a boundary.
// BUDGET: saved_bytes_after = 256 : i64, saved_bytes_before = 384 : i64
// BUDGET: cleave.binary sub %{{.*}}, %{{.*}} {cleave.backward}
// BUDGET-NEXT: cleave.binary mul %{{.*}}, %{{.*}} {cleave.backward}
// BUDGET-NEXT: %[[Y0:.*]] = cleave.binary add %{{.*}}, %{{.*}} {cleave.recompute}
// BUDGET-NEXT: cleave.contract %[[Y0]], %{{.*}} {{.*}} {cleave.backward}

// BADPOLICY: unknown recompute policy 'some' (expected none, selective, full or budget:<bytes>)
// BADBUDGET: invalid recompute budget 'lots'
