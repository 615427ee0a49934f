//===- CanonicalizeContractions.cpp - Batched-GEMM form of contractions ---===//

#include "cleave/Transforms/Passes.h"

#include "cleave/Analysis/GemmShape.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <numeric>

#define DEBUG_TYPE "cleave-canonicalize-contractions"

namespace cleave {
#define GEN_PASS_DEF_CANONICALIZECONTRACTIONSPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::isDimRange;

//===----------------------------------------------------------------------===//
// Rewrites
//===----------------------------------------------------------------------===//

/// Replaces `op` by a contraction of `lhs` and `rhs` with the given
/// dimension numbers and the same result type, built by `b`.
static ContractOp replaceContract(OpBuilder &b, ContractOp op, Value lhs,
                                  Value rhs, ArrayRef<int64_t> lb,
                                  ArrayRef<int64_t> rb, ArrayRef<int64_t> lc,
                                  ArrayRef<int64_t> rc) {
  auto replacement = ContractOp::create(b, op.getLoc(), op.getType(), lhs, rhs,
                                        lb, rb, lc, rc);
  op.replaceAllUsesWith(replacement.getResult());
  op.erase();
  return replacement;
}

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
  if (nb == 0 || !isDimRange(lb, 0) || !isDimRange(rb, 0) ||
      !isDimRange(bcast.getBroadcastDimensions(), nb) ||
      wType.getShape() != rhsType.getShape().drop_front(nb))
    return {};
  SmallVector<int64_t> rc;
  for (int64_t d : op.getRhsContractingDimensions())
    rc.push_back(d - nb);
  OpBuilder b(op);
  return replaceContract(b, op, op.getLhs(), bcast.getOperand(), {}, {},
                         op.getLhsContractingDimensions(), rc);
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

/// Dimensions of `op`'s lhs (or rhs) by role, as stored on the op.
struct OperandDims {
  SmallVector<int64_t> batch, contract;
};

/// The GEMM layout of one operand: batch dimensions leading, contracting
/// dimensions contiguous at the front (after batch) or at the back.
static bool isGemmOperand(ArrayRef<int64_t> batch, ArrayRef<int64_t> contract,
                          int64_t rank) {
  int64_t nb = batch.size(), nk = contract.size();
  return isDimRange(batch, 0) &&
         (isDimRange(contract, rank - nk) || isDimRange(contract, nb));
}

/// The permutation that brings one operand into a GEMM layout: batch
/// dimensions first, then `contract` (in pair order) and the free
/// dimensions, in whichever of the two orders (contract-free or
/// free-contract) keeps the operand's innermost dimension innermost, so that
/// the materialized transpose copies contiguous rows; `contractFirst` breaks
/// the tie (the non-transposed GEMM layout of the operand).
static SmallVector<int64_t> gemmLayoutPermutation(ArrayRef<int64_t> batch,
                                                  ArrayRef<int64_t> contract,
                                                  int64_t rank,
                                                  bool contractFirst) {
  SmallVector<int64_t> free =
      ContractOp::getFreeDimensions(rank, batch, contract);
  bool innerIsContract = !contract.empty() && contract.back() == rank - 1;
  bool innerIsFree = !free.empty() && free.back() == rank - 1;
  if (innerIsContract)
    contractFirst = false;
  else if (innerIsFree)
    contractFirst = true;
  SmallVector<int64_t> perm(batch);
  if (contractFirst) {
    llvm::append_range(perm, contract);
    llvm::append_range(perm, free);
  } else {
    llvm::append_range(perm, free);
    llvm::append_range(perm, contract);
  }
  return perm;
}

/// Applies `perm` to `v` and returns the new positions of `dims`.
static SmallVector<int64_t> permutedDims(ArrayRef<int64_t> perm,
                                         ArrayRef<int64_t> dims) {
  SmallVector<int64_t> out;
  for (int64_t d : dims)
    out.push_back(llvm::find(perm, d) - perm.begin());
  return out;
}

/// Transposes operands that are not in a GEMM layout.
static ContractOp transposeToGemmLayout(ContractOp op) {
  if (succeeded(::cleave::getGemmShape(op)))
    return op;
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
  SmallVector<int64_t> lb(op.getLhsBatchingDimensions()),
      rb(op.getRhsBatchingDimensions());

  OpBuilder b(op);
  Value lhs = op.getLhs(), rhs = op.getRhs();
  auto toGemmLayout = [&](Value &operand, SmallVector<int64_t> &batch,
                          SmallVector<int64_t> &contract, int64_t rank,
                          bool contractFirst) {
    if (isGemmOperand(batch, contract, rank))
      return;
    SmallVector<int64_t> perm =
        gemmLayoutPermutation(batch, contract, rank, contractFirst);
    operand = transpose(b, op.getLoc(), operand, perm);
    contract = permutedDims(perm, contract);
    batch = permutedDims(perm, batch);
  };
  toGemmLayout(lhs, lb, lc, rl, /*contractFirst=*/false);
  toGemmLayout(rhs, rb, rc, rr, /*contractFirst=*/true);
  return replaceContract(b, op, lhs, rhs, lb, rb, lc, rc);
}

/// contract(transpose(x), y) -> contract(x, y) with the dimension numbers
/// mapped through the permutation (likewise for the rhs), when the free
/// dimensions of x keep their order (the result layout is unchanged) and
/// the fold does not make things worse: x is in a GEMM layout (the
/// transpose disappears, the GEMM reads x with transA/transB), or the
/// transpose x would need instead keeps x's innermost dimension innermost
/// while the folded one does not (a row copy instead of a strided gather).
static ContractOp foldOperandTransposes(ContractOp op) {
  SmallVector<int64_t> lb(op.getLhsBatchingDimensions()),
      rb(op.getRhsBatchingDimensions()), lc(op.getLhsContractingDimensions()),
      rc(op.getRhsContractingDimensions());
  Value lhs = op.getLhs(), rhs = op.getRhs();
  bool changed = false;
  auto tryFold = [&](Value &operand, SmallVector<int64_t> &batch,
                     SmallVector<int64_t> &contract, bool contractFirst) {
    auto t = operand.getDefiningOp<TransposeOp>();
    if (!t)
      return;
    ArrayRef<int64_t> perm = t.getPermutation();
    int64_t rank = perm.size();
    SmallVector<int64_t> newBatch, newContract;
    for (int64_t d : batch)
      newBatch.push_back(perm[d]);
    for (int64_t d : contract)
      newContract.push_back(perm[d]);
    SmallVector<int64_t> free =
        ContractOp::getFreeDimensions(rank, batch, contract);
    for (size_t i = 1; i < free.size(); ++i)
      if (perm[free[i - 1]] > perm[free[i]])
        return; // the result layout would change
    // The layout the operand has through the transpose; the fold must
    // leave one at least as good.
    bool wasGemm = isGemmOperand(batch, contract, rank);
    bool foldedGemm = isGemmOperand(newBatch, newContract, rank);
    if (!foldedGemm) {
      if (!wasGemm)
        return; // transposeToGemmLayout composes the two transposes anyway
      SmallVector<int64_t> needed =
          gemmLayoutPermutation(newBatch, newContract, rank, contractFirst);
      if (perm.back() == rank - 1 || needed.back() != rank - 1)
        return;
    }
    operand = t.getOperand();
    batch = std::move(newBatch);
    contract = std::move(newContract);
    changed = true;
  };
  tryFold(lhs, lb, lc, /*contractFirst=*/false);
  tryFold(rhs, rb, rc, /*contractFirst=*/true);
  if (!changed)
    return op;
  OpBuilder b(op);
  return replaceContract(b, op, lhs, rhs, lb, rb, lc, rc);
}

/// A product rearranged (transposes, reshapes) and then narrowed
/// (attention's context [b, heads, s, d] in f32, transposed to [b, s, h]
/// and rounded to bf16) is narrowed first: the GEMM writes the narrow type
/// and the rearrangement moves half the bytes. Each op of the chain has one
/// reader; converting elementwise commutes with moving elements.
static void narrowBeforeDataMovement(ContractOp op) {
  SmallVector<Operation *> chain;
  Value v = op.getResult();
  while (v.hasOneUse() && isa<TransposeOp, ReshapeOp>(*v.user_begin())) {
    chain.push_back(*v.user_begin());
    v = chain.back()->getResult(0);
  }
  if (chain.empty() || !v.hasOneUse())
    return;
  // A tagged convert (a parameter's gradient, cleave.gradient_of) stays
  // where the tag says the value is finished.
  auto convert = dyn_cast<ConvertOp>(*v.user_begin());
  if (!convert || !convert->getDiscardableAttrDictionary().empty())
    return;
  auto from = dyn_cast<FloatType>(op.getType().getElementType());
  auto to = dyn_cast<FloatType>(convert.getType().getElementType());
  if (!from || !to || to.getWidth() >= from.getWidth())
    return;
  OpBuilder b(op);
  b.setInsertionPointAfter(op);
  Value x = ConvertOp::create(b, convert.getLoc(), op.getType().clone(to),
                              op.getResult());
  for (Operation *member : chain) {
    b.setInsertionPoint(member);
    IRMapping mapping;
    mapping.map(member->getOperand(0), x);
    Operation *copy = b.clone(*member, mapping);
    copy->getResult(0).setType(
        cast<RankedTensorType>(member->getResult(0).getType()).clone(to));
    x = copy->getResult(0);
  }
  convert.replaceAllUsesWith(x);
  convert.erase();
  for (Operation *member : llvm::reverse(chain))
    member->erase();
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
      op = foldOperandTransposes(op);
      narrowBeforeDataMovement(transposeToGemmLayout(op));
    }
    // Transposes and broadcasts left without users are dead.
    getOperation().walk([](TransposeOp op) {
      if (op->use_empty())
        op.erase();
    });
    getOperation().walk([](BroadcastInDimOp op) {
      if (op->use_empty())
        op.erase();
    });
  }
};
} // namespace
