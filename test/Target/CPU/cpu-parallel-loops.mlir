// RUN: cleave-opt --cleave-cpu-parallel-loops %s | FileCheck %s
// RUN: cleave-opt --cleave-cpu-parallel-loops %s | FileCheck %s --check-prefix=BODY
// RUN: cleave-opt --cleave-cpu-parallel-loops=min-work=0 %s | FileCheck %s --check-prefix=OFF

// OFF-NOT: $launch

// A 2-D elementwise nest: the rows (64, enough outer iterations) run on the
// runtime's threads, the columns stay a loop of each range. The buffers are
// passed; constants are cloned into the outlined function.
// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[X:.*]]: memref<64x512xf32>, %[[Y:.*]]: memref<64x512xf32>)
// CHECK: call @rows$par0$launch(%[[X]], %[[Y]], %c64{{.*}})
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @rows(%x: memref<64x512xf32>, %y: memref<64x512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %c64 = arith.constant 64 : index
  %two = arith.constant 2.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c512) step (%c1, %c1) {
    %v = memref.load %x[%i, %j] : memref<64x512xf32>
    %w = arith.mulf %v, %two : f32
    memref.store %w, %y[%i, %j] : memref<64x512xf32>
    scf.reduce
  }
  return
}

// The outlined functions follow the kernels.
// BODY-LABEL: func.func private @rows$par0(
// BODY-SAME: %[[X:[^:]*]]: memref<64x512xf32>, %[[Y:[^:]*]]: memref<64x512xf32>, %[[B:[^:]*]]: index, %[[E:[^:]*]]: index)
// BODY: arith.constant 2.000000e+00 : f32
// BODY: scf.for %[[I:.*]] = %[[B]] to %[[E]]
// BODY: scf.parallel (%[[J:.*]]) = (%{{.*}}) to (%{{.*}}) step
// BODY: memref.load %[[X]][%{{.*}}, %[[J]]]
// BODY: memref.store %{{.*}}, %[[Y]][%{{.*}}, %[[J]]]
// BODY: func.func private @rows$par0$launch(memref<64x512xf32>, memref<64x512xf32>, index)

// Few rows: the leading dimensions are linearized until there are at least
// 64 outer iterations (4 x 32 = 128), then split back into indices.
// CHECK-LABEL: func.func @prefix(
// CHECK: %[[N:.*]] = arith.constant 128 : index
// CHECK: call @prefix$par0$launch(%{{.*}}, %{{.*}}, %[[N]])
func.func @prefix(%x: memref<4x32x256xf32>, %y: memref<4x32x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c32 = arith.constant 32 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%a, %b, %c) = (%c0, %c0, %c0) to (%c4, %c32, %c256) step (%c1, %c1, %c1) {
    %v = memref.load %x[%a, %b, %c] : memref<4x32x256xf32>
    memref.store %v, %y[%a, %b, %c] : memref<4x32x256xf32>
    scf.reduce
  }
  return
}
// BODY-LABEL: func.func private @prefix$par0(
// BODY: scf.for %[[O:.*]] =
// BODY: %[[B:.*]] = arith.remui %[[O]], %{{.*}} : index
// BODY: %[[A:.*]] = arith.divui %[[O]], %{{.*}} : index
// BODY: scf.parallel (%[[C:.*]]) =
// BODY: memref.load %{{.*}}[%{{.*}}, %{{.*}}, %[[C]]]

// A row loop whose body has loops of its own (a row reduction) splits over
// all its dimensions.
// CHECK-LABEL: func.func @row_sums(
// CHECK: call @row_sums$par0$launch
// BODY-LABEL: func.func private @row_sums$par0(
// BODY: scf.for
// BODY-NOT: scf.parallel
// BODY: scf.for
func.func @row_sums(%x: memref<512x64xf32>, %y: memref<512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c512 = arith.constant 512 : index
  scf.parallel (%i) = (%c0) to (%c512) step (%c1) {
    scf.for %j = %c0 to %c64 step %c1 {
      %v = memref.load %x[%i, %j] : memref<512x64xf32>
      %s = memref.load %y[%i] : memref<512xf32>
      %t = arith.addf %s, %v : f32
      memref.store %t, %y[%i] : memref<512xf32>
    }
    scf.reduce
  }
  return
}

// Too little work (below min-work = 16384 scalar iterations), a loop that
// yields a reduction, and a loop with dynamic bounds stay where they are.
// CHECK-LABEL: func.func @stays(
// CHECK-NOT: call
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: scf.reduce(
// CHECK: scf.parallel
// CHECK: return
func.func @stays(%x: memref<64x64xf32>, %big: memref<65536xf32>, %n: index, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c65536 = arith.constant 65536 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c64) step (%c1, %c1) {
    memref.store %zero, %x[%i, %j] : memref<64x64xf32>
    scf.reduce
  }
  %s = scf.parallel (%i) = (%c0) to (%c65536) step (%c1) init (%zero) -> f32 {
    %v = memref.load %big[%i] : memref<65536xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %r = arith.addf %a, %b : f32
      scf.reduce.return %r : f32
    }
  }
  memref.store %s, %out[] : memref<f32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %zero, %big[%i] : memref<65536xf32>
    scf.reduce
  }
  return
}

// RUN: cleave-opt --cleave-cpu-split-outer-reductions %s | FileCheck %s --check-prefix=SPLIT
// A sum over the rows (the outermost loop a reduction): the 512 columns are
// tiled into an scf.parallel over 8 blocks of 64, each summing its columns
// over the rows in order. Small ops and ops whose outermost loop is parallel
// are left alone.
// SPLIT-LABEL: func.func @column_sums(
// SPLIT: scf.parallel (%[[B:.*]]) = (%{{.*}}) to (%{{.*}}) step (%[[STEP:.*]]) {
// SPLIT: memref.subview %{{.*}}[0, %[[B]]] [256, 64] [1, 1]
// SPLIT: memref.subview %{{.*}}[%[[B]]] [64] [1]
// SPLIT: linalg.generic
// SPLIT-SAME: iterator_types = ["reduction", "parallel"]
// SPLIT-LABEL: func.func @small_column_sums(
// SPLIT-NOT: scf.parallel
// SPLIT: linalg.generic
// SPLIT-NOT: scf.parallel
// SPLIT-LABEL: func.func @row_major_sums(
// SPLIT-NOT: scf.parallel
// SPLIT: return
#rc = affine_map<(r, c) -> (r, c)>
#c = affine_map<(r, c) -> (c)>
#cr = affine_map<(c, r) -> (r, c)>
#c2 = affine_map<(c, r) -> (c)>
func.func @column_sums(%x: memref<256x512xf32>, %y: memref<512xf32>) {
  linalg.generic {indexing_maps = [#rc, #c], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x512xf32>) outs(%y : memref<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
func.func @small_column_sums(%x: memref<16x64xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [#rc, #c], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<16x64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
func.func @row_major_sums(%x: memref<256x512xf32>, %y: memref<512xf32>) {
  linalg.generic {indexing_maps = [#cr, #c2], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<256x512xf32>) outs(%y : memref<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}
