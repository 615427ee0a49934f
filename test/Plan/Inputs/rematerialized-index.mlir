// A one-hot of %labels read by two kernels a GEMM separates: each kernel
// rebuilds it from the iota and the labels (rematerialized-index.test).
// %e is computed in bf16 and widened only for the softmax of its own
// kernel: the kernel writes the softmax, not %e.
func.func @main(%x: tensor<8x16xf32> {cleave.name = "x"},
                %labels: tensor<8xi64> {cleave.name = "labels"},
                %w: tensor<16x16xf32> {cleave.name = "w"},
                %h: tensor<8x16xbf16> {cleave.name = "h"})
    -> (tensor<8x16xf32> {cleave.name = "a"}, tensor<8x16xf32> {cleave.name = "b"},
        tensor<8x16xf32> {cleave.name = "s"}) {
  %iota = cleave.iota dim = 1 : tensor<8x16xi64>
  %lb = cleave.broadcast_in_dim %labels dims = [0] : tensor<8xi64> -> tensor<8x16xi64>
  %onehot = cleave.compare eq %iota, %lb : tensor<8x16xi64> -> tensor<8x16xi1>
  %zero = cleave.constant dense<0.0> : tensor<8x16xf32>
  %xe = cleave.unary exp %x : tensor<8x16xf32>
  %a = cleave.select %onehot, %xe, %zero : tensor<8x16xi1>, tensor<8x16xf32>
  %g = cleave.contract %a, %w batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %gt = cleave.unary tanh %g : tensor<8x16xf32>
  %b = cleave.select %onehot, %gt, %zero : tensor<8x16xi1>, tensor<8x16xf32>
  %e = cleave.unary exp %h : tensor<8x16xbf16>
  %ew = cleave.convert %e : tensor<8x16xbf16> -> tensor<8x16xf32>
  %s = cleave.softmax %ew dim = 1 : tensor<8x16xf32>
  return %a, %b, %s : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}
