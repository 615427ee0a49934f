// RUN: cleave-opt --cleave-propagate-sharding --cleave-partition="ring-axes=cp" %s -verify-diagnostics

// Ring attention refuses a bias: its key columns would have to follow the
// rotating key blocks.

cleave.mesh @mesh axes = ["cp"] shape = [2]

func.func @bias(
    %q: tensor<1x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>},
    %m: tensor<1x1x8x8xf32>)
    -> (tensor<1x2x8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"cp"}, {}]>}) {
  // expected-error @+1 {{cannot run as a ring over mesh axes ["cp"]: ring attention takes no additive bias}}
  %0 = cleave.attention %q, %q, %q bias %m scale = 0.5 : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  return %0 : tensor<1x2x8x8xf32>
}
