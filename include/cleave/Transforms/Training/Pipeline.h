//===- Pipeline.h - Pipelined training steps, split per rank ---*- C++ -*-===//
//
// A pipelined training step (--cleave-build-train-step with pipeline-ranks)
// is one global program whose ops carry the pipeline rank that runs them,
// so that sharding propagation and partitioning over the other mesh axes
// see every stage at once. splitPipelineRanks then makes the program of
// each pipeline rank (MPMD over the mesh axis "pp"; each program SPMD over
// the others).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_TRAINING_PIPELINE_H
#define CLEAVE_TRANSFORMS_TRAINING_PIPELINE_H

#include "Cleave/IR/CleaveMetadata.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace cleave {

/// The i64 attribute that names the pipeline rank running an op. Ops
/// without it (built after the step: optimizer updates, collectives the
/// partitioner adds) run on every rank that needs their results.
inline constexpr llvm::StringLiteral kPipelineRankAttr =
    mlir::cleave::attr::kPipelineRank;

/// The i64 attribute of a pipelined `@main`: its pipeline ranks.
inline constexpr llvm::StringLiteral kPipelineRanksAttr =
    mlir::cleave::attr::kPipelineRanks;

/// One module per pipeline rank, from a module whose `@main` is a pipelined
/// step (partitioned or not) and which declares one cleave.mesh with an axis
/// named "pp" of `@main`'s pipeline ranks. Rank r's `@main` keeps, in
/// order, the ops tagged r and the untagged ops they (or r's results) need;
/// a cleave.pipeline_transfer becomes a cleave.send on its source rank and
/// a cleave.recv on its target; a cleave.pipeline_sum becomes sends of each
/// rank's operand to the other ranks that read the sum and receives of
/// theirs, added in rank order. State arguments (and their updated
/// results) that rank r does not read are removed. Emits an error naming
/// the op and fails when an op of one rank reads a value of another
/// without a transfer.
mlir::FailureOr<llvm::SmallVector<mlir::OwningOpRef<mlir::ModuleOp>>>
splitPipelineRanks(mlir::ModuleOp module);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_TRAINING_PIPELINE_H
