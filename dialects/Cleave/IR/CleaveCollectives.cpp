//===- CleaveCollectives.cpp - Meshes and collectives ---------------------===//
//
// Verifiers, symbol checks and costs of the communication ops. What can be
// checked from the op alone (dimensions in range, pairs well formed, async
// results used once) is in verify(); what needs the mesh (axes exist, sizes
// divide by the group size) is in verifySymbolUses.
//
//===----------------------------------------------------------------------===//

#include "Cleave/IR/CleaveCollectives.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;

#include "Cleave/IR/CleaveCollectiveEnums.cpp.inc"
#include "Cleave/IR/CleaveCollectiveInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "Cleave/IR/CleaveCollectiveOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

int64_t MeshOp::getWorldSize() {
  int64_t n = 1;
  for (int64_t s : getShape())
    n *= s;
  return n;
}

int64_t MeshOp::getAxisIndex(StringRef name) {
  for (auto [i, a] : llvm::enumerate(getAxisNames()))
    if (cast<StringAttr>(a).getValue() == name)
      return i;
  return -1;
}

LogicalResult MeshOp::verify() {
  ArrayRef<int64_t> shape = getShape();
  if (shape.empty())
    return emitOpError() << "needs at least one axis";
  if (getAxisNames().size() != shape.size())
    return emitOpError() << "has " << getAxisNames().size()
                         << " axis names for " << shape.size() << " sizes";
  llvm::SmallSet<StringRef, 8> seen;
  int64_t world = 1;
  for (auto [name, size] : llvm::zip(getAxisNames(), shape)) {
    StringRef n = cast<StringAttr>(name).getValue();
    if (n.empty() ||
        !llvm::all_of(n, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
      return emitOpError() << "axis name '" << n
                           << "' must be letters, digits and '_'";
    if (!seen.insert(n).second)
      return emitOpError() << "axis '" << n << "' appears twice";
    if (size < 1)
      return emitOpError() << "axis '" << n << "' has size " << size
                           << "; sizes must be at least 1";
    if (world > (int64_t{1} << 24) / size)
      return emitOpError() << "has more than 2^24 ranks";
    world *= size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

MeshOp mlir::cleave::lookupMesh(CollectiveOpInterface op) {
  return SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, op.getMeshAttr());
}

static std::string axesString(ArrayAttr axes) {
  std::string s = "[";
  for (auto [i, a] : llvm::enumerate(axes))
    s += (i ? ", " : "") + cast<StringAttr>(a).getValue().str();
  return s + "]";
}

FailureOr<int64_t> mlir::cleave::getGroupSize(CollectiveOpInterface op) {
  MeshOp mesh = lookupMesh(op);
  if (!mesh)
    return failure();
  int64_t n = 1;
  for (Attribute a : op.getMeshAxesAttr()) {
    int64_t axis = mesh.getAxisIndex(cast<StringAttr>(a).getValue());
    if (axis < 0)
      return failure();
    n *= mesh.getShape()[axis];
  }
  return n;
}

/// The mesh exists and every axis is one of its axes, once; sets *groupSize.
static LogicalResult verifyGroup(CollectiveOpInterface op,
                                 SymbolTableCollection &symbols,
                                 int64_t *groupSize) {
  auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(op, op.getMeshAttr());
  if (!mesh)
    return op->emitOpError() << "names mesh " << op.getMeshAttr()
                             << ", which is not a cleave.mesh";
  ArrayAttr axes = op.getMeshAxesAttr();
  if (axes.empty())
    return op->emitOpError() << "needs at least one mesh axis";
  llvm::SmallSet<StringRef, 8> seen;
  *groupSize = 1;
  for (Attribute a : axes) {
    StringRef name = cast<StringAttr>(a).getValue();
    int64_t axis = mesh.getAxisIndex(name);
    if (axis < 0)
      return op->emitOpError()
             << "mesh " << op.getMeshAttr() << " has no axis '" << name << "'";
    if (!seen.insert(name).second)
      return op->emitOpError() << "mesh axis '" << name << "' appears twice";
    *groupSize *= mesh.getShape()[axis];
  }
  return success();
}

/// The result of an asynchronous collective is read by one cleave.done and
/// nothing else.
static LogicalResult verifyAsyncUse(Operation *op, bool async) {
  if (!async || op->getNumResults() == 0)
    return success();
  Value result = op->getResult(0);
  if (!result.hasOneUse() || !isa<DoneOp>(*result.getUsers().begin()))
    return op->emitOpError()
           << "is async: its result must have exactly one use, a cleave.done";
  return success();
}

static LogicalResult verifyFloatForAvg(Operation *op, CollectiveReduceKind kind,
                                       Type type) {
  if (kind == CollectiveReduceKind::avg &&
      !isa<FloatType>(getElementTypeOrSelf(type)))
    return op->emitOpError() << "avg needs a float element type, got "
                             << getElementTypeOrSelf(type);
  return success();
}

static LogicalResult checkRankAndElementType(Operation *op, Type in, Type out) {
  auto a = cast<RankedTensorType>(in), b = cast<RankedTensorType>(out);
  if (a.getElementType() != b.getElementType())
    return op->emitOpError()
           << "result element type " << b.getElementType()
           << " differs from the operand's " << a.getElementType();
  if (a.getRank() != b.getRank())
    return op->emitOpError() << "result rank " << b.getRank()
                             << " differs from the operand's " << a.getRank();
  return success();
}

static LogicalResult checkDimInRange(Operation *op, int64_t dim, int64_t rank,
                                     StringRef what) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError()
           << what << " " << dim << " is out of range for rank " << rank;
  return success();
}

/// `dim` of `type` divides by the group size.
static LogicalResult checkDivides(CollectiveOpInterface op,
                                  RankedTensorType type, int64_t dim,
                                  int64_t groupSize, StringRef which) {
  int64_t size = type.getDimSize(dim);
  if (size % groupSize != 0)
    return op->emitOpError()
           << which << " dimension " << dim << " of size " << size
           << " does not divide by the group size " << groupSize
           << " of mesh axes " << axesString(op.getMeshAxesAttr());
  return success();
}

/// Every dimension of `out` equals `in`'s, except `dim`, which is `in`'s
/// times `mul` divided by `div`.
static LogicalResult checkScaledDim(Operation *op, RankedTensorType in,
                                    RankedTensorType out, int64_t dim,
                                    int64_t mul, int64_t div) {
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t want = in.getDimSize(d);
    if (d == dim)
      want = want * mul / div;
    if (out.getDimSize(d) != want)
      return op->emitOpError() << "result dimension " << d << " is "
                               << out.getDimSize(d) << ", expected " << want;
  }
  return success();
}

static LogicalResult checkGroupIndex(Operation *op, int64_t index,
                                     int64_t groupSize, StringRef what) {
  if (index < 0 || index >= groupSize)
    return op->emitOpError()
           << what << " " << index << " is not a group index (the group has "
           << groupSize << " ranks)";
  return success();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  if (failed(verifyFloatForAvg(*this, getKind(), getOperand().getType())))
    return failure();
  return verifyAsyncUse(*this, getAsync());
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  int64_t n;
  return verifyGroup(*this, symbols, &n);
}

LogicalResult AllGatherOp::verify() {
  if (failed(
          checkRankAndElementType(*this, getOperand().getType(), getType())) ||
      failed(checkDimInRange(*this, getDim(), getType().getRank(), "dim")))
    return failure();
  return verifyAsyncUse(*this, getAsync());
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &symbols) {
  int64_t n;
  if (failed(verifyGroup(*this, symbols, &n)))
    return failure();
  return checkScaledDim(*this, getOperand().getType(), getType(), getDim(), n,
                        1);
}

LogicalResult AllSliceOp::verify() {
  if (getAsync())
    return emitOpError() << "sends nothing, so it has no async form";
  if (failed(
          checkRankAndElementType(*this, getOperand().getType(), getType())) ||
      failed(checkDimInRange(*this, getDim(), getType().getRank(), "dim")))
    return failure();
  return success();
}

/// reduce_scatter and all_slice: the operand's `dim` divides by the group
/// size and the result keeps one group-size-th of it.
template <typename Op>
static LogicalResult verifySplitGroup(Op op, SymbolTableCollection &symbols) {
  int64_t n;
  if (failed(verifyGroup(op, symbols, &n)) ||
      failed(checkDivides(op, op.getOperand().getType(), op.getDim(), n,
                          "operand")))
    return failure();
  return checkScaledDim(op, op.getOperand().getType(), op.getType(),
                        op.getDim(), 1, n);
}

LogicalResult AllSliceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifySplitGroup(*this, symbols);
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyFloatForAvg(*this, getKind(), getOperand().getType())) ||
      failed(
          checkRankAndElementType(*this, getOperand().getType(), getType())) ||
      failed(checkDimInRange(*this, getDim(), getType().getRank(), "dim")))
    return failure();
  return verifyAsyncUse(*this, getAsync());
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifySplitGroup(*this, symbols);
}

