// RUN: cleave-opt --pass-pipeline="builtin.module(gpu.module(cleave-cuda-lower-all-reduce))" --split-input-file --verify-diagnostics %s | FileCheck %s

// A uniform block sum becomes warp shuffles, one value per warp in a
// workgroup buffer, a barrier, and the first warp's reduction of those.
// CHECK-LABEL: gpu.func @block_sum(
// CHECK-SAME: workgroup(%[[SHARED:.*]] : memref<32xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT: gpu.all_reduce
// CHECK: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %[[SHARED]][%{{.*}}] : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.load %[[SHARED]][%{{.*}}] : memref<32xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.shuffle xor
// CHECK: gpu.return
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @block_sum(%x: memref<128xf32>, %y: memref<1xf32>) kernel {
      %tid = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%tid] : memref<128xf32>
      %s = gpu.all_reduce add %v uniform {} : (f32) -> f32
      memref.store %s, %y[%c0] : memref<1xf32>
      gpu.return
    }
  }
}

// -----

// A gpu.all_reduce the rewrite does not take (not uniform) is an error.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @divergent(%x: memref<128xf32>, %y: memref<1xf32>) kernel {
      %tid = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%tid] : memref<128xf32>
      // expected-error @+1 {{cuda: gpu.all_reduce was not lowered}}
      %s = gpu.all_reduce add %v {} : (f32) -> f32
      memref.store %s, %y[%c0] : memref<1xf32>
      gpu.return
    }
  }
}
