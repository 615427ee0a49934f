//===- DecomposeAttention.cpp - Attention as contractions and a softmax ---===//
//
// The expression is built by the same helpers as the VJP rule
// (Autodiff/VJPRulesAttention.cpp).
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "Autodiff/VJPHelpers.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "cleave-decompose-attention"

namespace cleave {
#define GEN_PASS_DEF_DECOMPOSEATTENTIONPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {
struct DecomposeAttentionPass
    : ::cleave::impl::DecomposeAttentionPassBase<DecomposeAttentionPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) { ops.push_back(op); });
    for (AttentionOp op : ops) {
      OpBuilder b(op);
      ::cleave::autodiff::Emitter e{b, op.getLoc()};
      ::cleave::autodiff::AttentionProbabilities parts =
          ::cleave::autodiff::attentionProbabilities(e, op);
      op.getResult().replaceAllUsesWith(
          ::cleave::autodiff::attentionOutput(e, op, parts));
      op.erase();
    }
  }
};
} // namespace
