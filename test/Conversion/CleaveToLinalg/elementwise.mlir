// RUN: cleave-opt --cleave-convert-cleave-to-linalg %s | FileCheck %s

// Float binary ops become one linalg.generic with identity maps.
// CHECK-LABEL: func.func @add
// CHECK: tensor.empty() : tensor<4x8xf32>
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "parallel"]
// CHECK: arith.addf
// CHECK: linalg.yield
func.func @add(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = cleave.binary add %a, %b : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Unsigned types become signless at the boundary and pick unsigned ops.
// CHECK-LABEL: func.func @unsigned_ops
// CHECK-SAME: (%{{.*}}: tensor<4xi32>, %{{.*}}: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi1>, tensor<4xf32>)
// CHECK: arith.divui
// CHECK: arith.shrui
// CHECK: arith.cmpi ult
// CHECK: arith.uitofp
func.func @unsigned_ops(%a: tensor<4xui32>, %b: tensor<4xui32>) -> (tensor<4xui32>, tensor<4xui32>, tensor<4xi1>, tensor<4xf32>) {
  %0 = cleave.binary div %a, %b : tensor<4xui32>
  %1 = cleave.binary shr %a, %b : tensor<4xui32>
  %2 = cleave.compare lt %a, %b : tensor<4xui32> -> tensor<4xi1>
  %3 = cleave.convert %a : tensor<4xui32> -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xui32>, tensor<4xui32>, tensor<4xi1>, tensor<4xf32>
}

// Signed integers: truncating div, rem, mod fixed to the divisor's sign, ipowi.
// CHECK-LABEL: func.func @signed_ops
// CHECK: arith.divsi
// CHECK: arith.remsi
// CHECK: arith.remsi
// CHECK: arith.select
// CHECK: math.ipowi
func.func @signed_ops(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
  %0 = cleave.binary div %a, %b : tensor<4xi32>
  %1 = cleave.binary rem %a, %b : tensor<4xi32>
  %2 = cleave.binary mod %a, %b : tensor<4xi32>
  %3 = cleave.binary pow %a, %b : tensor<4xi32>
  return %0, %1, %2, %3 : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
}

// Float unary kinds: round is half-to-even, sigmoid is 1/(1+exp(-x)).
// CHECK-LABEL: func.func @float_unary
// CHECK: math.roundeven
// CHECK: arith.negf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: math.erf
func.func @float_unary(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = cleave.unary round %x : tensor<4xf32>
  %1 = cleave.unary sigmoid %x : tensor<4xf32>
  %2 = cleave.unary erf %x : tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// `not` is xor with all ones; float `ne` is unordered.
// CHECK-LABEL: func.func @not_and_ne
// CHECK: %[[ONES:.*]] = arith.constant -1 : i8
// CHECK: arith.xori %{{.*}}, %[[ONES]]
// CHECK: arith.cmpf une
func.func @not_and_ne(%x: tensor<4xi8>, %a: tensor<4xf32>) -> (tensor<4xi8>, tensor<4xi1>) {
  %0 = cleave.unary not %x : tensor<4xi8>
  %1 = cleave.compare ne %a, %a : tensor<4xf32> -> tensor<4xi1>
  return %0, %1 : tensor<4xi8>, tensor<4xi1>
}

// Casts: float->int truncates (fptosi), float->i1 tests != 0.
// CHECK-LABEL: func.func @converts
// CHECK: arith.fptosi
// CHECK: arith.cmpf une
// CHECK: arith.cmpi ne
func.func @converts(%x: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xi32>, tensor<4xi1>, tensor<4xi1>) {
  %0 = cleave.convert %x : tensor<4xf32> -> tensor<4xi32>
  %1 = cleave.convert %x : tensor<4xf32> -> tensor<4xi1>
  %2 = cleave.convert %i : tensor<4xi64> -> tensor<4xi1>
  return %0, %1, %2 : tensor<4xi32>, tensor<4xi1>, tensor<4xi1>
}

// bf16 math is computed in f32 inside the body.
// CHECK-LABEL: func.func @bf16_exp
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: math.exp %{{.*}} : f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @bf16_exp(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = cleave.unary exp %x : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// Constants (unsigned ones bitcast to signless), iota and select.
// CHECK-LABEL: func.func @constant_iota_select
// CHECK: arith.constant dense<[1, -1]> : tensor<2xi8>
// CHECK: linalg.index 1
// CHECK: arith.index_cast
// CHECK: arith.select
func.func @constant_iota_select(%c: tensor<2x3xi1>, %a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> (tensor<2xui8>, tensor<2x3xi64>, tensor<2x3xf32>) {
  %0 = cleave.constant dense<[1, 255]> : tensor<2xui8>
  %1 = cleave.iota dim = 1 : tensor<2x3xi64>
  %2 = cleave.select %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>
  return %0, %1, %2 : tensor<2xui8>, tensor<2x3xi64>, tensor<2x3xf32>
}
