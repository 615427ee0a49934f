// RUN: cleave-opt --cleave-propagate-sharding %s | FileCheck %s
// RUN: cleave-opt --cleave-propagate-sharding=keep-open %s | FileCheck %s --check-prefix=OPEN

// Sharding propagation through the ops' factor rules: every value ends with
// a sharding, taken forward from the arguments and backward from the
// results. propagate-policies.mlir holds priorities and op order,
// propagate-blocks.mlir whole models' blocks, propagate-invalid.mlir errors.

cleave.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]

// Forward through elementwise ops: the unannotated operand and the function
// result take the batch split.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %arg1: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>})
// CHECK: cleave.unary tanh %arg0 {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {}]>]}
// CHECK: cleave.binary add {{.*}} {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {}]>]}
// OPEN-LABEL: func.func @forward(
// OPEN-SAME: %arg1: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp", ?}p0, {?}]>}
// OPEN: cleave.unary tanh %arg0 {cleave.sharding = [#cleave.sharding<@mesh, [{"dp", ?}p0, {?}]>]}
func.func @forward(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
                   %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = cleave.unary tanh %x : tensor<8x16xf32>
  %1 = cleave.binary add %0, %y : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Backward from a stated function result to both arguments.
// CHECK-LABEL: func.func @backward(
// CHECK-SAME: %arg0: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: %arg1: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}
// CHECK: cleave.binary mul {{.*}} {cleave.sharding = [#cleave.sharding<@mesh, [{}, {"tp"}]>]}
func.func @backward(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>)
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}) {
  %0 = cleave.binary mul %x, %y : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// A contraction's free dimensions carry their operands' axes: rows over dp
// from the lhs, columns over tp from the rhs.
// CHECK-LABEL: func.func @contract(
// CHECK: cleave.contract {{.*}} {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {"tp"}]>]}
// CHECK-SAME: -> tensor<8x32xf32>
func.func @contract(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
                    %w: tensor<16x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8x32xf32> {
  %0 = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// A reduced dimension's axes do not reach the result (the partitioner
// completes the partial sums); the kept dimension's do.
// CHECK-LABEL: func.func @reduction(
// CHECK-SAME: -> (tensor<8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>})
// CHECK: cleave.reduce sum {{.*}} {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}]>]}
func.func @reduction(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8xf32> {
  %0 = cleave.reduce sum %x dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// A softmax row is a need-replication factor: tp stays on the operand's
// side, dp crosses.
// CHECK-LABEL: func.func @need_replication(
// CHECK: cleave.softmax %arg0 dim = 1 {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {}]>]}
func.func @need_replication(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x16xf32> {
  %0 = cleave.softmax %x dim = 1 : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// A transpose permutes the axes with the dimensions.
// CHECK-LABEL: func.func @transpose(
// CHECK: cleave.transpose %arg0 perm = [1, 0] {cleave.sharding = [#cleave.sharding<@mesh, [{"tp"}, {"dp"}]>]}
func.func @transpose(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<16x8xf32> {
  %0 = cleave.transpose %x perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// A reshape that splits a dimension (8 -> 2 x 4) gives its axes to the
// major part.
// CHECK-LABEL: func.func @reshape(
// CHECK: cleave.reshape %arg0 {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {}, {}]>]}
func.func @reshape(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<2x4x16xf32> {
  %0 = cleave.reshape %x : tensor<8x16xf32> -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// A conflict on the batch factor: dp reshards the 2 KiB rhs, tp the 16 KiB
// lhs (then also the 8 KiB result); dp wins, and each settlement is
// recorded on the op for --explain-sharding.
// CHECK-LABEL: func.func @conflict(
// CHECK-SAME: %arg1: tensor<4x16x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}, {}]>}
// CHECK: cleave.contract {{.*}} {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {}, {}]>], cleave.sharding_conflicts = ["factor i (size 4): [\22dp\22] kept, resharding 2048 bytes; [\22tp\22] rejected, it would reshard 16384 bytes", "factor i (size 4): [\22dp\22] kept, resharding 2048 bytes; [\22tp\22] rejected, it would reshard 24576 bytes"]}
func.func @conflict(%a: tensor<4x64x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {}]>},
                    %b: tensor<4x16x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}, {}]>}) -> tensor<4x64x8xf32> {
  %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1] : tensor<4x64x16xf32>, tensor<4x16x8xf32> -> tensor<4x64x8xf32>
  return %0 : tensor<4x64x8xf32>
}

// A stated function result is kept even where the returned value is split
// (the partitioner gathers it).
// CHECK-LABEL: func.func @closed_result(
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}]>})
// CHECK: cleave.unary exp %arg0 {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}, {}]>]}
func.func @closed_result(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}]>}) {
  %0 = cleave.unary exp %x : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Open dimensions are closed in the result, or stay open with keep-open.
// CHECK-LABEL: func.func @open_dims(
// CHECK-SAME: %arg0: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}
// OPEN-LABEL: func.func @open_dims(
// OPEN-SAME: %arg0: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp", ?}p0, {?}p0]>}
// OPEN: cleave.unary neg %arg0 {cleave.sharding = [#cleave.sharding<@mesh, [{"dp", ?}p0, {?}]>]}
func.func @open_dims(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp", ?}, {?}]>}) -> tensor<8x16xf32> {
  %0 = cleave.unary neg %x : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

func.func private @opaque(tensor<8x16xf32>) -> tensor<8x16xf32>

// An op without a sharding rule is a barrier: nothing crosses it.
// CHECK-LABEL: func.func @barrier(
// CHECK-SAME: -> (tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}]>})
// CHECK: call @opaque(%arg0) {cleave.sharding = [#cleave.sharding<@mesh, [{}, {}]>]}
// CHECK: cleave.unary neg {{.*}} {cleave.sharding = [#cleave.sharding<@mesh, [{}, {}]>]}
func.func @barrier(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %0 = call @opaque(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = cleave.unary neg %0 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
