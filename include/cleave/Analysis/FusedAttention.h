//===- FusedAttention.h - Attentions the runtime runs fused -----*- C++ -*-===//
//
// Read by --cleave-decompose-attention, which keeps these attentions whole,
// and by the plan builder, which turns them into fused attention commands.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ANALYSIS_FUSEDATTENTION_H
#define CLEAVE_ANALYSIS_FUSEDATTENTION_H

#include <cstdint>

namespace mlir {
class Operation;
} // namespace mlir

namespace cleave {

/// Whether a cleave.attention or cleave.attention_grad can run as the
/// runtime's fused attention command (plan::CommandKind::Attention and
/// AttentionBackward): f32, bf16 or f16 operands and results, and, when
/// `maxHeadDim` is not 0, q/k and v head dimensions up to it (the CUDA
/// kernels take 128; the CPU's any).
bool hasFusedAttentionKernel(mlir::Operation *op, int64_t maxHeadDim = 0);

} // namespace cleave

#endif // CLEAVE_ANALYSIS_FUSEDATTENTION_H
