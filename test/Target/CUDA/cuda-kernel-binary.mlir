// REQUIRES: ptxas
// RUN: cleave-opt --cleave-cuda-kernel-pipeline="format=isa" %s | FileCheck %s --check-prefix=PTX
// RUN: cleave-opt --cleave-cuda-kernel-pipeline="format=bin" %s | FileCheck %s --check-prefix=BIN

// PTX: gpu.binary @cleave_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a">, properties = {{.*}}, assembly = "
// PTX-SAME: .target sm_90a
// PTX-SAME: .entry ln_kernel(
// PTX-SAME: .maxntid 192, 1, 1
// PTX-SAME: ld.global.v4.b32
// PTX-SAME: shfl.sync.bfly.b32
// PTX-SAME: bar.sync
// BIN-LABEL: func.func @ln(
// BIN: gpu.launch_func @cleave_kernels::@ln_kernel
// BIN: gpu.binary @cleave_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a">, properties = {{.*}}ISAToBinaryTimeInMs{{.*}}, bin = "\7FELF

func.func @ln(%x: tensor<128x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>) -> tensor<128x768xf32> {
  %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
      : (tensor<128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<128x768xf32>
  return %0 : tensor<128x768xf32>
}
