//===- ElideExpertSums.cpp - Sums over ep no result needs -----------------===//
//
// --cleave-elide-expert-sums: under expert parallelism each rank's grouped
// matmul gives the rows routed to its experts whole and zeros elsewhere.
// The partitioner completes the partial sums over the experts' axes, but
// between two expert GEMMs of the same routing (the expert MLP's gate/up
// GEMM, activation, down GEMM; and the same backward) only the rank's own
// rows are ever read: the next grouped matmul and the weight gradient read
// the rows whose ids are this rank's experts. Such an all_reduce is
// dropped when every reader of its result, through ops that keep the rows
// apart, is one of those.
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "Cleave/Utils/ValueEquivalence.h"

#include "cleave/Transforms/Sharding/Passes.h"

#include "llvm/ADT/SetVector.h"

namespace cleave {
#define GEN_PASS_DEF_ELIDEEXPERTSUMSPASS
#include "cleave/Transforms/Sharding/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// The expert axes of a local grouped matmul or weight gradient and its
/// ids; null where it has none.
std::pair<ArrayAttr, Value> expertsOf(Operation *op) {
  auto over = op->getAttrOfType<ArrayAttr>(attr::kExpertsOver);
  if (auto gm = dyn_cast<GroupedMatmulOp>(op))
    return {over, gm.getGroupIds()};
  if (auto wg = dyn_cast<GroupedMatmulWeightGradOp>(op))
    return {over, wg.getGroupIds()};
  return {};
}

/// Whether `user`, reading `v` (rows along dimension 0), gives results
/// whose row m depends on row m of `v` and of its other operands only.
bool keepsRows(Operation *user, Value v) {
  auto rowsOf = [](Value x) {
    auto t = dyn_cast<RankedTensorType>(x.getType());
    return t && t.getRank() > 0 ? t.getDimSize(0) : -1;
  };
  int64_t rows = rowsOf(v);
  if (rows < 0 || user->getNumResults() != 1 ||
      rowsOf(user->getResult(0)) != rows)
    return false;
  if (isa<UnaryOp, BinaryOp, SelectOp, CompareOp, ConvertOp>(user))
    return llvm::all_of(user->getOperands(),
                        [&](Value o) { return rowsOf(o) == rows; });
  if (auto pad = dyn_cast<PadOp>(user))
    return pad.getOperand() == v && pad.getLow()[0] == 0 &&
           pad.getHigh()[0] == 0;
  if (auto slice = dyn_cast<SliceOp>(user))
    return slice.getStartIndices()[0] == 0 && slice.getStrides()[0] == 1;
  if (auto reshape = dyn_cast<ReshapeOp>(user))
    return true; // Rows of equal count and equal size stay rows.
  if (auto transpose = dyn_cast<TransposeOp>(user))
    return transpose.getPermutation()[0] == 0;
  if (auto concat = dyn_cast<ConcatOp>(user))
    return concat.getDimension() != 0;
  if (auto reduce = dyn_cast<ReduceOp>(user))
    return !llvm::is_contained(reduce.getDimensions(), 0);
  if (auto broadcast = dyn_cast<BroadcastInDimOp>(user))
    return !broadcast.getBroadcastDimensions().empty() &&
           broadcast.getBroadcastDimensions()[0] == 0;
  return false;
}

/// Whether `sum`'s result is read, through ops that keep rows apart, only
/// by grouped matmuls and weight gradients of `producer`'s routing and
/// experts.
bool onlyOwnRowsRead(AllReduceOp sum, Operation *producer,
                     ValueEquivalence &routing) {
  auto [over, ids] = expertsOf(producer);
  if (!over || sum.getMeshAxes() != over ||
      sum.getKind() != CollectiveReduceKind::sum)
    return false;
  llvm::SetVector<Value> reached;
  reached.insert(sum.getResult());
  for (size_t i = 0; i < reached.size(); ++i) {
    Value v = reached[i];
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      auto [userOver, userIds] = expertsOf(user);
      if (userOver) {
        // The rows it multiplies (a weight gradient's x and dy; not a
        // grouped matmul's weights or ids).
        bool rowsOperand = isa<GroupedMatmulOp>(user)
                               ? use.getOperandNumber() == 0
                               : use.getOperandNumber() <= 1;
        if (!rowsOperand || userOver != over || !routing.same(userIds, ids))
          return false;
        continue;
      }
      if (!keepsRows(user, v))
        return false;
      reached.insert(user->getResult(0));
    }
  }
  return true;
}

struct ElideExpertSumsPass
    : ::cleave::impl::ElideExpertSumsPassBase<ElideExpertSumsPass> {
  void runOnOperation() override {
    SmallVector<AllReduceOp> sums;
    ValueEquivalence routing;
    getOperation().walk([&](AllReduceOp sum) {
      Operation *producer = sum.getOperand().getDefiningOp();
      if (producer && isa<GroupedMatmulOp>(producer) &&
          onlyOwnRowsRead(sum, producer, routing))
        sums.push_back(sum);
    });
    for (AllReduceOp sum : sums) {
      sum.getResult().replaceAllUsesWith(sum.getOperand());
      sum.erase();
    }
  }
};

} // namespace
