// RUN: cleave-opt --cleave-propagate-sharding --cleave-partition %s | FileCheck %s

// SPMD partitioning: local shapes and the collectives the shardings imply.
// Every collective says why it exists in cleave.phase.

cleave.mesh @mesh axes = ["dp", "tp"] shape = [2, 2]

// Megatron's MLP: the column-split first layer needs nothing; the row-split
// second layer leaves partial sums, completed by one all-reduce over tp.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %arg0: tensor<4x16xf32>
// CHECK-SAME: %arg1: tensor<16x16xf32>
// CHECK-SAME: %arg2: tensor<16x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-NOT: cleave.all_
// CHECK: cleave.unary tanh
// CHECK-NOT: cleave.all_
// CHECK: %[[Y:.*]] = cleave.contract {{.*}} -> tensor<4x16xf32>
// CHECK-NEXT: %[[S:.*]] = cleave.all_reduce sum %[[Y]] over @mesh ["tp"] {cleave.phase = "all_reduce [\22tp\22]: partial results of cleave.contract (its reduction is split)"} : tensor<4x16xf32>
// CHECK-NEXT: return %[[S]]
func.func @mlp(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>},
               %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %0 = cleave.contract %x, %w1 batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %1 = cleave.unary tanh %0 : tensor<8x32xf32>
  %2 = cleave.contract %1, %w2 batch = [] x [] contract = [1] x [0] : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// Resharding: a replicated operand is sliced locally where a split op reads
// it (no traffic), a splat constant is built at the local shape, a split
// max-reduction is completed with an all-reduce of max, and a result
// returned in another layout is gathered.
// CHECK-LABEL: func.func @reshard(
// CHECK-SAME: -> (tensor<8x4xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}, tensor<4xf32>
// CHECK: cleave.constant dense<2.000000e+00> : tensor<4x4xf32>
// CHECK: cleave.all_slice %arg0 over @mesh ["tp"] dim = 1
// CHECK: cleave.all_slice %arg1 over @mesh ["dp"] dim = 0
// CHECK: cleave.all_slice {{.*}} over @mesh ["tp"] dim = 1
// CHECK: cleave.reduce max {{.*}} : tensor<4x4xf32> -> tensor<4xf32>
// CHECK-NEXT: cleave.all_reduce max {{.*}} over @mesh ["dp"]
// CHECK-NEXT: cleave.all_gather {{.*}} over @mesh ["dp"] dim = 0
func.func @reshard(%a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
                   %r: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}, tensor<8xf32>) {
  %c = cleave.constant dense<2.0> : tensor<8x8xf32>
  %0 = cleave.binary mul %a, %r : tensor<8x8xf32>
  %1 = cleave.binary add %0, %c : tensor<8x8xf32>
  %2 = cleave.reduce max %1 dims = [0] : tensor<8x8xf32> -> tensor<8xf32>
  return %1, %2 : tensor<8x8xf32>, tensor<8xf32>
}

// An axis that only moves between dimensions is one all_to_all (split along
// the dimension that gains it, concatenated along the one that loses it),
// not a gather and a slice: each rank sends (n-1)/n of its local value
// instead of a whole gathered one. Where the target puts another axis
// before the moved one, it gathers and slices.
// CHECK-LABEL: func.func @move(
// CHECK: %[[M:.*]] = cleave.all_to_all %arg0 over @mesh ["tp"] split = 1 concat = 0 {cleave.phase = "all_to_all [\22tp\22] from dimension 0 to 1: {{.*}}"} : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NOT: cleave.all_gather
// CHECK: return %[[M]]
func.func @move(%a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>})
    -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>}) {
  return %a : tensor<8x8xf32>
}
// CHECK-LABEL: func.func @move_two_axes(
// CHECK: cleave.all_to_all %arg0 over @mesh ["dp", "tp"] split = 2 concat = 1 {{.*}} : tensor<2x2x16xf32> -> tensor<2x8x4xf32>
func.func @move_two_axes(%a: tensor<2x8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"dp", "tp"}, {}]>})
    -> (tensor<2x8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}, {"dp", "tp"}]>}) {
  return %a : tensor<2x8x16xf32>
}
// CHECK-LABEL: func.func @move_then_slice(
// CHECK: cleave.all_to_all %arg0 over @mesh ["tp"] split = 1 concat = 0
// CHECK-NEXT: cleave.all_slice {{.*}} over @mesh ["dp"] dim = 1
func.func @move_then_slice(%a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>})
    -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp", "dp"}]>}) {
  return %a : tensor<8x8xf32>
}
// CHECK-LABEL: func.func @move_behind_another(
// CHECK: cleave.all_gather %arg0 over @mesh ["tp"] dim = 0
// CHECK-NEXT: cleave.all_slice {{.*}} over @mesh ["dp", "tp"] dim = 1
func.func @move_behind_another(%a: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>})
    -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"dp", "tp"}]>}) {
  return %a : tensor<8x8xf32>
}

