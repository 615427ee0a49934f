// RUN: cleave-opt --cleave-cuda-load-translations %s | FileCheck %s
// RUN: cleave-opt --cleave-cuda-load-translations --gpu-module-to-binary="format=isa" %s | FileCheck %s --check-prefix=PTX
// RUN: not cleave-opt --gpu-module-to-binary="format=isa" %s 2>&1 | FileCheck %s --check-prefix=MISSING

// The pass changes nothing...
// CHECK: gpu.module @cleave_kernels [#nvvm.target<chip = "sm_80">] {
// CHECK:   llvm.func @k(%{{.*}}: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
// CHECK:     llvm.return
// ...but gpu-module-to-binary can then translate the module to LLVM IR and
// PTX.
// PTX: gpu.binary @cleave_kernels
// PTX-SAME: .target sm_80
// PTX-SAME: .visible .entry k(
// Without it, cleave-opt has no LLVM IR translation for the module.
// MISSING: error: cannot be converted to LLVM IR: missing `LLVMTranslationDialectInterface` registration
module attributes {gpu.container_module} {
  gpu.module @cleave_kernels [#nvvm.target<chip = "sm_80">] {
    llvm.func @k(%x: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
}
