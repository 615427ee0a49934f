// A two-layer MLP as a global forward program (explain-sharding.test).
func.func @main(%x: tensor<8x16xf32> {cleave.name = "x"},
                %w1: tensor<16x32xf32> {cleave.name = "w1"},
                %w2: tensor<32x16xf32> {cleave.name = "w2"}) -> (tensor<8x16xf32> {cleave.name = "y"}) {
  %0 = cleave.contract %x, %w1 batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %1 = cleave.unary tanh %0 : tensor<8x32xf32>
  %2 = cleave.contract %1, %w2 batch = [] x [] contract = [1] x [0] : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