// A table split over tp along the gathered axis: indices become local rows
// (negative ones counted from the end of the whole table, rows other ranks
// hold mapped out of range, which reads zero) and the partial embeddings are
// summed.
// CHECK-LABEL: func.func @embedding(
// CHECK: %[[STARTS:.*]] = cleave.constant dense<[0, 48]> : tensor<2xi64>
// CHECK: cleave.all_slice %[[STARTS]] over @mesh ["tp"] dim = 0
// CHECK: cleave.compare lt %arg0
// CHECK: cleave.binary sub
// CHECK: cleave.select
// CHECK: %[[G:.*]] = cleave.gather %arg1, {{.*}} : (tensor<48x32xf32>, tensor<2x8xi64>) -> tensor<2x8x32xf32>
// CHECK-NEXT: cleave.all_reduce sum %[[G]] over @mesh ["tp"]
func.func @embedding(%ids: tensor<4x8xi64> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>},
                     %table: tensor<96x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>})
    -> tensor<4x8x32xf32> {
  %h = cleave.gather %table, %ids axis = 0 : (tensor<96x32xf32>, tensor<4x8xi64>) -> tensor<4x8x32xf32>
  return %h : tensor<4x8x32xf32>
}

// An embedding's gradient under sequence parallelism: the tokens' gradients
// come split over dp and tp, the table's gradient goes split over tp along
// the vocabulary. Each rank scattering its tokens into the whole table
// would leave the table partial over dp and tp (an all-reduce of the table
// over both); the tokens are instead gathered over tp (sequence x hidden,
// less than the table), and the table is partial over dp only: each rank
// slices its part of the table before the all-reduce over dp.
// CHECK-LABEL: func.func @embedding_gradient_sp(
// CHECK-DAG: %[[I:.*]] = cleave.all_gather %arg0 over @mesh ["tp"] dim = 1 {{.*}}sharding_conflicts = ["layout: reductions gathered, {{[0-9]+}} bytes; results first rejected{{.*}} : tensor<1x4x32xi64> -> tensor<1x8x32xi64>
// CHECK-DAG: %[[U:.*]] = cleave.all_gather %arg1 over @mesh ["tp"] dim = 1 {{.*}} : tensor<1x4x32xf32> -> tensor<1x8x32xf32>
// CHECK: %[[S:.*]] = cleave.scatter add %{{.*}}, %[[I]], %[[U]] axis = 1 : (tensor<1x96x32xf32>, tensor<1x8x32xi64>, tensor<1x8x32xf32>) -> tensor<1x96x32xf32>
// CHECK-NEXT: %[[T:.*]] = cleave.all_slice %[[S]] over @mesh ["tp"] dim = 1 {cleave.phase = "{{.*}}, sliced before its reduction"
// CHECK-NEXT: cleave.all_reduce sum %[[T]] over @mesh ["dp"] {{.*}} : tensor<1x48x32xf32>
// CHECK-NOT: cleave.all_
// CHECK: return
func.func @embedding_gradient_sp(
    %ids: tensor<1x16x32xi64> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"dp", "tp"}, {}]>},
    %dh: tensor<1x16x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"dp", "tp"}, {}]>})
    -> (tensor<1x96x32xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}, {}]>}) {
  %zero = cleave.constant dense<0.0> : tensor<1x96x32xf32>
  %g = cleave.scatter add %zero, %ids, %dh axis = 1 : (tensor<1x96x32xf32>, tensor<1x16x32xi64>, tensor<1x16x32xf32>) -> tensor<1x96x32xf32>
  return %g : tensor<1x96x32xf32>
}

