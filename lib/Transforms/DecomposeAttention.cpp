//===- DecomposeAttention.cpp - Attention as contractions and a softmax ---===//
//
// The expression is built by the same helpers as the VJP rules
// (Cleave/Utils/AttentionExpansion.h).
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "Cleave/Utils/AttentionExpansion.h"
#include "cleave/Analysis/FusedAttention.h"

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
using ::cleave::attentionGradients;
using ::cleave::AttentionGradients;
using ::cleave::AttentionOperands;
using ::cleave::attentionOutput;
using ::cleave::attentionProbabilities;
using ::cleave::Emitter;
using ::cleave::rotaryOutput;

namespace {
struct DecomposeAttentionPass
    : ::cleave::impl::DecomposeAttentionPassBase<DecomposeAttentionPass> {
  using DecomposeAttentionPassBase::DecomposeAttentionPassBase;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<AttentionOp, AttentionGradOp>(op) &&
          !(keepFused && ::cleave::hasFusedAttentionKernel(op, maxHeadDim)))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Emitter e{b, op->getLoc()};
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        AttentionOperands operands = AttentionOperands::of(attention);
        attention.getResult().replaceAllUsesWith(
            attentionOutput(e, operands, attentionProbabilities(e, operands)));
      } else {
        auto grad = cast<AttentionGradOp>(op);
        AttentionGradients g =
            attentionGradients(e, AttentionOperands::of(grad), grad.getDout());
        SmallVector<Value, 3> values = {g.dq, g.dk, g.dv};
        for (auto [result, value] : llvm::zip(grad.getResults(), values))
          result.replaceAllUsesWith(e.convert(
              value,
              cast<RankedTensorType>(result.getType()).getElementType()));
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
      Emitter e{b, op.getLoc()};
      op.getResult().replaceAllUsesWith(rotaryOutput(e, op));
      op.erase();
    }
  }
};
} // namespace
