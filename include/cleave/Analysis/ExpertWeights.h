//===- ExpertWeights.h - The weights of a mixture's experts -----*- C++ -*-===//
//
// Which values hold the experts of a mixture of experts: what the
// partitioner splits over mesh axis ep (ShardProgram), and what --auto reads
// to know which ep sizes a model can take; and which top-ks route rows to
// them (the router losses, the log's expert figures, the experts' biases).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ANALYSIS_EXPERTWEIGHTS_H
#define CLEAVE_ANALYSIS_EXPERTWEIGHTS_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "mlir/IR/Visitors.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/SetVector.h"

#include <cstdint>

namespace cleave {

/// Calls `visit(op, weight)` for every expert weight an op under `root`
/// uses, in walk order: the weights of a cleave.grouped_matmul, and an
/// operand a cleave.contract is batched over by its leading dimension (the
/// experts of the capacity form, or of an einsum mixture). `weight` is
/// seen through cleave.convert (the low-precision copy mixed precision
/// multiplies with); its dimension 0 counts the experts. The walk stops
/// where `visit` interrupts it.
mlir::WalkResult
forEachExpertWeight(mlir::Operation *root,
                    llvm::function_ref<mlir::WalkResult(mlir::Operation *op,
                                                        mlir::Value weight)>
                        visit);

/// The greatest common divisor of the expert counts of the expert weights
/// under `root` that are constants (an imported model's initializers), or
/// 0 where there are none: the ep sizes that split every expert weight
/// divide it.
int64_t commonExpertCount(mlir::Operation *root);

/// Adds to `found` the cleave.top_k ops whose indices `ids` is computed
/// from, through ops on integers (a grouped matmul's group ids, the slots
/// of the capacity form).
void topKsFeeding(mlir::Value ids, llvm::SetVector<mlir::Operation *> &found);

} // namespace cleave

#endif // CLEAVE_ANALYSIS_EXPERTWEIGHTS_H
