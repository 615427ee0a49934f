// %p (f16) is widened for two kernels that a GEMM separates: each kernel
// widens it as it reads (rematerialized-convert.test). %bias (f16) is broadcast and then widened: the
// broadcast is rebuilt inside the kernel, and the conversion with it.
func.func @main(%p: tensor<8x16xf16> {cleave.name = "p"},
                %w: tensor<16x4xf32> {cleave.name = "w"},
                %bias: tensor<16xf16> {cleave.name = "bias"})
    -> (tensor<8x16xf32> {cleave.name = "x"}, tensor<8x4xf32> {cleave.name = "y"},
        tensor<8x16xf32> {cleave.name = "z"}) {
  %pw = cleave.convert %p : tensor<8x16xf16> -> tensor<8x16xf32>
  %x = cleave.unary exp %pw : tensor<8x16xf32>
  %m = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %s = cleave.slice %pw start = [0, 0] limit = [8, 4] strides = [1, 1] : tensor<8x16xf32> -> tensor<8x4xf32>
  %y = cleave.binary mul %m, %s : tensor<8x4xf32>
  %b = cleave.broadcast_in_dim %bias dims = [1] : tensor<16xf16> -> tensor<8x16xf16>
  %bw = cleave.convert %b : tensor<8x16xf16> -> tensor<8x16xf32>
  %z = cleave.binary add %bw, %x : tensor<8x16xf32>
  return %x, %y, %z : tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x16xf32>
}
