// RUN: cleave-opt %s --cleave-drop-attribute=name=cleave.backward | FileCheck %s
// RUN: cleave-opt %s --pass-pipeline="builtin.module(builtin.module(cleave-drop-attribute{name=cleave.backward}))" | FileCheck %s --check-prefix=NESTED
// RUN: not cleave-opt %s --cleave-drop-attribute 2>&1 | FileCheck %s --check-prefix=NONAME

// Every op of the module loses the tag, other attributes stay; the module
// keeps its own, and a nested module (a program of its own) is left alone.
// CHECK: module attributes {cleave.backward}
// CHECK: cleave.binary mul %{{.*}}, %{{.*}} {cleave.recompute} :
// CHECK-NOT: cleave.backward
// CHECK: module @sync attributes {cleave.backward}
// CHECK-NEXT: func.func @sync
// CHECK-NEXT: cleave.binary mul %{{.*}}, %{{.*}} {cleave.backward}

// Nested in a pipeline, the pass reaches the nested module's ops only.
// NESTED: cleave.binary mul %{{.*}}, %{{.*}} {cleave.backward, cleave.recompute} :
// NESTED: cleave.binary add %{{.*}}, %{{.*}} {cleave.backward} :
// NESTED: module @sync attributes {cleave.backward}
// NESTED-NEXT: func.func @sync
// NESTED-NEXT: cleave.binary mul %{{.*}}, %{{.*}} :
module attributes {cleave.backward} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = cleave.binary mul %x, %x {cleave.backward, cleave.recompute} : tensor<4xf32>
    %z = cleave.binary add %y, %x {cleave.backward} : tensor<4xf32>
    return %z : tensor<4xf32>
  }
  module @sync attributes {cleave.backward} {
    func.func @sync(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = cleave.binary mul %x, %x {cleave.backward} : tensor<4xf32>
      return %y : tensor<4xf32>
    }
  }
}
// NONAME: error: --cleave-drop-attribute needs a name
