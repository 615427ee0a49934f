//===- ExpertCapacity.cpp - Grouped matmuls with a capacity per expert ----===//
//
// --cleave-expert-capacity{factor=F}: each cleave.grouped_matmul becomes
// the capacity form of GShard and Switch: the routed rows of each group (a
// row of the batch: a sequence's tokens times their k choices) are placed in
// a buffer of C slots per expert, in row order, C = ceil(F * rows per
// group / E); a row past its expert's C slots is dropped (its result is
// zero: the token goes on through the residual). The experts then multiply
// their slots as one batched contraction, and each row reads its result
// back from its slot.
//
//   slot[g, r]  = id * C + (rows before r in g routed to id)
//   buffer      = scatter of the kept rows into G x E x C x K zeros
//   results     = contract(buffer, W) over the experts: E x G x C x N
//   y[g, r]     = results[id, g, slot] where kept, else 0
//
// Static shapes throughout: under expert parallelism (an ep axis splitting
// W's experts) the partitioner moves the buffer's split from the groups to
// the experts and back, an all_to_all over ep each way, as GShard's
// dispatch and combine. The groups are the batch rows (dimension 0 of
// @main's first input), so which rows are dropped does not depend on the
// mesh.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "Cleave/IR/CleaveOps.h"
#include "Cleave/Utils/ValueEquivalence.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_EXPERTCAPACITYPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Builds the capacity form of grouped matmuls that share one routing:
/// `groups` groups of rows, `capacity` slots per expert and group.
class CapacityBuilder {
public:
  CapacityBuilder(GroupedMatmulOp op, int64_t groups, int64_t capacity)
      : b(op), loc(op.getLoc()), g(groups), c(capacity) {
    auto xt = cast<RankedTensorType>(op.getX().getType());
    r = xt.getDimSize(0) / g;
    e = cast<RankedTensorType>(op.getW().getType()).getDimSize(0);
    route(op.getGroupIds());
  }

  /// `x` (M x K) dispatched: each kept row in its slot, G x E x C x K.
  Value dispatch(Value x) {
    auto xt = cast<RankedTensorType>(x.getType());
    int64_t k = xt.getDimSize(1);
    Type ft = xt.getElementType();
    auto grk = RankedTensorType::get({g, r, k}, ft);
    Value keptK = broadcast(kept, grk.clone(b.getI1Type()), {0, 1});
    Value rows = select(keptK, reshape(x, {g, r, k}), splat(ft, {g, r, k}, 0));
    Value buffer =
        ScatterOp::create(b, loc, RankedTensorType::get({g, e * c, k}, ft),
                          ScatterKind::add, splat(ft, {g, e * c, k}, 0),
                          broadcast(slot, grk.clone(i64()), {0, 1}), rows, 1);
    return reshape(buffer, {g, e, c, k});
  }

  /// Each slot's row times its expert's weights, one contraction batched
  /// over the experts (dimension `expertDim` of `slots`, G x E x C x K or
  /// E x G x C x K): E x G x C x N.
  Value experts(Value slots, int64_t expertDim, Value w, bool transposeW) {
    auto st = cast<RankedTensorType>(slots.getType());
    auto wt = cast<RankedTensorType>(w.getType());
    int64_t n = wt.getDimSize(transposeW ? 1 : 2);
    return ContractOp::create(
        b, loc, RankedTensorType::get({e, g, c, n}, st.getElementType()), slots,
        w, b.getDenseI64ArrayAttr({expertDim}), b.getDenseI64ArrayAttr({0}),
        b.getDenseI64ArrayAttr({3}),
        b.getDenseI64ArrayAttr({transposeW ? 2 : 1}));
  }

  /// The slots' results (E x G x C x N) combined: each kept row reads its
  /// slot, the others zero; M x N.
  Value combine(Value results) {
    auto st = cast<RankedTensorType>(results.getType());
    int64_t n = st.getDimSize(3);
    Type ft = st.getElementType();
    Value slots =
        TransposeOp::create(b, loc, RankedTensorType::get({g, e, c, n}, ft),
                            results, ArrayRef<int64_t>{1, 0, 2, 3});
    auto grn = RankedTensorType::get({g, r, n}, ft);
    Value y =
        GatherElementsOp::create(b, loc, grn, reshape(slots, {g, e * c, n}),
                                 broadcast(slot, grn.clone(i64()), {0, 1}), 1);
    y = select(broadcast(kept, grn.clone(b.getI1Type()), {0, 1}), y,
               splat(ft, {g, r, n}, 0));
    return reshape(y, {g * r, n});
  }

