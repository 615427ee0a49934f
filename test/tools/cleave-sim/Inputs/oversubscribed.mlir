// A GEMM of 1e7 flops and an all-reduce of its 40000-byte product over the
// 2-rank axis r of a 2 x 2 mesh (oversubscribed.test).
module {
  cleave.mesh @mesh axes = ["g", "r"] shape = [2, 2]
  func.func @main(%w: tensor<100x500xf32> {cleave.name = "w"}, %x: tensor<500x100xf32> {cleave.name = "x"}) -> tensor<100x100xf32> {
    %y = cleave.contract %w, %x batch = [] x [] contract = [1] x [0] : tensor<100x500xf32>, tensor<500x100xf32> -> tensor<100x100xf32>
    %z = cleave.all_reduce sum %y over @mesh ["r"] : tensor<100x100xf32>
    return %z : tensor<100x100xf32>
  }
}
