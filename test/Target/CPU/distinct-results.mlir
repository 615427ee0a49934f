// RUN: cleave-opt %s --cleave-cpu-kernel-pipeline | FileCheck %s

// A kernel whose results fold to the same value still writes every
// out-parameter: the sum goes to the first (%arg1), and a second loop copies
// it into the second (%arg2), so the two results do not alias.
// CHECK-LABEL: llvm.func @same_twice(
// CHECK-SAME: %[[X:[^:]*]]: !llvm.ptr, %[[R0:[^:]*]]: !llvm.ptr, %[[R1:[^:]*]]: !llvm.ptr)
// CHECK: %[[V:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: %[[SUM:.*]] = llvm.fadd %[[V]], %[[V]] : f32
// CHECK: %[[P0:.*]] = llvm.getelementptr inbounds|nuw %[[R0]][%{{.*}}]
// CHECK: llvm.store %[[SUM]], %[[P0]] : f32, !llvm.ptr
// CHECK: %[[Q0:.*]] = llvm.getelementptr inbounds|nuw %[[R0]][%{{.*}}]
// CHECK: %[[W:.*]] = llvm.load %[[Q0]] : !llvm.ptr -> f32
// CHECK: %[[P1:.*]] = llvm.getelementptr inbounds|nuw %[[R1]][%{{.*}}]
// CHECK: llvm.store %[[W]], %[[P1]] : f32, !llvm.ptr
// CHECK: llvm.return
func.func @same_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %one = cleave.constant dense<1.0> : tensor<4xf32>
  %y = cleave.binary add %x, %x : tensor<4xf32>
  %z = cleave.binary mul %one, %y : tensor<4xf32>
  return %y, %y : tensor<4xf32>, tensor<4xf32>
}

// A kernel returning its own argument copies it into its out-parameter.
// CHECK-LABEL: llvm.func @returns_argument(
// CHECK-SAME: %[[X:[^:]*]]: !llvm.ptr, %[[R:[^:]*]]: !llvm.ptr)
// CHECK: %[[P:.*]] = llvm.getelementptr inbounds|nuw %[[X]][%{{.*}}]
// CHECK: %[[V:.*]] = llvm.load %[[P]] : !llvm.ptr -> f32
// CHECK: %[[Q:.*]] = llvm.getelementptr inbounds|nuw %[[R]][%{{.*}}]
// CHECK: llvm.store %[[V]], %[[Q]] : f32, !llvm.ptr
// CHECK: llvm.return
func.func @returns_argument(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
