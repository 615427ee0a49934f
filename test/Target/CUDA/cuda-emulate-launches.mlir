// RUN: cleave-opt --cleave-cuda-emulate-launches --split-input-file --verify-diagnostics %s | FileCheck %s

// A block-per-row launch: phase 1 (every thread), a block all-reduce of the
// threads' partial values in thread order, phase 2 using the result. The
// value a thread carries across the all-reduce lives in a per-thread buffer.
// CHECK-LABEL: func.func @rows(
// CHECK: %[[SLOT:.*]] = memref.alloc() : memref<4xf32>
// CHECK: scf.for %[[BID:.*]] = %{{.*}} to %c2{{.*}} step
// CHECK:   scf.for %[[TID:.*]] = %{{.*}} to %c4{{.*}} step
// CHECK:     %[[V:.*]] = memref.load %arg0[%[[BID]], %[[TID]]]
// CHECK:     memref.store %[[V]], %[[SLOT]][%[[TID]]]
// CHECK:   %[[FIRST:.*]] = memref.load %[[SLOT]][%c0
// CHECK:   %[[SUM:.*]] = scf.for %[[T:.*]] = %c1{{.*}} to %c4{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[FIRST]])
// CHECK:     %[[X:.*]] = memref.load %[[SLOT]][%[[T]]]
// CHECK:     %[[NEW:.*]] = arith.addf %[[ACC]], %[[X]]
// CHECK:     scf.yield %[[NEW]]
// CHECK:   scf.for %[[TID2:.*]] = %{{.*}} to %c4{{.*}} step
// CHECK:     memref.store %[[SUM]], %arg1[%[[BID]]]
// CHECK-NOT: gpu.
// CHECK: memref.dealloc %[[SLOT]]
func.func @rows(%x: memref<2x4xf32>, %y: memref<2xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%bx, %tx] : memref<2x4xf32>
    %s = gpu.all_reduce %v uniform {
    ^bb0(%a: f32, %b: f32):
      %r = arith.addf %a, %b : f32
      gpu.yield %r : f32
    } : (f32) -> f32
    memref.store %s, %y[%bx] : memref<2xf32>
    gpu.terminator
  }
  return
}

// -----

func.func @nested_barrier(%c: i1) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{emulation: barrier or all_reduce below the top level of a launch}}
    scf.if %c {
      gpu.barrier
    }
    gpu.terminator
  }
  return
}

// -----

func.func @outside_value(%v: f32, %y: memref<f32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // expected-error @+1 {{emulation: all_reduce of a value not computed in the launch body}}
    %s = gpu.all_reduce %v uniform {
    ^bb0(%a: f32, %b: f32):
      %r = arith.addf %a, %b : f32
      gpu.yield %r : f32
    } : (f32) -> f32
    memref.store %s, %y[] : memref<f32>
    gpu.terminator
  }
  return
}
