// RUN: cleave-opt %s --cleave-add-activation-probes=pattern='h0\..*' | FileCheck %s
// RUN: cleave-opt %s --cleave-add-activation-probes=pattern=nothing | FileCheck %s --check-prefix=NONE
// RUN: not cleave-opt %s --cleave-add-activation-probes=pattern='(' 2>&1 | FileCheck %s --check-prefix=BAD

// The last forward op of each matching node is returned, named in program
// order; backward ops are never probes.
// CHECK-LABEL: func.func @main
// CHECK-SAME: -> (tensor<f32> {cleave.name = "loss"}, tensor<4xf32> {cleave.name = "probe.0000.h0.fc", cleave.role = #cleave.role<probe>}, tensor<4xf32> {cleave.name = "probe.0001.h0.act", cleave.role = #cleave.role<probe>})
// CHECK: %[[FC:.*]] = cleave.binary add
// CHECK: %[[ACT:.*]] = cleave.unary tanh
// CHECK: return %{{.*}}, %[[FC]], %[[ACT]]
// NONE: -> (tensor<f32> {cleave.name = "loss"})
// BAD: error: --probe '(' is not a valid regular expression
func.func @main(%x: tensor<4xf32>) -> (tensor<f32> {cleave.name = "loss"}) {
  %a = cleave.binary mul %x, %x : tensor<4xf32> loc("h0.fc")
  %b = cleave.binary add %a, %x : tensor<4xf32> loc("h0.fc")
  %c = cleave.unary tanh %b : tensor<4xf32> loc("h0.act")
  %d = cleave.unary tanh %c {cleave.backward} : tensor<4xf32> loc("h0.act")
  %l = cleave.reduce sum %d dims = [0] : tensor<4xf32> -> tensor<f32> loc("h1.loss")
  return %l : tensor<f32>
}
