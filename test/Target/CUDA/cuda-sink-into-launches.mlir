// RUN: cleave-opt --cleave-cuda-sink-into-launches %s | FileCheck %s

// The constant and the view a launch uses are cloned into it, so that the
// outlined kernel takes the whole buffer.
// CHECK-LABEL: func.func @sink(
// CHECK-SAME: %[[BUF:[^:]*]]: memref<8xf32>
// CHECK: gpu.launch
// CHECK-DAG: %[[V:.*]] = memref.subview %[[BUF]][4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
// CHECK-DAG: %[[F:.*]] = arith.constant 3.000000e+00 : f32
// CHECK: memref.store %[[F]], %[[V]][%{{.*}}] : memref<4xf32, strided<[1], offset: 4>>
// CHECK: gpu.terminator
func.func @sink(%buf: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %f = arith.constant 3.0 : f32
  %v = memref.subview %buf[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %f, %v[%tx] : memref<4xf32, strided<[1], offset: 4>>
    gpu.terminator
  }
  return
}
