//===- Passes.h - Cleave transformation passes ------------------*- C++ -*-===//

#ifndef CLEAVE_TRANSFORMS_PASSES_H
#define CLEAVE_TRANSFORMS_PASSES_H

#include "Cleave/IR/CleaveDialect.h"
#include "Cleave/IR/CleaveOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace cleave {

#define GEN_PASS_DECL
#include "cleave/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "cleave/Transforms/Passes.h.inc"

/// Describes a contraction in batched-GEMM form, or fails if the operands
/// are not laid out as CanonicalizeContractionsPass produces.
struct GemmShape {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool transA = false, transB = false;
};
mlir::FailureOr<GemmShape> getGemmShape(mlir::cleave::ContractOp op);

/// Whether a cleave.attention or cleave.attention_grad can run as the
/// runtime's fused attention command (plan::CommandKind::Attention and
/// AttentionBackward): f32, bf16 or f16 operands and results, and, when
/// `maxHeadDim` is not 0, q/k and v head dimensions up to it (the CUDA
/// kernels take 128; the CPU's any).
bool hasFusedAttentionKernel(mlir::Operation *op, int64_t maxHeadDim = 0);

} // namespace cleave

#endif // CLEAVE_TRANSFORMS_PASSES_H
