// RUN: cleave-opt %s --cleave-expand-narrow-floats | FileCheck %s

// Conversions from float8/float4 decode the bits into f32 bits; nothing of
// the narrow type is left but the bitcast of the argument.
// CHECK-LABEL: func.func @ext
// CHECK: arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK: arith.extui %{{.*}} : i8 to i32
// Subnormals: mantissa * 2^-9.
// CHECK: arith.uitofp
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: f8E4M3FN
// CHECK: %[[F:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: arith.extf %[[F]] : f32 to f64
func.func @ext(%x: f8E4M3FN) -> f64 {
  %0 = arith.extf %x : f8E4M3FN to f64
  return %0 : f64
}

// Conversions to them round the f32 bits (f16 is extended first): a
// rebiased shift with round-half-even, the subnormal step by an f32
// addition of 2^7, overflow to e5m2's infinity (124), NaN to 126.
// CHECK-LABEL: func.func @trunc
// CHECK-DAG: %[[INF:.*]] = arith.constant 124 : i32
// CHECK-DAG: %[[NAN:.*]] = arith.constant 126 : i32
// CHECK-DAG: %[[MAGIC:.*]] = arith.constant 1.280000e+02 : f32
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.addf %{{.*}}, %[[MAGIC]] : f32
// CHECK: arith.select %{{.*}}, %[[INF]], %{{.*}} : i32
// CHECK: arith.select %{{.*}}, %[[NAN]], %{{.*}} : i32
// CHECK: %[[CODE:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK: arith.bitcast %[[CODE]] : i8 to f8E5M2
func.func @trunc(%x: f16) -> f8E5M2 {
  %0 = arith.truncf %x : f16 to f8E5M2
  return %0 : f8E5M2
}

// Other arithmetic moves to f32; the constant folds into an f32 one.
// CHECK-LABEL: func.func @cmp
// CHECK-DAG: %[[C:.*]] = arith.constant 1.500000e+00 : f32
// CHECK: arith.bitcast %{{.*}} : f4E2M1FN to i4
// CHECK: %[[X:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK: arith.cmpf olt, %[[X]], %[[C]] : f32
func.func @cmp(%x: f4E2M1FN) -> i1 {
  %c = arith.constant 1.5 : f4E2M1FN
  %0 = arith.cmpf olt, %x, %c : f4E2M1FN
  return %0 : i1
}

// A float8 constant stays one (LLVM takes its bits as an i8).
// CHECK-LABEL: func.func @constant
// CHECK: arith.constant -4.480000e+02 : f8E4M3FN
func.func @constant() -> f8E4M3FN {
  %c = arith.constant -448.0 : f8E4M3FN
  return %c : f8E4M3FN
}

// Scalars only: arithmetic on vectors of a narrow type moves to f32, but the
// vector conversions to and from it stay (the kernel pipelines produce none).
// CHECK-LABEL: func.func @vector
// CHECK: arith.extf %{{.*}} : vector<4xf8E4M3FN> to vector<4xf32>
// CHECK: arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK: arith.truncf %{{.*}} : vector<4xf32> to vector<4xf8E4M3FN>
func.func @vector(%x: vector<4xf8E4M3FN>, %y: vector<4xf8E4M3FN>) -> vector<4xf8E4M3FN> {
  %0 = arith.addf %x, %y : vector<4xf8E4M3FN>
  return %0 : vector<4xf8E4M3FN>
}
