// RUN: cleave-opt --cleave-convert-cleave-to-linalg %s | FileCheck %s

// Scatter-add: a loop per indices dimension carries a copy of the operand; each
// iteration wraps a negative index, skips one out of range, and adds the
// update into the carried tensor (so duplicate indices accumulate).
// CHECK-LABEL: func.func @scatter_add
// CHECK-SAME: (%[[X:.*]]: tensor<2x5xf32>, %[[I:.*]]: tensor<2x3xi64>, %[[U:.*]]: tensor<2x3xf32>)
// CHECK: %[[COPY:.*]] = linalg.copy ins(%[[X]] : tensor<2x5xf32>) outs(%{{.*}} : tensor<2x5xf32>)
// CHECK: %[[R:.*]] = scf.for %[[A:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[T0:.*]] = %[[COPY]])
// CHECK: scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[T1:.*]] = %[[T0]])
// CHECK: %[[RAW:.*]] = tensor.extract %[[I]][%[[A]], %[[B]]]
// CHECK: %[[UPD:.*]] = tensor.extract %[[U]][%[[A]], %[[B]]]
// CHECK: arith.index_cast %[[RAW]]
// CHECK: arith.cmpi slt
// CHECK: %[[POS:.*]] = arith.select
// CHECK: scf.if
// CHECK: %[[OLD:.*]] = tensor.extract %[[T1]][%[[A]], %[[POS]]]
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %[[UPD]]
// CHECK: tensor.insert %[[NEW]] into %[[T1]][%[[A]], %[[POS]]]
// CHECK: } else {
// CHECK: scf.yield %[[T1]]
// CHECK: return %[[R]]
func.func @scatter_add(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %0 = cleave.scatter add %x, %i, %u axis = 1 : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// Replace (kind none) stores the update without reading the old element.
// CHECK-LABEL: func.func @scatter_none
// CHECK: scf.if
// CHECK-NOT: tensor.extract
// CHECK: tensor.insert
func.func @scatter_none(%x: tensor<4xi32>, %i: tensor<6xi32>, %u: tensor<6xi32>) -> tensor<4xi32> {
  %0 = cleave.scatter none %x, %i, %u axis = 0 : (tensor<4xi32>, tensor<6xi32>, tensor<6xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// Unsigned max uses the unsigned integer maximum.
// CHECK-LABEL: func.func @scatter_max_unsigned
// CHECK: arith.maxui
func.func @scatter_max_unsigned(%x: tensor<4xui8>, %i: tensor<2xi64>, %u: tensor<2xui8>) -> tensor<4xui8> {
  %0 = cleave.scatter max %x, %i, %u axis = 0 : (tensor<4xui8>, tensor<2xi64>, tensor<2xui8>) -> tensor<4xui8>
  return %0 : tensor<4xui8>
}
