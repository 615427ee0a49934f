// Two messages from rank 0 to rank 1 whose tags (MSG_A, MSG_B) the test
// sets in or out of the order rank 1 receives them (message-order.test).
module {
  cleave.mesh @mesh axes = ["pp"] shape = [2]
  func.func @main(%x: tensor<4xf32> {cleave.name = "x"}) -> (tensor<4xf32> {cleave.name = "y"}) {
    %two = cleave.constant dense<2.0> : tensor<4xf32>
    %b = cleave.binary mul %x, %two : tensor<4xf32>
    cleave.send %x over @mesh ["pp"] from = 0 to = 1 {cleave.message = MSG_A : i64} : tensor<4xf32>
    cleave.send %b over @mesh ["pp"] from = 0 to = 1 {cleave.message = MSG_B : i64} : tensor<4xf32>
    %r1 = cleave.recv over @mesh ["pp"] from = 0 to = 1 {cleave.message = 1 : i64} : tensor<4xf32>
    %r2 = cleave.recv over @mesh ["pp"] from = 0 to = 1 {cleave.message = 2 : i64} : tensor<4xf32>
    %y = cleave.binary add %r1, %r2 : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
