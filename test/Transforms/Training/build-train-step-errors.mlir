// Errors of --cleave-build-train-step name the problem; nothing crashes.
// RUN: not cleave-opt %s --split-input-file --cleave-build-train-step="loss=mse:y,target optimizer=sgd" 2>&1 | FileCheck %s

// CHECK: error: @main's arguments and results must be ranked tensors, got 'tensor<*xf32>'
func.func @main(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<*xf32> {cleave.name = "y"}) {
  %c = cleave.constant {cleave.initializer = "c"} dense<1.0> : tensor<2x4xf32>
  %0 = cleave.binary add %x, %c : tensor<2x4xf32>
  %1 = tensor.cast %0 : tensor<2x4xf32> to tensor<*xf32>
  return %1 : tensor<*xf32>
}

// -----

// CHECK: error: no trainable parameters: no float initializer has more than one element
func.func @main(%x: tensor<2x4xf32> {cleave.name = "x"}) -> (tensor<2x4xf32> {cleave.name = "y"}) {
  %s = cleave.constant {cleave.initializer = "s"} dense<3.0> : tensor<f32>
  %sb = cleave.broadcast_in_dim %s dims = [] : tensor<f32> -> tensor<2x4xf32>
  %y = cleave.binary mul %x, %sb : tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
