// RUN: cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-kernel-modules{pipeline=builtin.module(cleave-convert-cleave-to-linalg)})' --verify-diagnostics | FileCheck %s
// RUN: not cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-kernel-modules{pipeline=builtin.module(no-such-pass)})' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not cleave-opt %s --split-input-file --pass-pipeline='builtin.module(cleave-outline-kernels{entry=step})' 2>&1 | FileCheck %s --check-prefix=ENTRY

// The pipeline runs on every `module @kernels`, at any depth (here a
// program's and one nested in another program module, as local SGD's @sync
// holds its own); the programs around them are left alone.
// CHECK-LABEL: module @outer
// CHECK: func.func @main
// CHECK-NEXT: cleave.unary exp
// CHECK: module @sync
// CHECK: func.func @sync
// CHECK-NEXT: cleave.unary tanh
// CHECK: module @kernels
// CHECK: func.func @k0
// CHECK-NOT: cleave.unary
// CHECK: linalg.generic
// CHECK: module @kernels
// CHECK: func.func @k1
// CHECK-NOT: cleave.unary
// CHECK: linalg.generic
module @outer {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = cleave.unary exp %x : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  module @sync {
    func.func @sync(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = cleave.unary tanh %x : tensor<4xf32>
      return %0 : tensor<4xf32>
    }
    module @kernels {
      func.func @k0(%x: tensor<4xf32>) -> tensor<4xf32> {
        %0 = cleave.unary tanh %x : tensor<4xf32>
        return %0 : tensor<4xf32>
      }
    }
  }
  module @kernels {
    func.func @k1(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = cleave.unary exp %x : tensor<4xf32>
      return %0 : tensor<4xf32>
    }
  }
}

// -----

// A pipeline that does not parse is an error naming the option; outline-
// kernels{entry=NAME} plans @NAME, and a module without it is an error
// naming the function.
// BAD: error: cleave-kernel-modules: the pipeline option 'builtin.module(no-such-pass)' does not parse: {{.*}}'no-such-pass' does not refer to a registered pass
// ENTRY: error: expected a single-block func.func @step
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
