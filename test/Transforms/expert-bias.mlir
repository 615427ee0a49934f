// RUN: cleave-opt %s --split-input-file --verify-diagnostics --cleave-expert-bias=rate=0.001 | FileCheck %s

// --cleave-expert-bias: the router's top-k (8 tokens x 4 experts, k = 2)
// picks its experts by the scores plus a bias per expert, a tagged
// initializer of zeros named after the top-k's node, and the gating
// weights are the scores gathered at the picked experts, without the bias.

// CHECK-LABEL: func.func @main
// CHECK: %[[B:.*]] = cleave.constant {cleave.expert_bias = 1.000000e-03 : f64, cleave.initializer = "moe_topk.expert_bias"} dense<0.000000e+00> : tensor<4xf32>
// CHECK: %[[S:.*]] = cleave.softmax
// CHECK: %[[BB:.*]] = cleave.broadcast_in_dim %[[B]] dims = [1] : tensor<4xf32> -> tensor<8x4xf32>
// CHECK: %[[PICK:.*]] = cleave.binary add %[[S]], %[[BB]] : tensor<8x4xf32>
// CHECK: %{{.*}}, %[[IDS:.*]] = cleave.top_k %[[PICK]] k = 2 dim = 1 largest = true sorted = true
// CHECK: %[[W:.*]] = cleave.gather_elements %[[S]], %[[IDS]] axis = 1 : (tensor<8x4xf32>, tensor<8x2xi64>) -> tensor<8x2xf32>
// CHECK: cleave.reshape %[[IDS]] : tensor<8x2xi64> -> tensor<16xi64>
// CHECK: return %{{.*}}, %[[W]]
func.func @main(%x: tensor<8x32xf32>, %r: tensor<32x4xf32>, %w: tensor<4x64x32xf32>, %rows: tensor<16x32xf32>) -> (tensor<16x64xf32>, tensor<8x2xf32>) {
  %logits = cleave.contract %x, %r batch = [] x [] contract = [1] x [0] : tensor<8x32xf32>, tensor<32x4xf32> -> tensor<8x4xf32>
  %s = cleave.softmax %logits dim = 1 : tensor<8x4xf32>
  %v, %i = cleave.top_k %s k = 2 dim = 1 largest = true sorted = true : tensor<8x4xf32> -> tensor<8x2xf32>, tensor<8x2xi64> loc("moe_topk")
  %ids = cleave.reshape %i : tensor<8x2xi64> -> tensor<16xi64>
  %y = cleave.grouped_matmul %rows, %w, %ids transpose_w : (tensor<16x32xf32>, tensor<4x64x32xf32>, tensor<16xi64>) -> tensor<16x64xf32>
  return %y, %v : tensor<16x64xf32>, tensor<8x2xf32>
}

// -----

// A program without a router is refused.
// expected-error @+1 {{--moe-bias-update: the program has no router}}
module {
  func.func @main(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    return %x : tensor<8x4xf32>
  }
}

// -----

// A top-k of the smallest scores is not a router the bias can steer.
func.func @main(%s: tensor<8x4xf32>, %w: tensor<4x64x32xf32>, %rows: tensor<16x32xf32>) -> tensor<16x64xf32> {
  // expected-error @+1 {{is not a top-k of the largest tokens x experts scores}}
  %v, %i = cleave.top_k %s k = 2 dim = 1 largest = false sorted = true : tensor<8x4xf32> -> tensor<8x2xf32>, tensor<8x2xi64>
  %ids = cleave.reshape %i : tensor<8x2xi64> -> tensor<16xi64>
  %y = cleave.grouped_matmul %rows, %w, %ids transpose_w : (tensor<16x32xf32>, tensor<4x64x32xf32>, tensor<16xi64>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