  /// One grouped matmul in the capacity form.
  Value build(GroupedMatmulOp op) {
    return combine(
        experts(dispatch(op.getX()), 1, op.getW(), op.getTransposeW()));
  }

  OpBuilder &builder() { return b; }

private:
  /// Each row's expert (negative from the end) and its place among the
  /// group's rows routed there (an inclusive count down the rows of a
  /// one-hot of the experts): `kept` and `slot` (G x R).
  void route(Value groupIds) {
    Value ids = convert(reshape(groupIds, {g, r}), i64());
    Value negative = compare(CompareKind::lt, ids, splat(i64(), {g, r}, 0));
    ids = select(negative, add(ids, splat(i64(), {g, r}, e)), ids);
    Value routed = and_(compare(CompareKind::ge, ids, splat(i64(), {g, r}, 0)),
                        compare(CompareKind::lt, ids, splat(i64(), {g, r}, e)));
    auto gre = RankedTensorType::get({g, r, e}, i64());
    Value experts = IotaOp::create(b, loc, gre, 2);
    Value oneHot =
        select(compare(CompareKind::eq, broadcast(ids, gre, {0, 1}), experts),
               splat(i64(), {g, r, e}, 1), splat(i64(), {g, r, e}, 0));
    Value counts = CumSumOp::create(b, loc, oneHot, 1, false, false);
    Value place = ReduceOp::create(b, loc, RankedTensorType::get({g, r}, i64()),
                                   ReduceKind::sum, mul(oneHot, counts),
                                   ArrayRef<int64_t>{2});
    place = sub(place, splat(i64(), {g, r}, 1));
    kept =
        and_(routed, compare(CompareKind::lt, place, splat(i64(), {g, r}, c)));
    // Dropped rows read and write slot 0 with zeros.
    slot = select(kept, add(mul(ids, splat(i64(), {g, r}, c)), place),
                  splat(i64(), {g, r}, 0));
  }

  Type i64() { return b.getI64Type(); }
  Value splat(Type et, ArrayRef<int64_t> shape, int64_t v) {
    auto scalarType = RankedTensorType::get({}, et);
    Attribute value = isa<FloatType>(et)
                          ? Attribute(b.getFloatAttr(et, double(v)))
                          : Attribute(b.getIntegerAttr(et, v));
    Value scalar = ConstantOp::create(
        b, loc, scalarType, DenseElementsAttr::get(scalarType, value));
    return broadcast(scalar, RankedTensorType::get(shape, et), {});
  }
  Value broadcast(Value v, RankedTensorType type, ArrayRef<int64_t> dims) {
    return BroadcastInDimOp::create(b, loc, type, v,
                                    b.getDenseI64ArrayAttr(dims));
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getShape() == shape)
      return v;
    return ReshapeOp::create(b, loc, type.clone(shape), v);
  }
  Value convert(Value v, Type et) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getElementType() == et)
      return v;
    return ConvertOp::create(b, loc, type.clone(et), v);
  }
  Value compare(CompareKind kind, Value lhs, Value rhs) {
    auto type = cast<RankedTensorType>(lhs.getType());
    return CompareOp::create(b, loc, type.clone(b.getI1Type()), kind, lhs, rhs);
  }
  Value select(Value pred, Value lhs, Value rhs) {
    return SelectOp::create(b, loc, pred, lhs, rhs);
  }
  Value add(Value lhs, Value rhs) {
    return BinaryOp::create(b, loc, BinaryKind::add, lhs, rhs);
  }
  Value sub(Value lhs, Value rhs) {
    return BinaryOp::create(b, loc, BinaryKind::sub, lhs, rhs);
  }
  Value mul(Value lhs, Value rhs) {
    return BinaryOp::create(b, loc, BinaryKind::mul, lhs, rhs);
  }
  Value and_(Value lhs, Value rhs) {
    return BinaryOp::create(b, loc, BinaryKind::land, lhs, rhs);
  }

  OpBuilder b;
  Location loc;
  int64_t g, c, r = 0, e = 0;
  Value kept, slot;
};

/// The row-wise ops between two grouped matmuls of one routing.
struct ExpertChain {
  SmallVector<Operation *> ops; ///< In program order.
  GroupedMatmulOp second;
};

