// RUN: cleave-opt --cleave-cpu-kernel-pipeline %s | FileCheck %s

// Results become out-parameters (bare pointers), elementwise chains fuse into
// one loop nest, erf becomes a libm call, and no buffer is allocated.
// CHECK-DAG: llvm.func @erff(f32) -> f32
// CHECK-LABEL: llvm.func @chain(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK-NOT: llvm.call @malloc
// CHECK: llvm.call @erff
// CHECK-NOT: llvm.call @malloc
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
