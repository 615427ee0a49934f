// RUN: cleave-opt %s --cleave-drop-attribute=name=cleave.backward | FileCheck %s
// RUN: not cleave-opt %s --cleave-drop-attribute 2>&1 | FileCheck %s --check-prefix=NONAME

// Every op loses the tag, other attributes stay; the module keeps its own.
// CHECK: module attributes {cleave.backward}
// CHECK: cleave.binary mul %{{.*}}, %{{.*}} {cleave.recompute} :
// CHECK-NOT: cleave.backward
module attributes {cleave.backward} {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = cleave.binary mul %x, %x {cleave.backward, cleave.recompute} : tensor<4xf32>
    %z = cleave.binary add %y, %x {cleave.backward} : tensor<4xf32>
    return %z : tensor<4xf32>
  }
}
// NONAME: error: --cleave-drop-attribute needs a name
