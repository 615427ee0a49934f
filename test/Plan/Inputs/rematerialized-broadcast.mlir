// One scalar broadcast to two shapes, read by kernels on either side of a
// GEMM (rematerialized-broadcast.test).
func.func @main(%s: tensor<f32> {cleave.name = "s"}, %a: tensor<8x16xf32> {cleave.name = "a"}, %w: tensor<16x4xf32> {cleave.name = "w"}) -> (tensor<8x16xf32> {cleave.name = "x"}, tensor<8x4xf32> {cleave.name = "y"}) {
  %e = cleave.unary exp %s : tensor<f32>
  %bx = cleave.broadcast_in_dim %e dims = [] : tensor<f32> -> tensor<8x16xf32>
  %x = cleave.binary mul %a, %bx : tensor<8x16xf32>
  %g = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %by = cleave.broadcast_in_dim %e dims = [] : tensor<f32> -> tensor<8x4xf32>
  %y = cleave.binary mul %g, %by : tensor<8x4xf32>
  return %x, %y : tensor<8x16xf32>, tensor<8x4xf32>
}
