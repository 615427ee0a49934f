// Round-trip of every cleave op through the custom assembly format.
// RUN: cleave-opt %s | cleave-opt | FileCheck %s
// RUN: cleave-opt %s --mlir-print-op-generic | cleave-opt | FileCheck %s

//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

// Constants of every element type family, dense and splat, including 0-d.
// CHECK-LABEL: func.func @constants
func.func @constants() {
  // CHECK: cleave.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %0 = cleave.constant dense<[1.0, 2.0]> : tensor<2xf32>
  // CHECK: cleave.constant dense<2.500000e-01> : tensor<2x2xf64>
  %1 = cleave.constant dense<0.25> : tensor<2x2xf64>
  // CHECK: cleave.constant dense<1.000000e+00> : tensor<3xf16>
  %2 = cleave.constant dense<1.0> : tensor<3xf16>
  // CHECK: cleave.constant dense<-2.000000e+00> : tensor<bf16>
  %3 = cleave.constant dense<-2.0> : tensor<bf16>
  // CHECK: cleave.constant dense<[1, -2, 3]> : tensor<3xi64>
  %4 = cleave.constant dense<[1, -2, 3]> : tensor<3xi64>
  // CHECK: cleave.constant dense<7> : tensor<i32>
  %5 = cleave.constant dense<7> : tensor<i32>
  // CHECK: cleave.constant dense<-128> : tensor<4xi8>
  %6 = cleave.constant dense<-128> : tensor<4xi8>
  // CHECK: cleave.constant dense<[true, false]> : tensor<2xi1>
  %7 = cleave.constant dense<[true, false]> : tensor<2xi1>
  // CHECK: cleave.constant dense<255> : tensor<2xui8>
  %8 = cleave.constant dense<255> : tensor<2xui8>
  // CHECK: cleave.constant dense<> : tensor<0xf32>
  %9 = cleave.constant dense<> : tensor<0xf32>
  return
}

// Iota along an inner and an outer dimension, integer and float results.
// CHECK-LABEL: func.func @iota
func.func @iota() -> (tensor<2x3xi64>, tensor<4xf32>) {
  // CHECK: cleave.iota dim = 1 : tensor<2x3xi64>
  %0 = cleave.iota dim = 1 : tensor<2x3xi64>
  // CHECK: cleave.iota dim = 0 : tensor<4xf32>
  %1 = cleave.iota dim = 0 : tensor<4xf32>
  return %0, %1 : tensor<2x3xi64>, tensor<4xf32>
}

