func.func @main(%x: tensor<64x256xf32>, %b: tensor<256xf32>) -> (tensor<64x256xf32>, tensor<256xf32>) {
  %bb = cleave.broadcast_in_dim %b dims = [1] : tensor<256xf32> -> tensor<64x256xf32>
  %s = cleave.binary add %x, %bb : tensor<64x256xf32>
  %g = cleave.unary tanh %s : tensor<64x256xf32>
  %m = cleave.softmax %g dim = 1 : tensor<64x256xf32>
  %c = cleave.reduce sum %x dims = [0] : tensor<64x256xf32> -> tensor<256xf32>
  return %m, %c : tensor<64x256xf32>, tensor<256xf32>
}
