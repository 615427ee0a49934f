//===- MarkIndexRanges.cpp - The values @main's index inputs may hold -----===//
//
// --cleave-mark-index-ranges: each integer argument of @main that a gather
// reads as indices gets `cleave.valid_range` = [-rows, rows) of the smallest
// table it indexes (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Training/Passes.h"

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "cleave-mark-index-ranges"

namespace cleave {
#define GEN_PASS_DEF_MARKINDEXRANGESPASS
#include "cleave/Transforms/Training/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace cleave {
namespace {
struct MarkIndexRangesPass
    : impl::MarkIndexRangesPassBase<MarkIndexRangesPass> {
  void runOnOperation() override {
    auto main = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!main)
      return;
    Builder b(&getContext());
    for (BlockArgument arg : main.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || !isa<IntegerType>(type.getElementType()))
        continue;
      int64_t rows = -1;
      for (OpOperand &use : arg.getUses()) {
        auto gather = dyn_cast<mlir::cleave::GatherOp>(use.getOwner());
        if (!gather || use.getOperandNumber() != 1)
          continue;
        int64_t n = cast<RankedTensorType>(gather.getOperand().getType())
                        .getDimSize(gather.getAxis());
        rows = rows < 0 ? n : std::min(rows, n);
      }
      if (rows > 0)
        main.setArgAttr(arg.getArgNumber(), mlir::cleave::attr::kValidRange,
                        b.getDenseI64ArrayAttr({-rows, rows}));
    }
  }
};
} // namespace
} // namespace cleave
