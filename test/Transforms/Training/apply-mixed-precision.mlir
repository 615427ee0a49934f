// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd mark-fp32-ops=true" --cleave-apply-mixed-precision=precision=bf16 | FileCheck %s
// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd mark-fp32-ops=true" --cleave-apply-mixed-precision=precision=fp16 | FileCheck %s --check-prefix=F16
// RUN: cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd mark-fp32-ops=true" --cleave-apply-mixed-precision=precision=fp32 | FileCheck %s --check-prefix=F32
// RUN: not cleave-opt %s --cleave-build-train-step="loss=mse:y,target optimizer=sgd" --cleave-apply-mixed-precision=precision=bf16 2>&1 | FileCheck %s --check-prefix=UNTAGGED
// RUN: not cleave-opt %s --cleave-apply-mixed-precision=precision=fp8 2>&1 | FileCheck %s --check-prefix=BADPREC

// A linear layer, a bias, a softmax and an MSE loss; parameters w and b.
func.func @main(%x: tensor<8x4xf32> {cleave.name = "x"}) -> (tensor<8x2xf32> {cleave.name = "y"}) {
  %w = cleave.constant {cleave.initializer = "w"} dense<0.5> : tensor<4x2xf32>
  %b = cleave.constant {cleave.initializer = "b"} dense<0.1> : tensor<8x2xf32>
  %h = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<8x4xf32>, tensor<4x2xf32> -> tensor<8x2xf32>
  %y = cleave.binary add %h, %b : tensor<8x2xf32>
  %s = cleave.softmax %y dim = 1 : tensor<8x2xf32>
  return %s : tensor<8x2xf32>
}

// Parameters stay f32 master weights (arguments and updated results).
// CHECK: func.func @main(%[[W:.*]]: tensor<4x2xf32> {{{.*}}cleave.state = #cleave.state<parameter>}, %[[B:.*]]: tensor<8x2xf32> {{{.*}}cleave.state = #cleave.state<parameter>}, %[[X:.*]]: tensor<8x4xf32>
// CHECK-SAME: -> (tensor<4x2xf32> {{{.*}}cleave.updates = 0 : i64}, tensor<8x2xf32> {{{.*}}cleave.updates = 1 : i64}, tensor<f32> {{{.*}}cleave.role = #cleave.role<loss>}, tensor<f32> {{{.*}}cleave.role = #cleave.role<grad_norm>})
// Converted down where used; the contraction accumulates in f32.
// CHECK-DAG: %[[BL:.*]] = cleave.convert %[[B]] : tensor<8x2xf32> -> tensor<8x2xbf16>
// CHECK-DAG: %[[WL:.*]] = cleave.convert %[[W]] : tensor<4x2xf32> -> tensor<4x2xbf16>
// CHECK-DAG: %[[XL:.*]] = cleave.convert %[[X]] : tensor<8x4xf32> -> tensor<8x4xbf16>
// CHECK: %[[H:.*]] = cleave.contract %[[XL]], %[[WL]] {{.*}} : tensor<8x4xbf16>, tensor<4x2xbf16> -> tensor<8x2xf32>
// The bias add is elementwise on an activation: bf16.
// CHECK: %[[HL:.*]] = cleave.convert %[[H]] : tensor<8x2xf32> -> tensor<8x2xbf16>
// CHECK: %[[Y:.*]] = cleave.binary add %[[HL]], %[[BL]] : tensor<8x2xbf16>
// Softmax statistics in f32.
// CHECK: %[[YF:.*]] = cleave.convert %[[Y]] : tensor<8x2xbf16> -> tensor<8x2xf32>
// CHECK: %[[S:.*]] = cleave.softmax %[[YF]] dim = 1 : tensor<8x2xf32>
// The loss in f32.
// CHECK: cleave.binary sub %[[S]], %{{.*}} : tensor<8x2xf32>
// CHECK: %[[LOSS:.*]] = cleave.binary div %{{.*}}, %{{.*}} : tensor<f32>
// Backward: the gradient contractions take bf16 operands, give f32.
// CHECK-DAG: cleave.contract %{{.*}}, %[[XL]] {{.*}} : tensor<8x2xbf16>, tensor<8x4xbf16> -> tensor<2x4xf32>
// Gradient norm and SGD update in f32 (each update as soon as its gradient
// is complete).
// CHECK-DAG: %[[NORM:.*]] = cleave.unary sqrt %{{.*}} : tensor<f32>
// CHECK-DAG: %[[NW:.*]] = cleave.binary sub %[[W]], %{{.*}} : tensor<4x2xf32>
// CHECK-DAG: %[[NB:.*]] = cleave.binary sub %[[B]], %{{.*}} : tensor<8x2xf32>
// CHECK: return %[[NW]], %[[NB]], %[[LOSS]], %[[NORM]]
// The tags are gone.
// CHECK-NOT: cleave.fp32

// F16: cleave.contract %{{.*}}, %{{.*}} {{.*}} : tensor<8x4xf16>, tensor<4x2xf16> -> tensor<8x2xf32>
// F16: cleave.binary add %{{.*}}, %{{.*}} : tensor<8x2xf16>
// F16: cleave.softmax %{{.*}} dim = 1 : tensor<8x2xf32>

// precision=fp32 changes nothing but the tags.
// F32-NOT: bf16
// F32-NOT: f16
// F32-NOT: cleave.fp32
// F32: cleave.contract %{{.*}}, %{{.*}} {{.*}} : tensor<8x4xf32>, tensor<4x2xf32> -> tensor<8x2xf32>

// UNTAGGED: error: training step without `cleave.fp32` tags
// BADPREC: error: unknown precision 'fp8' (expected fp32, bf16 or fp16)
