//===- SplatConstantsToFill.cpp - Splat tensor constants as linalg.fill ---===//
//
// `--cleave-splat-constants-to-fill`: splat tensor constants (other than
// scalars) become `linalg.fill` of an empty tensor, so they bufferize to a
// filled buffer instead of a global of the full size in the kernel object
// (for CUDA, host memory the device cannot read).
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/Common/Passes.h"

#define DEBUG_TYPE "cleave-splat-constants-to-fill"

namespace cleave {
#define GEN_PASS_DEF_SPLATCONSTANTSTOFILLPASS
#include "cleave/Target/Common/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct SplatConstantsToFillPass
    : ::cleave::impl::SplatConstantsToFillPassBase<SplatConstantsToFillPass> {
  void runOnOperation() override {
    SmallVector<arith::ConstantOp> splats;
    getOperation().walk([&](arith::ConstantOp op) {
      auto type = dyn_cast<RankedTensorType>(op.getType());
      auto value = dyn_cast<SplatElementsAttr>(op.getValue());
      if (type && value && type.getNumElements() > 1)
        splats.push_back(op);
    });
    for (arith::ConstantOp op : splats) {
      OpBuilder b(op);
      auto type = cast<RankedTensorType>(op.getType());
      Value scalar = arith::ConstantOp::create(
          b, op.getLoc(), type.getElementType(),
          cast<TypedAttr>(cast<SplatElementsAttr>(op.getValue())
                              .getSplatValue<Attribute>()));
      Value empty = tensor::EmptyOp::create(b, op.getLoc(), type.getShape(),
                                            type.getElementType());
      op.replaceAllUsesWith(
          linalg::FillOp::create(b, op.getLoc(), scalar, empty).getResult(0));
      op.erase();
    }
  }
};

} // namespace