// Logits split over tp along the vocabulary: the log_softmax normalizes each
// rank's part with the row maximum and the sum of exponentials all-reduced
// over tp, and stays split; the one-hot's iota along the split vocabulary
// starts at this rank's first index; the pick of each label's
// log-probability is a partial sum, all-reduced. An iota split along
// another dimension (dp) is built at the local shape, no offset.
// CHECK-LABEL: func.func @vocab_parallel_loss(
// CHECK: %[[MAX:.*]] = cleave.reduce max %arg0 dims = [2] : tensor<2x8x48xf32> -> tensor<2x8xf32>
// CHECK: %[[GMAX:.*]] = cleave.all_reduce max %[[MAX]] over @mesh ["tp"]
// CHECK: %[[SHIFT:.*]] = cleave.binary sub %arg0, %{{.*}} : tensor<2x8x48xf32>
// CHECK: %[[EXP:.*]] = cleave.unary exp %[[SHIFT]]
// CHECK: %[[SUM:.*]] = cleave.reduce sum %[[EXP]] dims = [2]
// CHECK: %[[GSUM:.*]] = cleave.all_reduce sum %[[SUM]] over @mesh ["tp"]
// CHECK: %[[LOG:.*]] = cleave.unary log %[[GSUM]]
// CHECK: %[[LP:.*]] = cleave.binary sub %[[SHIFT]], %{{.*}} : tensor<2x8x48xf32>
// CHECK: %[[IOTA:.*]] = cleave.iota dim = 2 : tensor<2x8x48xi64>
// CHECK: %[[STARTS:.*]] = cleave.constant dense<[0, 48]> : tensor<2xi64>
// CHECK: cleave.all_slice %[[STARTS]] over @mesh ["tp"] dim = 0
// CHECK: cleave.binary add %[[IOTA]], %{{.*}} : tensor<2x8x48xi64>
// CHECK: %[[PICK:.*]] = cleave.reduce sum %{{.*}} dims = [2] : tensor<2x8x48xf32> -> tensor<2x8xf32>
// CHECK: cleave.all_reduce sum %[[PICK]] over @mesh ["tp"]
// CHECK: cleave.iota dim = 1 : tensor<2x8xi64>
// CHECK-NOT: cleave.all_slice
// CHECK: return
func.func @vocab_parallel_loss(%logits: tensor<4x8x96xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}, {"tp"}]>},
                               %labels: tensor<4x8xi64> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>})
    -> (tensor<4x8xf32>, tensor<4x8xi64>) {
  %lp = cleave.log_softmax %logits dim = 2 : tensor<4x8x96xf32>
  %iota = cleave.iota dim = 2 : tensor<4x8x96xi64>
  %b = cleave.broadcast_in_dim %labels dims = [0, 1] : tensor<4x8xi64> -> tensor<4x8x96xi64>
  %hot = cleave.compare eq %iota, %b : tensor<4x8x96xi64> -> tensor<4x8x96xi1>
  %zero = cleave.constant dense<0.0> : tensor<4x8x96xf32>
  %picked = cleave.select %hot, %lp, %zero : tensor<4x8x96xi1>, tensor<4x8x96xf32>
  %nll = cleave.reduce sum %picked dims = [2] : tensor<4x8x96xf32> -> tensor<4x8xf32>
  %pos = cleave.iota dim = 1 : tensor<4x8xi64>
  %shifted = cleave.binary add %pos, %labels : tensor<4x8xi64>
  return %nll, %shifted : tensor<4x8xf32>, tensor<4x8xi64>
}

