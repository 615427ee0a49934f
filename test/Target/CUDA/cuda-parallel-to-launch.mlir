// RUN: cleave-opt --cleave-cuda-parallel-to-launch %s | FileCheck %s
// RUN: cleave-opt --cleave-cuda-parallel-to-launch %s | FileCheck %s --check-prefix=SCALAR

// f32, innermost extent 1000: each thread runs 4 consecutive columns
// (16 bytes per operand), 64 * 1000 / 4 = 16000 threads in 63 blocks of 256
// with a bounds guard. The copies are interleaved op by op; the accesses
// indexed by the innermost variable (%x, the broadcast row %b, %y) become
// one aligned vector access each, the one indexed by the row only (%s)
// stays scalar.
// CHECK-LABEL: func.func @f32_rows(
// CHECK: %[[C63:[a-z0-9_]+]] = arith.constant 63 : index
// CHECK: %[[C256:[a-z0-9_]+]] = arith.constant 256 : index
// CHECK: gpu.launch blocks(%[[BX:[a-z0-9_]+]], {{.*}}) in (%{{[a-z0-9_]+}} = %[[C63]], {{.*}}) threads(%[[TX:[a-z0-9_]+]], {{.*}}) in (%{{[a-z0-9_]+}} = %[[C256]],
// CHECK: %[[BASE:.*]] = arith.muli %[[BX]], %{{.*}} : index
// CHECK: %[[LIN:.*]] = arith.addi %[[BASE]], %[[TX]] : index
// CHECK: %[[N:.*]] = arith.constant 16000 : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[LIN]], %[[N]] : index
// CHECK: scf.if %[[IN]] {
// CHECK: %[[G:.*]] = arith.constant 250 : index
// CHECK: %[[GRP:.*]] = arith.remui %[[LIN]], %[[G]] : index
// CHECK: %[[ROW:.*]] = arith.divui %[[LIN]], %[[G]] : index
// CHECK: %[[J0:.*]] = arith.muli %[[GRP]], %c4{{[_0-9]*}} : index
// CHECK: %[[X:.*]] = vector.load %arg0[%[[ROW]], %[[J0]]] {alignment = 16 : i64} : memref<64x1000xf32>, vector<4xf32>
// CHECK-NEXT: %[[X0:.*]] = vector.extract %[[X]][0]
// CHECK-NEXT: %[[X1:.*]] = vector.extract %[[X]][1]
// CHECK-NEXT: %[[X2:.*]] = vector.extract %[[X]][2]
// CHECK-NEXT: %[[X3:.*]] = vector.extract %[[X]][3]
// CHECK-NEXT: %[[B:.*]] = vector.load %arg1[%[[J0]]] {alignment = 16 : i64} : memref<1000xf32>, vector<4xf32>
// CHECK-NEXT: %[[B0:.*]] = vector.extract %[[B]][0]
// CHECK-NEXT: %[[B1:.*]] = vector.extract %[[B]][1]
// CHECK-NEXT: %[[B2:.*]] = vector.extract %[[B]][2]
// CHECK-NEXT: %[[B3:.*]] = vector.extract %[[B]][3]
// CHECK-COUNT-4: memref.load %arg2[%[[ROW]]] : memref<64xf32>
// CHECK-NEXT: %[[A0:.*]] = arith.addf %[[X0]], %[[B0]] : f32
// CHECK-NEXT: %[[A1:.*]] = arith.addf %[[X1]], %[[B1]] : f32
// CHECK-NEXT: %[[A2:.*]] = arith.addf %[[X2]], %[[B2]] : f32
// CHECK-NEXT: %[[A3:.*]] = arith.addf %[[X3]], %[[B3]] : f32
// CHECK-NEXT: %[[M0:.*]] = arith.mulf %[[A0]]
// CHECK-NEXT: %[[M1:.*]] = arith.mulf %[[A1]]
// CHECK-NEXT: %[[M2:.*]] = arith.mulf %[[A2]]
// CHECK-NEXT: %[[M3:.*]] = arith.mulf %[[A3]]
// CHECK-NEXT: %[[Y:.*]] = vector.from_elements %[[M0]], %[[M1]], %[[M2]], %[[M3]] : vector<4xf32>
// CHECK-NEXT: vector.store %[[Y]], %arg3[%[[ROW]], %[[J0]]] {alignment = 16 : i64} : memref<64x1000xf32>, vector<4xf32>
// CHECK-NEXT: }
func.func @f32_rows(%x: memref<64x1000xf32>, %b: memref<1000xf32>,
                    %s: memref<64xf32>, %y: memref<64x1000xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1000 = arith.constant 1000 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c1000) step (%c1, %c1) {
    %0 = memref.load %x[%i, %j] : memref<64x1000xf32>
    %1 = memref.load %b[%j] : memref<1000xf32>
    %2 = memref.load %s[%i] : memref<64xf32>
    %3 = arith.addf %0, %1 : f32
    %4 = arith.mulf %3, %2 : f32
    memref.store %4, %y[%i, %j] : memref<64x1000xf32>
    scf.reduce
  }
  return
}

// The widest element decides: bf16 in, f32 out, 4 elements per thread (8
// bytes of bf16, 16 of f32); 1-D, 4096 / 4 = 1024 threads, no guard.
// CHECK-LABEL: func.func @widen(
// CHECK-NOT: scf.if
// CHECK: %[[I0:[0-9]+]] = arith.muli %{{[0-9]+}}, %c4{{[_0-9]*}} : index
// CHECK: vector.load %arg0[%[[I0]]] {alignment = 8 : i64} : memref<4096xbf16>, vector<4xbf16>
// CHECK-COUNT-4: arith.extf
// CHECK: vector.store %{{.*}}, %arg1[%[[I0]]] {alignment = 16 : i64} : memref<4096xf32>, vector<4xf32>
func.func @widen(%x: memref<4096xbf16>, %y: memref<4096xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4096 = arith.constant 4096 : index
  scf.parallel (%i) = (%c0) to (%c4096) step (%c1) {
    %0 = memref.load %x[%i] : memref<4096xbf16>
    %1 = arith.extf %0 : bf16 to f32
    memref.store %1, %y[%i] : memref<4096xf32>
    scf.reduce
  }
  return
}

