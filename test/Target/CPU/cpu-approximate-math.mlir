// RUN: cleave-opt --cleave-cpu-approximate-math %s | FileCheck %s

// f32 transcendentals become polynomial arithmetic: no math.exp, math.tanh
// or math.erf is left.
// CHECK-LABEL: func.func @f32_ops(
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK: arith.mulf
// CHECK: return
func.func @f32_ops(%x: f32) -> (f32, f32, f32) {
  %0 = math.exp %x : f32
  %1 = math.tanh %x : f32
  %2 = math.erf %x : f32
  return %0, %1, %2 : f32, f32, f32
}

// pow by a constant 2 becomes a product, by 0.5 a square root.
// CHECK-LABEL: func.func @pow_constant(
// CHECK-SAME: %[[X:[^:]*]]: f32
// CHECK-NOT: math.powf
// CHECK-DAG: %[[SQ:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-DAG: %[[RT:.*]] = math.sqrt %[[X]] : f32
// CHECK: return %[[SQ]], %[[RT]]
func.func @pow_constant(%x: f32) -> (f32, f32) {
  %c2 = arith.constant 2.0 : f32
  %ch = arith.constant 0.5 : f32
  %0 = math.powf %x, %c2 : f32
  %1 = math.powf %x, %ch : f32
  return %0, %1 : f32, f32
}

// Other element types, and functions outside the list, keep their math ops.
// CHECK-LABEL: func.func @kept(
// CHECK: math.exp %{{.*}} : f64
// CHECK: math.sin %{{.*}} : f32
func.func @kept(%x: f64, %y: f32) -> (f64, f32) {
  %0 = math.exp %x : f64
  %1 = math.sin %y : f32
  return %0, %1 : f64, f32
}