// Partial sums wait for their add: two row-split contractions, transposed
// on the way (each rank transposes its addend), are summed on each rank and
// completed by one all-reduce after the add.
// CHECK-LABEL: func.func @deferred_sum(
// CHECK-NOT: cleave.all_reduce
// CHECK: %[[AT:.*]] = cleave.transpose {{.*}} : tensor<8x16xf32> -> tensor<16x8xf32>
// CHECK-NOT: cleave.all_reduce
// CHECK: %[[BT:.*]] = cleave.transpose {{.*}} : tensor<8x16xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[S:.*]] = cleave.binary add %[[AT]], %[[BT]] : tensor<16x8xf32>
// CHECK-NEXT: %[[R:.*]] = cleave.all_reduce sum %[[S]] over @mesh ["tp"] {cleave.phase = "all_reduce [\22tp\22]: partial results of cleave.contract (its reduction is split)"} : tensor<16x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @deferred_sum(%x: tensor<8x32xf32>,
                        %w1: tensor<32x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>},
                        %w2: tensor<32x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>})
    -> (tensor<16x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {}]>}) {
  %a = cleave.contract %x, %w1 batch = [] x [] contract = [1] x [0] : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
  %b = cleave.contract %x, %w2 batch = [] x [] contract = [1] x [0] : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
  %at = cleave.transpose %a perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %bt = cleave.transpose %b perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
  %s = cleave.binary add %at, %bt : tensor<16x8xf32>
  return %s : tensor<16x8xf32>
}

// A partial f32 sum rounded to bf16: each rank rounds its addend and the
// sum is all-reduced in bf16, after the rounding.
// CHECK-LABEL: func.func @rounded_sum(
// CHECK: %[[C:.*]] = cleave.contract {{.*}} -> tensor<8x16xf32>
// CHECK-NEXT: %[[B:.*]] = cleave.convert %[[C]] : tensor<8x16xf32> -> tensor<8x16xbf16>
// CHECK-NEXT: cleave.all_reduce sum %[[B]] over @mesh ["tp"] {{.*}} : tensor<8x16xbf16>
func.func @rounded_sum(%x: tensor<8x32xf32>,
                       %w: tensor<32x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {}]>})
    -> tensor<8x16xbf16> {
  %a = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
  %r = cleave.convert %a : tensor<8x16xf32> -> tensor<8x16xbf16>
  return %r : tensor<8x16xbf16>
}

// A slice split along a dimension it keeps whole: the limit there is the
// local size.
// CHECK-LABEL: func.func @slice(
// CHECK: cleave.slice %arg0 start = [0, 2] limit = [4, 6] strides = [1, 1] : tensor<4x16xf32> -> tensor<4x4xf32>
func.func @slice(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
  %0 = cleave.slice %x start = [0, 2] limit = [8, 6] strides = [1, 1] : tensor<8x16xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// Partial sums over tp whose result moves its dp split from dimension 1 to
// dimension 0: reduced, then one all_to_all over dp. Slicing dimension 0
// over dp before the reduction would split both dimensions over dp (a
// ZeRO-3 expert weight split over dp on its output dimension did, and
// gathered rows of other ranks).
// CHECK-LABEL: func.func @moved(
// CHECK: %[[C:.*]] = cleave.contract {{.*}} -> tensor<8x4xf32>
// CHECK-NEXT: %[[R:.*]] = cleave.all_reduce sum %[[C]] over @mesh ["tp"]
// CHECK-NEXT: %[[M:.*]] = cleave.all_to_all %[[R]] over @mesh ["dp"] split = 0 concat = 1
// CHECK-NEXT: return %[[M]] : tensor<4x8xf32>
func.func @moved(%x: tensor<8x16xf32> {cleave.sharding = #cleave.sharding<@mesh, [{}, {"tp"}]>},
                 %w: tensor<16x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}, {"dp"}]>})
    -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {}]>}) {
  %0 = cleave.contract %x, %w batch = [] x [] contract = [1] x [0] : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
