// Two pipeline ranks: each computes a GEMM of 2 * 512^3 flops, rank 0
// sends its result (1 MiB) to rank 1, which waits for it (sendrecv.test).
module {
  cleave.mesh @mesh axes = ["pp"] shape = [2]
  func.func @main(%x: tensor<512x512xf32> {cleave.name = "x"},
                  %w: tensor<512x512xf32> {cleave.name = "w"})
      -> tensor<512x512xf32> {
    %y = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
    cleave.send %y over @mesh ["pp"] from = 0 to = 1 : tensor<512x512xf32>
    %r = cleave.recv over @mesh ["pp"] from = 0 to = 1 : tensor<512x512xf32>
    return %r : tensor<512x512xf32>
  }
}