// bf16 only: 8 elements per thread; a subview whose offset (8 elements, 16
// bytes) and row stride (136 elements, 272 bytes) keep 16-byte alignment.
// CHECK-LABEL: func.func @bf16_view(
// CHECK: %[[V:.*]] = memref.subview %arg0[0, 8] [16, 128] [1, 1]
// CHECK: %[[J0:[0-9]+]] = arith.muli %{{[0-9]+}}, %c8{{[_0-9]*}} : index
// CHECK: vector.load %[[V]][%{{.*}}, %[[J0]]] {alignment = 16 : i64} : {{.*}}, vector<8xbf16>
// CHECK-COUNT-8: arith.negf
// CHECK: vector.store %{{.*}}, %arg1[%{{.*}}, %[[J0]]] {alignment = 16 : i64} : memref<16x128xbf16>, vector<8xbf16>
func.func @bf16_view(%x: memref<16x136xbf16>, %y: memref<16x128xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c128 = arith.constant 128 : index
  %v = memref.subview %x[0, 8] [16, 128] [1, 1]
      : memref<16x136xbf16> to memref<16x128xbf16, strided<[136, 1], offset: 8>>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c16, %c128) step (%c1, %c1) {
    %0 = memref.load %v[%i, %j] : memref<16x128xbf16, strided<[136, 1], offset: 8>>
    %1 = arith.negf %0 : bf16
    memref.store %1, %y[%i, %j] : memref<16x128xbf16>
    scf.reduce
  }
  return
}

// Loops that keep one iteration per thread (no vector accesses):
// SCALAR-LABEL: func.func @fallbacks(
// SCALAR-NOT: vector.
// SCALAR-LABEL: func.func @after(
// CHECK-LABEL: func.func @fallbacks(
// Innermost extent 1001 is not a multiple of 4: 64064 threads.
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{[a-z0-9_]+}} = %c251{{[_0-9]*}}, {{.*}}) threads
// CHECK: arith.constant 64064 : index
// Transposed read: the innermost variable indexes the first dimension of %t.
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{[a-z0-9_]+}} = %c32{{[_0-9]*}}, {{.*}}) threads
// Subview offset of 1 element (4 bytes): not 16-byte aligned.
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{[a-z0-9_]+}} = %c32{{[_0-9]*}}, {{.*}}) threads
// Row stride of 129 f32: odd rows are not 16-byte aligned.
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{[a-z0-9_]+}} = %c32{{[_0-9]*}}, {{.*}}) threads
// The innermost variable is used as a value (iota).
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{[a-z0-9_]+}} = %c32{{[_0-9]*}}, {{.*}}) threads
// A nested loop in the body.
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{[a-z0-9_]+}} = %c32{{[_0-9]*}}, {{.*}}) threads
// CHECK: scf.for
// The row read from %x depends on the innermost variable (through %iota),
// so the 4 iterations would not read one vector.
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{[a-z0-9_]+}} = %c32{{[_0-9]*}}, {{.*}}) threads
// CHECK-LABEL: func.func @after(
func.func @fallbacks(%x: memref<64x1001xf32>, %y: memref<64x1001xf32>,
                     %t: memref<128x64xf32>, %u: memref<64x128xf32>,
                     %w: memref<64x129xf32>, %s: memref<64xf32>,
                     %iota: memref<64x128xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c1001 = arith.constant 1001 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c1001) step (%c1, %c1) {
    %0 = memref.load %x[%i, %j] : memref<64x1001xf32>
    memref.store %0, %y[%i, %j] : memref<64x1001xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
    %0 = memref.load %t[%j, %i] : memref<128x64xf32>
    memref.store %0, %u[%i, %j] : memref<64x128xf32>
    scf.reduce
  }
  %shifted = memref.subview %w[0, 1] [64, 128] [1, 1]
      : memref<64x129xf32> to memref<64x128xf32, strided<[129, 1], offset: 1>>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
    %0 = memref.load %shifted[%i, %j] : memref<64x128xf32, strided<[129, 1], offset: 1>>
    memref.store %0, %u[%i, %j] : memref<64x128xf32>
    scf.reduce
  }
  %rows = memref.subview %w[0, 0] [64, 128] [1, 1]
      : memref<64x129xf32> to memref<64x128xf32, strided<[129, 1]>>
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
    %0 = memref.load %rows[%i, %j] : memref<64x128xf32, strided<[129, 1]>>
    memref.store %0, %u[%i, %j] : memref<64x128xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
    %0 = arith.index_cast %j : index to i64
    memref.store %0, %iota[%i, %j] : memref<64x128xi64>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
    %0 = scf.for %k = %c0 to %c64 step %c1 iter_args(%acc = %c0) -> (index) {
      %1 = arith.addi %acc, %k : index
      scf.yield %1 : index
    }
    %2 = arith.index_cast %0 : index to i64
    memref.store %2, %iota[%i, %j] : memref<64x128xi64>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
    %0 = memref.load %iota[%i, %j] : memref<64x128xi64>
    %1 = arith.index_cast %0 : i64 to index
    %2 = memref.load %u[%1, %j] : memref<64x128xf32>
    memref.store %2, %u[%i, %j] : memref<64x128xf32>
    scf.reduce
  }
  return
}

func.func @after() {
  return
}
