//===- RingAttention.cpp - Attention as a ring over a split sequence ------===//
//
// The PartitionOpInterface models of cleave.attention and attention_grad.
// Over the partitioner's ring axes (--context-parallel=ring: the cp axis),
// an attention whose queries arrive split along the sequence keeps them
// split, and splits the keys and values alike. Rank g of a ring of n holds
// block g of each; in n steps it attends its queries to the block it holds
// (cleave.attention_block, masked by the blocks' positions in the whole
// sequence) and passes that block on to rank g + 1 (collective_permute),
// so that at step s it holds block g - s. The steps' results merge by their
// rows' log-sum-exp, in f32:
//
//   lse = m + log(exp(lse1 - m) + exp(lse2 - m)),  m = max(lse1, lse2)
//   out = out1 exp(lse1 - lse) + out2 exp(lse2 - lse)
//
// The gradient rotates the blocks again (cleave.attention_block_grad with
// the whole rows' log-sum-exp, kept from the forward): dq sums on the
// rank, while each block's dk and dv travel with it, gaining every rank's
// share, and a last permute brings them home. No rank ever holds more than
// two key/value blocks, and each step's permute can overlap the step's
// products.
//
// Any other layout goes the generic way (partitionByRule).
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "mlir/IR/DialectRegistry.h"

#define DEBUG_TYPE "cleave-partition"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::partition;
using namespace ::cleave::sharding;

namespace {

/// The ring an attention runs on.
struct Ring {
  /// The ring axes, the ranks on them, and the op's factor axes with
  /// both sequences split over them.
  Axes axes;
  int64_t size = 1;
  SmallVector<Axes> factorAxes;
  /// The sequence factors' axes in the local layout: the queries' rows
  /// (the ring's axes, maybe after others), the keys' (the ring's alone).
  Axes queryAxes;
};

/// The ring `op` runs on, or none when no ring axis splits its queries'
/// sequence as they arrive (failure, reported, when one does but the op
/// cannot run as a ring).
FailureOr<std::optional<Ring>> findRing(Partitioner &p, Operation *op,
                                        const ShardingRule &rule) {
  const DimAxes &qDims = p.getLocal(op->getOperand(0)).dims;
  Ring ring;
  for (StringAttr a : qDims[2])
    if (llvm::is_contained(p.getRingAxes(), a.getValue()))
      ring.axes.push_back(a);
  if (ring.axes.empty())
    return std::optional<Ring>();
  auto fail = [&]() {
    return op->emitError() << "cannot run as a ring over mesh axes "
                           << axesToString(ring.axes) << ": ";
  };
  bool hasBias = isa<AttentionOp>(op)
                     ? bool(cast<AttentionOp>(op).getBias())
                     : bool(cast<AttentionGradOp>(op).getBias());
  if (hasBias)
    return fail() << "ring attention takes no additive bias (its columns "
                     "would follow the rotating key blocks); "
                     "--context-parallel=all-to-all or auto computes it";
  FailureOr<SmallVector<Axes>> base = p.chooseFactorAxes(op, rule);
  if (failed(base))
    return failure();
  ring.factorAxes = std::move(*base);
  for (Axes &f : ring.factorAxes)
    llvm::erase_if(
        f, [&](StringAttr a) { return llvm::is_contained(ring.axes, a); });
  int64_t sq = rule.getOperand(0)[2].front();
  int64_t skv = rule.getOperand(1)[2].front();
  const MeshAxes &axes = p.getMeshAxes();
  ring.size = axes.size(ring.axes);
  if (!ring.factorAxes[skv].empty())
    return fail() << "its keys' sequence is split over "
                  << axesToString(ring.factorAxes[skv]) << " as well";
  for (auto [f, what] :
       {std::pair<int64_t, const char *>{sq, "queries'"}, {skv, "keys'"}}) {
    int64_t size = rule.getFactor(f).size;
    if (size % (axes.size(ring.factorAxes[f]) * ring.size) != 0)
      return fail() << "its " << what << " sequence (" << size
                    << ") does not divide over "
                    << axes.size(ring.factorAxes[f]) * ring.size << " ranks";
    llvm::append_range(ring.factorAxes[f], ring.axes);
  }
  ring.queryAxes = ring.factorAxes[sq];
  return std::optional<Ring>(std::move(ring));
}

/// What the block ops copy from an attention or its gradient, and the
/// global sequence lengths.
struct AttentionAttrs {
  FloatAttr scale, softcap;
  UnitAttr causal;
  IntegerAttr causalOffset;
  int64_t queries, keys;