/// Whether `op`, with `rows` rows along dimension 0 in its tensors of
/// that many rows, keeps rows apart in a way cloneOnSlots can redo at
/// another row count.
bool keepsRows(Operation *op, int64_t rows) {
  if (op->getNumResults() != 1)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || type.getRank() == 0 || type.getDimSize(0) != rows)
    return false;
  if (isa<UnaryOp, BinaryOp, SelectOp, CompareOp, ConvertOp>(op))
    return true;
  if (auto slice = dyn_cast<SliceOp>(op))
    return slice.getStartIndices()[0] == 0 && slice.getStrides()[0] == 1;
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    return cast<RankedTensorType>(reshape.getOperand().getType())
               .getDimSize(0) == rows;
  if (auto transpose = dyn_cast<TransposeOp>(op))
    return transpose.getPermutation()[0] == 0;
  return false;
}

/// Whether an operand from outside a chain, with the routed rows (`rows`
/// along dimension 0), can be made again at the slots' shape: a splat
/// constant, or a broadcast that does not read along the rows.
bool remakeable(Value v, int64_t rows) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() == 0 || type.getDimSize(0) != rows)
    return true; // Not along the rows: read as it is.
  DenseElementsAttr value;
  if (matchPattern(v, m_Constant(&value)))
    return value.isSplat();
  auto bcast = v.getDefiningOp<BroadcastInDimOp>();
  return bcast && !llvm::is_contained(bcast.getBroadcastDimensions(), 0);
}

/// The chain from `first`'s result to the one grouped matmul of the same
/// routing (`routing` decides that its ids compute `first`'s) and experts
/// reading it (through row-wise ops) as its rows; none if anything else
/// reads a value of the chain or an outside operand cannot be made again
/// at the slots' shape.
std::optional<ExpertChain> findChain(GroupedMatmulOp first,
                                     ValueEquivalence &routing) {
  int64_t rows = first.getX().getType().getDimSize(0);
  int64_t experts = first.getW().getType().getDimSize(0);
  ExpertChain chain;
  llvm::SetVector<Value> reached;
  reached.insert(first.getResult());
  for (size_t i = 0; i < reached.size(); ++i) {
    for (OpOperand &use : reached[i].getUses()) {
      Operation *user = use.getOwner();
      if (auto second = dyn_cast<GroupedMatmulOp>(user)) {
        if (use.getOperandNumber() != 0 ||
            !routing.same(second.getGroupIds(), first.getGroupIds()) ||
            second.getW().getType().getDimSize(0) != experts ||
            (chain.second && chain.second != second))
          return std::nullopt;
        chain.second = second;
        continue;
      }
      if (!keepsRows(user, rows))
        return std::nullopt;
      if (!llvm::is_contained(chain.ops, user))
        chain.ops.push_back(user);
      reached.insert(user->getResult(0));
    }
  }
  if (!chain.second)
    return std::nullopt;
  for (Operation *op : chain.ops)
    for (Value operand : op->getOperands())
      if (!reached.contains(operand) && !remakeable(operand, rows))
        return std::nullopt;
  llvm::sort(chain.ops,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return chain;
}

/// `chain` again on the slots (`slots`, E x G x C x N, standing for `from`,
/// M x N): the routed rows' dimension of each op becomes the slots' three,
/// and each operand from outside the chain with the routed rows is made
/// again at the slots' shape (findChain checked that it can be). The second
/// GEMM's rows, as slots.
Value cloneOnSlots(OpBuilder &b, const ExpertChain &chain, Value from,
                   Value slots) {
  int64_t rows = cast<RankedTensorType>(from.getType()).getDimSize(0);
  ArrayRef<int64_t> lead =
      cast<RankedTensorType>(slots.getType()).getShape().take_front(3);
  auto atSlots = [&](Type t) {
    auto type = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(lead);
    llvm::append_range(shape, type.getShape().drop_front());
    return type.clone(shape);
  };
  // An attribute per dimension with the rows' entry replaced by three.
  auto widen = [](ArrayRef<int64_t> values, ArrayRef<int64_t> first) {
    SmallVector<int64_t> out(first);
    llvm::append_range(out, values.drop_front());
    return out;
  };
  IRMapping map;
  map.map(from, slots);
  for (Operation *op : chain.ops) {
    for (Value operand : op->getOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.getType());
      if (map.contains(operand) || !type || type.getRank() == 0 ||
          type.getDimSize(0) != rows)
        continue;
      DenseElementsAttr value;
      Value again;
      if (matchPattern(operand, m_Constant(&value))) {
        auto slotType = atSlots(type);
        again = ConstantOp::create(
            b, operand.getLoc(), slotType,
            DenseElementsAttr::get(slotType, value.getSplatValue<Attribute>()));
      } else {
        auto bcast = operand.getDefiningOp<BroadcastInDimOp>();
        SmallVector<int64_t> dims;
        for (int64_t d : bcast.getBroadcastDimensions())
          dims.push_back(d + 2);
        again = BroadcastInDimOp::create(b, operand.getLoc(), atSlots(type),
                                         bcast.getOperand(), dims);
      }
      map.map(operand, again);
    }
    Operation *clone = b.clone(*op, map);
    clone->getResult(0).setType(atSlots(clone->getResult(0).getType()));
    if (auto slice = dyn_cast<SliceOp>(clone)) {
      slice.setStartIndices(widen(slice.getStartIndices(), {0, 0, 0}));
      slice.setLimitIndices(widen(slice.getLimitIndices(), lead));
      slice.setStrides(widen(slice.getStrides(), {1, 1, 1}));
    } else if (auto transpose = dyn_cast<TransposeOp>(clone)) {
      SmallVector<int64_t> perm = {0, 1, 2};
      for (int64_t p : transpose.getPermutation().drop_front())
        perm.push_back(p + 2);
      transpose.setPermutation(perm);
    }
  }
  GroupedMatmulOp second = chain.second;
  return map.lookup(second.getX());
}

