// A causal attention of 128 queries and 256 keys (kernels.test).
func.func @main(%q: tensor<1x1x128x64xf32> {cleave.name = "q"}, %k: tensor<1x1x256x64xf32> {cleave.name = "k"}, %v: tensor<1x1x256x64xf32> {cleave.name = "v"}) -> tensor<1x1x128x64xf32> {
  %y = cleave.attention %q, %k, %v scale = 1.250000e-01 causal : (tensor<1x1x128x64xf32>, tensor<1x1x256x64xf32>, tensor<1x1x256x64xf32>) -> tensor<1x1x128x64xf32>
  return %y : tensor<1x1x128x64xf32>
}
