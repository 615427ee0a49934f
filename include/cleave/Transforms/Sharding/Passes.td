//===- Passes.td - Cleave sharding passes ------------------*- tablegen -*-===//

#ifndef CLEAVE_TRANSFORMS_SHARDING_PASSES_TD
#define CLEAVE_TRANSFORMS_SHARDING_PASSES_TD

include "mlir/Pass/PassBase.td"

def ShardProgramPass : Pass<"cleave-shard-program", "::mlir::ModuleOp"> {
  let summary = "Partition a global program over a device mesh";
  let description = [{
    What `cleave-compile --mesh=... --shard=... --zero=...` does to a global
    program (a training step or a forward model): declares `cleave.mesh`
    `@mesh`, states shardings on `@main`'s arguments, propagates them
    (`--cleave-propagate-sharding`), lays out each result that updates a
    state like the state, and partitions the program
    (`--cleave-partition`, then `--cleave-schedule-collectives` with
    `overlap`).

    The stated shardings, in order: the `shard` rules (`regex=[{axes},
    ...]`, the first rule whose regular expression matches the whole
    parameter name wins); on a mesh with a `tp` axis and no rules,
    Megatron's tensor-parallel regions found from the program; on a `dp`
    axis, the batch dimension of every data input; on a `cp` axis, the
    sequence dimension (1) of every data input of rank 2 or more, with
    attention exchanging it for heads over `all_to_all` as
    `context-parallel` says (`--cleave-partition`'s `exchange-axes`). ZeRO
    (`zero` 1-3) adds `dp` to the optimizer states, then the gradients,
    then the parameters, on top of each parameter's layout without ZeRO;
    `sequence-parallel` splits the sequence dimension of every layer norm's
    result over `tp` (over `cp` and `tp` on a mesh with both).

    ```mlir
    // Before (mesh=dp=2): a global step on a batch of 8.
    func.func @main(%w: tensor<4x4xf32> {cleave.state = "parameter"},
                    %x: tensor<8x4xf32> {cleave.role = "data"}) ...
    // After: each rank's half of the batch, the gradient all-reduced.
    cleave.mesh @mesh(shape = dp=2)
    func.func @main(%w: tensor<4x4xf32> ..., %x: tensor<4x4xf32> ...) ...
      %g = cleave.all_reduce sum %gl over ["dp"] ...
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect",
                           "::mlir::func::FuncDialect"];
  let options = [
    Option<"mesh", "mesh", "std::string", "\"\"",
           "Mesh axes in order, e.g. dp=2,tp=2 (the last varies fastest)">,
    ListOption<"shard", "shard", "std::string",
               "Sharding rules: regex=[{axes}, ...], first match wins">,
    ListOption<"shardSources", "shard-sources", "std::string",
               "Where each rule comes from, for errors (--shard, file:line)">,
    Option<"zero", "zero", "int64_t", "0", "ZeRO stage over dp (0-3)">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Megatron's sequence parallelism over tp">,
    Option<"contextParallel", "context-parallel", "std::string", "\"auto\"",
           "How attention works on a sequence split over cp: all-to-all, "
           "ring or auto">,
    Option<"overlap", "overlap", "bool", "false",
           "Bucket gradient all-reduces and run collectives asynchronously">,
    Option<"bucketMB", "bucket-mb", "::cleave::ExactDouble", "25.0",
           "MiB per all-reduce bucket with overlap">,
    Option<"ringFault", "ring-fault", "int64_t", "-1",
           "Testing only: with context-parallel=ring, the keys' positions "
           "at this ring step are the neighbouring block's">,
    Option<"dropCollective", "drop-collective", "int64_t", "-1",
           "Testing only: drop the N-th all_reduce after partitioning">,
  ];
}

def PropagateShardingPass : Pass<"cleave-propagate-sharding", "::mlir::ModuleOp"> {
  let summary = "Give every tensor a sharding, from the ops' sharding rules";
  let description = [{
    Starts from the shardings the program states (`cleave.sharding` on
    function arguments and results, and on ops as constraints) and carries
    them through the ops' factor-based rules, forward and backward, until
    nothing changes. Then every op result carries a `cleave.sharding` and
    every function argument and result one of its own.

    - **Priorities.** Propagation runs in rounds, one per priority given on
      the program's dimension shardings (`{"dp"}p0` first), then one for the
      rest: what a higher priority reaches, a lower one cannot change.
    - **Open and closed.** A closed dimension (`{"dp"}`, `{}`) keeps its
      axes; an open one (`{?}`, `{"dp", ?}`) can gain axes.
    - **Conflicts.** When the tensors of an op ask for different axes on
      one factor, the choice that reshards the fewest bytes wins; ties go
      to the higher priority, then to the smaller axis names.
    - **Determinism.** Each sweep computes every op's proposals from the
      state before the sweep and merges them per value by rules that do not
      depend on the order of ops, so the result does not depend on op order.

    Need-replication factors carry no axes across an op, so a tensor that
    reaches one (a softmax row, a sliced dimension) stays sharded only on
    its own side; the partitioner gathers it there. Ops without a rule and
    ops with regions are barriers.
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
  let options = [
    Option<"keepOpen", "keep-open", "bool", "false",
           "Leave open dimensions open in the result (to add more "
           "shardings and propagate again)">,
  ];
}

def PartitionPass : Pass<"cleave-partition", "::mlir::ModuleOp"> {
  let summary = "Rewrite a sharded global program into the per-rank program";
  let description = [{
    Takes a program whose values all carry shardings (after
    `--cleave-propagate-sharding`) and gives every function local shapes
    and the collectives its shardings imply, op by op through the sharding
    rules: operands are resharded to the layout the op's factors give them
    (`all_gather` for axes to drop, `all_slice` for axes to add, a local
    copy), the op runs on its slice, split reductions are completed with an
    `all_reduce` of their kind, and results are resharded to their own
    sharding. A gather from a table split along the gathered axis looks up
    only the rows the rank holds (Megatron's vocabulary-parallel
    embedding). Function arguments and results keep their
    `cleave.sharding`, which now says which part of the global tensor each
    rank holds. Every collective says why it exists in `cleave.phase`.

    Each op is rewritten through its `PartitionOpInterface`
    (`include/cleave/Transforms/Sharding/PartitionOpInterface.td`): the
    cleave ops whose per-rank form is not the rule's generic path (partial
    sums through adds, reshapes, transposes and gradient roundings, pipeline
    messages, splat constants, iotas, split log-softmax rows, gathers from a
    split table, slices, grouped convolutions) get external models, the
    other ops the generic path. Reshards are planned (gathers, slices,
    reductions, as layouts) before they are priced or emitted, so the layout
    chosen for each op is priced on exactly the collectives it emits.
    Shardings the partitioner cannot apply (an axis the mesh lacks, an axis
    on two dimensions, a dimension the axes do not divide, another mesh) are
    errors.

    ```mlir
    // Before: rows of %w over tp, the contraction over them.
    %0 = cleave.contract %x, %w batch = [] x [] contract = [1] x [0]
        {cleave.sharding = [#cleave.sharding<@mesh, [{}, {} ]>]}
        : tensor<8x32xf32>, tensor<32x16xf32> -> tensor<8x16xf32>
    // After, on each of 2 ranks:
    %1 = cleave.contract %xl, %wl batch = [] x [] contract = [1] x [0]
        : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
    %0 = cleave.all_reduce sum %1 over @mesh ["tp"] : tensor<8x16xf32>
    ```

    A dimension split over mesh axes holds a block per rank; over
    `interleaved-axes` (BuildTrainStep's microbatches, which take rows
    k, k + m, k + 2m, ...) rank r's elements are r, r + n, r + 2n, ...:
    an iota along it is n * iota + r instead of iota + r * size / n.

    Over `exchange-axes` (the `cp` axis of all-to-all context
    parallelism), an op whose rule lets a factor it needs whole trade its
    axes for another factor (an attention's sequence for its key/value
    heads) may compute split along that one instead: its operands move the
    axis between dimensions with one `all_to_all` each, and its results
    move it back. The layout that sends the fewest bytes wins, or, with
    `require-exchange`, the exchanged one always (an op whose other factor
    does not divide over the axis is then an error).

    Over `ring-axes` (the `cp` axis of ring context parallelism), an
    attention whose queries' sequence is split keeps it split and splits
    the keys' alike: each rank attends its queries to its key/value block,
    passes the block on with a `collective_permute` and attends to the
    next, `cleave.attention_block`s merged by their rows' log-sum-exp;
    the gradient rotates the blocks again, their `dk` and `dv` travelling
    with them (`cleave.attention_block_grad`).
  }];
  let options = [
    ListOption<"interleavedAxes", "interleaved-axes", "std::string",
               "Mesh axes whose ranks hold interleaved elements of a split "
               "dimension instead of blocks">,
    ListOption<"exchangeAxes", "exchange-axes", "std::string",
               "Mesh axes an op may move from a factor it needs whole to "
               "the factor its rule exchanges it for, with all_to_all "
               "(an attention's sequence for its heads)">,
    Option<"requireExchange", "require-exchange", "bool", "false",
           "Exchange exchange-axes wherever an op's rule allows, and refuse "
           "an op that cannot, instead of taking the cheapest layout">,
    ListOption<"ringAxes", "ring-axes", "std::string",
               "Mesh axes over which an attention on a split sequence runs "
               "as a ring of key/value blocks">,
    Option<"ringFault", "ring-fault", "int64_t", "-1",
           "Testing only: at this ring step the keys' positions are the "
           "neighbouring block's">,
  ];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def ElideExpertSumsPass : Pass<"cleave-elide-expert-sums", "::mlir::func::FuncOp"> {
  let summary = "Drop the sums over ep between expert GEMMs that only the experts' own rows reach";
  let description = [{
    On a partitioned program under expert parallelism, a grouped matmul
    whose experts are split over an axis gives, on each rank, the rows
    routed to the rank's experts and zeros for the others; the partitioner
    sums these partial results over the axis (`cleave.all_reduce`). Where
    everything that reads the sum works row by row (elementwise ops,
    slices, reshapes and reductions that keep the rows) and ends in grouped
    matmuls or weight gradients with the same ids whose experts are split
    over the same axes, the sum is not needed: those read only the rows
    routed to this rank's experts, which this rank computed whole, and the
    other rows never reach a result. The all_reduce is dropped; its operand
    is read instead. This is the expert MLP between the dispatch and the
    combine (gate/up GEMM, activation, down GEMM), forward and backward.

    ```mlir
    // Before (experts split over ep):
    %h = cleave.grouped_matmul %x, %w1, %ids {cleave.experts_over = ["ep"]} ...
    %s = cleave.all_reduce sum %h over @mesh ["ep"] : tensor<32x64xf32>
    %a = cleave.unary silu %s : tensor<32x64xf32>
    %y = cleave.grouped_matmul %a, %w2, %ids {cleave.experts_over = ["ep"]} ...
    // After:
    %a = cleave.unary silu %h : tensor<32x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
}

def ScheduleCollectivesPass : Pass<"cleave-schedule-collectives", "::mlir::func::FuncOp"> {
  let summary = "Bucket gradient all-reduces and overlap collectives with compute";
  let description = [{
    On a partitioned program, in program order:

    - **Buckets.** Consecutive all-reduces of the same kind, mesh axes and
      element type are packed into one (flattened, concatenated, sliced
      back) until the bucket holds `bucket-mb` MiB or an op reads one of
      them; the bucket starts where its last member's operand is ready.
      Every element is reduced as before, so results are bitwise the same.
    - **Overlap.** Each synchronous all_reduce, reduce_scatter and
      all_gather becomes asynchronous, with its `cleave.done` right before
      the first op that reads it, so the compute in between runs while it
      is in flight and each optimizer update waits only for its own bucket.
    - **Late waits.** The wait of an all_reduce or reduce_scatter, and the
      ops that depend on it, move to just before the next collective
      starts: a gradient's reduction (ZeRO-2/3's reduce-scatters) runs
      while backward computes the next gradient, instead of being waited
      for by the gradient-norm term right after it.
    - **Prefetch.** A gather of a function argument (a ZeRO-3 parameter)
      starts right after the previous one is waited for: the next layer's
      parameters arrive while this layer computes.

    ```mlir
    // Before:
    %a = cleave.all_reduce sum %ga over @mesh ["dp"] : tensor<64xf32>
    %b = cleave.all_reduce sum %gb over @mesh ["dp"] : tensor<32xf32>
    %y = ... independent compute ...
    %u = cleave.binary sub %w, %a : tensor<64xf32>
    // After (one bucket):
    %f = cleave.concat %ga', %gb' dim = 0 : (...) -> tensor<96xf32>
    %h = cleave.all_reduce sum %f over @mesh ["dp"] async : tensor<96xf32>
    %y = ... independent compute ...
    %r = cleave.done %h : tensor<96xf32>
    %a = cleave.slice %r ...
    ```
  }];
  let dependentDialects = ["::mlir::cleave::CleaveDialect"];
  let options = [
    Option<"bucketMB", "bucket-mb", "::cleave::ExactDouble", "25.0",
           "Bytes per bucket in MiB (0: no buckets)">,
    Option<"async", "async", "bool", "true",
           "Make collectives asynchronous, waiting at their first reader">,
    Option<"lateWaits", "late-waits", "bool", "true",
           "Move each reduction's wait, with what depends on it, to just "
           "before the next collective starts">,
    Option<"prefetch", "prefetch", "bool", "true",
           "Start each asynchronous gather of a function argument (a ZeRO-3 "
           "parameter) right after the previous one is waited for">,
  ];
}

#endif // CLEAVE_TRANSFORMS_SHARDING_PASSES_TD
