// RUN: cleave-opt --cleave-row-kernels --split-input-file %s | FileCheck %s

// Softmax over the last axis: one loop over rows runs every op on the row;
// the reductions start from their neutral element and combine into the
// buffer the fill initialized.
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME: %[[X:.*]]: memref<3x4xf32>, %[[Y:.*]]: memref<3x4xf32>)
// CHECK: %[[T:.*]] = memref.alloc() {{.*}} : memref<3xf32>
// CHECK: scf.parallel (%[[R:.*]]) = (%{{.*}}) to (%c3)
// CHECK:   scf.parallel
// CHECK:     memref.store %{{.*}}, %[[T]][%[[R]]]
// CHECK:   %[[MAX:.*]] = scf.parallel (%[[C:.*]]) = (%{{.*}}) to (%c4) step (%{{.*}}) init (%{{.*}}) -> f32
// CHECK:     %[[V:.*]] = memref.load %[[X]][%[[R]], %[[C]]]
// CHECK:     scf.reduce(%[[V]] : f32)
// CHECK:       arith.maxnumf
// CHECK:   %[[OLD:.*]] = memref.load %[[T]][%[[R]]]
// CHECK:   %[[NEW:.*]] = arith.maxnumf %[[OLD]], %[[MAX]]
// CHECK:   memref.store %[[NEW]], %[[T]][%[[R]]]
// CHECK:   scf.parallel
// CHECK:     math.exp
// CHECK:     memref.store %{{.*}}, %[[Y]][%[[R]], %{{.*}}]
// CHECK:   scf.parallel {{.*}} init
// CHECK:     arith.addf
// CHECK:   arith.divf
// CHECK: } {cleave.row_kernel}
// CHECK-NEXT: memref.dealloc %[[T]]
// CHECK-NOT: linalg.
func.func @softmax(%arg0: memref<3x4xf32>, %arg1: memref<3x4xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 0xFF800000 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<3xf32>
  linalg.fill ins(%cst_0 : f32) outs(%alloc : memref<3xf32>)
  linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%arg0 : memref<3x4xf32>) outs(%alloc : memref<3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maxnumf %out, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0, %alloc : memref<3x4xf32>, memref<3xf32>) outs(%arg1 : memref<3x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.subf %in, %in_1 : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  }
  linalg.fill ins(%cst : f32) outs(%alloc : memref<3xf32>)
  linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction"]} ins(%arg1 : memref<3x4xf32>) outs(%alloc : memref<3xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in fastmath<reassoc> : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%arg1, %alloc : memref<3x4xf32>, memref<3xf32>) outs(%arg1 : memref<3x4xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.divf %in, %in_1 : f32
    linalg.yield %0 : f32
  }
  memref.dealloc %alloc : memref<3xf32>
  return
}

// -----

// Softmax over a middle axis: a row (d0, d2) is strided in memory, so no
// row kernel; each reduction is split over the columns (flat loops, the
// contiguous d2 innermost), the elementwise ops stay.
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @softmax_axis1(
// CHECK-NOT: cleave.row_kernel
// CHECK: memref.alloc() : memref<1x3x5xf32>
// CHECK: linalg.generic
// CHECK: memref.alloc() : memref<1x3x5xf32>
// CHECK: linalg.generic
func.func @softmax_axis1(%arg0: memref<3x4x5xf32>, %arg1: memref<3x4x5xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant 0xFF800000 : f32
  %alloc = memref.alloc() {alignment = 64 : i64} : memref<3x5xf32>
  linalg.fill ins(%cst_0 : f32) outs(%alloc : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction", "parallel"]} ins(%arg0 : memref<3x4x5xf32>) outs(%alloc : memref<3x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maxnumf %out, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %alloc : memref<3x4x5xf32>, memref<3x5xf32>) outs(%arg1 : memref<3x4x5xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.subf %in, %in_1 : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  }
  linalg.fill ins(%cst : f32) outs(%alloc : memref<3x5xf32>)
  linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "reduction", "parallel"]} ins(%arg1 : memref<3x4x5xf32>) outs(%alloc : memref<3x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %out, %in fastmath<reassoc> : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg1, %alloc : memref<3x4x5xf32>, memref<3x5xf32>) outs(%arg1 : memref<3x4x5xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %0 = arith.divf %in, %in_1 : f32
    linalg.yield %0 : f32
  }
  memref.dealloc %alloc : memref<3x5xf32>
  return
}

// -----

