// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd mark-backward=true" --cleave-insert-recompute=policy=full | FileCheck %s
// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd" --cleave-insert-recompute=policy=none | FileCheck %s --check-prefix=NONE
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd" --cleave-insert-recompute=policy=full 2>&1 | FileCheck %s --check-prefix=UNTAGGED

// Two tanh layers named like PyTorch exports (/h.0/..., /h.1/...): with
// mark-backward, autodiff tags its ops, and full recompute keeps only the
// layer inputs; each layer's tanh is cloned before its first backward use.
func.func @main(%x: tensor<8x4xf32> {cleave.name = "x"}) -> (tensor<8x4xf32> {cleave.name = "y"}) {
  %w0 = cleave.constant {cleave.initializer = "w0"} dense<0.5> : tensor<4x4xf32> loc("w0")
  %w1 = cleave.constant {cleave.initializer = "w1"} dense<0.25> : tensor<4x4xf32> loc("w1")
  %a0 = cleave.contract %x, %w0 batch = [] x [] contract = [1] x [0] : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32> loc("/h.0/fc/MatMul")
  %t0 = cleave.unary tanh %a0 : tensor<8x4xf32> loc("/h.0/act/Tanh")
  %a1 = cleave.contract %t0, %w1 batch = [] x [] contract = [1] x [0] : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32> loc("/h.1/fc/MatMul")
  %t1 = cleave.unary tanh %a1 : tensor<8x4xf32> loc("/h.1/act/Tanh")
  return %t1 : tensor<8x4xf32>
}

// CHECK: cleave.recompute_stats = {{{.*}}policy = "full"{{.*}}saved_bytes_after = 128 : i64, saved_bytes_before = 388 : i64}
// CHECK: %[[T0:.*]] = cleave.unary tanh %{{.*}} : tensor<8x4xf32>
// CHECK: %[[T1:.*]] = cleave.unary tanh %{{.*}} : tensor<8x4xf32>
// The backward pass starts; layer 1 (and the loss ops after it, which have
// no name and so take the layer of the op before them) is cloned right
// before the first backward op that reads it. %t0, layer 1's input, stays.
// CHECK: %[[A1R:.*]] = cleave.contract %[[T0]], {{.*}} {cleave.recompute}
// CHECK-NEXT: %[[T1R:.*]] = cleave.unary tanh %[[A1R]] {cleave.recompute}
// CHECK: cleave.binary mul %[[T1R]], %[[T1R]] {cleave.backward}
// CHECK: cleave.binary mul %[[T0]], %[[T0]] {cleave.backward}
// CHECK: return

// NONE: cleave.recompute_stats = {extra_flops = 0 : i64, policy = "none", recompute_flops = 0 : i64, recomputed_ops = 0 : i64, saved_bytes_after = 0 : i64, saved_bytes_before = 0 : i64}
// NONE-NOT: cleave.backward

// UNTAGGED: error: --cleave-insert-recompute found no backward ops (tagged `cleave.backward`): build the training step with --cleave-build-train-step="mark-backward=true"