  template <typename OpT> static AttentionAttrs of(OpT op) {
    return {op.getScaleAttr(),
            op.getSoftcapAttr(),
            op.getCausalAttr(),
            op.getCausalOffsetAttr(),
            cast<RankedTensorType>(op.getQ().getType()).getDimSize(2),
            cast<RankedTensorType>(op.getK().getType()).getDimSize(2)};
  }
};

/// Builds one ring's local ops.
class RingBuilder {
public:
  RingBuilder(Partitioner &p, OpBuilder &b, Operation *op, const Ring &ring,
              AttentionAttrs attrs)
      : p(p), b(b), loc(op->getLoc()), ring(ring), attrs(attrs),
        i64(b.getIntegerType(64)), f32(b.getF32Type()) {
    why = ("ring attention of " + op->getName().getStringRef() + " over " +
           axesToString(ring.axes))
              .str();
  }

  /// The queries' positions: this rank's rows of a sequence of `length`.
  Value queryPositions(int64_t length) {
    return positions(length / p.getMeshAxes().size(ring.queryAxes),
                     p.rankOffset(b, loc, i64, length, ring.queryAxes, why));
  }

  /// The positions of the key block this rank holds at `step` (block
  /// g - step of a sequence of `length`); the testing fault names the
  /// neighbouring block instead.
  Value keyPositions(int64_t length, int64_t step) {
    int64_t n = ring.size, block = length / n;
    int64_t shift = step == p.getRingFault() ? step - 1 : step;
    SmallVector<int64_t> starts;
    for (int64_t g = 0; g < n; ++g)
      starts.push_back(((g - shift) % n + n) % n * block);
    return positions(block, p.rankValue(b, loc, i64, starts, ring.axes, why));
  }

  /// `v` passed on to the next rank of the ring (group index g to g + 1).
  Value rotate(Value v) {
    SmallVector<int64_t> pairs;
    for (int64_t g = 0; g < ring.size; ++g)
      pairs.append({g, (g + 1) % ring.size});
    return p
        .tag(CollectivePermuteOp::create(b, loc, v.getType(), v,
                                         p.getMesh().getSymName(),
                                         p.axesAttr(ring.axes), pairs),
             why)
        ->getResult(0);
  }

  Value binary(BinaryKind kind, Value x, Value y) {
    return BinaryOp::create(b, loc, x.getType(), kind, x, y);
  }
  Value unary(UnaryKind kind, Value x) {
    return UnaryOp::create(b, loc, x.getType(), kind, x);
  }
  Value convert(Value x, Type elementType) {
    auto type = cast<RankedTensorType>(x.getType());
    if (type.getElementType() == elementType)
      return x;
    return ConvertOp::create(b, loc, type.clone(elementType), x);
  }
  /// A B x H x S row value broadcast along the output's last dimension.
  Value perRow(Value rows, RankedTensorType outType) {
    return BroadcastInDimOp::create(b, loc, outType, rows,
                                    ArrayRef<int64_t>{0, 1, 2});
  }

  /// Merges two blocks' (out, lse), out in f32.
  std::pair<Value, Value> merge(Value out1, Value lse1, Value out2,
                                Value lse2) {
    auto outType = cast<RankedTensorType>(out1.getType());
    Value m = binary(BinaryKind::max, lse1, lse2);
    Value w1 = unary(UnaryKind::exp, binary(BinaryKind::sub, lse1, m));
    Value w2 = unary(UnaryKind::exp, binary(BinaryKind::sub, lse2, m));
    Value sum = binary(BinaryKind::add, w1, w2);
    Value lse = binary(BinaryKind::add, m, unary(UnaryKind::log, sum));
    Value a = perRow(binary(BinaryKind::div, w1, sum), outType);
    Value c = perRow(binary(BinaryKind::div, w2, sum), outType);
    Value out = binary(BinaryKind::add, binary(BinaryKind::mul, out1, a),
                       binary(BinaryKind::mul, out2, c));
    return {out, lse};
  }