struct ExpertCapacityPass
    : ::cleave::impl::ExpertCapacityPassBase<ExpertCapacityPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    double f = double(factor);
    if (!(f > 0) || !std::isfinite(f)) {
      module.emitError() << "--moe-capacity-factor=" << f
                         << ": expected a finite factor > 0";
      return signalPassFailure();
    }
    auto main = module.lookupSymbol<func::FuncOp>("main");
    SmallVector<GroupedMatmulOp> ops;
    if (main)
      main.walk([&](GroupedMatmulOp op) { ops.push_back(op); });
    if (ops.empty()) {
      module.emitError()
          << "--moe-capacity-factor: the program has no grouped expert GEMMs "
             "(cleave.grouped_matmul, which --recognize-composites finds in "
             "mixture-of-experts exports)";
      return signalPassFailure();
    }
    auto first =
        main.getNumArguments() == 0
            ? RankedTensorType()
            : dyn_cast<RankedTensorType>(main.getArgument(0).getType());
    if (!first || first.getRank() == 0 || first.isDynamicDim(0)) {
      main.emitError() << "--moe-capacity-factor: the groups that share each "
                          "expert's capacity are the rows of the batch, but "
                          "@main's first input has no static batch dimension";
      return signalPassFailure();
    }
    int64_t groups = first.getDimSize(0);
    auto capacityOf = [&](GroupedMatmulOp op) -> std::optional<int64_t> {
      int64_t rows = op.getX().getType().getDimSize(0);
      int64_t experts = op.getW().getType().getDimSize(0);
      if (rows % groups != 0) {
        op.emitError() << "--moe-capacity-factor: the " << rows
                       << " routed rows do not split into the batch's "
                       << groups << " rows";
        return std::nullopt;
      }
      int64_t perGroup = rows / groups;
      int64_t capacity = static_cast<int64_t>(
          std::ceil(f * static_cast<double>(perGroup) / experts));
      return std::max<int64_t>(1, std::min(capacity, perGroup));
    };
    // Exports compute the ids once per gathered weight.
    ValueEquivalence routing;
    llvm::SmallPtrSet<Operation *, 8> done;
    for (GroupedMatmulOp op : ops) {
      if (done.contains(op))
        continue;
      std::optional<int64_t> capacity = capacityOf(op);
      if (!capacity)
        return signalPassFailure();
      // An expert MLP (a grouped matmul, row-wise ops, a grouped matmul of
      // the same routing) stays in the slots between its two GEMMs: one
      // dispatch and one combine, not two of each.
      if (std::optional<ExpertChain> chain = findChain(op, routing)) {
        GroupedMatmulOp second = chain->second;
        CapacityBuilder builder(second, groups, *capacity);
        Value slots = builder.experts(builder.dispatch(op.getX()), 1, op.getW(),
                                      op.getTransposeW());
        Value x2 =
            cloneOnSlots(builder.builder(), *chain, op.getResult(), slots);
        Value y = builder.combine(
            builder.experts(x2, 0, second.getW(), second.getTransposeW()));
        second.getResult().replaceAllUsesWith(y);
        second.erase();
        for (Operation *chained : llvm::reverse(chain->ops))
          chained->erase();
        op.erase();
        done.insert(second);
        continue;
      }
      Value y = CapacityBuilder(op, groups, *capacity).build(op);
      op.getResult().replaceAllUsesWith(y);
      op.erase();
    }
  }
};

} // namespace
