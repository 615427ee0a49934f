// RUN: cleave-opt --cleave-cpu-kernel-pipeline %s | FileCheck %s

// Results become out-parameters (bare pointers), elementwise chains fuse into
// one loop nest, f32 erf becomes a polynomial (arithmetic LLVM vectorizes, no
// libm call), and no buffer is allocated.
// CHECK-NOT: llvm.func @erff
// CHECK-LABEL: llvm.func @chain(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK-NOT: llvm.call
// CHECK: llvm.intr.fma
// CHECK-NOT: llvm.call
// CHECK: llvm.return
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %s = cleave.binary add %x, %bb : tensor<4x8xf32>
  %t = cleave.unary erf %s : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// Unsigned division keeps udiv after the boundary types become signless.
// CHECK-LABEL: llvm.func @udiv(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: llvm.udiv
func.func @udiv(%a: tensor<4xui32>, %b: tensor<4xui32>) -> tensor<4xui32> {
  %d = cleave.binary div %a, %b : tensor<4xui32>
  return %d : tensor<4xui32>
}

// f32 exp and tanh are polynomials too; f64 keeps libm / the intrinsic.
// CHECK-LABEL: llvm.func @transcendentals
// CHECK-NOT: llvm.call @expf
// CHECK-NOT: llvm.call @tanhf
// CHECK-NOT: llvm.intr.exp
// CHECK: llvm.return
func.func @transcendentals(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = cleave.unary exp %x : tensor<16xf32>
  %t = cleave.unary tanh %e : tensor<16xf32>
  %l = cleave.unary log %t : tensor<16xf32>
  return %l : tensor<16xf32>
}

// CHECK-LABEL: llvm.func @erf_f64
// CHECK: llvm.call @erf(
func.func @erf_f64(%x: tensor<4xf64>) -> tensor<4xf64> {
  %t = cleave.unary erf %x : tensor<4xf64>
  return %t : tensor<4xf64>
}

// A softmax's row maxima and sums are temporaries of the kernel: they live
// in a scratch buffer it takes as its last argument (the plan's arena), not
// on the heap.
// CHECK-LABEL: llvm.func @softmax(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK-NOT: llvm.call @malloc
// CHECK-NOT: llvm.call @free
// CHECK: llvm.return
func.func @softmax(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %a = cleave.softmax %x dim = 1 : tensor<3x5xf32>
  return %a : tensor<3x5xf32>
}

// pow by a constant 3 (GELU's cube) and 2 (its derivative) is products, not
// a libm powf per element; a variable exponent keeps pow.
// CHECK-LABEL: llvm.func @pow_constant
// CHECK-NOT: llvm.intr.pow
// CHECK-NOT: llvm.call @powf
// CHECK: llvm.fmul
// CHECK: llvm.return
func.func @pow_constant(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %c3 = cleave.constant dense<3.0> : tensor<16xf32>
  %c2 = cleave.constant dense<2.0> : tensor<16xf32>
  %p3 = cleave.binary pow %x, %c3 : tensor<16xf32>
  %p2 = cleave.binary pow %x, %c2 : tensor<16xf32>
  return %p3, %p2 : tensor<16xf32>, tensor<16xf32>
}
// CHECK-LABEL: llvm.func @pow_variable
// CHECK: llvm.intr.pow
func.func @pow_variable(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %p = cleave.binary pow %x, %y : tensor<16xf32>
  return %p : tensor<16xf32>
}
