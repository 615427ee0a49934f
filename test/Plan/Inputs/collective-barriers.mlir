// Collectives are barriers for fusion and the GEMM epilogue matcher (test/Plan/collectives.test).
cleave.mesh @mesh axes = ["tp"] shape = [2]
func.func @main(%x: tensor<4x8xf32> {cleave.name = "x"}, %w: tensor<8x8xf32> {cleave.name = "w"}, %bias: tensor<8xf32> {cleave.name = "bias"}) -> (tensor<4x8xf32> {cleave.name = "y"}, tensor<4x8xf32> {cleave.name = "z"}) {
  %c = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = cleave.all_reduce sum %c over @mesh ["tp"] : tensor<4x8xf32>
  %bb = cleave.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %y = cleave.binary add %r, %bb : tensor<4x8xf32>
  %e = cleave.unary exp %x : tensor<4x8xf32>
  %s = cleave.all_reduce sum %e over @mesh ["tp"] : tensor<4x8xf32>
  %z = cleave.unary tanh %s : tensor<4x8xf32>
  return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}
