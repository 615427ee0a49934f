//===- CollectiveLowering.cpp - Collectives into commands -----------------===//
//
// Lowers a cleave collective (all-reduce, all-gather, send, ...) to a plan
// Collective command: its mesh axes, element type, counts and splits.
//
//===----------------------------------------------------------------------===//

#include "PlanBuilderInternal.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;
using namespace mlir::cleave::plan_builder;
namespace plan = ::cleave::plan;

/// Where a collective came from, for messages: the ONNX node (a NameLoc),
/// or file:line.
std::string plan_builder::sourceOf(Operation *op) {
  std::string s = describeLocation(op->getLoc());
  if (auto phase = getPhase(op))
    s += (s.empty() ? "" : ", ") + phase.getValue().str();
  return s;
}

LogicalResult PlanBuilder::lowerCollective(Node &node, plan::Command &cmd) {
  auto op = cast<CollectiveOpInterface>(node.comm);
  if (!mesh || lookupMesh(op) != mesh)
    return op->emitOpError() << "must communicate over the module's one mesh";
  plan::CollectiveInfo &info = cmd.collective;
  cmd.kind = plan::CommandKind::Collective;
  info.id = numCollectives++;
  for (Attribute a : op.getMeshAxesAttr())
    info.axes.push_back(static_cast<uint32_t>(
        mesh.getAxisIndex(cast<StringAttr>(a).getValue())));
  int64_t g = *getGroupSize(op);
  Value data = node.comm->getNumOperands() ? node.comm->getOperand(0)
                                           : node.comm->getResult(0);
  auto type = cast<RankedTensorType>(data.getType());
  FailureOr<plan::DType> dtype = toDType(type.getElementType());
  if (failed(dtype))
    return op->emitOpError() << "communicates " << type.getElementType()
                             << " elements, which plans cannot hold";
  bool reduces = isa<AllReduceOp, ReduceScatterOp>(op.getOperation());
  if (reduces && plan::isNarrowType(*dtype))
    return op->emitOpError() << "reduces " << type.getElementType()
                             << " elements; reduce in a wider type";
  info.dtype = *dtype;
  info.count = type.getNumElements();
  ArrayRef<int64_t> shape = type.getShape();
  auto reduceOf = [](CollectiveReduceKind k) {
    switch (k) {
    case CollectiveReduceKind::sum:
      return plan::ReduceOp::Sum;
    case CollectiveReduceKind::avg:
      return plan::ReduceOp::Avg;
    case CollectiveReduceKind::max:
      return plan::ReduceOp::Max;
    case CollectiveReduceKind::min:
      return plan::ReduceOp::Min;
    case CollectiveReduceKind::prod:
      return plan::ReduceOp::Prod;
    }
    return plan::ReduceOp::Sum;
  };
  TypeSwitch<Operation *>(node.comm)
      .Case([&](AllReduceOp o) {
        info.op = plan::CollectiveOp::AllReduce;
        info.reduce = reduceOf(o.getKind());
      })
      .Case([&](AllGatherOp o) {
        info.op = plan::CollectiveOp::AllGather;
        int64_t d = o.getDim();
        info.splitOuter = ShapedType::getNumElements(shape.take_front(d));
        info.splitInner = ShapedType::getNumElements(shape.drop_front(d));
      })
      .Case([&](AllSliceOp o) {
        info.op = plan::CollectiveOp::AllSlice;
        int64_t d = o.getDim();
        info.splitOuter = ShapedType::getNumElements(shape.take_front(d));
        info.splitInner = ShapedType::getNumElements(shape.drop_front(d)) / g;
      })
      .Case([&](ReduceScatterOp o) {
        info.op = plan::CollectiveOp::ReduceScatter;
        info.reduce = reduceOf(o.getKind());
        int64_t d = o.getDim();
        info.splitOuter = ShapedType::getNumElements(shape.take_front(d));
        info.splitInner = ShapedType::getNumElements(shape.drop_front(d)) / g;
      })
      .Case([&](AllToAllOp o) {
        info.op = plan::CollectiveOp::AllToAll;
        int64_t s = o.getSplitDim(), c = o.getConcatDim();
        ArrayRef<int64_t> out = o.getType().getShape();
        info.splitOuter = ShapedType::getNumElements(shape.take_front(s));
        info.splitInner = ShapedType::getNumElements(shape.drop_front(s)) / g;
        info.concatOuter = ShapedType::getNumElements(out.take_front(c));
        info.concatInner = ShapedType::getNumElements(out.drop_front(c)) / g;
      })
      .Case([&](BroadcastOp o) {
        info.op = plan::CollectiveOp::Broadcast;
        info.root = o.getRoot();
      })
      .Case([&](CollectivePermuteOp o) {
        info.op = plan::CollectiveOp::Permute;
        info.pairs.assign(o.getPairs().begin(), o.getPairs().end());
      })
      .Case([&](SendOp o) {
        info.op = plan::CollectiveOp::Send;
        info.root = o.getSource();
        info.peer = o.getTarget();
      })
      .Case([&](RecvOp o) {
        info.op = plan::CollectiveOp::Recv;
        info.root = o.getSource();
        info.peer = o.getTarget();
      });
  // A pipeline message's tag (cleave::splitPipelineRanks), which the
  // receiving rank checks.
  if (std::optional<int64_t> tag = getMessageTag(node.comm))
    info.pairs = {*tag};
  info.source = sourceOf(node.comm);
  if (op.getAsync()) {
    cmd.stream = plan::kCommStream;
    cmd.event = eventOf.lookup(node.comm);
  }
  return success();
}
