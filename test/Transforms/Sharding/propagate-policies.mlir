// RUN: cleave-opt --cleave-propagate-sharding %s | FileCheck %s

// How propagation settles what the program leaves open: conflicts, priorities,
// open and closed dimensions, op order.

cleave.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]

// Both operands ask for the batch factor, over different axes. Taking dp
// reshards the 2 KiB rhs, taking tp the 16 KiB lhs: dp wins.
// CHECK-LABEL: func.func @conflict_cheaper_wins(
// CHECK: cleave.contract {{.*}}[{"dp"}, {}, {}]
func.func @conflict_cheaper_wins(%a: tensor<4x64x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {}]>},
                                 %b: tensor<4x16x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}, {}]>}) -> tensor<4x64x8xf32> {
  %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1] : tensor<4x64x16xf32>, tensor<4x16x8xf32> -> tensor<4x64x8xf32>
  return %0 : tensor<4x64x8xf32>
}

// p0 is propagated before p1: tp reaches the sum first and dp cannot take it.
// CHECK-LABEL: func.func @priorities(
// CHECK: cleave.binary add {{.*}}[{"tp"}, {}]
func.func @priorities(%a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}p1, {}]>},
                      %b: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}p0, {}]>}) -> tensor<8x8xf32> {
  %0 = cleave.binary add %a, %b : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// An open argument takes axes from its users; a closed one stays as stated
// (the partitioner slices it where a sharded op reads it).
// CHECK-LABEL: func.func @open_and_closed(
// CHECK-SAME: %arg1: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: %arg2: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}]>}
func.func @open_and_closed(%a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
                           %open: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{?}, {?}]>},
                           %closed: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}]>}) -> tensor<8x8xf32> {
  %0 = cleave.binary add %a, %open : tensor<8x8xf32>
  %1 = cleave.binary mul %0, %closed : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}

// %x is read by two sums that want it over different axes: the outcome is
// decided by priority, count and name, so swapping the ops changes nothing.
// CHECK-LABEL: func.func @order_ab(
// CHECK-SAME: %arg0: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}
func.func @order_ab(%x: tensor<8x8xf32>,
                    %a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>},
                    %b: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %u = cleave.binary add %x, %a : tensor<8x8xf32>
  %v = cleave.binary add %x, %b : tensor<8x8xf32>
  return %u, %v : tensor<8x8xf32>, tensor<8x8xf32>
}

// CHECK-LABEL: func.func @order_ba(
// CHECK-SAME: %arg0: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}
func.func @order_ba(%x: tensor<8x8xf32>,
                    %a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>},
                    %b: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %v = cleave.binary add %x, %b : tensor<8x8xf32>
  %u = cleave.binary add %x, %a : tensor<8x8xf32>
  return %u, %v : tensor<8x8xf32>, tensor<8x8xf32>
}

// A mesh axis splits one dimension of a tensor at most: the first factor
// keeps dp and the second goes without.
// CHECK-LABEL: func.func @axis_once(
// CHECK: cleave.binary add {{.*}}[{"dp"}, {}]
func.func @axis_once(%a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
                     %b: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"dp"}]>}) -> tensor<8x8xf32> {
  %0 = cleave.binary add %a, %b : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// Axes travel a chain one op per sweep, dp forward from %a and tp backward
// from the stated result; later sweeps rerun only the ops next to what
// changed, and every value still ends with both.
// CHECK-LABEL: func.func @long_chain(
// CHECK-SAME: %arg0: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: %arg1: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-COUNT-6: cleave.binary {{.*}}[{"dp"}, {"tp"}]>]}
// CHECK-NEXT: return
func.func @long_chain(%a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {?}]>},
                      %s: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{?}, {?}]>})
    -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{?}, {"tp"}]>}) {
  %0 = cleave.binary add %a, %a : tensor<8x8xf32>
  %1 = cleave.binary mul %0, %0 : tensor<8x8xf32>
  %2 = cleave.binary sub %1, %a : tensor<8x8xf32>
  %3 = cleave.binary mul %2, %1 : tensor<8x8xf32>
  %4 = cleave.binary add %3, %0 : tensor<8x8xf32>
  %5 = cleave.binary add %4, %s : tensor<8x8xf32>
  return %5 : tensor<8x8xf32>
}