LogicalResult AllToAllOp::verify() {
  int64_t rank = getType().getRank();
  if (failed(
          checkRankAndElementType(*this, getOperand().getType(), getType())) ||
      failed(checkDimInRange(*this, getSplitDim(), rank, "split dim")) ||
      failed(checkDimInRange(*this, getConcatDim(), rank, "concat dim")))
    return failure();
  return verifyAsyncUse(*this, getAsync());
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &symbols) {
  int64_t n;
  RankedTensorType in = getOperand().getType(), out = getType();
  if (failed(verifyGroup(*this, symbols, &n)) ||
      failed(checkDivides(*this, in, getSplitDim(), n, "split")))
    return failure();
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t want = in.getDimSize(d);
    if (d == static_cast<int64_t>(getSplitDim()))
      want /= n;
    if (d == static_cast<int64_t>(getConcatDim()))
      want *= n;
    if (out.getDimSize(d) != want)
      return emitOpError() << "result dimension " << d << " is "
                           << out.getDimSize(d) << ", expected " << want;
  }
  return success();
}

LogicalResult BroadcastOp::verify() {
  return verifyAsyncUse(*this, getAsync());
}

LogicalResult BroadcastOp::verifySymbolUses(SymbolTableCollection &symbols) {
  int64_t n;
  if (failed(verifyGroup(*this, symbols, &n)))
    return failure();
  return checkGroupIndex(*this, getRoot(), n, "root");
}

