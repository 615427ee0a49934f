// RUN: cleave-opt %s --split-input-file --cleave-outline-kernels --verify-diagnostics | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-outline-kernels=library-gemm=false --verify-diagnostics | FileCheck %s --check-prefix=NOGEMM

// The contraction is a library GEMM and stays in @main untagged; the two
// elementwise chains after it are one kernel each, tagged with their group,
// and identical bodies share one outlined function. The bias add joins the
// GEMM as its epilogue.
// CHECK-LABEL: func.func @main
// CHECK: %[[G:.*]] = cleave.contract
// CHECK-NOT: cleave.kernel
// CHECK: %[[B:.*]] = cleave.binary add %[[G]], %{{.*}} :
// CHECK-NOT: cleave.kernel
// CHECK: cleave.unary exp %[[B]] {cleave.kernel = "[[K:k[0-9]+_unary]]", cleave.kernel_group = [[G1:[0-9]+]] : i64}
// CHECK: cleave.unary exp %{{.*}} {cleave.kernel = "[[K]]", cleave.kernel_group = [[G2:[0-9]+]] : i64}
// CHECK: cleave.binary mul {{.*}} {cleave.kernel = "[[K]]", cleave.kernel_group = [[G1]] : i64}
// CHECK: cleave.binary mul {{.*}} {cleave.kernel = "[[K]]", cleave.kernel_group = [[G2]] : i64}
// CHECK: return
// CHECK: module @kernels {
// CHECK-NEXT: func.func @[[K]](%[[A:.*]]: tensor<2x4xf32>, %[[S:.*]]: tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT: %[[E:.*]] = cleave.unary exp %[[A]] : tensor<2x4xf32>
// CHECK-NEXT: %[[M:.*]] = cleave.binary mul %[[E]], %[[S]] : tensor<2x4xf32>
// CHECK-NEXT: return %[[M]]
// CHECK-NEXT: }
// CHECK-NEXT: }

// Without library GEMMs the contraction and the bias add are kernels too.
// NOGEMM-LABEL: func.func @main
// NOGEMM: cleave.contract {{.*}} {cleave.kernel = "k0_contract", cleave.kernel_group = 0 : i64}
// NOGEMM: module @kernels {
// NOGEMM: func.func @k0_contract
func.func @main(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>, %s: tensor<2x4xf32>, %t: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %h = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
  %hb = cleave.binary add %h, %bb : tensor<2x4xf32>
  %e0 = cleave.unary exp %hb : tensor<2x4xf32>
  %e1 = cleave.unary exp %t : tensor<2x4xf32>
  %m0 = cleave.binary mul %e0, %s : tensor<2x4xf32>
  %m1 = cleave.binary mul %e1, %s : tensor<2x4xf32>
  return %m0, %m1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// A program is outlined once: the kernel module's symbol must be free.
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = cleave.unary exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
// expected-error @below {{already holds the symbol @kernels: the program's kernels are outlined once}}
module @kernels {
}

// -----

// The pass outlines @main; a module without one is an error.
// expected-error @below {{expected a single-block func.func @main}}
module {
  func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
