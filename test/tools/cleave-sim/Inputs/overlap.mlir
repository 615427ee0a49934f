// An asynchronous all-reduce of g (G elements) started before a GEMM of
// 2 * 1024^3 flops and waited for after it (overlap.test).
module {
  cleave.mesh @mesh axes = ["r"] shape = [2]
  func.func @main(%x: tensor<1024x1024xf32> {cleave.name = "x"},
                  %w: tensor<1024x1024xf32> {cleave.name = "w"},
                  %g: tensor<Gxf32> {cleave.name = "g"})
      -> (tensor<1024x1024xf32>, tensor<Gxf32>) {
    %h = cleave.all_reduce sum %g over @mesh ["r"] async : tensor<Gxf32>
    %y = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<1024x1024xf32>
    %r = cleave.done %h : tensor<Gxf32>
    return %y, %r : tensor<1024x1024xf32>, tensor<Gxf32>
  }
}
