//===- GemmShape.cpp - Contractions in batched-GEMM form ------------------===//
//
// getGemmShape and the dimension helpers of cleave/Analysis/GemmShape.h.
//
//===----------------------------------------------------------------------===//

#include "cleave/Analysis/GemmShape.h"

using namespace mlir;
using namespace mlir::cleave;

/// The product of `shape`'s sizes over `dims`.
static int64_t product(ArrayRef<int64_t> shape, ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= shape[d];
  return p;
}

namespace cleave {

bool isDimRange(ArrayRef<int64_t> dims, int64_t start) {
  for (auto [i, d] : llvm::enumerate(dims))
    if (d != start + static_cast<int64_t>(i))
      return false;
  return true;
}

FailureOr<GemmShape> getGemmShape(ContractOp op) {
  auto lhsShape = cast<RankedTensorType>(op.getLhs().getType()).getShape();
  auto rhsShape = cast<RankedTensorType>(op.getRhs().getType()).getShape();
  int64_t rl = lhsShape.size(), rr = rhsShape.size();
  ArrayRef<int64_t> lb = op.getLhsBatchingDimensions(),
                    rb = op.getRhsBatchingDimensions(),
                    lc = op.getLhsContractingDimensions(),
                    rc = op.getRhsContractingDimensions();
  int64_t nb = lb.size(), nk = lc.size();
  if (!isDimRange(lb, 0) || !isDimRange(rb, 0))
    return failure();
  GemmShape shape;
  if (isDimRange(lc, rl - nk))
    shape.transA = false;
  else if (isDimRange(lc, nb))
    shape.transA = true;
  else
    return failure();
  if (isDimRange(rc, nb))
    shape.transB = false;
  else if (isDimRange(rc, rr - nk))
    shape.transB = true;
  else
    return failure();
  shape.batch = product(lhsShape, lb);
  shape.k = product(lhsShape, lc);
  shape.m = product(lhsShape, ContractOp::getFreeDimensions(rl, lb, lc));
  shape.n = product(rhsShape, ContractOp::getFreeDimensions(rr, rb, rc));
  return shape;
}
} // namespace cleave
