// RUN: cleave-opt --cleave-lower-memref-copy %s | FileCheck %s

// A copy between strided buffers becomes a linalg.copy (loops later), not a
// call of the C runner's memrefCopy.
// CHECK-LABEL: func.func @strided(
// CHECK-SAME: %[[A:[^:]*]]: memref<4xf32, strided<[2]>>, %[[B:[^:]*]]: memref<4xf32>
// CHECK: linalg.copy ins(%[[A]] : memref<4xf32, strided<[2]>>) outs(%[[B]] : memref<4xf32>)
// CHECK-NOT: memref.copy
func.func @strided(%a: memref<4xf32, strided<[2]>>, %b: memref<4xf32>) {
  memref.copy %a, %b : memref<4xf32, strided<[2]>> to memref<4xf32>
  return
}

// Every copy of a function is rewritten, in order.
// CHECK-LABEL: func.func @two(
// CHECK-SAME: %[[A:[^:]*]]: memref<2x3xf32>, %[[B:[^:]*]]: memref<2x3xf32>, %[[C:[^:]*]]: memref<2x3xf32>
// CHECK: linalg.copy ins(%[[A]] : memref<2x3xf32>) outs(%[[B]] : memref<2x3xf32>)
// CHECK: linalg.copy ins(%[[B]] : memref<2x3xf32>) outs(%[[C]] : memref<2x3xf32>)
// CHECK-NOT: memref.copy
func.func @two(%a: memref<2x3xf32>, %b: memref<2x3xf32>, %c: memref<2x3xf32>) {
  memref.copy %a, %b : memref<2x3xf32> to memref<2x3xf32>
  memref.copy %b, %c : memref<2x3xf32> to memref<2x3xf32>
  return
}
