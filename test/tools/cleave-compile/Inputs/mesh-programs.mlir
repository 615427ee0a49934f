// Programs in the cleave dialect for mlir-input.test, one per split.
cleave.mesh @mesh axes = ["dp"] shape = [2]
func.func @main(%x: tensor<4xf32> {cleave.name = "x", cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>}) -> (tensor<4xf32> {cleave.name = "y"}) {
  %0 = cleave.all_reduce sum %x over @mesh ["dp"] : tensor<4xf32>
  return %0 : tensor<4xf32>
}
// -----
func.func @not_main(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// -----
cleave.mesh @a axes = ["dp"] shape = [2]
cleave.mesh @b axes = ["tp"] shape = [2]
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = cleave.all_reduce sum %x over @a ["dp"] : tensor<4xf32>
  return %0 : tensor<4xf32>
}
// -----
cleave.mesh @mesh axes = ["dp"] shape = [2]
func.func @main(%x: tensor<4xf32> {cleave.name = "x", cleave.sharding = #cleave.sharding<@mesh, [{"tp"}]>}) -> tensor<4xf32> {
  %0 = cleave.all_reduce sum %x over @mesh ["dp"] : tensor<4xf32>
  return %0 : tensor<4xf32>
}
// -----
func.func @main(%x: tensor<4xf32> {cleave.name = "x", cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// -----
cleave.mesh @mesh axes = ["dp"] shape = [4]
func.func @main(%x: tensor<6xf32>) -> tensor<2xf32> {
  %0 = cleave.reduce_scatter sum %x over @mesh ["dp"] dim = 0 : tensor<6xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
// -----
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = cleave.unary exp %x : tensor<4xf32>
  return %0 tensor<4xf32>
}
// -----
func.func @main(%x: i32) -> i32 {
  return %x : i32
}
// -----
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
// -----
cleave.mesh @m axes = ["dp"] shape = [2]
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = cleave.convert %x : tensor<4xf32> -> tensor<4xf8E4M3FN>
  %1 = cleave.all_reduce max %0 over @m ["dp"] : tensor<4xf8E4M3FN>
  %2 = cleave.convert %1 : tensor<4xf8E4M3FN> -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
// -----
cleave.mesh @mesh axes = ["dp"] shape = [2]
func.func @main(%x: tensor<4xf32> {cleave.name = "x", cleave.sharding = [["dp"]]}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// -----
cleave.mesh @mesh axes = ["dp"] shape = [2]
func.func @main(%x: tensor<4x4xf32> {cleave.name = "x", cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"dp"}]>}) -> tensor<4x4xf32> {
  return %x : tensor<4x4xf32>
}
// -----
func.func @main(%w: tensor<4xf32> {cleave.name = "w", cleave.state = #cleave.state<parameter>, cleave.parameter = "w", cleave.initial_value = dense<1.0> : tensor<4xf32>}) -> (tensor<4xf32> {cleave.name = "w", cleave.updates = 7 : i64}) {
  return %w : tensor<4xf32>
}
