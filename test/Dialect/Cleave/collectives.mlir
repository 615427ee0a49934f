// Meshes and collectives: round-trip through the custom assembly and the
// generic form, and no rewrite merges, drops or moves a collective.
// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --cse --canonicalize | FileCheck %s --check-prefix=OPT

// CHECK: cleave.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// CHECK: cleave.mesh @cube axes = ["x", "y", "z"] shape = [2, 2, 2]
cleave.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
cleave.mesh @cube axes = ["x", "y", "z"] shape = [2, 2, 2]

// CHECK-LABEL: func.func @every_collective
func.func @every_collective(%x: tensor<4x6xf32>, %i: tensor<8xi32>)
    -> (tensor<4x6xf32>, tensor<8x6xf32>, tensor<2x6xf32>, tensor<2x12xf32>,
        tensor<4x6xf32>, tensor<8xi32>, tensor<4x6xf32>, tensor<4x3xf32>) {
  // CHECK: cleave.all_reduce sum %{{.*}} over @mesh ["dp"] : tensor<4x6xf32>
  %0 = cleave.all_reduce sum %x over @mesh ["dp"] : tensor<4x6xf32>
  // CHECK: cleave.all_gather %{{.*}} over @mesh ["tp"] dim = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
  %1 = cleave.all_gather %x over @mesh ["tp"] dim = 0 : tensor<4x6xf32> -> tensor<8x6xf32>
  // CHECK: cleave.reduce_scatter avg %{{.*}} over @mesh ["dp"] dim = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
  %2 = cleave.reduce_scatter avg %x over @mesh ["dp"] dim = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
  // CHECK: cleave.all_to_all %{{.*}} over @mesh ["dp"] split = 0 concat = 1 : tensor<4x6xf32> -> tensor<2x12xf32>
  %3 = cleave.all_to_all %x over @mesh ["dp"] split = 0 concat = 1 : tensor<4x6xf32> -> tensor<2x12xf32>
  // CHECK: cleave.broadcast %{{.*}} over @mesh ["dp", "tp"] root = 3 : tensor<4x6xf32>
  %4 = cleave.broadcast %x over @mesh ["dp", "tp"] root = 3 : tensor<4x6xf32>
  // CHECK: cleave.collective_permute %{{.*}} over @cube ["z", "x"] pairs = [0, 1, 1, 2, 2, 3, 3, 0] : tensor<8xi32>
  %5 = cleave.collective_permute %i over @cube ["z", "x"] pairs = [0, 1, 1, 2, 2, 3, 3, 0] : tensor<8xi32>
  // CHECK: cleave.send %{{.*}} over @mesh ["tp"] from = 0 to = 1 : tensor<4x6xf32>
  cleave.send %x over @mesh ["tp"] from = 0 to = 1 : tensor<4x6xf32>
  // CHECK: cleave.recv over @mesh ["tp"] from = 0 to = 1 : tensor<4x6xf32>
  %6 = cleave.recv over @mesh ["tp"] from = 0 to = 1 : tensor<4x6xf32>
  // CHECK: cleave.all_slice %{{.*}} over @mesh ["dp"] dim = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  %7 = cleave.all_slice %x over @mesh ["dp"] dim = 1 : tensor<4x6xf32> -> tensor<4x3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<4x6xf32>, tensor<8x6xf32>, tensor<2x6xf32>, tensor<2x12xf32>, tensor<4x6xf32>, tensor<8xi32>, tensor<4x6xf32>, tensor<4x3xf32>
}

// CHECK-LABEL: func.func @async
func.func @async(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: %[[H:.*]] = cleave.all_reduce max %{{.*}} over @mesh ["dp"] async : tensor<4xf32>
  %h = cleave.all_reduce max %x over @mesh ["dp"] async : tensor<4xf32>
  // CHECK: %[[E:.*]] = cleave.unary exp
  %e = cleave.unary exp %x : tensor<4xf32>
  // CHECK: cleave.done %[[H]] : tensor<4xf32>
  %r = cleave.done %h : tensor<4xf32>
  %s = cleave.binary add %r, %e : tensor<4xf32>
  return %s : tensor<4xf32>
}

// Two identical all-reduces stay two (each is a rendezvous of its own), and
// an all-reduce whose result is unused stays: the other ranks wait for it.
// OPT-LABEL: func.func @not_pure
// OPT-COUNT-3: cleave.all_reduce sum
// OPT: cleave.send
func.func @not_pure(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = cleave.all_reduce sum %x over @mesh ["dp"] : tensor<4xf32>
  %b = cleave.all_reduce sum %x over @mesh ["dp"] : tensor<4xf32>
  %unused = cleave.all_reduce sum %x over @mesh ["tp"] : tensor<4xf32>
  cleave.send %x over @mesh ["tp"] from = 1 to = 0 : tensor<4xf32>
  %c = cleave.binary add %a, %b : tensor<4xf32>
  return %c : tensor<4xf32>
}
