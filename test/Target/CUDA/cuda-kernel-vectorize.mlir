// REQUIRES: ptxas
// RUN: cleave-opt --cleave-cuda-kernel-pipeline="format=isa" %s | FileCheck %s

// Elementwise launches move 16 bytes per thread and operand where the layout
// allows (see cleave-cuda-parallel-to-launch): LLVM's load/store vectorizer
// merges the interleaved copies into ld/st.global.v4. The PTX is one
// escaped string, so every check is on the same line.

// CHECK: gpu.binary @cleave_kernels
// f32 with a broadcast row: 4 x f32.
// CHECK-SAME: .entry add_f32_kernel(
// CHECK-NOT: .entry
// CHECK-SAME: ld.global.v4.b32
// CHECK-NOT: .entry
// CHECK-SAME: ld.global.v4.b32
// CHECK-NOT: .entry
// CHECK-SAME: st.global.v4.b32
// bf16: 8 x bf16 in 16 bytes.
// CHECK-SAME: .entry mul_bf16_kernel(
// CHECK-NOT: .entry
// CHECK-SAME: ld.global.v4.b32
// CHECK-NOT: .entry
// CHECK-SAME: ld.global.v4.b32
// CHECK-NOT: .entry
// CHECK-SAME: st.global.v4.b32
// bf16 -> f32: 4 elements per thread, 8 bytes in, 16 out.
// CHECK-SAME: .entry widen_kernel(
// CHECK-NOT: .entry
// CHECK-SAME: ld.global.v4.b16
// CHECK-NOT: .entry
// CHECK-SAME: st.global.v4.b32
// A slice whose offset and row stride are multiples of 16 bytes.
// CHECK-SAME: .entry aligned_slice_kernel(
// CHECK-NOT: .entry
// CHECK-SAME: ld.global.v4.b32
// CHECK-NOT: .entry
// CHECK-SAME: st.global.v4.b32
// Scalar: innermost extent not a multiple of 4, transposed read, slice
// offset of 4 bytes.
// CHECK-SAME: .entry odd_kernel(
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: ld.global.b32
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: st.global.b32
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: .entry transpose_kernel(
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: ld.global.b32
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: st.global.b32
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: .entry shifted_kernel(
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: ld.global.b32
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: st.global.b32
// CHECK-NOT: .v4.
// CHECK-NOT: .v2.
// CHECK-SAME: ret;

func.func @add_f32(%x: tensor<64x1000xf32>, %b: tensor<1000xf32>) -> tensor<64x1000xf32> {
  %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<1000xf32> -> tensor<64x1000xf32>
  %s = cleave.binary add %x, %bb : tensor<64x1000xf32>
  return %s : tensor<64x1000xf32>
}

func.func @mul_bf16(%x: tensor<64x256xbf16>, %y: tensor<64x256xbf16>) -> tensor<64x256xbf16> {
  %s = cleave.binary mul %x, %y : tensor<64x256xbf16>
  return %s : tensor<64x256xbf16>
}

func.func @widen(%x: tensor<64x256xbf16>) -> tensor<64x256xf32> {
  %s = cleave.convert %x : tensor<64x256xbf16> -> tensor<64x256xf32>
  return %s : tensor<64x256xf32>
}

func.func @aligned_slice(%x: tensor<64x132xf32>) -> tensor<64x128xf32> {
  %t = cleave.slice %x start = [0, 4] limit = [64, 132] strides = [1, 1]
      : tensor<64x132xf32> -> tensor<64x128xf32>
  %e = cleave.unary exp %t : tensor<64x128xf32>
  return %e : tensor<64x128xf32>
}

func.func @odd(%x: tensor<64x1001xf32>) -> tensor<64x1001xf32> {
  %s = cleave.unary exp %x : tensor<64x1001xf32>
  return %s : tensor<64x1001xf32>
}

func.func @transpose(%x: tensor<64x128xf32>) -> tensor<128x64xf32> {
  %t = cleave.transpose %x perm = [1, 0] : tensor<64x128xf32> -> tensor<128x64xf32>
  return %t : tensor<128x64xf32>
}

func.func @shifted(%x: tensor<64x129xf32>) -> tensor<64x128xf32> {
  %t = cleave.slice %x start = [0, 1] limit = [64, 129] strides = [1, 1]
      : tensor<64x129xf32> -> tensor<64x128xf32>
  %e = cleave.unary exp %t : tensor<64x128xf32>
  return %e : tensor<64x128xf32>
}
