// Two state updates, each a copy of the new value over its state: 64 KiB
// (inside a 1 MiB cache, read and written) and 4 MiB (kernels.test).
func.func @main(%s: tensor<16384xf32> {cleave.name = "s", cleave.state},
                %t: tensor<1048576xf32> {cleave.name = "t", cleave.state})
    -> (tensor<16384xf32> {cleave.updates = 0 : i64},
        tensor<1048576xf32> {cleave.updates = 1 : i64}) {
  %y = cleave.binary mul %s, %s : tensor<16384xf32>
  %z = cleave.binary mul %t, %t : tensor<1048576xf32>
  return %y, %z : tensor<16384xf32>, tensor<1048576xf32>
}
