// RUN: cleave-opt --cleave-cpu-temporaries-to-scratch --split-input-file %s | FileCheck %s

// Two temporaries become views of one scratch argument at 64-byte aligned
// offsets; their deallocations go, and the kernel records its scratch bytes.
// CHECK-LABEL: func.func @two(
// CHECK-SAME: %{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>, %[[S:.*]]: memref<128xi8>)
// CHECK-SAME: cleave.scratch_bytes = 128 : i64
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[S]][%[[C0]]][] : memref<128xi8> to memref<4xf32>
// CHECK: %[[C64:.*]] = arith.constant 64 : index
// CHECK: memref.view %[[S]][%[[C64]]][] : memref<128xi8> to memref<4xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @two(%x: memref<4xf32>, %y: memref<4xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  memref.copy %x, %a : memref<4xf32> to memref<4xf32>
  memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  memref.copy %b, %y : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %b : memref<4xf32>
  return
}

// -----

// A kernel without temporaries keeps its arguments.
// CHECK-LABEL: func.func @none(
// CHECK-SAME: %{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>) {
func.func @none(%x: memref<4xf32>, %y: memref<4xf32>) {
  memref.copy %x, %y : memref<4xf32> to memref<4xf32>
  return
}
