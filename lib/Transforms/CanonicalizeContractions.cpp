//===- CanonicalizeContractions.cpp - Batched-GEMM form of contractions ----===//

#include "cleave/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <numeric>

#define DEBUG_TYPE "cleave-canonicalize-contractions"

namespace cleave {
#define GEN_PASS_DEF_CANONICALIZECONTRACTIONSPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// GEMM shape of a canonical contraction
//===----------------------------------------------------------------------===//

/// True if `v` is `start, start + 1, ...`.
static bool isRange(ArrayRef<int64_t> v, int64_t start) {
  for (auto [i, d] : llvm::enumerate(v))
    if (d != start + static_cast<int64_t>(i))
      return false;
  return true;
}

static int64_t product(ArrayRef<int64_t> shape, ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= shape[d];
  return p;
}

static SmallVector<int64_t> freeDims(int64_t rank, ArrayRef<int64_t> batch,
                                     ArrayRef<int64_t> contract) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(batch, d) && !llvm::is_contained(contract, d))
      dims.push_back(d);
  return dims;
}

namespace cleave {
FailureOr<GemmShape> getGemmShape(ContractOp op) {
  auto lhsShape = cast<RankedTensorType>(op.getLhs().getType()).getShape();
  auto rhsShape = cast<RankedTensorType>(op.getRhs().getType()).getShape();
  int64_t rl = lhsShape.size(), rr = rhsShape.size();
  ArrayRef<int64_t> lb = op.getLhsBatchingDimensions(),
                    rb = op.getRhsBatchingDimensions(),
                    lc = op.getLhsContractingDimensions(),
                    rc = op.getRhsContractingDimensions();
  int64_t nb = lb.size(), nk = lc.size();
  if (!isRange(lb, 0) || !isRange(rb, 0))
    return failure();
  GemmShape shape;
  if (isRange(lc, rl - nk))
    shape.transA = false;
  else if (isRange(lc, nb))
    shape.transA = true;
  else
    return failure();
  if (isRange(rc, nb))
    shape.transB = false;
  else if (isRange(rc, rr - nk))
    shape.transB = true;
  else
    return failure();
  shape.batch = product(lhsShape, lb);
  shape.k = product(lhsShape, lc);
  shape.m = product(lhsShape, freeDims(rl, lb, lc));
  shape.n = product(rhsShape, freeDims(rr, rb, rc));
  return shape;
}
} // namespace cleave

//===----------------------------------------------------------------------===//
// Rewrites
//===----------------------------------------------------------------------===//

/// contract(x, broadcast_in_dim(w)) where the broadcast only adds the
/// leading batch dimensions -> contract(x, w) with those dimensions as lhs
/// free dimensions. The result layout is unchanged.
static ContractOp foldBroadcastBatch(ContractOp op) {
  auto bcast = op.getRhs().getDefiningOp<BroadcastInDimOp>();
  if (!bcast)
    return {};
  ArrayRef<int64_t> lb = op.getLhsBatchingDimensions(),
                    rb = op.getRhsBatchingDimensions();
  int64_t nb = lb.size();
  auto rhsType = cast<RankedTensorType>(op.getRhs().getType());
  auto wType = cast<RankedTensorType>(bcast.getOperand().getType());
  if (nb == 0 || !isRange(lb, 0) || !isRange(rb, 0) ||
      !isRange(bcast.getBroadcastDimensions(), nb) ||
      wType.getShape() != rhsType.getShape().drop_front(nb))
    return {};
  SmallVector<int64_t> rc;
  for (int64_t d : op.getRhsContractingDimensions())
    rc.push_back(d - nb);
  OpBuilder b(op);
  auto replacement = ContractOp::create(
      b, op.getLoc(), op.getType(), op.getLhs(), bcast.getOperand(),
      ArrayRef<int64_t>{}, ArrayRef<int64_t>{}, op.getLhsContractingDimensions(),
      rc);
  op.replaceAllUsesWith(replacement.getResult());
  op.erase();
  return replacement;
}

static Value transpose(OpBuilder &b, Location loc, Value v,
                       ArrayRef<int64_t> perm) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  return TransposeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), v, perm);
}

/// Transposes operands that are not in a GEMM layout.
static void transposeToGemmLayout(ContractOp op) {
  if (succeeded(::cleave::getGemmShape(op)))
    return;
  int64_t rl = cast<RankedTensorType>(op.getLhs().getType()).getRank();
  int64_t rr = cast<RankedTensorType>(op.getRhs().getType()).getRank();
  // Sort the contracting pairs by lhs dimension.
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  for (auto [l, r] : llvm::zip(op.getLhsContractingDimensions(),
                               op.getRhsContractingDimensions()))
    pairs.push_back({l, r});
  llvm::sort(pairs);
  SmallVector<int64_t> lc, rc;
  for (auto [l, r] : pairs) {
    lc.push_back(l);
    rc.push_back(r);
  }
  ArrayRef<int64_t> lb = op.getLhsBatchingDimensions(),
                    rb = op.getRhsBatchingDimensions();
  int64_t nb = lb.size(), nk = lc.size();

  OpBuilder b(op);
  Value lhs = op.getLhs(), rhs = op.getRhs();
  bool lhsOk = isRange(lb, 0) && (isRange(lc, rl - nk) || isRange(lc, nb));
  if (!lhsOk) {
    SmallVector<int64_t> perm(lb);
    llvm::append_range(perm, freeDims(rl, lb, lc));
    llvm::append_range(perm, lc);
    lhs = transpose(b, op.getLoc(), lhs, perm);
    lc.clear();
    for (int64_t i = 0; i < nk; ++i)
      lc.push_back(rl - nk + i);
  }
  bool rhsOk = isRange(rb, 0) && (isRange(rc, nb) || isRange(rc, rr - nk));
  if (!rhsOk) {
    SmallVector<int64_t> perm(rb);
    llvm::append_range(perm, rc);
    llvm::append_range(perm, freeDims(rr, rb, rc));
    rhs = transpose(b, op.getLoc(), rhs, perm);
    rc.clear();
    for (int64_t i = 0; i < nk; ++i)
      rc.push_back(nb + i);
  }
  SmallVector<int64_t> batch(nb);
  std::iota(batch.begin(), batch.end(), 0);
  auto replacement = ContractOp::create(b, op.getLoc(), op.getType(), lhs, rhs,
                                        batch, batch, lc, rc);
  op.replaceAllUsesWith(replacement.getResult());
  op.erase();
}

namespace {
struct CanonicalizeContractionsPass
    : public ::cleave::impl::CanonicalizeContractionsPassBase<
          CanonicalizeContractionsPass> {
  void runOnOperation() override {
    SmallVector<ContractOp> contracts;
    getOperation().walk([&](ContractOp op) { contracts.push_back(op); });
    for (ContractOp op : contracts) {
      if (ContractOp folded = foldBroadcastBatch(op))
        op = folded;
      transposeToGemmLayout(op);
    }
    // Broadcasts left without users are dead.
    getOperation().walk([](BroadcastInDimOp op) {
      if (op->use_empty())
        op.erase();
    });
  }
};
} // namespace