// A small reduction to one value: one "row" over the linearized space; the
// fill before it is folded in (the result is added to the fill value, not
// to a load of the output).
// CHECK-LABEL: func.func @total(
// CHECK-SAME: %{{.*}}: memref<16x8xf32>, %[[OUT:.*]]: memref<f32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK-NOT: linalg.generic
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c1{{.*}})
// CHECK:   %[[SUM:.*]] = scf.parallel (%{{.*}}) = (%{{.*}}) to (%c128) {{.*}} init
// CHECK-NOT: memref.load %[[OUT]]
// CHECK:   %[[NEW:.*]] = arith.addf %[[SUM]], %[[ZERO]] : f32
// CHECK:   memref.store %[[NEW]], %[[OUT]][] : memref<f32>
// CHECK: } {cleave.row_kernel}
func.func @total(%x: memref<16x8xf32>, %out: memref<f32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<f32>)
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%x : memref<16x8xf32>) outs(%out : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A large one: 128 slices of 8192 reduce into a temporary (one row each),
// then one row reduces the 128 partial values into the output.
// CHECK-LABEL: func.func @big_total(
// CHECK: %[[P:.*]] = memref.alloc() : memref<128xf32>
// CHECK: scf.parallel (%[[S:.*]]) = (%c0{{.*}}) to (%c128)
// CHECK:   scf.parallel (%{{.*}}) = (%{{.*}}) to (%c8192{{.*}}) {{.*}} init
// CHECK:     scf.if
// CHECK:   memref.store %{{.*}}, %[[P]][%[[S]]]
// CHECK: } {cleave.row_kernel}
// CHECK: scf.parallel
// CHECK:   scf.parallel (%[[J:.*]]) = (%{{.*}}) to (%c128{{.*}}) {{.*}} init
// CHECK:     memref.load %[[P]][%[[J]]]
// CHECK:   memref.store %{{.*}}, %{{.*}}[] : memref<f32>
// CHECK: } {cleave.row_kernel}
// CHECK: memref.dealloc %[[P]]
func.func @big_total(%x: memref<1024x1024xf32>, %out: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]} ins(%x : memref<1024x1024xf32>) outs(%out : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Reductions over different row spaces are not one row kernel: the row
// sums become a row kernel of their own; the column sums (rows innermost in
// memory would be strided) two flat loops: per (slice, column) partial sums
// into a temporary, then per column the sum of its slices.
// CHECK-LABEL: func.func @two_spaces(
// CHECK: scf.parallel (%{{.*}}) = (%c0) to (%c4)
// CHECK: } {cleave.row_kernel}
// CHECK: %[[P:.*]] = memref.alloc() : memref<1x8xf32>
// CHECK: scf.parallel (%[[S:.*]], %[[C:.*]]) = (%{{.*}}, %{{.*}}) to (%c1{{.*}}, %c8{{.*}})
// CHECK:   scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK:     memref.load %arg0[%[[R]], %[[C]]]
// CHECK:   memref.store %{{.*}}, %[[P]][%[[S]], %[[C]]]
// CHECK-NOT: cleave.row_kernel
// CHECK: scf.parallel (%[[C2:.*]]) = (%{{.*}}) to (%c8{{.*}})
// CHECK:   scf.for
// CHECK:     memref.load %[[P]][%{{.*}}, %[[C2]]]
// CHECK:   memref.store %{{.*}}, %arg2[%[[C2]]]
// CHECK: memref.dealloc %[[P]]
// CHECK-NOT: linalg.generic
func.func @two_spaces(%x: memref<4x8xf32>, %rows: memref<4xf32>, %cols: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<4x8xf32>) outs(%rows : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : memref<4x8xf32>) outs(%cols : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row result read by another row (a shifted index): not one row kernel;
// the reduction alone is one, the shifted read stays an op after it.
// CHECK-LABEL: func.func @cross_row(
// CHECK: } {cleave.row_kernel}
// CHECK-NEXT: linalg.generic
func.func @cross_row(%x: memref<4x8xf32>, %y: memref<3xf32>) {
  %t = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<4x8xf32>) outs(%t : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0 + 1)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%t : memref<4xf32>) outs(%y : memref<3xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %t : memref<4xf32>
  return
}

// -----

// A combiner that is not a single op with a neutral element: left alone.
// CHECK-LABEL: func.func @no_neutral(
// CHECK-NOT: cleave.row_kernel
func.func @no_neutral(%x: memref<4x8xf32>, %y: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : memref<4x8xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.subf %acc, %in : f32
    linalg.yield %s : f32
  }
  return
}
