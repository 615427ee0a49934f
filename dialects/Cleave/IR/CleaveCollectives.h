//===- CleaveCollectives.h - Meshes and collectives ------------*- C++ -*-===//
//
// `cleave.mesh` and the communication ops (all_reduce, all_gather,
// reduce_scatter, all_to_all, broadcast, collective_permute, send, recv,
// done); see CleaveCollectives.td.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_IR_CLEAVECOLLECTIVES_H
#define CLEAVE_IR_CLEAVECOLLECTIVES_H

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::cleave {

/// What every collective reads and writes: the communication between ranks.
/// Ops with this effect are never merged, dropped or reordered against each
/// other.
struct CommunicationResource
    : public SideEffects::Resource::Base<CommunicationResource> {
  StringRef getName() final { return "Communication"; }
};

} // namespace mlir::cleave

#include "Cleave/IR/CleaveCollectiveEnums.h.inc"
#include "Cleave/IR/CleaveCollectiveInterfaces.h.inc"

#define GET_OP_CLASSES
#include "Cleave/IR/CleaveCollectiveOps.h.inc"

namespace mlir::cleave {

/// The ring and tree algorithms of NCCL (tree: all-reduce only; the other
/// collectives fall back to the ring).
enum class CollectiveAlgorithm { Ring, Tree };

/// What one execution of a collective costs each rank of its group: the
/// bytes it sends (averaged over the group's ranks) and the sequential
/// communication steps (latency terms) of the algorithm.
struct CollectiveCost {
  int64_t bytesSent = 0;
  int64_t steps = 0;
};

/// The `cleave.mesh` a collective names, or null if it names none.
MeshOp lookupMesh(CollectiveOpInterface op);

/// The number of ranks in each group of `op` (the product of its mesh axes'
/// sizes); fails if the mesh is missing or an axis is unknown.
FailureOr<int64_t> getGroupSize(CollectiveOpInterface op);

/// Bytes per rank by the ring and tree formulas (../shared/REFERENCE.md): for
/// a buffer of S bytes over n ranks, all-reduce sends 2(n-1)/n S in 2(n-1)
/// ring steps or 2 ceil(log2 n) tree steps; all-gather (S the gathered size)
/// and reduce-scatter (S the input size) (n-1)/n S in n-1 steps; all-to-all
/// (n-1)/n S; broadcast (n-1)/n S on average; permute and send S.
CollectiveCost getCollectiveCost(CollectiveOpInterface op, int64_t groupSize,
                                 CollectiveAlgorithm algorithm);

} // namespace mlir::cleave

#endif // CLEAVE_IR_CLEAVECOLLECTIVES_H
