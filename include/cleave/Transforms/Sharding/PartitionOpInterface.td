//===- PartitionOpInterface.td - Per-op SPMD partitioning --*- tablegen -*-===//
//
// How an op is rewritten into its per-rank form by --cleave-partition. The
// interface lives with the partitioner, not in the dialect: its methods work
// on the partitioner's state (the local value and layout of every value),
// and the cleave ops get it as external models registered from
// lib/Transforms/Sharding, so the dialect does not depend on the pass.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_SHARDING_PARTITIONOPINTERFACE_TD
#define CLEAVE_TRANSFORMS_SHARDING_PARTITIONOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def PartitionOpInterface : OpInterface<"PartitionOpInterface"> {
  let cppNamespace = "::mlir::cleave::partition";
  let description = [{
    The per-rank rewrite of an op whose values carry shardings, for the SPMD
    partitioner (`--cleave-partition`). The partitioner walks a function in
    program order and asks each op to partition itself; an op without the
    interface, and an op whose model keeps the defaults, is partitioned
    through its sharding rule (`ShardingRuleOpInterface`): factor axes,
    operands resharded, the op cloned on local shapes, results completed
    and resharded to their shardings.

    The methods receive the `Partitioner`, which holds the local value and
    layout of every global value, the deferred partial sums, and emits
    reshards and collectives. The cleave ops that differ from the rule's
    generic path get external models (`registerPartitionExternalModels`):
    adds and subtracts of partial sums, reshapes and transposes that carry
    partial sums, gradient roundings, pipeline messages, splat constants,
    iotas (`partition`), and split log-softmax rows, gathers from a table
    split along its gathered axis, slices and grouped convolutions
    (`buildLocalOp`).
  }];
  let methods = [
    InterfaceMethod<[{
        Rewrites the op at `b`'s insertion point into the ops every rank
        runs, and records the local value and layout of each of its results
        in `p`. Emits an error and fails when the op cannot be partitioned.
      }],
      "::mlir::LogicalResult", "partition",
      (ins "::mlir::cleave::partition::Partitioner &":$p,
           "::mlir::OpBuilder &":$b), [{}], [{
        return ::mlir::cleave::partition::partitionByRule(p, b, $_op);
      }]>,
    InterfaceMethod<[{
        On the generic path, once the operands are in the layout `layout`
        gives them (`operands`, local values): builds the op on local shapes
        (`resultTypes`, the results in `layout.produced`) and returns the op
        whose results are the local results. A split reduction's partial
        results (over `layout.partial`) are completed by the partitioner.
      }],
      "::mlir::Operation *", "buildLocalOp",
      (ins "::mlir::cleave::partition::Partitioner &":$p,
           "::mlir::OpBuilder &":$b,
           "const ::mlir::cleave::partition::LocalLayout &":$layout,
           "::mlir::ValueRange":$operands,
           "::mlir::TypeRange":$resultTypes), [{}], [{
        return ::mlir::cleave::partition::cloneOnLocalShapes(b, $_op, operands,
                                                           resultTypes);
      }]>,
  ];
}

#endif // CLEAVE_TRANSFORMS_SHARDING_PARTITIONOPINTERFACE_TD
