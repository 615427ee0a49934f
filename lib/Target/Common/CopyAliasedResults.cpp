//===- CopyAliasedResults.cpp - Kernel results that alias are copied ------===//
//
// `--cleave-copy-aliased-results`: every kernel result becomes a tensor of
// its own. A result that is a kernel argument, or the same value as an
// earlier result (folding can make `mul(ones, x)` return x), is copied.
// Results become out-parameters the caller owns, so they may alias neither
// an input nor each other.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/Common/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#define DEBUG_TYPE "cleave-copy-aliased-results"

namespace cleave {
#define GEN_PASS_DEF_COPYALIASEDRESULTSPASS
#include "cleave/Target/Common/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct CopyAliasedResultsPass
    : ::cleave::impl::CopyAliasedResultsPassBase<CopyAliasedResultsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      OpBuilder b(ret);
      llvm::SmallPtrSet<Value, 8> seen;
      for (OpOperand &operand : ret->getOpOperands()) {
        Value v = operand.get();
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (!type || (!isa<BlockArgument>(v) && seen.insert(v).second))
          continue;
        // alloc_tensor with `copy` always bufferizes to a fresh buffer.
        operand.set(bufferization::AllocTensorOp::create(b, ret.getLoc(), type,
                                                         ValueRange{}, v));
      }
    });
  }
};

} // namespace
