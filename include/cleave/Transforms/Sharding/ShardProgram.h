//===- ShardProgram.h - Mesh, shardings, propagation, partition -*- C++ -*-===//
//
// What `cleave-compile --mesh=... --shard=...` does to a global program:
// declares the mesh, states the shardings the user and the axis policies
// give, propagates them to every value, and partitions the program into the
// per-rank one.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_SHARDING_SHARDPROGRAM_H
#define CLEAVE_TRANSFORMS_SHARDING_SHARDPROGRAM_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cleave {

struct ShardProgramOptions {
  /// Mesh axes in order (the last varies fastest over ranks).
  std::vector<std::pair<std::string, int64_t>> mesh;
  /// Without rules, a `tp` axis of more than one rank splits what
  /// findTensorParallelSeeds finds (Megatron's policy); with rules, only
  /// what they say.
  ///
  /// A function argument whose parameter name (`cleave.parameter`, else
  /// `cleave.name`) matches the whole regular expression `pattern` gets
  /// the dimension shardings `spec` (such as `[{}, {"tp"}]`); the first
  /// rule that matches wins. `source` names the rule in errors (`--shard`,
  /// or `file:line` of a sharding file).
  struct ShardingRule {
    std::string pattern, spec, source;
  };
  std::vector<ShardingRule> shardings;
  /// ZeRO stage over the `dp` axis: 1 splits optimizer states over dp
  /// (parameters and gradients stay whole), 2 also gradients, 3 also
  /// parameters. Each tensor gets `dp` on its first dimension that divides
  /// (after the axes a --shard rule gives it); one with none stays whole.
  int zero = 0;
  /// Megatron's sequence parallelism over `tp`: the sequence dimension
  /// (dimension 1 of [batch, sequence, hidden]) of every layer norm's and
  /// RMS norm's result is split over tp, and propagation carries that
  /// through the regions between the tensor-parallel ones.
  bool sequenceParallel = false;
  /// How attention works on a sequence split over a `cp` axis: "auto"
  /// (exchange the sequence for heads with all_to_all where that sends
  /// fewer bytes than gathering it), "all-to-all" (always, refusing an
  /// attention whose heads do not divide), "ring" (key/value blocks
  /// rotate over cp; RingAttention.cpp).
  std::string contextParallel = "auto";
  /// Run --cleave-schedule-collectives after partitioning: gradient
  /// all-reduces in buckets of `bucketMB` MiB, collectives asynchronous.
  bool overlap = false;
  /// Verify the program after each of its passes (PhaseOptions::
  /// verifyPasses).
  bool verifyPasses = true;
  double bucketMB = 25.0;
  /// For testing the parity check: after partitioning, drop the all_reduce
  /// with this index in program order (its result becomes its operand).
  int64_t dropCollective = -1;
  /// For testing the parity check: with contextParallel "ring", the keys'
  /// positions at this ring step are the neighbouring block's.
  int64_t ringFault = -1;
  /// If set, receives the explainSharding report after partitioning.
  std::function<void(const std::string &)> explain;
  /// If set, runs the propagation and partitioning passes on the program
  /// (the calling pass's dynamic pipeline, Pass::runPipeline); else they
  /// run on a pass manager of their own.
  std::function<mlir::LogicalResult(mlir::OpPassManager &)> runPipeline;
};

/// --cleave-shard-program with `options`, its explain callback included.
std::unique_ptr<mlir::Pass>
createShardProgramPass(const ShardProgramOptions &options);

/// Parses `dp=4,tp=2`. Returns an error message, or an empty string.
std::string parseMeshSpec(llvm::StringRef text,
                          std::vector<std::pair<std::string, int64_t>> &mesh);

/// Declares the mesh in `module` (which must have none), states shardings
/// on `@main`'s arguments (the rules; then, on a mesh with a `dp` axis, the
/// batch dimension of every data input over `dp`), propagates them, gives
/// each result that updates a state argument that argument's sharding, and
/// partitions the program. Fails after emitting diagnostics.
mlir::LogicalResult shardProgram(mlir::ModuleOp module,
                                 const ShardProgramOptions &options);

/// The seeds of Megatron's tensor parallelism in a global program: pairs
/// of @main's argument number and the dimension to split over tp, and a
/// report with one line per weight (the seed and the region it splits, or
/// why the weight stays whole).
struct TensorParallelPolicy {
  std::vector<std::pair<unsigned, int64_t>> seeds;
  std::string report;
};

/// Finds, for each weight of a forward contraction or embedding lookup not
/// yet in a region, a dimension whose split over `tp` ranks closes a
/// tensor-parallel region: followed through every op's sharding rule, it
/// ends only in contractions over it (the row-split partner) or lookups of
/// a split table, never in an op that needs it whole.
TensorParallelPolicy findTensorParallelSeeds(mlir::func::FuncOp main,
                                             int64_t tp);

/// The --explain-sharding report of a partitioned module: every collective
/// of `@main` with its bytes sent per rank per step (ring algorithm), the
/// op and sharding that caused it, where it comes from (ONNX node or
/// file:line), the conflicts propagation settled on that op and the factor
/// layout the partitioner rejected for it (what lost and by how many
/// bytes), and totals per group of mesh axes.
std::string explainSharding(mlir::ModuleOp module);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_SHARDING_SHARDPROGRAM_H
