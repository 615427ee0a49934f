// RUN: cleave-opt %s --split-input-file --cleave-expert-capacity --verify-diagnostics

// The routed rows must split into the batch rows (dimension 0 of @main's
// first input), which are the groups sharing each expert's capacity.
func.func @main(%x: tensor<3x10xf32>, %rows: tensor<10x32xf32>, %w: tensor<4x32x64xf32>, %ids: tensor<10xi64>) -> tensor<10x64xf32> {
  // expected-error @+1 {{--moe-capacity-factor: the 10 routed rows do not split into the batch's 3 rows}}
  %y = cleave.grouped_matmul %rows, %w, %ids : (tensor<10x32xf32>, tensor<4x32x64xf32>, tensor<10xi64>) -> tensor<10x64xf32>
  return %y : tensor<10x64xf32>
}

// -----

// expected-error @+1 {{--moe-capacity-factor: the program has no grouped expert GEMMs}}
module {
  func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}
