// RUN: cleave-opt --cleave-cpu-expand-arith %s | FileCheck %s

// Float min/max stay ops (LLVM intrinsics the loop vectorizer recognizes as
// reductions), unlike arith-expand, which spells them out.
// CHECK-LABEL: func.func @minmax(
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : f32
// CHECK: arith.minnumf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: arith.cmpf
func.func @minmax(%a: f32, %b: f32) -> (f32, f32) {
  %0 = arith.maximumf %a, %b : f32
  %1 = arith.minnumf %a, %b : f32
  return %0, %1 : f32, f32
}

// Ceil division is spelled out with plain divisions and selects.
// CHECK-LABEL: func.func @ceildiv(
// CHECK-NOT: arith.ceildivsi
// CHECK: arith.divsi
// CHECK: arith.select
func.func @ceildiv(%a: i32, %b: i32) -> i32 {
  %0 = arith.ceildivsi %a, %b : i32
  return %0 : i32
}

// bf16 conversions become integer operations on the bits.
// CHECK-LABEL: func.func @bf16(
// CHECK-NOT: arith.extf
// CHECK: arith.bitcast %{{.*}} : bf16 to i16
// CHECK: arith.extui
// CHECK: arith.shli
// CHECK: arith.bitcast %{{.*}} : i32 to f32
func.func @bf16(%x: bf16) -> f32 {
  %0 = arith.extf %x : bf16 to f32
  return %0 : f32
}
