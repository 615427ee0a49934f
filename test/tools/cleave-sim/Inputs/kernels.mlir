// One kernel per op, each costing what one term of the CPU kernel model
// gives (kernels.test).
func.func @main(%r: tensor<64x1024xf32> {cleave.name = "r"},
                %c: tensor<1024x64xf32> {cleave.name = "c"},
                %t: tensor<256x512xf32> {cleave.name = "t"},
                %e: tensor<65536xf32> {cleave.name = "e"},
                %a: tensor<1048576xf32> {cleave.name = "a"},
                %b: tensor<1048576xf32> {cleave.name = "b"},
                %h: tensor<4x32x2x32xf32> {cleave.name = "h"},
                %n: tensor<64x64x8xf32> {cleave.name = "n"})
    -> (tensor<64xf32>, tensor<64xf32>, tensor<512x256xf32>, tensor<65536xf32>,
        tensor<1048576xf32>, tensor<4x2x32x32xf32>, tensor<64x64x8xf32>) {
  %rows = cleave.reduce sum %r dims = [1] : tensor<64x1024xf32> -> tensor<64xf32>
  %cols = cleave.reduce sum %c dims = [0] : tensor<1024x64xf32> -> tensor<64xf32>
  %tt = cleave.transpose %t perm = [1, 0] : tensor<256x512xf32> -> tensor<512x256xf32>
  %ee = cleave.unary exp %e : tensor<65536xf32>
  %ab = cleave.binary mul %a, %b : tensor<1048576xf32>
  %hh = cleave.transpose %h perm = [0, 2, 1, 3] : tensor<4x32x2x32xf32> -> tensor<4x2x32x32xf32>
  %nn = cleave.transpose %n perm = [1, 0, 2] : tensor<64x64x8xf32> -> tensor<64x64x8xf32>
  return %rows, %cols, %tt, %ee, %ab, %hh, %nn : tensor<64xf32>, tensor<64xf32>, tensor<512x256xf32>, tensor<65536xf32>, tensor<1048576xf32>, tensor<4x2x32x32xf32>, tensor<64x64x8xf32>
}
