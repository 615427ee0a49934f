//===- LowerMemRefCopy.cpp - memref.copy as linalg.copy -------------------===//
//
// `--cleave-lower-memref-copy`: rewrites `memref.copy` as `linalg.copy` so
// that copies between strided buffers become loops instead of calls to
// MLIR's C runner `memrefCopy`, which kernels cannot link against.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/Common/Passes.h"

#define DEBUG_TYPE "cleave-lower-memref-copy"

namespace cleave {
#define GEN_PASS_DEF_LOWERMEMREFCOPYPASS
#include "cleave/Target/Common/Passes.h.inc"
} // namespace cleave

using namespace mlir;

namespace {

struct LowerMemRefCopyPass
    : ::cleave::impl::LowerMemRefCopyPassBase<LowerMemRefCopyPass> {
  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp op) { copies.push_back(op); });
    for (memref::CopyOp op : copies) {
      OpBuilder b(op);
      linalg::CopyOp::create(b, op.getLoc(), op.getSource(), op.getTarget());
      op.erase();
    }
  }
};

} // namespace
