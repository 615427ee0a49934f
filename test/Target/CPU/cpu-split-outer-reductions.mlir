// RUN: cleave-opt --cleave-cpu-split-outer-reductions %s | FileCheck %s
// RUN: cleave-opt --cleave-cpu-split-outer-reductions=min-work=1000000 %s | FileCheck %s --check-prefix=SMALL
// RUN: cleave-opt --cleave-cpu-split-outer-reductions=min-work=0 %s | FileCheck %s --check-prefix=SMALL

#rows = affine_map<(d0, d1) -> (d0, d1)>
#cols = affine_map<(d0, d1) -> (d1)>

// A bias gradient (the sum of 1024 rows into 64 columns, outermost loop a
// reduction): its 64 columns are tiled into an scf.parallel over 8 blocks of
// 8, each summing its columns over every row with the original op.
// CHECK-LABEL: func.func @bias_grad(
// CHECK-SAME: %[[X:[^:]*]]: memref<1024x64xf32>, %[[Y:[^:]*]]: memref<64xf32>
// CHECK: scf.parallel (%[[J:.*]]) = (%c0{{.*}}) to (%c64) step (%c8{{.*}}) {
// CHECK:   %[[XS:.*]] = memref.subview %[[X]][0, %[[J]]] [1024, 8] [1, 1]
// CHECK:   %[[YS:.*]] = memref.subview %[[Y]][%[[J]]] [8] [1]
// CHECK:   linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]{{.*}} ins(%[[XS]] : {{.*}}) outs(%[[YS]] : {{.*}})
// CHECK:     arith.addf
// SMALL-LABEL: func.func @bias_grad(
// SMALL-NOT: scf.parallel
// SMALL: linalg.generic {{.*}}ins(%{{.*}} : memref<1024x64xf32>) outs(%{{.*}} : memref<64xf32>)
func.func @bias_grad(%x: memref<1024x64xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<1024x64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in : f32
    linalg.yield %0 : f32
  }
  return
}

#t = affine_map<(d0, d1) -> (d1, d0)>
#r = affine_map<(d0, d1) -> (d0)>

// An op whose outermost loop is parallel (a row sum) is left as it is.
// CHECK-LABEL: func.func @row_sum(
// CHECK-NOT: scf.parallel
// CHECK: linalg.generic {{.*}}ins(%{{.*}} : memref<1024x64xf32>) outs(%{{.*}} : memref<1024xf32>)
func.func @row_sum(%x: memref<1024x64xf32>, %y: memref<1024xf32>) {
  linalg.generic {indexing_maps = [#rows, #r], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<1024x64xf32>) outs(%y : memref<1024xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// Columns with no divisor from 8 to 64 (7) are left as they are.
// CHECK-LABEL: func.func @no_blocks(
// CHECK-NOT: scf.parallel
// CHECK: linalg.generic {{.*}}ins(%{{.*}} : memref<4096x7xf32>)
func.func @no_blocks(%x: memref<4096x7xf32>, %y: memref<7xf32>) {
  linalg.generic {indexing_maps = [#rows, #cols], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<4096x7xf32>) outs(%y : memref<7xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in : f32
    linalg.yield %0 : f32
  }
  return
}
