//===- CleaveInterfaces.td - Cleave op interfaces ---------*- tablegen -*-===//

#ifndef CLEAVE_IR_CLEAVEINTERFACES_TD
#define CLEAVE_IR_CLEAVEINTERFACES_TD

include "mlir/IR/OpBase.td"

def Cleave_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    The static cost of one execution of an op: floating-point (or integer)
    operations, and bytes read and written, assuming every operand is read
    once and every result written once. Used by the memory planner, the
    cost model and the pipeline/sharding planners.
  }];
  let methods = [
    InterfaceMethod<"Arithmetic operations performed by the op.",
      "int64_t", "getFlops", (ins), [{}], [{
        return ::mlir::cleave::detail::getTotalResultElements($_op);
      }]>,
    InterfaceMethod<"Bytes of operands read by the op.",
      "int64_t", "getBytesRead", (ins), [{}], [{
        return ::mlir::cleave::detail::getTotalOperandBytes($_op);
      }]>,
    InterfaceMethod<"Bytes of results written by the op.",
      "int64_t", "getBytesWritten", (ins), [{}], [{
        return ::mlir::cleave::detail::getTotalResultBytes($_op);
      }]>,
  ];
}

def Cleave_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    The vector-Jacobian product of an op, for reverse-mode automatic
    differentiation (`cleave::buildGradients`): given one cotangent per
    result (the gradient of a scalar loss with respect to that result; a
    null Value for results that are not differentiable, such as integer
    ones), emits at the builder's insertion point the cotangent of each
    operand, built from cleave ops. Operands that are not differentiable
    (integer and `i1` tensors, indices) get a null Value.

    The rules are attached to the cleave ops as external models
    (`cleave::registerVJPExternalModels`), so ops without a rule make
    differentiation fail with an error naming the op.
  }];
  let methods = [
    InterfaceMethod<[{
        Emits the cotangents of the operands from those of the results
        (`resultCotangents` has one entry per result). Fails, after
        emitting an error, when the op's configuration has no rule.
      }],
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildVJP",
      (ins "::mlir::OpBuilder &":$b, "::mlir::ValueRange":$resultCotangents)>,
  ];
}

def Cleave_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    The factor-based sharding rule of an op (`cleave::ShardingRule`): how
    its operand and result dimensions map to the factors of its iteration
    space, and whether each factor is parallel, a reduction or in need of
    replication. Sharding propagation and SPMD partitioning read every op
    through it, and the linalg lowering takes the indexing maps of simple
    ops from it. Every cleave compute op implements it; an op that cannot
    be partitioned returns `ShardingRule::replicatedOnly` with the reason.
  }];
  let methods = [
    InterfaceMethod<"The op's sharding rule.",
      "::mlir::cleave::ShardingRule", "getShardingRule", (ins)>,
  ];
}

#endif // CLEAVE_IR_CLEAVEINTERFACES_TD
