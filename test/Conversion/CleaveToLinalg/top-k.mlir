// RUN: cleave-opt --cleave-convert-cleave-to-linalg %s | FileCheck %s

// TopK along dim 1: a loop over rows carries both results; k selection
// passes each scan the row and insert the pick and its i64 position.
// CHECK-LABEL: func.func @top_k
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[C10:.*]] = arith.constant 10 : index
// CHECK-DAG: %[[V0:.*]] = tensor.empty() : tensor<4x3xf32>
// CHECK-DAG: %[[I0:.*]] = tensor.empty() : tensor<4x3xi64>
// CHECK: %[[R:.*]]:2 = scf.for %[[ROW:.*]] = %[[C0]] to %{{.*}} step %[[C1]] iter_args(%{{.*}} = %[[V0]], %{{.*}} = %[[I0]])
// CHECK: scf.for %[[J:.*]] = %[[C0]] to %[[C3]] step %[[C1]] iter_args
// CHECK: %[[BEST:.*]]:3 = scf.for %[[C:.*]] = %[[C0]] to %[[C10]] step %[[C1]] iter_args
// CHECK: tensor.extract %{{.*}}[%[[ROW]], %[[C]]]
// CHECK: arith.cmpf olt
// CHECK: tensor.insert %[[BEST]]#0 into %{{.*}}[%[[ROW]], %[[J]]]
// CHECK: arith.index_cast %[[BEST]]#1 : index to i64
// CHECK: tensor.insert
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @top_k(%x: tensor<4x10xf32>) -> (tensor<4x3xf32>, tensor<4x3xi64>) {
  %v, %i = cleave.top_k %x k = 3 dim = 1 largest = true sorted = true
      : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
  return %v, %i : tensor<4x3xf32>, tensor<4x3xi64>
}

// Smallest on signed integers compares with sgt (a candidate is after the
// previous pick when greater).
// CHECK-LABEL: func.func @top_k_smallest
// CHECK: arith.cmpi sgt
func.func @top_k_smallest(%x: tensor<6xi32>) -> (tensor<2xi32>, tensor<2xi64>) {
  %v, %i = cleave.top_k %x k = 2 dim = 0 largest = false sorted = true
      : tensor<6xi32> -> tensor<2xi32>, tensor<2xi64>
  return %v, %i : tensor<2xi32>, tensor<2xi64>
}
