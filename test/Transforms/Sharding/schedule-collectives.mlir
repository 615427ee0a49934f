// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-schedule-collectives{bucket-mb=1}))' | FileCheck %s --check-prefix=BUCKET
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-schedule-collectives{bucket-mb=0}))' | FileCheck %s --check-prefix=ASYNC
// RUN: cleave-opt %s --pass-pipeline='builtin.module(func.func(cleave-schedule-collectives{bucket-mb=0.123456789}))' --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXACT

// The bucket size prints as the shortest text that reads back as the same
// double (six significant digits would print 1.234568e-01), so a printed
// pipeline runs with the bucket it was given.
// EXACT: cleave-schedule-collectives{{{.*}}bucket-mb=0.123456789{{[ }]}}

// Two gradient all-reduces, each read by its optimizer update, with
// independent compute (exp) after them.
cleave.mesh @mesh axes = ["dp"] shape = [2]

// One bucket: the operands are flattened and concatenated, the all-reduce
// starts where the last gradient is ready, the updates move after it, and
// the independent compute runs while it is in flight.
// BUCKET-LABEL: func.func @step
// BUCKET: %[[A:.*]] = cleave.reshape %arg0 : tensor<8x4xf32> -> tensor<32xf32>
// BUCKET: %[[C:.*]] = cleave.concat %[[A]], %{{.*}} dim = 0 : (tensor<32xf32>, tensor<16xf32>) -> tensor<48xf32>
// BUCKET: %[[H:.*]] = cleave.all_reduce sum %[[C]] over @mesh ["dp"] async {cleave.phase = "bucket of 2 all_reduces (192 bytes)"}
// BUCKET-NEXT: cleave.unary exp
// BUCKET-NEXT: %[[D:.*]] = cleave.done %[[H]] : tensor<48xf32>
// BUCKET-NEXT: cleave.slice %[[D]] start = [0] limit = [32]
// BUCKET: cleave.slice %[[D]] start = [32] limit = [48]
// BUCKET: cleave.binary sub %arg2
// BUCKET: cleave.binary sub %arg3
// BUCKET-NOT: cleave.all_reduce

// Without buckets each all-reduce is asynchronous and waited for right
// before its reader: the second one overlaps the exp.
// ASYNC-LABEL: func.func @step
// ASYNC: %[[A:.*]] = cleave.all_reduce sum %arg0 over @mesh ["dp"] async
// ASYNC-NEXT: cleave.done %[[A]]
// ASYNC-NEXT: cleave.binary sub %arg2
// ASYNC-NEXT: %[[B:.*]] = cleave.all_reduce sum %arg1 over @mesh ["dp"] async
// ASYNC-NEXT: cleave.unary exp
// ASYNC-NEXT: cleave.done %[[B]]
// ASYNC-NEXT: cleave.binary sub %arg3
func.func @step(%ga: tensor<8x4xf32>, %gb: tensor<16xf32>, %w: tensor<8x4xf32>, %v: tensor<16xf32>, %x: tensor<4xf32>)
    -> (tensor<8x4xf32>, tensor<16xf32>, tensor<4xf32>) {
  %a = cleave.all_reduce sum %ga over @mesh ["dp"] : tensor<8x4xf32>
  %wa = cleave.binary sub %w, %a : tensor<8x4xf32>
  %b = cleave.all_reduce sum %gb over @mesh ["dp"] : tensor<16xf32>
  %y = cleave.unary exp %x : tensor<4xf32>
  %vb = cleave.binary sub %v, %b : tensor<16xf32>
  return %wa, %vb, %y : tensor<8x4xf32>, tensor<16xf32>, tensor<4xf32>
}

// ZeRO-3: the second layer's parameter gather starts as soon as the first
// one is waited for, so it arrives while the first layer computes.
// BUCKET-LABEL: func.func @prefetch
// BUCKET: %[[G1:.*]] = cleave.all_gather %arg1 over @mesh ["dp"] dim = 0 async
// BUCKET-NEXT: %[[W1:.*]] = cleave.done %[[G1]]
// BUCKET-NEXT: %[[G2:.*]] = cleave.all_gather %arg2 over @mesh ["dp"] dim = 0 async
// BUCKET-NEXT: cleave.contract %arg0, %[[W1]]
// BUCKET-NEXT: cleave.unary tanh
// BUCKET-NEXT: cleave.done %[[G2]]
// BUCKET-NEXT: cleave.contract
func.func @prefetch(%x: tensor<4x8xf32>, %w1: tensor<4x8xf32>, %w2: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = cleave.all_gather %w1 over @mesh ["dp"] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %h = cleave.contract %x, %a batch = [] x [] contract = [1] x [0] : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %t = cleave.unary tanh %h : tensor<4x8xf32>
  %b = cleave.all_gather %w2 over @mesh ["dp"] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y = cleave.contract %t, %b batch = [] x [] contract = [1] x [0] : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// Late waits: the first gradient's reduce-scatter is waited for only when
// the second one starts, so the second gradient's product runs while it is
// in flight; the norm term that reads it moves with the wait.
// ASYNC-LABEL: func.func @late
// ASYNC: %[[R1:.*]] = cleave.reduce_scatter sum %arg0 over @mesh ["dp"] dim = 0 async
// ASYNC-NEXT: cleave.contract %arg1, %arg2
// ASYNC-NEXT: %[[D1:.*]] = cleave.done %[[R1]]
// ASYNC-NEXT: cleave.binary mul %[[D1]], %[[D1]]
// ASYNC-NEXT: cleave.reduce_scatter sum
func.func @late(%g1: tensor<8x4xf32>, %x: tensor<4x8xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %r1 = cleave.reduce_scatter sum %g1 over @mesh ["dp"] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %sq = cleave.binary mul %r1, %r1 : tensor<4x4xf32>
  %g2 = cleave.contract %x, %y batch = [] x [] contract = [0] x [0] : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %r2 = cleave.reduce_scatter sum %g2 over @mesh ["dp"] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  return %sq, %r2 : tensor<4x4xf32>, tensor<4x4xf32>
}
