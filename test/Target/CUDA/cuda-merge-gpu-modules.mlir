// RUN: cleave-opt --cleave-cuda-merge-gpu-modules %s | FileCheck %s

// Two outlined modules, each with a kernel named @k: both kernels move into
// @cleave_kernels, the second renamed, and each launch follows its kernel.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @cleave_kernels {
// CHECK:   gpu.func @k(%{{.*}}: memref<4xf32>) kernel
// CHECK:     arith.constant 1.0
// CHECK:   gpu.func @[[K2:k_[0-9]+]](%{{.*}}: memref<4xf32>) kernel
// CHECK:     arith.constant 2.0
// CHECK-NOT: gpu.module
// CHECK: func.func @host(
// CHECK: gpu.launch_func @cleave_kernels::@k blocks
// CHECK: gpu.launch_func @cleave_kernels::@[[K2]] blocks
module attributes {gpu.container_module} {
  gpu.module @first {
    gpu.func @k(%x: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %v = arith.constant 1.0 : f32
      memref.store %v, %x[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @second {
    gpu.func @k(%x: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %v = arith.constant 2.0 : f32
      memref.store %v, %x[%c0] : memref<4xf32>
      gpu.return
    }
  }
  func.func @host(%x: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @first::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    gpu.launch_func @second::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    return
  }
}