LogicalResult CollectivePermuteOp::verify() {
  if (getPairs().size() % 2 != 0)
    return emitOpError() << "pairs must list (source, target) pairs, got "
                         << getPairs().size() << " indices";
  return verifyAsyncUse(*this, getAsync());
}

LogicalResult
CollectivePermuteOp::verifySymbolUses(SymbolTableCollection &symbols) {
  int64_t n;
  if (failed(verifyGroup(*this, symbols, &n)))
    return failure();
  llvm::SmallSet<int64_t, 8> sources, targets;
  ArrayRef<int64_t> pairs = getPairs();
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    if (failed(checkGroupIndex(*this, pairs[i], n, "source")) ||
        failed(checkGroupIndex(*this, pairs[i + 1], n, "target")))
      return failure();
    if (!sources.insert(pairs[i]).second)
      return emitOpError() << "source " << pairs[i] << " appears twice";
    if (!targets.insert(pairs[i + 1]).second)
      return emitOpError() << "target " << pairs[i + 1] << " appears twice";
  }
  return success();
}

template <typename OpT>
static LogicalResult verifyPointToPoint(OpT op,
                                        SymbolTableCollection &symbols) {
  int64_t n;
  if (failed(verifyGroup(op, symbols, &n)) ||
      failed(checkGroupIndex(op, op.getSource(), n, "source")) ||
      failed(checkGroupIndex(op, op.getTarget(), n, "target")))
    return failure();
  if (op.getSource() == op.getTarget())
    return op.emitOpError()
           << "source and target are both group index " << op.getSource();
  return success();
}

LogicalResult SendOp::verify() { return success(); }
LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyPointToPoint(*this, symbols);
}

LogicalResult RecvOp::verify() { return verifyAsyncUse(*this, getAsync()); }
LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyPointToPoint(*this, symbols);
}

LogicalResult DoneOp::verify() {
  auto start = getOperand().getDefiningOp<CollectiveOpInterface>();
  if (!start || !start.getAsync())
    return emitOpError() << "operand must be the result of an async collective";
  return success();
}

//===----------------------------------------------------------------------===//
// Cost
//===----------------------------------------------------------------------===//

int64_t AllReduceOp::getFlops() { return getType().getNumElements(); }
int64_t ReduceScatterOp::getFlops() {
  return getOperand().getType().getNumElements();
}
int64_t AllGatherOp::getFlops() { return 0; }
int64_t AllSliceOp::getFlops() { return 0; }
int64_t AllToAllOp::getFlops() { return 0; }
int64_t BroadcastOp::getFlops() { return 0; }
int64_t CollectivePermuteOp::getFlops() { return 0; }
int64_t SendOp::getFlops() { return 0; }
int64_t RecvOp::getFlops() { return 0; }

static int64_t ceilLog2(int64_t n) {
  int64_t s = 0;
  while ((int64_t{1} << s) < n)
    ++s;
  return s;
}

CollectiveCost mlir::cleave::getCollectiveCost(CollectiveOpInterface op,
                                               int64_t n,
                                               CollectiveAlgorithm algorithm) {
  CollectiveCost cost;
  if (n <= 1)
    return cost;
  auto bytesOf = [](Type t) { return detail::getSizeInBytes(t); };
  auto share = [&](int64_t s) { return s * (n - 1) / n; };
  TypeSwitch<Operation *>(op.getOperation())
      .Case([&](AllReduceOp o) {
        cost.bytesSent = 2 * share(bytesOf(o.getType()));
        cost.steps = algorithm == CollectiveAlgorithm::Tree ? 2 * ceilLog2(n)
                                                            : 2 * (n - 1);
      })
      .Case([&](AllGatherOp o) {
        cost.bytesSent = share(bytesOf(o.getType()));
        cost.steps = n - 1;
      })
      .Case([&](ReduceScatterOp o) {
        cost.bytesSent = share(bytesOf(o.getOperand().getType()));
        cost.steps = n - 1;
      })
      .Case([&](AllToAllOp o) {
        cost.bytesSent = share(bytesOf(o.getOperand().getType()));
        cost.steps = n - 1;
      })
      .Case([&](BroadcastOp o) {
        cost.bytesSent = share(bytesOf(o.getType()));
        cost.steps =
            algorithm == CollectiveAlgorithm::Tree ? ceilLog2(n) : n - 1;
      })
      .Case([&](CollectivePermuteOp o) {
        cost.bytesSent = bytesOf(o.getType());
        cost.steps = 1;
      })
      .Case([&](SendOp o) {
        cost.bytesSent = bytesOf(o.getOperand().getType());
        cost.steps = 1;
      })
      .Case([&](RecvOp) { cost.steps = 1; });
  // AllSliceOp sends nothing: zero bytes, zero steps.
  return cost;
}