// A random stream's key (the full 64-bit range of the salt).
// CHECK-LABEL: func.func @rng_key
func.func @rng_key() -> tensor<ui64> {
  // CHECK: cleave.rng_key salt = 18446744073709551615 : tensor<ui64>
  %0 = cleave.rng_key salt = 18446744073709551615 : tensor<ui64>
  return %0 : tensor<ui64>
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Elementwise ops, explicit broadcast and selection round-trip.
// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: cleave.broadcast_in_dim %{{.*}} dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %0 = cleave.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  // CHECK: cleave.binary add
  %1 = cleave.binary add %a, %0 : tensor<4x8xf32>
  // CHECK: cleave.unary exp
  %2 = cleave.unary exp %1 : tensor<4x8xf32>
  // CHECK: cleave.compare lt {{.*}} : tensor<4x8xf32> -> tensor<4x8xi1>
  %c = cleave.compare lt %1, %2 : tensor<4x8xf32> -> tensor<4x8xi1>
  // CHECK: cleave.select
  %3 = cleave.select %c, %1, %2 : tensor<4x8xi1>, tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// Every unary kind on a float tensor (f32).
// CHECK-LABEL: func.func @unary_float_kinds
func.func @unary_float_kinds(%x: tensor<4xf32>) {
  // CHECK: cleave.unary neg %{{.*}} : tensor<4xf32>
  %0 = cleave.unary neg %x : tensor<4xf32>
  // CHECK: cleave.unary abs
  %1 = cleave.unary abs %x : tensor<4xf32>
  // CHECK: cleave.unary exp
  %2 = cleave.unary exp %x : tensor<4xf32>
  // CHECK: cleave.unary log
  %3 = cleave.unary log %x : tensor<4xf32>
  // CHECK: cleave.unary sqrt
  %4 = cleave.unary sqrt %x : tensor<4xf32>
  // CHECK: cleave.unary rsqrt
  %5 = cleave.unary rsqrt %x : tensor<4xf32>
  // CHECK: cleave.unary tanh
  %6 = cleave.unary tanh %x : tensor<4xf32>
  // CHECK: cleave.unary sigmoid
  %7 = cleave.unary sigmoid %x : tensor<4xf32>
  // CHECK: cleave.unary erf
  %8 = cleave.unary erf %x : tensor<4xf32>
  // CHECK: cleave.unary sin
  %9 = cleave.unary sin %x : tensor<4xf32>
  // CHECK: cleave.unary cos
  %10 = cleave.unary cos %x : tensor<4xf32>
  // CHECK: cleave.unary tan
  %11 = cleave.unary tan %x : tensor<4xf32>
  // CHECK: cleave.unary asin
  %12 = cleave.unary asin %x : tensor<4xf32>
  // CHECK: cleave.unary acos
  %13 = cleave.unary acos %x : tensor<4xf32>
  // CHECK: cleave.unary atan
  %14 = cleave.unary atan %x : tensor<4xf32>
  // CHECK: cleave.unary sinh
  %15 = cleave.unary sinh %x : tensor<4xf32>
  // CHECK: cleave.unary cosh
  %16 = cleave.unary cosh %x : tensor<4xf32>
  // CHECK: cleave.unary asinh
  %17 = cleave.unary asinh %x : tensor<4xf32>
  // CHECK: cleave.unary acosh
  %18 = cleave.unary acosh %x : tensor<4xf32>
  // CHECK: cleave.unary atanh
  %19 = cleave.unary atanh %x : tensor<4xf32>
  // CHECK: cleave.unary floor
  %20 = cleave.unary floor %x : tensor<4xf32>
  // CHECK: cleave.unary ceil
  %21 = cleave.unary ceil %x : tensor<4xf32>
  // CHECK: cleave.unary round
  %22 = cleave.unary round %x : tensor<4xf32>
  // CHECK: cleave.unary sign
  %23 = cleave.unary sign %x : tensor<4xf32>
  // CHECK: cleave.unary reciprocal
  %24 = cleave.unary reciprocal %x : tensor<4xf32>
  return
}

// Float unary kinds on the other float types (f64, f16, bf16).
// CHECK-LABEL: func.func @unary_float_types
func.func @unary_float_types(%a: tensor<2xf64>, %b: tensor<2xf16>, %c: tensor<2xbf16>) {
  // CHECK: cleave.unary sqrt %{{.*}} : tensor<2xf64>
  %0 = cleave.unary sqrt %a : tensor<2xf64>
  // CHECK: cleave.unary exp %{{.*}} : tensor<2xf16>
  %1 = cleave.unary exp %b : tensor<2xf16>
  // CHECK: cleave.unary tanh %{{.*}} : tensor<2xbf16>
  %2 = cleave.unary tanh %c : tensor<2xbf16>
  return
}

// The kinds allowed on integers: neg, abs, sign and not (i64, i32, i8, i1, ui8).
// CHECK-LABEL: func.func @unary_integer
func.func @unary_integer(%a: tensor<3xi64>, %b: tensor<3xi32>, %c: tensor<3xi8>,
                         %d: tensor<3xi1>, %e: tensor<3xui8>) {
  // CHECK: cleave.unary neg %{{.*}} : tensor<3xi64>
  %0 = cleave.unary neg %a : tensor<3xi64>
  // CHECK: cleave.unary abs %{{.*}} : tensor<3xi32>
  %1 = cleave.unary abs %b : tensor<3xi32>
  // CHECK: cleave.unary sign %{{.*}} : tensor<3xi8>
  %2 = cleave.unary sign %c : tensor<3xi8>
  // CHECK: cleave.unary not %{{.*}} : tensor<3xi1>
  %3 = cleave.unary not %d : tensor<3xi1>
  // CHECK: cleave.unary not %{{.*}} : tensor<3xui8>
  %4 = cleave.unary not %e : tensor<3xui8>
  return
}

// Every binary kind: arithmetic on floats, bitwise and shifts on integers.
// CHECK-LABEL: func.func @binary_kinds
func.func @binary_kinds(%x: tensor<4xf32>, %i: tensor<4xi32>, %b: tensor<4xi1>, %u: tensor<4xui8>) {
  // CHECK: cleave.binary add %{{.*}}, %{{.*}} : tensor<4xf32>
  %0 = cleave.binary add %x, %x : tensor<4xf32>
  // CHECK: cleave.binary sub
  %1 = cleave.binary sub %x, %x : tensor<4xf32>
  // CHECK: cleave.binary mul
  %2 = cleave.binary mul %x, %x : tensor<4xf32>
  // CHECK: cleave.binary div
  %3 = cleave.binary div %x, %x : tensor<4xf32>
  // CHECK: cleave.binary rem
  %4 = cleave.binary rem %x, %x : tensor<4xf32>
  // CHECK: cleave.binary mod
  %5 = cleave.binary mod %i, %i : tensor<4xi32>
  // CHECK: cleave.binary pow
  %6 = cleave.binary pow %x, %x : tensor<4xf32>
  // CHECK: cleave.binary max
  %7 = cleave.binary max %x, %x : tensor<4xf32>
  // CHECK: cleave.binary min
  %8 = cleave.binary min %i, %i : tensor<4xi32>
  // CHECK: cleave.binary and %{{.*}}, %{{.*}} : tensor<4xi1>
  %9 = cleave.binary and %b, %b : tensor<4xi1>
  // CHECK: cleave.binary or %{{.*}}, %{{.*}} : tensor<4xi1>
  %10 = cleave.binary or %b, %b : tensor<4xi1>
  // CHECK: cleave.binary xor %{{.*}}, %{{.*}} : tensor<4xi32>
  %11 = cleave.binary xor %i, %i : tensor<4xi32>
  // CHECK: cleave.binary shl %{{.*}}, %{{.*}} : tensor<4xi32>
  %12 = cleave.binary shl %i, %i : tensor<4xi32>
  // CHECK: cleave.binary shr %{{.*}}, %{{.*}} : tensor<4xui8>
  %13 = cleave.binary shr %u, %u : tensor<4xui8>
  return
}

// Binary ops over every element type family.
// CHECK-LABEL: func.func @binary_types
func.func @binary_types(%f64: tensor<2xf64>, %f16: tensor<2xf16>, %bf16: tensor<2xbf16>,
                        %i64: tensor<2xi64>, %i8: tensor<2xi8>, %u8: tensor<2xui8>) {
  // CHECK: cleave.binary mul %{{.*}}, %{{.*}} : tensor<2xf64>
  %0 = cleave.binary mul %f64, %f64 : tensor<2xf64>
  // CHECK: cleave.binary add %{{.*}}, %{{.*}} : tensor<2xf16>
  %1 = cleave.binary add %f16, %f16 : tensor<2xf16>
  // CHECK: cleave.binary sub %{{.*}}, %{{.*}} : tensor<2xbf16>
  %2 = cleave.binary sub %bf16, %bf16 : tensor<2xbf16>
  // CHECK: cleave.binary div %{{.*}}, %{{.*}} : tensor<2xi64>
  %3 = cleave.binary div %i64, %i64 : tensor<2xi64>
  // CHECK: cleave.binary rem %{{.*}}, %{{.*}} : tensor<2xi8>
  %4 = cleave.binary rem %i8, %i8 : tensor<2xi8>
  // CHECK: cleave.binary max %{{.*}}, %{{.*}} : tensor<2xui8>
  %5 = cleave.binary max %u8, %u8 : tensor<2xui8>
  return
}

// Every comparison kind, on float, signed, unsigned and boolean operands.
// CHECK-LABEL: func.func @compare
func.func @compare(%x: tensor<2x3xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xui8>,
                   %b: tensor<2x3xi1>) {
  // CHECK: cleave.compare eq %{{.*}}, %{{.*}} : tensor<2x3xf32> -> tensor<2x3xi1>
  %0 = cleave.compare eq %x, %x : tensor<2x3xf32> -> tensor<2x3xi1>
  // CHECK: cleave.compare ne %{{.*}}, %{{.*}} : tensor<2x3xf32> -> tensor<2x3xi1>
  %1 = cleave.compare ne %x, %x : tensor<2x3xf32> -> tensor<2x3xi1>
  // CHECK: cleave.compare lt %{{.*}}, %{{.*}} : tensor<2x3xi64> -> tensor<2x3xi1>
  %2 = cleave.compare lt %i, %i : tensor<2x3xi64> -> tensor<2x3xi1>
  // CHECK: cleave.compare le %{{.*}}, %{{.*}} : tensor<2x3xi64> -> tensor<2x3xi1>
  %3 = cleave.compare le %i, %i : tensor<2x3xi64> -> tensor<2x3xi1>
  // CHECK: cleave.compare gt %{{.*}}, %{{.*}} : tensor<2x3xui8> -> tensor<2x3xi1>
  %4 = cleave.compare gt %u, %u : tensor<2x3xui8> -> tensor<2x3xi1>
  // CHECK: cleave.compare ge %{{.*}}, %{{.*}} : tensor<2x3xi1> -> tensor<2x3xi1>
  %5 = cleave.compare ge %b, %b : tensor<2x3xi1> -> tensor<2x3xi1>
  return
}

// Select on integer values and on a 0-d tensor.
// CHECK-LABEL: func.func @select
func.func @select(%c: tensor<4xi1>, %a: tensor<4xi8>, %s: tensor<i1>, %v: tensor<f16>)
    -> (tensor<4xi8>, tensor<f16>) {
  // CHECK: cleave.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xi8>
  %0 = cleave.select %c, %a, %a : tensor<4xi1>, tensor<4xi8>
  // CHECK: cleave.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<i1>, tensor<f16>
  %1 = cleave.select %s, %v, %v : tensor<i1>, tensor<f16>
  return %0, %1 : tensor<4xi8>, tensor<f16>
}

// Conversions between float widths, float and integer, signed and unsigned.
// CHECK-LABEL: func.func @convert
func.func @convert(%x: tensor<4xf32>, %i: tensor<4xi64>, %u: tensor<4xui8>) {
  // CHECK: cleave.convert %{{.*}} : tensor<4xf32> -> tensor<4xbf16>
  %0 = cleave.convert %x : tensor<4xf32> -> tensor<4xbf16>
  // CHECK: cleave.convert %{{.*}} : tensor<4xf32> -> tensor<4xf64>
  %1 = cleave.convert %x : tensor<4xf32> -> tensor<4xf64>
  // CHECK: cleave.convert %{{.*}} : tensor<4xf32> -> tensor<4xf16>
  %2 = cleave.convert %x : tensor<4xf32> -> tensor<4xf16>
  // CHECK: cleave.convert %{{.*}} : tensor<4xf32> -> tensor<4xi32>
  %3 = cleave.convert %x : tensor<4xf32> -> tensor<4xi32>
  // CHECK: cleave.convert %{{.*}} : tensor<4xi64> -> tensor<4xi1>
  %4 = cleave.convert %i : tensor<4xi64> -> tensor<4xi1>
  // CHECK: cleave.convert %{{.*}} : tensor<4xui8> -> tensor<4xi8>
  %5 = cleave.convert %u : tensor<4xui8> -> tensor<4xi8>
  // CHECK: cleave.convert %{{.*}} : tensor<4xui8> -> tensor<4xf32>
  %6 = cleave.convert %u : tensor<4xui8> -> tensor<4xf32>
  // The narrow storage types (ONNX float8, float4, int4, int2).
  // CHECK: cleave.convert %{{.*}} : tensor<4xf32> -> tensor<4xf8E4M3FN>
  %7 = cleave.convert %x : tensor<4xf32> -> tensor<4xf8E4M3FN>
  // CHECK: cleave.convert %{{.*}} : tensor<4xf8E4M3FN> -> tensor<4xf4E2M1FN>
  %8 = cleave.convert %7 : tensor<4xf8E4M3FN> -> tensor<4xf4E2M1FN>
  // CHECK: cleave.convert %{{.*}} : tensor<4xi64> -> tensor<4xi4>
  %9 = cleave.convert %i : tensor<4xi64> -> tensor<4xi4>
  return
}

// Bit reinterpretation between types of one width; i1 counts as a byte.
// CHECK-LABEL: func.func @bitcast
func.func @bitcast(%x: tensor<4xf32>, %b: tensor<4xi1>, %h: tensor<4xbf16>) {
  // CHECK: cleave.bitcast %{{.*}} : tensor<4xf32> -> tensor<4xui32>
  %0 = cleave.bitcast %x : tensor<4xf32> -> tensor<4xui32>
  // CHECK: cleave.bitcast %{{.*}} : tensor<4xi1> -> tensor<4xui8>
  %1 = cleave.bitcast %b : tensor<4xi1> -> tensor<4xui8>
  // CHECK: cleave.bitcast %{{.*}} : tensor<4xbf16> -> tensor<4xf16>
  %2 = cleave.bitcast %h : tensor<4xbf16> -> tensor<4xf16>
  return
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// Broadcast of a size-1 dimension, of a scalar, and into new inner dimensions.
// CHECK-LABEL: func.func @broadcast_in_dim
func.func @broadcast_in_dim(%a: tensor<1x8xf32>, %s: tensor<i32>, %v: tensor<3xi1>) {
  // CHECK: cleave.broadcast_in_dim %{{.*}} dims = [0, 2] : tensor<1x8xf32> -> tensor<4x5x8xf32>
  %0 = cleave.broadcast_in_dim %a dims = [0, 2] : tensor<1x8xf32> -> tensor<4x5x8xf32>
  // CHECK: cleave.broadcast_in_dim %{{.*}} dims = [] : tensor<i32> -> tensor<2x2xi32>
  %1 = cleave.broadcast_in_dim %s dims = [] : tensor<i32> -> tensor<2x2xi32>
  // CHECK: cleave.broadcast_in_dim %{{.*}} dims = [0] : tensor<3xi1> -> tensor<3x2xi1>
  %2 = cleave.broadcast_in_dim %v dims = [0] : tensor<3xi1> -> tensor<3x2xi1>
  return
}

// Reshape to fewer dimensions, to a scalar and to more dimensions.
// CHECK-LABEL: func.func @reshape
func.func @reshape(%x: tensor<2x3xf32>, %y: tensor<1x1xi64>, %z: tensor<6xui8>) {
  // CHECK: cleave.reshape %{{.*}} : tensor<2x3xf32> -> tensor<6xf32>
  %0 = cleave.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  // CHECK: cleave.reshape %{{.*}} : tensor<1x1xi64> -> tensor<i64>
  %1 = cleave.reshape %y : tensor<1x1xi64> -> tensor<i64>
  // CHECK: cleave.reshape %{{.*}} : tensor<6xui8> -> tensor<1x3x2xui8>
  %2 = cleave.reshape %z : tensor<6xui8> -> tensor<1x3x2xui8>
  return
}

// Transposes of rank 2 and rank 3.
// CHECK-LABEL: func.func @transpose
func.func @transpose(%x: tensor<2x3xf32>, %y: tensor<2x3x4xbf16>) {
  // CHECK: cleave.transpose %{{.*}} perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %0 = cleave.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  // CHECK: cleave.transpose %{{.*}} perm = [2, 0, 1] : tensor<2x3x4xbf16> -> tensor<4x2x3xbf16>
  %1 = cleave.transpose %y perm = [2, 0, 1] : tensor<2x3x4xbf16> -> tensor<4x2x3xbf16>
  return
}

// Unit-stride and strided slices, with a result dimension rounded up.
// CHECK-LABEL: func.func @slice
func.func @slice(%x: tensor<2x4xf32>, %y: tensor<7xi32>) {
  // CHECK: cleave.slice %{{.*}} start = [0, 1] limit = [2, 3] strides = [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %0 = cleave.slice %x start = [0, 1] limit = [2, 3] strides = [1, 1]
      : tensor<2x4xf32> -> tensor<2x2xf32>
  // CHECK: cleave.slice %{{.*}} start = [1] limit = [7] strides = [4] : tensor<7xi32> -> tensor<2xi32>
  %1 = cleave.slice %y start = [1] limit = [7] strides = [4] : tensor<7xi32> -> tensor<2xi32>
  // CHECK: cleave.slice %{{.*}} start = [3] limit = [3] strides = [1] : tensor<7xi32> -> tensor<0xi32>
  %2 = cleave.slice %y start = [3] limit = [3] strides = [1] : tensor<7xi32> -> tensor<0xi32>
  return
}

// Reverse along one and along several dimensions.
// CHECK-LABEL: func.func @reverse
func.func @reverse(%x: tensor<4x2xf32>, %y: tensor<2x3x4xi8>) {
  // CHECK: cleave.reverse %{{.*}} dims = [0] : tensor<4x2xf32>
  %0 = cleave.reverse %x dims = [0] : tensor<4x2xf32>
  // CHECK: cleave.reverse %{{.*}} dims = [0, 2] : tensor<2x3x4xi8>
  %1 = cleave.reverse %y dims = [0, 2] : tensor<2x3x4xi8>
  return
}

// Concat of two and of three inputs along different dimensions.
// CHECK-LABEL: func.func @concat
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>, %c: tensor<2x1xi64>) {
  // CHECK: cleave.concat %{{.*}}, %{{.*}} dim = 0 : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
  %0 = cleave.concat %a, %b dim = 0 : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
  // CHECK: cleave.concat %{{.*}}, %{{.*}}, %{{.*}} dim = 1 : (tensor<2x1xi64>, tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x3xi64>
  %1 = cleave.concat %c, %c, %c dim = 1
      : (tensor<2x1xi64>, tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x3xi64>
  return
}

// Pad in each mode: constant (float and integer), reflect and edge.
// CHECK-LABEL: func.func @pad
func.func @pad(%x: tensor<2x3xf32>, %zero: tensor<f32>, %i: tensor<4xi32>, %izero: tensor<i32>) {
  // CHECK: cleave.pad %{{.*}}, %{{.*}} low = [0, 1] high = [0, 1] mode = constant : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x5xf32>
  %0 = cleave.pad %x, %zero low = [0, 1] high = [0, 1] mode = constant
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x5xf32>
  // CHECK: cleave.pad %{{.*}}, %{{.*}} low = [1, 2] high = [1, 0] mode = reflect : (tensor<2x3xf32>, tensor<f32>) -> tensor<4x5xf32>
  %1 = cleave.pad %x, %zero low = [1, 2] high = [1, 0] mode = reflect
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<4x5xf32>
  // CHECK: cleave.pad %{{.*}}, %{{.*}} low = [5, 3] high = [0, 7] mode = edge : (tensor<2x3xf32>, tensor<f32>) -> tensor<7x13xf32>
  %2 = cleave.pad %x, %zero low = [5, 3] high = [0, 7] mode = edge
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<7x13xf32>
  // CHECK: cleave.pad %{{.*}}, %{{.*}} low = [2] high = [3] mode = constant : (tensor<4xi32>, tensor<i32>) -> tensor<9xi32>
  %3 = cleave.pad %i, %izero low = [2] high = [3] mode = constant
      : (tensor<4xi32>, tensor<i32>) -> tensor<9xi32>
  return
}

// Gather of an embedding table with a 2-d index tensor, and along an inner axis.
// CHECK-LABEL: func.func @gather
func.func @gather(%table: tensor<100x16xf32>, %ids: tensor<2x8xi64>, %x: tensor<3x5xi8>,
                  %j: tensor<i32>) {
  // CHECK: cleave.gather %{{.*}}, %{{.*}} axis = 0 : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %0 = cleave.gather %table, %ids axis = 0
      : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  // CHECK: cleave.gather %{{.*}}, %{{.*}} axis = 1 : (tensor<3x5xi8>, tensor<i32>) -> tensor<3xi8>
  %1 = cleave.gather %x, %j axis = 1 : (tensor<3x5xi8>, tensor<i32>) -> tensor<3xi8>
  return
}

// GatherElements along the inner and the outer axis.
// CHECK-LABEL: func.func @gather_elements
func.func @gather_elements(%x: tensor<2x5xf32>, %idx: tensor<2x1xi64>, %idx0: tensor<4x5xi32>) {
  // CHECK: cleave.gather_elements %{{.*}}, %{{.*}} axis = 1 : (tensor<2x5xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
  %0 = cleave.gather_elements %x, %idx axis = 1
      : (tensor<2x5xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
  // CHECK: cleave.gather_elements %{{.*}}, %{{.*}} axis = 0 : (tensor<2x5xf32>, tensor<4x5xi32>) -> tensor<4x5xf32>
  %1 = cleave.gather_elements %x, %idx0 axis = 0
      : (tensor<2x5xf32>, tensor<4x5xi32>) -> tensor<4x5xf32>
  return
}

// Scatter with each combine kind, and with i32 indices into integers.
// CHECK-LABEL: func.func @scatter
func.func @scatter(%x: tensor<2x5xf32>, %idx: tensor<2x3xi64>, %u: tensor<2x3xf32>,
                   %y: tensor<4xi32>, %j: tensor<6xi32>, %v: tensor<6xi32>) {
  // CHECK: cleave.scatter none %{{.*}}, %{{.*}}, %{{.*}} axis = 1 : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  %0 = cleave.scatter none %x, %idx, %u axis = 1
      : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  // CHECK: cleave.scatter add
  %1 = cleave.scatter add %x, %idx, %u axis = 1
      : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  // CHECK: cleave.scatter mul
  %2 = cleave.scatter mul %x, %idx, %u axis = 1
      : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  // CHECK: cleave.scatter max
  %3 = cleave.scatter max %x, %idx, %u axis = 1
      : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  // CHECK: cleave.scatter min %{{.*}}, %{{.*}}, %{{.*}} axis = 0 : (tensor<4xi32>, tensor<6xi32>, tensor<6xi32>) -> tensor<4xi32>
  %4 = cleave.scatter min %y, %j, %v axis = 0
      : (tensor<4xi32>, tensor<6xi32>, tensor<6xi32>) -> tensor<4xi32>
  return
}

// TopK: largest sorted, and smallest along the outer dimension.
// CHECK-LABEL: func.func @top_k
func.func @top_k(%x: tensor<4x10xf32>) {
  // CHECK: cleave.top_k %{{.*}} k = 3 dim = 1 largest = true sorted = true : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
  %v, %i = cleave.top_k %x k = 3 dim = 1 largest = true sorted = true
      : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
  // CHECK: cleave.top_k %{{.*}} k = 2 dim = 0 largest = false sorted = false : tensor<4x10xf32> -> tensor<2x10xf32>, tensor<2x10xi64>
  %w, %j = cleave.top_k %x k = 2 dim = 0 largest = false sorted = false
      : tensor<4x10xf32> -> tensor<2x10xf32>, tensor<2x10xi64>
  return
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

// Batched matmul, a plain matmul without batch dimensions and an outer product.
// CHECK-LABEL: func.func @contract
func.func @contract(%a: tensor<4x8x16xf32>, %b: tensor<4x16x32xf32>,
                    %m: tensor<3x5xbf16>, %n: tensor<5x7xbf16>,
                    %u: tensor<3xi32>, %v: tensor<2xi32>) {
  // CHECK: cleave.contract %{{.*}}, %{{.*}} batch = [0] x [0] contract = [2] x [1] : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1]
      : tensor<4x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  // CHECK: cleave.contract %{{.*}}, %{{.*}} batch = [] x [] contract = [1] x [0] : tensor<3x5xbf16>, tensor<5x7xbf16> -> tensor<3x7xbf16>
  %1 = cleave.contract %m, %n batch = [] x [] contract = [1] x [0]
      : tensor<3x5xbf16>, tensor<5x7xbf16> -> tensor<3x7xbf16>
  // Mixed precision: bf16 operands, f32 accumulation and result.
  // CHECK: cleave.contract %{{.*}}, %{{.*}} batch = [] x [] contract = [1] x [0] : tensor<3x5xbf16>, tensor<5x7xbf16> -> tensor<3x7xf32>
  %mixed = cleave.contract %m, %n batch = [] x [] contract = [1] x [0]
      : tensor<3x5xbf16>, tensor<5x7xbf16> -> tensor<3x7xf32>
  // CHECK: cleave.contract %{{.*}}, %{{.*}} batch = [] x [] contract = [] x [] : tensor<3xi32>, tensor<2xi32> -> tensor<3x2xi32>
  %2 = cleave.contract %u, %v batch = [] x [] contract = [] x []
      : tensor<3xi32>, tensor<2xi32> -> tensor<3x2xi32>
  return
}

// Every reduction kind, over one, several and no dimensions.
// CHECK-LABEL: func.func @reduce
func.func @reduce(%x: tensor<4x8xf32>, %i: tensor<2x3x4xi64>) {
  // CHECK: cleave.reduce sum %{{.*}} dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %0 = cleave.reduce sum %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  // CHECK: cleave.reduce prod %{{.*}} dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %1 = cleave.reduce prod %x dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  // CHECK: cleave.reduce max %{{.*}} dims = [0, 2] : tensor<2x3x4xi64> -> tensor<3xi64>
  %2 = cleave.reduce max %i dims = [0, 2] : tensor<2x3x4xi64> -> tensor<3xi64>
  // CHECK: cleave.reduce min %{{.*}} dims = [] : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = cleave.reduce min %x dims = [] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// ArgMax and ArgMin, with and without `last` (select_last_index).
// CHECK-LABEL: func.func @arg_reduce
func.func @arg_reduce(%x: tensor<4x8xf32>, %u: tensor<5xui8>) {
  // CHECK: cleave.arg_reduce max %{{.*}} dim = 1 : tensor<4x8xf32> -> tensor<4xi64>
  %0 = cleave.arg_reduce max %x dim = 1 : tensor<4x8xf32> -> tensor<4xi64>
  // CHECK: cleave.arg_reduce min %{{.*}} dim = 0 last : tensor<4x8xf32> -> tensor<8xi64>
  %1 = cleave.arg_reduce min %x dim = 0 last : tensor<4x8xf32> -> tensor<8xi64>
  // CHECK: cleave.arg_reduce max %{{.*}} dim = 0 last : tensor<5xui8> -> tensor<i64>
  %2 = cleave.arg_reduce max %u dim = 0 last : tensor<5xui8> -> tensor<i64>
  return
}

// Cumsum with each combination of the `exclusive` and `reverse` flags.
// CHECK-LABEL: func.func @cumsum
func.func @cumsum(%x: tensor<5xf32>, %y: tensor<2x3xi32>) {
  // CHECK: cleave.cumsum %{{.*}} dim = 0 : tensor<5xf32>
  %0 = cleave.cumsum %x dim = 0 : tensor<5xf32>
  // CHECK: cleave.cumsum %{{.*}} dim = 0 exclusive : tensor<5xf32>
  %1 = cleave.cumsum %x dim = 0 exclusive : tensor<5xf32>
  // CHECK: cleave.cumsum %{{.*}} dim = 1 reverse : tensor<2x3xi32>
  %2 = cleave.cumsum %y dim = 1 reverse : tensor<2x3xi32>
  // CHECK: cleave.cumsum %{{.*}} dim = 0 exclusive reverse : tensor<5xf32>
  %3 = cleave.cumsum %x dim = 0 exclusive reverse : tensor<5xf32>
  return
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

// Softmax and log-softmax on f32, f16 and bf16.
// CHECK-LABEL: func.func @softmax
func.func @softmax(%x: tensor<4x8xf32>, %h: tensor<2x3xf16>, %b: tensor<6xbf16>) {
  // CHECK: cleave.softmax %{{.*}} dim = 1 : tensor<4x8xf32>
  %0 = cleave.softmax %x dim = 1 : tensor<4x8xf32>
  // CHECK: cleave.log_softmax %{{.*}} dim = 0 : tensor<4x8xf32>
  %1 = cleave.log_softmax %x dim = 0 : tensor<4x8xf32>
  // CHECK: cleave.softmax %{{.*}} dim = 1 : tensor<2x3xf16>
  %2 = cleave.softmax %h dim = 1 : tensor<2x3xf16>
  // CHECK: cleave.log_softmax %{{.*}} dim = 0 : tensor<6xbf16>
  %3 = cleave.log_softmax %b dim = 0 : tensor<6xbf16>
  return
}

// Ring attention's block forms: one key block with positions, the rows'
// log-sum-exp; the block's gradients given the whole rows' lse and out.
// CHECK-LABEL: func.func @attention_block
func.func @attention_block(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                           %qp: tensor<8xi64>, %kp: tensor<8xi64>) {
  // CHECK: %[[O:.*]], %[[L:.*]] = cleave.attention_block %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}}, %{{.*}} scale = 1.250000e-01 causal : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<8xi64>, tensor<8xi64>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
  %o, %lse = cleave.attention_block %q, %k, %k positions %qp, %kp scale = 0.125 causal
      : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<8xi64>, tensor<8xi64>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
  // CHECK: cleave.attention_block_grad %{{.*}}, %{{.*}}, %{{.*}} positions %{{.*}}, %{{.*}} lse %[[L]] out %[[O]] dout %[[O]] scale = 1.250000e-01 causal
  %g:3 = cleave.attention_block_grad %q, %k, %k positions %qp, %kp lse %lse out %o dout %o scale = 0.125 causal
      : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<8xi64>, tensor<8xi64>, tensor<1x4x8xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>)
  return
}

// The expert GEMMs: rows times their expert's weights (E x N x K read
// transposed, or E x K x N), int32 or int64 ids; the weights' gradient.
// CHECK-LABEL: func.func @grouped_matmul
func.func @grouped_matmul(%x: tensor<16x32xf32>, %w: tensor<4x64x32xf32>,
                          %wk: tensor<4x32x64xbf16>, %xb: tensor<16x32xbf16>,
                          %ids: tensor<16xi64>, %ids32: tensor<16xi32>) {
  // CHECK: cleave.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} transpose_w : (tensor<16x32xf32>, tensor<4x64x32xf32>, tensor<16xi64>) -> tensor<16x64xf32>
  %y = cleave.grouped_matmul %x, %w, %ids transpose_w
      : (tensor<16x32xf32>, tensor<4x64x32xf32>, tensor<16xi64>) -> tensor<16x64xf32>
  // CHECK: cleave.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x32xbf16>, tensor<4x32x64xbf16>, tensor<16xi32>) -> tensor<16x64xbf16>
  %yb = cleave.grouped_matmul %xb, %wk, %ids32
      : (tensor<16x32xbf16>, tensor<4x32x64xbf16>, tensor<16xi32>) -> tensor<16x64xbf16>
  // CHECK: cleave.grouped_matmul_weight_grad %{{.*}}, %{{.*}}, %{{.*}} transpose_w : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<16xi64>) -> tensor<4x64x32xf32>
  %dw = cleave.grouped_matmul_weight_grad %x, %y, %ids transpose_w
      : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<16xi64>) -> tensor<4x64x32xf32>
  return
}

// Attention: multi-head, grouped-query with a broadcast bias, a causal mask
// with an offset and a softcap, bf16 operands.
// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x8x16x4xf32>, %k: tensor<2x2x12x4xf32>,
                     %v: tensor<2x2x12x6xf32>, %m: tensor<2x1x1x12xf32>,
                     %qh: tensor<2x2x16x4xf32>, %qb: tensor<1x2x3x8xbf16>,
                     %d: tensor<1x2x3x8xf32>) {
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 5.000000e-01 : (tensor<2x2x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>) -> tensor<2x2x16x6xf32>
  %0 = cleave.attention %qh, %k, %v scale = 0.5
      : (tensor<2x2x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>) -> tensor<2x2x16x6xf32>
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} scale = 2.500000e-01 causal {causal_offset = -4 : i64, softcap = 3.000000e+01 : f64} : (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>, tensor<2x1x1x12xf32>) -> tensor<2x8x16x6xf32>
  %1 = cleave.attention %q, %k, %v bias %m scale = 0.25 causal {causal_offset = -4 : i64, softcap = 30.0 : f64}
      : (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>, tensor<2x1x1x12xf32>) -> tensor<2x8x16x6xf32>
  // CHECK: cleave.attention %{{.*}}, %{{.*}}, %{{.*}} scale = 1.250000e-01 causal : (tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>) -> tensor<1x2x3x8xbf16>
  %2 = cleave.attention %qb, %qb, %qb scale = 0.125 causal
      : (tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>) -> tensor<1x2x3x8xbf16>
  // CHECK: cleave.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} scale = 2.500000e-01 causal {causal_offset = -4 : i64, softcap = 3.000000e+01 : f64} : (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>, tensor<2x8x16x6xf32>, tensor<2x8x16x6xf32>, tensor<2x1x1x12xf32>) -> (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>)
  %g:3 = cleave.attention_grad %q, %k, %v, %1, %1 bias %m scale = 0.25 causal {causal_offset = -4 : i64, softcap = 30.0 : f64}
      : (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>, tensor<2x8x16x6xf32>, tensor<2x8x16x6xf32>, tensor<2x1x1x12xf32>) -> (tensor<2x8x16x4xf32>, tensor<2x2x12x4xf32>, tensor<2x2x12x6xf32>)
  // bf16 operands with f32 gradients.
  // CHECK: cleave.attention_grad {{.*}} : (tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>, tensor<1x2x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>)
  %h:3 = cleave.attention_grad %qb, %qb, %qb, %2, %d scale = 0.125 causal
      : (tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>, tensor<1x2x3x8xbf16>, tensor<1x2x3x8xf32>) -> (tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>)
  return
}

// Layer norm over the last dimension and over the last two (f64).
// CHECK-LABEL: func.func @layer_norm
func.func @layer_norm(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>,
                      %y: tensor<2x3x4xf64>, %g2: tensor<3x4xf64>) {
  // CHECK: cleave.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis = 1 epsilon = 1.000000e-05 : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: cleave.layer_norm %{{.*}}, %{{.*}}, %{{.*}} axis = 1 epsilon = 0.000000e+00 : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
  %1 = cleave.layer_norm %y, %g2, %g2 axis = 1 epsilon = 0.0
      : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
  return
}

// RMS norm over the last dimension and over the last two (bf16).
// CHECK-LABEL: func.func @rms_norm
func.func @rms_norm(%x: tensor<4x8xf32>, %g: tensor<8xf32>,
                    %y: tensor<2x3x4xbf16>, %g2: tensor<3x4xbf16>) {
  // CHECK: cleave.rms_norm %{{.*}}, %{{.*}} axis = 1 epsilon = 9.9999999999999995E-7 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %0 = cleave.rms_norm %x, %g axis = 1 epsilon = 1.0e-06
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: cleave.rms_norm %{{.*}}, %{{.*}} axis = 1 epsilon = 1.000000e-05 : (tensor<2x3x4xbf16>, tensor<3x4xbf16>) -> tensor<2x3x4xbf16>
  %1 = cleave.rms_norm %y, %g2 axis = 1 epsilon = 1.0e-05
      : (tensor<2x3x4xbf16>, tensor<3x4xbf16>) -> tensor<2x3x4xbf16>
  return
}

//===----------------------------------------------------------------------===//
// Convolution and windowed reduction
//===----------------------------------------------------------------------===//

// Same-padded 2-d conv, strided and dilated 1-d conv, grouped and depthwise 2-d conv.
// CHECK-LABEL: func.func @conv
func.func @conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>,
                %s: tensor<2x4x10xf16>, %sw: tensor<6x4x3xf16>,
                %g: tensor<1x4x5x5xf32>, %gw: tensor<6x2x3x3xf32>,
                %dw: tensor<1x4x5x5xf32>, %dww: tensor<4x1x3x3xf32>) {
  // CHECK: cleave.conv %{{.*}}, %{{.*}} strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 1 : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1]
      dilations = [1, 1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  // (10 + 1 + 0 - (2 * 2 + 1)) / 2 + 1 = 4
  // CHECK: cleave.conv %{{.*}}, %{{.*}} strides = [2] pad_low = [1] pad_high = [0] dilations = [2] groups = 1 : (tensor<2x4x10xf16>, tensor<6x4x3xf16>) -> tensor<2x6x4xf16>
  %1 = cleave.conv %s, %sw strides = [2] pad_low = [1] pad_high = [0]
      dilations = [2] groups = 1
      : (tensor<2x4x10xf16>, tensor<6x4x3xf16>) -> tensor<2x6x4xf16>
  // CHECK: cleave.conv %{{.*}}, %{{.*}} strides = [1, 1] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] groups = 2 : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
  %2 = cleave.conv %g, %gw strides = [1, 1] pad_low = [0, 0] pad_high = [0, 0]
      dilations = [1, 1] groups = 2
      : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
  // CHECK: cleave.conv %{{.*}}, %{{.*}} strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 4 : (tensor<1x4x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x5x5xf32>
  %3 = cleave.conv %dw, %dww strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1]
      dilations = [1, 1] groups = 4
      : (tensor<1x4x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x5x5xf32>
  return
}

// Max pooling, padded sum pooling and a dilated min window on integers.
// CHECK-LABEL: func.func @reduce_window
func.func @reduce_window(%x: tensor<1x3x8x8xf32>, %i: tensor<9xi32>) {
  // CHECK: cleave.reduce_window max %{{.*}} window = [1, 1, 2, 2] strides = [1, 1, 2, 2] pad_low = [0, 0, 0, 0] pad_high = [0, 0, 0, 0] dilations = [1, 1, 1, 1] : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  %0 = cleave.reduce_window max %x window = [1, 1, 2, 2] strides = [1, 1, 2, 2]
      pad_low = [0, 0, 0, 0] pad_high = [0, 0, 0, 0] dilations = [1, 1, 1, 1]
      : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  // CHECK: cleave.reduce_window sum %{{.*}} window = [1, 1, 3, 3] strides = [1, 1, 1, 1] pad_low = [0, 0, 1, 1] pad_high = [0, 0, 1, 1] dilations = [1, 1, 1, 1] : tensor<1x3x8x8xf32> -> tensor<1x3x8x8xf32>
  %1 = cleave.reduce_window sum %x window = [1, 1, 3, 3] strides = [1, 1, 1, 1]
      pad_low = [0, 0, 1, 1] pad_high = [0, 0, 1, 1] dilations = [1, 1, 1, 1]
      : tensor<1x3x8x8xf32> -> tensor<1x3x8x8xf32>
  // (9 - (2 * 2 + 1)) / 1 + 1 = 5
  // CHECK: cleave.reduce_window min %{{.*}} window = [3] strides = [1] pad_low = [0] pad_high = [0] dilations = [2] : tensor<9xi32> -> tensor<5xi32>
  %2 = cleave.reduce_window min %i window = [3] strides = [1] pad_low = [0]
      pad_high = [0] dilations = [2] : tensor<9xi32> -> tensor<5xi32>
  // CHECK: cleave.reduce_window prod %{{.*}} window = [2] strides = [3] pad_low = [0] pad_high = [0] dilations = [1] : tensor<9xi32> -> tensor<3xi32>
  %3 = cleave.reduce_window prod %i window = [2] strides = [3] pad_low = [0]
      pad_high = [0] dilations = [1] : tensor<9xi32> -> tensor<3xi32>
  return
}

// CHECK-LABEL: func.func @rotary
func.func @rotary(%x: tensor<2x4x16x8xf32>, %c: tensor<1x16x4xf32>, %c2: tensor<2x16x2xf32>) {
  // CHECK: cleave.rotary %{{.*}}, %{{.*}}, %{{.*}} interleaved : (tensor<2x4x16x8xf32>, tensor<1x16x4xf32>, tensor<1x16x4xf32>) -> tensor<2x4x16x8xf32>
  %0 = cleave.rotary %x, %c, %c interleaved
      : (tensor<2x4x16x8xf32>, tensor<1x16x4xf32>, tensor<1x16x4xf32>) -> tensor<2x4x16x8xf32>
  // CHECK: cleave.rotary %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x16x8xf32>, tensor<2x16x2xf32>, tensor<2x16x2xf32>) -> tensor<2x4x16x8xf32>
  %1 = cleave.rotary %x, %c2, %c2
      : (tensor<2x4x16x8xf32>, tensor<2x16x2xf32>, tensor<2x16x2xf32>) -> tensor<2x4x16x8xf32>
  return
}