  /// The forward ring: the merged out (in f32) and the rows' lse.
  std::pair<Value, Value> forward(Value q, Value k, Value v) {
    auto qType = cast<RankedTensorType>(q.getType());
    auto vType = cast<RankedTensorType>(v.getType());
    auto outType =
        RankedTensorType::get({qType.getDimSize(0), qType.getDimSize(1),
                               qType.getDimSize(2), vType.getDimSize(3)},
                              qType.getElementType());
    auto lseType = RankedTensorType::get(qType.getShape().take_front(3), f32);
    Value qPos = queryPositions(attrs.queries);
    Value out, lse;
    for (int64_t step = 0; step < ring.size; ++step) {
      // The next block is sent on before this one's products, so that
      // an asynchronous permute (--overlap-collectives) runs beside them.
      Value nextK, nextV;
      if (step + 1 < ring.size) {
        nextK = rotate(k);
        nextV = rotate(v);
      }
      auto block = AttentionBlockOp::create(
          b, loc, outType, lseType, q, k, v, qPos,
          keyPositions(attrs.keys, step), attrs.scale, attrs.causal,
          attrs.causalOffset, attrs.softcap);
      Value blockOut = convert(block.getOut(), f32);
      if (step == 0) {
        out = blockOut;
        lse = block.getLse();
      } else {
        std::tie(out, lse) = merge(out, lse, blockOut, block.getLse());
      }
      k = nextK;
      v = nextV;
    }
    return {out, lse};
  }

  /// The backward ring: dq, dk and dv given the whole rows' lse and out.
  SmallVector<Value> backward(ValueRange operands, TypeRange resultTypes,
                              Value lse) {
    Value q = operands[0], k = operands[1], v = operands[2];
    Value out = operands[3], dout = operands[4];
    Value qPos = queryPositions(attrs.queries);
    Value dq, dk, dv;
    for (int64_t step = 0; step < ring.size; ++step) {
      // As forward: the next block, and the gradients of the one before,
      // are sent on before this block's products.
      Value nextK, nextV, dkIn, dvIn;
      if (step + 1 < ring.size) {
        nextK = rotate(k);
        nextV = rotate(v);
      }
      if (step > 0) {
        dkIn = rotate(dk);
        dvIn = rotate(dv);
      }
      auto block = AttentionBlockGradOp::create(
          b, loc, resultTypes, q, k, v, qPos, keyPositions(attrs.keys, step),
          lse, out, dout, attrs.scale, attrs.causal, attrs.causalOffset,
          attrs.softcap);
      if (step == 0) {
        dq = block.getDq();
        dk = block.getDk();
        dv = block.getDv();
      } else {
        dq = binary(BinaryKind::add, dq, block.getDq());
        dk = binary(BinaryKind::add, dkIn, block.getDk());
        dv = binary(BinaryKind::add, dvIn, block.getDv());
      }
      k = nextK;
      v = nextV;
    }
    // Rank g holds block g + 1's gradients: home is one step on.
    if (ring.size > 1) {
      dk = rotate(dk);
      dv = rotate(dv);
    }
    return {dq, dk, dv};
  }

private:
  /// `count` positions from `start` (a 0-d i64 tensor) on.
  Value positions(int64_t count, Value start) {
    auto type = RankedTensorType::get({count}, i64);
    Value iota = IotaOp::create(b, loc, type, b.getI64IntegerAttr(0));
    Value from =
        BroadcastInDimOp::create(b, loc, type, start, ArrayRef<int64_t>{});
    return binary(BinaryKind::add, iota, from);
  }

