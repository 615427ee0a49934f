//===- DecomposeAttention.cpp - Attention as contractions and a softmax ---===//
//
// The expression is built by the same helpers as the VJP rule
// (Autodiff/VJPRulesAttention.cpp).
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "Autodiff/VJPHelpers.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#define DEBUG_TYPE "cleave-decompose-attention"

namespace cleave {
#define GEN_PASS_DEF_DECOMPOSEATTENTIONPASS
#define GEN_PASS_DEF_DECOMPOSEROTARYPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {
struct DecomposeAttentionPass
    : ::cleave::impl::DecomposeAttentionPassBase<DecomposeAttentionPass> {
  using DecomposeAttentionPassBase::DecomposeAttentionPassBase;

  void runOnOperation() override {
    namespace ad = ::cleave::autodiff;
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionGradOp>(op) &&
          !(keepFused && ::cleave::hasFusedAttentionKernel(op, maxHeadDim)))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      ad::Emitter e{b, op->getLoc()};
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        ad::AttentionOperands operands = ad::AttentionOperands::of(attention);
        attention.getResult().replaceAllUsesWith(ad::attentionOutput(
            e, operands, ad::attentionProbabilities(e, operands)));
      } else {
        auto grad = cast<AttentionGradOp>(op);
        ad::AttentionGradients g = ad::attentionGradients(
            e, ad::AttentionOperands::of(grad), grad.getDout());
        SmallVector<Value, 3> values = {g.dq, g.dk, g.dv};
        for (auto [result, value] : llvm::zip(grad.getResults(), values))
          result.replaceAllUsesWith(e.convert(
              value, cast<RankedTensorType>(result.getType()).getElementType()));
      }
      op->erase();
    }
  }
};

struct DecomposeRotaryPass
    : ::cleave::impl::DecomposeRotaryPassBase<DecomposeRotaryPass> {
  void runOnOperation() override {
    SmallVector<RotaryOp> ops;
    getOperation().walk([&](RotaryOp op) { ops.push_back(op); });
    for (RotaryOp op : ops) {
      OpBuilder b(op);
      ::cleave::autodiff::Emitter e{b, op.getLoc()};
      op.getResult().replaceAllUsesWith(::cleave::autodiff::rotaryOutput(e, op));
      op.erase();
    }
  }
};
} // namespace

bool ::cleave::hasFusedAttentionKernel(Operation *op, int64_t maxHeadDim) {
  // The kernels compute in f32 from f32, bf16 or f16 operands.
  auto fits = [](Value v) {
    Type t = cast<RankedTensorType>(v.getType()).getElementType();
    return t.isF32() || t.isBF16() || t.isF16();
  };
  // q (operand 0) and v (operand 2) end in their head dimensions.
  auto headDim = [&](unsigned i) {
    return cast<RankedTensorType>(op->getOperand(i).getType()).getShape().back();
  };
  if (maxHeadDim > 0 && (headDim(0) > maxHeadDim || headDim(2) > maxHeadDim))
    return false;
  return llvm::all_of(op->getOperands(), fits) &&
         llvm::all_of(op->getResults(), fits);
}
