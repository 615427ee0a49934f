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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace cleave {
#define GEN_PASS_DEF_EXPERTCAPACITYPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

namespace {

/// Builds the capacity form of one grouped matmul with `groups` groups of
/// rows and `capacity` slots per expert and group.
class CapacityBuilder {
public:
  CapacityBuilder(GroupedMatmulOp op, int64_t groups, int64_t capacity)
      : op(op), b(op), loc(op.getLoc()), g(groups), c(capacity) {
    auto xt = cast<RankedTensorType>(op.getX().getType());
    auto wt = cast<RankedTensorType>(op.getW().getType());
    r = xt.getDimSize(0) / g;
    k = xt.getDimSize(1);
    e = wt.getDimSize(0);
    n = wt.getDimSize(op.getTransposeW() ? 1 : 2);
    ft = xt.getElementType();
  }

  Value build() {
    // Each row's expert (negative from the end) and its place among the
    // group's rows routed there: an inclusive count down the rows of a
    // one-hot of the experts.
    Value ids = convert(reshape(op.getGroupIds(), {g, r}), i64());
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
    Value kept =
        and_(routed, compare(CompareKind::lt, place, splat(i64(), {g, r}, c)));
    // Dropped rows read and write slot 0 with zeros.
    Value slot = select(kept, add(mul(ids, splat(i64(), {g, r}, c)), place),
                        splat(i64(), {g, r}, 0));

    // Dispatch: the kept rows into their slots.
    auto grk = RankedTensorType::get({g, r, k}, ft);
    Value keptK = broadcast(kept, grk.clone(b.getI1Type()), {0, 1});
    Value rows =
        select(keptK, reshape(op.getX(), {g, r, k}), splat(ft, {g, r, k}, 0));
    auto bufferType = RankedTensorType::get({g, e * c, k}, ft);
    Value buffer = ScatterOp::create(
        b, loc, bufferType, ScatterKind::add, splat(ft, {g, e * c, k}, 0),
        broadcast(slot, grk.clone(i64()), {0, 1}), rows, 1);
    buffer = reshape(buffer, {g, e, c, k});

    // The experts, one batched contraction: E x G x C x N.
    int64_t wContract = op.getTransposeW() ? 2 : 1;
    Value results = ContractOp::create(
        b, loc, RankedTensorType::get({e, g, c, n}, ft), buffer, op.getW(),
        b.getDenseI64ArrayAttr({1}), b.getDenseI64ArrayAttr({0}),
        b.getDenseI64ArrayAttr({3}), b.getDenseI64ArrayAttr({wContract}));
    results =
        TransposeOp::create(b, loc, RankedTensorType::get({g, e, c, n}, ft),
                            results, ArrayRef<int64_t>{1, 0, 2, 3});
    results = reshape(results, {g, e * c, n});

    // Combine: each kept row reads its slot.
    auto grn = RankedTensorType::get({g, r, n}, ft);
    Value y = GatherElementsOp::create(
        b, loc, grn, results, broadcast(slot, grn.clone(i64()), {0, 1}), 1);
    y = select(broadcast(kept, grn.clone(b.getI1Type()), {0, 1}), y,
               splat(ft, {g, r, n}, 0));
    return reshape(y, {g * r, n});
  }

private:
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

  GroupedMatmulOp op;
  OpBuilder b;
  Location loc;
  int64_t g, c, r = 0, k = 0, e = 0, n = 0;
  Type ft;
};

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
    for (GroupedMatmulOp op : ops) {
      int64_t rows = op.getX().getType().getDimSize(0);
      int64_t experts = op.getW().getType().getDimSize(0);
      if (rows % groups != 0) {
        op.emitError() << "--moe-capacity-factor: the " << rows
                       << " routed rows do not split into the batch's "
                       << groups << " rows";
        return signalPassFailure();
      }
      int64_t perGroup = rows / groups;
      int64_t capacity = static_cast<int64_t>(
          std::ceil(f * static_cast<double>(perGroup) / experts));
      capacity = std::clamp<int64_t>(capacity, 1, perGroup);
      Value y = CapacityBuilder(op, groups, capacity).build();
      op.getResult().replaceAllUsesWith(y);
      op.erase();
    }
  }
};

} // namespace
