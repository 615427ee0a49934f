// RUN: cleave-opt %s --cleave-shard-program="mesh=dp=2" | FileCheck %s --check-prefix=DP
// RUN: cleave-opt %s --cleave-shard-program="mesh=dp=2,tp=2 shard={w=[{},{\"tp\"}]}" | FileCheck %s --check-prefix=TP
// RUN: not cleave-opt %s --cleave-shard-program="mesh=dp=0" 2>&1 | FileCheck %s --check-prefix=BADMESH
// RUN: not cleave-opt %s --cleave-shard-program="mesh=tp=2 zero=1" 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not cleave-opt %s --cleave-shard-program="mesh=tp=2 shard={w}" 2>&1 | FileCheck %s --check-prefix=BADRULE
// RUN: not cleave-opt %s --cleave-shard-program="mesh=dp=2 zero=4294967297" 2>&1 | FileCheck %s --check-prefix=BIGZERO
// RUN: cleave-opt %s --cleave-shard-program="mesh=dp=2 overlap=true bucket-mb=0.123456789" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXACT

// A training step partitioned over dp: the batch split, the loss and the
// gradient all-reduced, the parameter whole.
// DP: cleave.mesh @mesh axes = ["dp"] shape = [2]
// DP: %arg1: tensor<4x4xf32> {{{.*}}cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}
// DP: cleave.all_reduce sum %{{.*}} over @mesh ["dp"]
// DP: %[[G:.*]] = cleave.contract {{.*}}cleave.gradient_of = "w"
// DP: cleave.all_reduce sum %[[G]] over @mesh ["dp"]

// A --shard rule splits w by columns over tp: each rank holds 4x2.
// TP: cleave.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]
// TP: %arg0: tensor<4x2xf32> {{{.*}}cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>
// TP: cleave.all_reduce sum %{{.*}} over @mesh ["dp", "tp"]

// BADMESH: error: bad --mesh entry 'dp=0'
// NODP: error: --zero=1 splits over the dp axis, which --mesh does not have
// BIGZERO: error: --zero must be 0, 1, 2 or 3
// BADRULE: error: --shard: bad sharding rule 'w'

// bucket-mb prints as the shortest text that reads back as the same double
// (six significant digits would print 1.234568e-01), so a printed pipeline
// runs with the bucket it was given.
// EXACT: cleave-shard-program{bucket-mb=0.123456789 {{.*}}overlap=true

func.func @main(%w: tensor<4x4xf32> {cleave.name = "w", cleave.parameter = "w", cleave.state = #cleave.state<parameter>},
                %x: tensor<8x4xf32> {cleave.name = "x", cleave.role = #cleave.role<data>})
    -> (tensor<4x4xf32> {cleave.name = "w", cleave.updates = 0 : i64}, tensor<f32> {cleave.name = "loss", cleave.role = #cleave.role<loss>}) {
  %y = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  %l = cleave.reduce sum %y dims = [0, 1] : tensor<8x4xf32> -> tensor<f32>
  %g = cleave.contract %x, %y batch = [] x [] contract = [0] x [0] {cleave.gradient_of = "w"} : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  %n = cleave.binary sub %w, %g : tensor<4x4xf32>
  return %n, %l : tensor<4x4xf32>, tensor<f32>
}
