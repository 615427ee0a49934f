//===- FusedAttention.cpp - Which attentions the runtime runs fused -------===//
//
// hasFusedAttentionKernel (cleave/Analysis/FusedAttention.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/Analysis/FusedAttention.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

using namespace mlir;

bool cleave::hasFusedAttentionKernel(Operation *op, int64_t maxHeadDim) {
  // The kernels compute in f32 from f32, bf16 or f16 operands (and the
  // block forms' i64 positions).
  auto fits = [](Value v) {
    Type t = cast<RankedTensorType>(v.getType()).getElementType();
    return t.isF32() || t.isBF16() || t.isF16() || t.isInteger(64);
  };
  // q (operand 0) and v (operand 2) end in their head dimensions.
  auto headDim = [&](unsigned i) {
    return cast<RankedTensorType>(op->getOperand(i).getType())
        .getShape()
        .back();
  };
  if (maxHeadDim > 0 && (headDim(0) > maxHeadDim || headDim(2) > maxHeadDim))
    return false;
  return llvm::all_of(op->getOperands(), fits) &&
         llvm::all_of(op->getResults(), fits);
}
