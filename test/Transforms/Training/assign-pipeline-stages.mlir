// Pipeline stages cut at layer boundaries (ONNX node name prefixes l0 ..
// l5; the embedding and the head are layers of their own) with the largest
// stage's flops as small as the layers allow: six equal layers (65,536
// flops for the product, 512 for tanh) and a cheaper embedding and head
// give 3 + 3 layers on 2 stages and 1 + 2 + 2 + 1 on 4, the embedding with
// the first and the head with the last. The tied table is read by the
// embedding and the head. Each cut sends one 8 x 64 activation.
// RUN: cleave-opt %s --cleave-assign-pipeline-stages="stages=2" -o - 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: cleave-opt %s --cleave-assign-pipeline-stages="stages=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FOUR
// RUN: cleave-opt %s --cleave-assign-pipeline-stages="stages=3 boundaries=l0.act,l3.act" -o /dev/null 2>&1 | FileCheck %s --check-prefix=USER
// RUN: not cleave-opt %s --cleave-assign-pipeline-stages="stages=3 boundaries=l0.act" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not cleave-opt %s --cleave-assign-pipeline-stages="stages=2 boundaries=l9.act" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not cleave-opt %s --cleave-assign-pipeline-stages="stages=9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LAYERS

// TWO: remark: stage 0: ops 0..6, 198144 flops (48.0%), parameters 53248 bytes, sends 2048 bytes on
// TWO: remark: stage 1: ops 7..14, 214528 flops (52.0%), parameters 49152 bytes
// TWO: remark: balance: largest stage 1.040 of the mean
// TWO: remark: tied parameter table on stages 0 1: its gradient is the sum of the stages'
// TWO: cleave.constant {cleave.initializer = "table", cleave.stage = 0 : i64}
// TWO: cleave.constant {cleave.initializer = "w3", cleave.stage = 1 : i64}
// TWO: cleave.gather {{.*}} {cleave.stage = 0 : i64}
// TWO-COUNT-3: cleave.unary tanh {{.*}} {cleave.stage = 0 : i64}
// TWO-NEXT: cleave.contract {{.*}} {cleave.stage = 1 : i64}
// TWO-COUNT-3: cleave.unary tanh {{.*}} {cleave.stage = 1 : i64}

// FOUR: remark: stage 0: ops 0..2, 66048 flops (16.0%), parameters 20480 bytes, sends 2048 bytes on
// FOUR: remark: stage 1: ops 3..6, 132096 flops (32.0%)
// FOUR: remark: stage 2: ops 7..10, 132096 flops (32.0%)
// FOUR: remark: stage 3: ops 11..14, 82432 flops (20.0%)
// FOUR: remark: balance: largest stage 1.280 of the mean
// FOUR: remark: tied parameter table on stages 0 3

// USER: remark: stage 0: ops 0..2,
// USER: remark: stage 1: ops 3..8,
// USER: remark: stage 2: ops 9..14,

// COUNT: error: --stage-boundaries names 1 nodes for 3 stages (one fewer than the stages)
// MISSING: error: stage boundary 'l9.act' is neither an ONNX node nor a layer of the program
// LAYERS: error: cannot cut the program into 9 pipeline stages: it has 8 layers

func.func @main(%ids: tensor<8xi64>) -> tensor<8x16xf32> {
  %table = cleave.constant {cleave.initializer = "table"} dense<0.5> : tensor<16x64xf32>
  %w0 = cleave.constant {cleave.initializer = "w0"} dense<0.01> : tensor<64x64xf32>
  %w1 = cleave.constant {cleave.initializer = "w1"} dense<0.01> : tensor<64x64xf32>
  %w2 = cleave.constant {cleave.initializer = "w2"} dense<0.01> : tensor<64x64xf32>
  %w3 = cleave.constant {cleave.initializer = "w3"} dense<0.01> : tensor<64x64xf32>
  %w4 = cleave.constant {cleave.initializer = "w4"} dense<0.01> : tensor<64x64xf32>
  %w5 = cleave.constant {cleave.initializer = "w5"} dense<0.01> : tensor<64x64xf32>
  %x = cleave.gather %table, %ids axis = 0 : (tensor<16x64xf32>, tensor<8xi64>) -> tensor<8x64xf32> loc("embed")
  %h0 = cleave.contract %x, %w0 batch = [] x [] contract = [1] x [0] : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32> loc("l0.fc")
  %a0 = cleave.unary tanh %h0 : tensor<8x64xf32> loc("l0.act")
  %h1 = cleave.contract %a0, %w1 batch = [] x [] contract = [1] x [0] : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32> loc("l1.fc")
  %a1 = cleave.unary tanh %h1 : tensor<8x64xf32> loc("l1.act")
  %h2 = cleave.contract %a1, %w2 batch = [] x [] contract = [1] x [0] : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32> loc("l2.fc")
  %a2 = cleave.unary tanh %h2 : tensor<8x64xf32> loc("l2.act")
  %h3 = cleave.contract %a2, %w3 batch = [] x [] contract = [1] x [0] : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32> loc("l3.fc")
  %a3 = cleave.unary tanh %h3 : tensor<8x64xf32> loc("l3.act")
  %h4 = cleave.contract %a3, %w4 batch = [] x [] contract = [1] x [0] : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32> loc("l4.fc")
  %a4 = cleave.unary tanh %h4 : tensor<8x64xf32> loc("l4.act")
  %h5 = cleave.contract %a4, %w5 batch = [] x [] contract = [1] x [0] : tensor<8x64xf32>, tensor<64x64xf32> -> tensor<8x64xf32> loc("l5.fc")
  %a5 = cleave.unary tanh %h5 : tensor<8x64xf32> loc("l5.act")
  %t = cleave.transpose %table perm = [1, 0] : tensor<16x64xf32> -> tensor<64x16xf32> loc("head_t")
  %y = cleave.contract %a5, %t batch = [] x [] contract = [1] x [0] : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32> loc("head")
  return %y : tensor<8x16xf32>
}
