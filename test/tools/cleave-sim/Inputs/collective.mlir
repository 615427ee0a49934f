// One collective (OP, with operand and result types IN and OUT) over the
// 4 ranks of mesh r; collectives.test substitutes them.
module {
  cleave.mesh @mesh axes = ["r"] shape = [4]
  func.func @main(%x: IN {cleave.name = "x"}) -> OUT {
    %y = OP
    return %y : OUT
  }
}