  Partitioner &p;
  OpBuilder &b;
  Location loc;
  const Ring &ring;
  AttentionAttrs attrs;
  Type i64, f32;
  std::string why;
};

/// The forward attention a gradient's `out` is the result of, through
/// element type conversions, or null.
AttentionOp forwardOf(AttentionGradOp grad) {
  Value out = grad.getOut();
  while (auto convert = out.getDefiningOp<ConvertOp>())
    out = convert.getOperand();
  auto fwd = out.getDefiningOp<AttentionOp>();
  if (!fwd || fwd.getQ() != grad.getQ() || fwd.getK() != grad.getK() ||
      fwd.getV() != grad.getV())
    return nullptr;
  return fwd;
}

/// Partitions an attention or its gradient: as a ring where a ring axis
/// splits its queries' sequence (`build` makes the local results), else by
/// its rule.
LogicalResult partitionAsRing(
    Partitioner &p, OpBuilder &b, Operation *op,
    llvm::function_ref<SmallVector<Value>(const Ring &, const ShardingRule &,
                                          ValueRange, TypeRange)>
        build) {
  if (p.getRingAxes().empty())
    return partitionByRule(p, b, op);
  p.completeOperands(b, op);
  ShardingRule rule = getShardingRule(op);
  FailureOr<std::optional<Ring>> ring = findRing(p, op, rule);
  if (failed(ring))
    return failure();
  if (!*ring)
    return p.partitionWithRule(b, op);
  return p.partitionWithFactors(
      b, op, rule, (*ring)->factorAxes, /*wholeOnly=*/false,
      [&](ValueRange operands,
          TypeRange resultTypes) -> FailureOr<SmallVector<Value>> {
        return build(**ring, rule, operands, resultTypes);
      });
}

struct AttentionModel
    : PartitionOpInterface::ExternalModel<AttentionModel, AttentionOp> {
  LogicalResult partition(Operation *op, Partitioner &p, OpBuilder &b) const {
    auto attention = cast<AttentionOp>(op);
    return partitionAsRing(
        p, b, op,
        [&](const Ring &ring, const ShardingRule &rule, ValueRange operands,
            TypeRange resultTypes) -> SmallVector<Value> {
          RingBuilder ringBuilder(p, b, op, ring,
                                  AttentionAttrs::of(attention));
          auto [out, lse] =
              ringBuilder.forward(operands[0], operands[1], operands[2]);
          p.getRingRows()[op] = {
              lse, projectToTensor(rule, 0, ring.factorAxes, p.getMeshAxes())};
          auto type = cast<RankedTensorType>(resultTypes[0]);
          return {ringBuilder.convert(out, type.getElementType())};
        });
  }
};

struct AttentionGradModel
    : PartitionOpInterface::ExternalModel<AttentionGradModel, AttentionGradOp> {
  LogicalResult partition(Operation *op, Partitioner &p, OpBuilder &b) const {
    auto grad = cast<AttentionGradOp>(op);
    return partitionAsRing(
        p, b, op,
        [&](const Ring &ring, const ShardingRule &rule, ValueRange operands,
            TypeRange resultTypes) -> SmallVector<Value> {
          RingBuilder ringBuilder(p, b, op, ring, AttentionAttrs::of(grad));
          // The rows' log-sum-exp: the forward's where its queries were
          // laid out as these, else a forward ring again.
          Value lse;
          DimAxes qDims =
              projectToTensor(rule, 0, ring.factorAxes, p.getMeshAxes());
          if (AttentionOp fwd = forwardOf(grad)) {
            auto it = p.getRingRows().find(fwd);
            if (it != p.getRingRows().end() &&
                ArrayRef<Axes>(it->second.dims).take_front(3) ==
                    ArrayRef<Axes>(qDims).take_front(3))
              lse = it->second.lse;
          }
          if (!lse)
            lse = ringBuilder.forward(operands[0], operands[1], operands[2])
                      .second;
          return ringBuilder.backward(operands, resultTypes, lse);
        });
  }
};

} // namespace

void partition::registerRingAttentionModels(MLIRContext *ctx) {
  AttentionOp::attachInterface<AttentionModel>(*ctx);
  AttentionGradOp::attachInterface<AttentionGradModel>(*ctx);
}
