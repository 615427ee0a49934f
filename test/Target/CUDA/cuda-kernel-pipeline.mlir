// RUN: cleave-opt --cleave-cuda-kernel-pipeline %s | FileCheck %s
// RUN: cleave-opt --cleave-cuda-kernel-pipeline="chip=sm_80 block-size=128" %s | FileCheck %s --check-prefix=SM80

// The host function keeps only launches (constant sizes) and the temporary
// buffers between them; all kernels land in one gpu.module with the NVVM
// target, bare-pointer parameters and launch bounds.
// CHECK-LABEL: func.func @chain(
// CHECK-NOT: scf.
// CHECK: gpu.launch_func @cleave_kernels::@chain_kernel blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) args(%arg0 : memref<64x1000xf32>, %arg1 : memref<1000xf32>, %arg2 : memref<64x1000xf32>)
// CHECK-NEXT: return
// CHECK-NEXT: }
// CHECK: gpu.module @cleave_kernels [#nvvm.target<O = 3, chip = "sm_90a">]
// Four elements per thread (63 blocks of 256), each operand one 16-byte
// aligned vector access.
// CHECK: llvm.func @chain_kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK-SAME: gpu.kernel
// CHECK-SAME: gpu.known_grid_size = array<i32: 63, 1, 1>
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr
// Softmax is one row kernel: a block of 128 threads per row (64 blocks),
// each thread moving 4 floats per access;
// its two reductions end in block all-reduces (butterfly shuffles, then one
// shared word per warp), phases are separated by barriers.
// CHECK: llvm.func @softmax_kernel(
// CHECK-SAME: gpu.known_grid_size = array<i32: 64, 1, 1>
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK: nvvm.barrier0
// CHECK: nvvm.shfl.sync bfly
// CHECK: nvvm.barrier0
// CHECK: nvvm.shfl.sync bfly
// CHECK-LABEL: func.func @softmax(
// CHECK: %[[TMP:.*]] = memref.alloc() {{.*}} : memref<64xf32>
// CHECK: gpu.launch_func @cleave_kernels::@softmax_kernel blocks in (%c64, %c1, %c1) threads in (%c128, %c1, %c1) args(%[[TMP]] : memref<64xf32>, %arg0 : memref<64x512xf32>, %arg1 : memref<64x512xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: memref.dealloc %[[TMP]]

// SM80: gpu.module @cleave_kernels [#nvvm.target<O = 3, chip = "sm_80">]
// SM80: nvvm.maxntid = array<i32: 128, 1, 1>

func.func @chain(%x: tensor<64x1000xf32>, %b: tensor<1000xf32>) -> tensor<64x1000xf32> {
  %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<1000xf32> -> tensor<64x1000xf32>
  %s = cleave.binary add %x, %bb : tensor<64x1000xf32>
  %t = cleave.unary exp %s : tensor<64x1000xf32>
  return %t : tensor<64x1000xf32>
}

// Row reductions: one block per row.
func.func @softmax(%x: tensor<64x512xf32>) -> tensor<64x512xf32> {
  %a = cleave.softmax %x dim = 1 : tensor<64x512xf32>
  return %a : tensor<64x512xf32>
}
