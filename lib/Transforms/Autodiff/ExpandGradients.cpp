//===- ExpandGradients.cpp - Build the gradients cleave.gradient marks ----===//
//
// --cleave-expand-gradients: replaces each cleave.gradient marker (the ONNX
// importer's Gradient nodes) with the gradients buildGradients emits right
// before it.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Autodiff.h"
#include "cleave/Transforms/Autodiff/Passes.h"

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "cleave-expand-gradients"

namespace cleave {
#define GEN_PASS_DEF_EXPANDGRADIENTSPASS
#include "cleave/Transforms/Autodiff/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {
struct ExpandGradientsPass
    : ::cleave::impl::ExpandGradientsPassBase<ExpandGradientsPass> {
  void runOnOperation() override {
    // In program order: a later marker may differentiate through the
    // expansion of an earlier one.
    SmallVector<GradientOp> markers;
    getOperation().walk<WalkOrder::PreOrder>(
        [&](GradientOp op) { markers.push_back(op); });
    for (GradientOp op : markers) {
      OpBuilder b(op);
      FailureOr<SmallVector<Value>> grads =
          ::cleave::buildGradients(b, op.getLoss(), op.getWrt());
      if (failed(grads)) {
        op.emitError() << "cannot build the gradients of its loss";
        return signalPassFailure();
      }
      op.replaceAllUsesWith(*grads);
      op.erase();
      ++numExpanded;
    }
  }
};
} // namespace
