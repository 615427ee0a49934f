// RUN: cleave-opt --cleave-cuda-rows-to-launch --split-input-file --verify-diagnostics %s | FileCheck %s
// RUN: cleave-opt --cleave-cuda-rows-to-launch=max-block-size=32 --split-input-file --verify-diagnostics %s | FileCheck %s --check-prefix=MAX32

// A row sum: one block per row (4), 64 threads (the phase's 64 columns);
// each thread sums its strided columns, the block all-reduces the partial
// sums, and thread 0 stores the row's result.
// CHECK-LABEL: func.func @row_sum(
// CHECK-SAME: %[[X:[^:]*]]: memref<4x64xf32>, %[[Y:[^:]*]]: memref<4xf32>
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c4{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c64{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK:   %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %{{.*}} : index
// CHECK:   %[[P:.*]] = scf.for %[[I:.*]] = %[[TX]] to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK:     %[[V:.*]] = memref.load %[[X]][%[[BX]], %[[I]]] : memref<4x64xf32>
// CHECK:     %[[SUM:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK:     scf.yield %[[SUM]] : f32
// CHECK:   %[[ROW:.*]] = gpu.all_reduce %[[P]] uniform {
// CHECK:     arith.addf
// CHECK:   scf.if %[[FIRST]] {
// CHECK:     memref.store %[[ROW]], %[[Y]][%[[BX]]] : memref<4xf32>
// CHECK:   gpu.barrier
// CHECK:   gpu.terminator
// CHECK-NOT: cleave.row_kernel
// MAX32-LABEL: func.func @row_sum(
// MAX32: gpu.launch {{.*}} threads({{.*}}) in (%{{.*}} = %c32{{.*}},
func.func @row_sum(%x: memref<4x64xf32>, %y: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
    %s = scf.parallel (%c) = (%c0) to (%c64) step (%c1) init (%zero) -> f32 {
      %v = memref.load %x[%r, %c] : memref<4x64xf32>
      scf.reduce(%v : f32) {
      ^bb0(%a: f32, %b: f32):
        %t = arith.addf %a, %b : f32
        scf.reduce.return %t : f32
      }
    }
    memref.store %s, %y[%r] : memref<4xf32>
    scf.reduce
  } {cleave.row_kernel}
  return
}

// -----

// An elementwise phase: the threads stride over the columns, and a barrier
// ends the phase.
// CHECK-LABEL: func.func @row_scale(
// CHECK: gpu.launch
// CHECK:   scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:     arith.mulf
// CHECK:     memref.store
// CHECK:   gpu.barrier
func.func @row_scale(%x: memref<2x32xf32>, %y: memref<2x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  scf.parallel (%r) = (%c0) to (%c2) step (%c1) {
    scf.parallel (%c) = (%c0) to (%c32) step (%c1) {
      %v = memref.load %x[%r, %c] : memref<2x32xf32>
      %w = arith.mulf %v, %v : f32
      memref.store %w, %y[%r, %c] : memref<2x32xf32>
      scf.reduce
    }
    scf.reduce
  } {cleave.row_kernel}
  return
}

// -----

// Loops without the cleave.row_kernel tag are left alone.
// CHECK-LABEL: func.func @untagged(
// CHECK-NOT: gpu.launch
// CHECK: scf.parallel
func.func @untagged(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
    memref.store %zero, %x[%r] : memref<4xf32>
    scf.reduce
  }
  return
}

// -----

// A row loop whose bounds are not constants cannot be a grid.
func.func @dynamic_rows(%x: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{cuda: row loop must have constant bounds and no reductions}}
  scf.parallel (%r) = (%c0) to (%n) step (%c1) {
    memref.store %zero, %x[%r] : memref<?xf32>
    scf.reduce
  } {cleave.row_kernel}
  return
}

// -----

// Nor can a phase whose bounds are not constants be split over threads.
func.func @dynamic_phase(%x: memref<4x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
    // expected-error @+1 {{cuda: row phase must have constant bounds}}
    scf.parallel (%c) = (%c0) to (%n) step (%c1) {
      memref.store %zero, %x[%r, %c] : memref<4x?xf32>
      scf.reduce
    }
    scf.reduce
  } {cleave.row_kernel}
  return
}
