//===- CleaveOps.cpp - Cleave op verifiers --------------------------------===//

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/TypeUtilities.h"

#include <cmath>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace mlir::cleave;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

/// Checks that `dims` are distinct dimensions of a rank-`rank` tensor.
static LogicalResult checkDimList(Operation *op, ArrayRef<int64_t> dims,
                                  int64_t rank, StringRef what) {
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t d : dims) {
    if (d < 0 || d >= rank)
      return op->emitOpError() << what << " dimension " << d
                               << " is out of range for rank " << rank;
    if (!seen.insert(d).second)
      return op->emitOpError()
             << what << " dimension " << d << " appears twice";
  }
  return success();
}

static LogicalResult checkDim(Operation *op, int64_t dim, int64_t rank,
                              StringRef what) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError()
           << what << " " << dim << " is out of range for rank " << rank;
  return success();
}

static LogicalResult checkSameElementType(Operation *op, Type a, Type b,
                                          StringRef aName, StringRef bName) {
  Type ea = getElementTypeOrSelf(a), eb = getElementTypeOrSelf(b);
  if (ea != eb)
    return op->emitOpError()
           << aName << " element type " << ea << " differs from " << bName
           << " element type " << eb;
  return success();
}

static LogicalResult checkResultShape(Operation *op,
                                      ArrayRef<int64_t> expected) {
  auto actual = cast<RankedTensorType>(op->getResult(0).getType()).getShape();
  if (actual != expected)
    return op->emitOpError()
           << "result shape " << shapeStr(actual)
           << " does not match the expected shape " << shapeStr(expected);
  return success();
}

static LogicalResult checkStaticShapes(Operation *op) {
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (auto rt = dyn_cast<RankedTensorType>(t); rt && !rt.hasStaticShape())
      return op->emitOpError() << "requires static shapes, got " << t;
  return success();
}

/// The preamble of most verifiers: static shapes, and `a`'s element type is
/// `b`'s.
static LogicalResult checkStaticShapesAndElementType(Operation *op, Type a,
                                                     Type b, StringRef aName,
                                                     StringRef bName) {
  if (failed(checkStaticShapes(op)))
    return failure();
  return checkSameElementType(op, a, b, aName, bName);
}

/// Checks that `indices` fits in `operand` in every dimension but `axis`
/// (gather_elements, scatter).
static LogicalResult checkIndicesFit(Operation *op, RankedTensorType operand,
                                     RankedTensorType indices, int64_t axis) {
  for (int64_t d = 0; d < operand.getRank(); ++d)
    if (d != axis && indices.getDimSize(d) > operand.getDimSize(d))
      return op->emitOpError()
             << "indices size " << indices.getDimSize(d) << " in dimension "
             << d << " exceeds the operand size " << operand.getDimSize(d);
  return success();
}

//===----------------------------------------------------------------------===//
// Constants and elementwise
//===----------------------------------------------------------------------===//

LogicalResult IotaOp::verify() {
  if (failed(checkStaticShapes(*this)))
    return failure();
  return checkDim(*this, getDimension(), getType().getRank(), "dimension");
}

static bool isFloatOnly(UnaryKind kind) {
  switch (kind) {
  case UnaryKind::neg:
  case UnaryKind::abs:
  case UnaryKind::sign:
  case UnaryKind::lnot:
    return false;
  default:
    return true;
  }
}

LogicalResult UnaryOp::verify() {
  Type et = getType().getElementType();
  if (isFloatOnly(getKind()) && !isa<FloatType>(et))
    return emitOpError() << "'" << stringifyUnaryKind(getKind())
                         << "' needs a float element type, got " << et;
  if (getKind() == UnaryKind::lnot && !isa<IntegerType>(et))
    return emitOpError() << "'not' needs an integer element type, got " << et;
  return checkStaticShapes(*this);
}

LogicalResult BinaryOp::verify() {
  Type et = getType().getElementType();
  switch (getKind()) {
  case BinaryKind::land:
  case BinaryKind::lor:
  case BinaryKind::lxor:
  case BinaryKind::shl:
  case BinaryKind::shr:
    if (!isa<IntegerType>(et))
      return emitOpError() << "'" << stringifyBinaryKind(getKind())
                           << "' needs an integer element type, got " << et;
    break;
  default:
    break;
  }
  return checkStaticShapes(*this);
}

LogicalResult CompareOp::verify() {
  // Equal operand types are checked by AllTypesMatch (ODS).
  if (failed(checkStaticShapes(*this)))
    return failure();
  return checkResultShape(*this, tensorType(getLhs()).getShape());
}

LogicalResult SelectOp::verify() {
  // Equal value and result types are checked by AllTypesMatch (ODS).
  if (tensorType(getCond()).getShape() != getType().getShape())
    return emitOpError() << "condition shape "
                         << shapeStr(tensorType(getCond()).getShape())
                         << " differs from result shape "
                         << shapeStr(getType().getShape());
  return checkStaticShapes(*this);
}

LogicalResult ConvertOp::verify() {
  if (failed(checkStaticShapes(*this)))
    return failure();
  return checkResultShape(*this, tensorType(getOperand()).getShape());
}

LogicalResult BitcastOp::verify() {
  if (failed(checkStaticShapes(*this)) ||
      failed(checkResultShape(*this, tensorType(getOperand()).getShape())))
    return failure();
  auto width = [](Type t) {
    return t.isInteger(1) ? 8u : t.getIntOrFloatBitWidth();
  };
  Type from = tensorType(getOperand()).getElementType();
  Type to = getType().getElementType();
  if (width(from) != width(to))
    return emitOpError() << "reinterprets " << from << " (" << width(from)
                         << " bits) as " << to << " (" << width(to)
                         << " bits): the widths must be equal";
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")))
    return failure();
  auto in = tensorType(getOperand()).getShape();
  auto out = getType().getShape();
  ArrayRef<int64_t> dims = getBroadcastDimensions();
  if (static_cast<int64_t>(dims.size()) != static_cast<int64_t>(in.size()))
    return emitOpError() << "has " << dims.size()
                         << " broadcast dimensions for an operand of rank "
                         << in.size();
  for (auto [i, d] : llvm::enumerate(dims)) {
    if (d < 0 || d >= static_cast<int64_t>(out.size()))
      return emitOpError() << "broadcast dimension " << d
                           << " is out of range for result rank " << out.size();
    if (i > 0 && d <= dims[i - 1])
      return emitOpError()
             << "broadcast dimensions must be strictly increasing";
    if (in[i] != 1 && in[i] != out[d])
      return emitOpError() << "operand dimension " << i << " of size " << in[i]
                           << " cannot broadcast to result dimension " << d
                           << " of size " << out[d];
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")))
    return failure();
  if (tensorType(getOperand()).getNumElements() != getType().getNumElements())
    return emitOpError() << "operand has "
                         << tensorType(getOperand()).getNumElements()
                         << " elements but the result has "
                         << getType().getNumElements();
  return success();
}

LogicalResult TransposeOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")))
    return failure();
  auto in = tensorType(getOperand()).getShape();
  ArrayRef<int64_t> perm = getPermutation();
  if (perm.size() != in.size())
    return emitOpError() << "permutation has " << perm.size()
                         << " entries for an operand of rank " << in.size();
  if (failed(checkDimList(*this, perm, in.size(), "permutation")))
    return failure();
  SmallVector<int64_t> expected;
  for (int64_t p : perm)
    expected.push_back(in[p]);
  return checkResultShape(*this, expected);
}

LogicalResult SliceOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")))
    return failure();
  auto in = tensorType(getOperand()).getShape();
  ArrayRef<int64_t> start = getStartIndices(), limit = getLimitIndices(),
                    strides = getStrides();
  if (start.size() != in.size() || limit.size() != in.size() ||
      strides.size() != in.size())
    return emitOpError() << "start, limit and strides need " << in.size()
                         << " entries each";
  SmallVector<int64_t> expected;
  for (size_t d = 0; d < in.size(); ++d) {
    if (strides[d] < 1)
      return emitOpError() << "stride " << strides[d] << " in dimension " << d
                           << " must be at least 1";
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > in[d])
      return emitOpError() << "slice [" << start[d] << ", " << limit[d]
                           << ") of dimension " << d << " is outside [0, "
                           << in[d] << "]";
    expected.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  }
  return checkResultShape(*this, expected);
}

LogicalResult ReverseOp::verify() {
  if (failed(checkStaticShapes(*this)))
    return failure();
  return checkDimList(*this, getDimensions(), getType().getRank(), "reverse");
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  if (failed(checkStaticShapes(*this)))
    return failure();
  int64_t rank = getType().getRank();
  if (failed(checkDim(*this, getDimension(), rank, "dimension")))
    return failure();
  SmallVector<int64_t> expected(getType().getShape());
  expected[getDimension()] = 0;
  for (auto [i, v] : llvm::enumerate(getInputs())) {
    auto t = tensorType(v);
    if (t.getRank() != rank)
      return emitOpError() << "input " << i << " has rank " << t.getRank()
                           << ", expected " << rank;
    if (failed(checkSameElementType(*this, t, getType(), "input", "result")))
      return failure();
    for (int64_t d = 0; d < rank; ++d) {
      if (d == static_cast<int64_t>(getDimension()))
        continue;
      if (t.getDimSize(d) != getType().getDimSize(d))
        return emitOpError() << "input " << i << " has size " << t.getDimSize(d)
                             << " in dimension " << d << ", expected "
                             << getType().getDimSize(d);
    }
    expected[getDimension()] += t.getDimSize(getDimension());
  }
  return checkResultShape(*this, expected);
}

LogicalResult PadOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")) ||
      failed(checkSameElementType(*this, getPaddingValue().getType(), getType(),
                                  "padding value", "result")))
    return failure();
  if (tensorType(getPaddingValue()).getRank() != 0)
    return emitOpError() << "padding value must be a 0-d tensor";
  auto in = tensorType(getOperand()).getShape();
  if (getLow().size() != in.size() || getHigh().size() != in.size())
    return emitOpError() << "low and high need " << in.size()
                         << " entries each";
  SmallVector<int64_t> expected;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t lo = getLow()[d], hi = getHigh()[d];
    if (lo < 0 || hi < 0)
      return emitOpError() << "padding of dimension " << d
                           << " must be non-negative";
    if (getMode() == PadMode::reflect && (lo >= in[d] || hi >= in[d]) &&
        (lo || hi))
      return emitOpError() << "reflect padding of dimension " << d
                           << " must be smaller than its size " << in[d];
    if (getMode() == PadMode::edge && in[d] == 0 && (lo || hi))
      return emitOpError() << "edge padding of empty dimension " << d;
    expected.push_back(in[d] + lo + hi);
  }
  return checkResultShape(*this, expected);
}

LogicalResult GatherOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")))
    return failure();
  auto in = tensorType(getOperand()).getShape();
  if (failed(checkDim(*this, getAxis(), in.size(), "axis")))
    return failure();
  SmallVector<int64_t> expected(in.begin(), in.begin() + getAxis());
  llvm::append_range(expected, tensorType(getIndices()).getShape());
  expected.append(in.begin() + getAxis() + 1, in.end());
  return checkResultShape(*this, expected);
}

LogicalResult GatherElementsOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")))
    return failure();
  auto in = tensorType(getOperand());
  auto idx = tensorType(getIndices());
  if (in.getRank() != idx.getRank())
    return emitOpError() << "indices rank " << idx.getRank()
                         << " differs from operand rank " << in.getRank();
  if (failed(checkDim(*this, getAxis(), in.getRank(), "axis")))
    return failure();
  if (failed(checkIndicesFit(*this, in, idx, getAxis())))
    return failure();
  return checkResultShape(*this, idx.getShape());
}

LogicalResult ScatterOp::verify() {
  // Equal operand and result types are checked by AllTypesMatch (ODS).
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getUpdates().getType(), "operand",
                                             "updates")))
    return failure();
  auto in = tensorType(getOperand());
  auto idx = tensorType(getIndices());
  auto upd = tensorType(getUpdates());
  if (idx.getRank() != in.getRank())
    return emitOpError() << "indices rank " << idx.getRank()
                         << " differs from operand rank " << in.getRank();
  if (upd.getShape() != idx.getShape())
    return emitOpError() << "updates shape " << shapeStr(upd.getShape())
                         << " differs from indices shape "
                         << shapeStr(idx.getShape());
  if (failed(checkDim(*this, getAxis(), in.getRank(), "axis")))
    return failure();
  return checkIndicesFit(*this, in, idx, getAxis());
}

LogicalResult TopKOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getValues().getType(), "operand",
                                             "values")))
    return failure();
  auto in = tensorType(getOperand()).getShape();
  if (failed(checkDim(*this, getDimension(), in.size(), "dimension")))
    return failure();
  int64_t n = in[getDimension()];
  // The attribute is signed; read it as such so a negative k is caught.
  int64_t k = getKAttr().getInt();
  if (k < 0 || k > n)
    return emitOpError() << "k = " << k << " is out of range [0, " << n
                         << "] for dimension " << getDimension();
  SmallVector<int64_t> expected(in);
  expected[getDimension()] = getK();
  for (Value r : {getValues(), getIndices()}) {
    auto actual = tensorType(r).getShape();
    if (actual != ArrayRef<int64_t>(expected))
      return emitOpError() << "result shape " << shapeStr(actual)
                           << " does not match the expected shape "
                           << shapeStr(expected);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

/// The result element type is the operands', or f32 for bf16/f16 operands
/// (products accumulated in f32: mixed-precision training).
LogicalResult ContractOp::checkContractResultType() {
  Type in = getElementTypeOrSelf(getLhs().getType());
  Type out = getElementTypeOrSelf(getType());
  if (in == out || (out.isF32() && (in.isBF16() || in.isF16())))
    return success();
  return emitOpError() << "result element type " << out
                       << " must be the operand element type " << in
                       << (in.isBF16() || in.isF16() ? " or f32" : "");
}

SmallVector<int64_t> ContractOp::getFreeDimensions(int64_t rank,
                                                   ArrayRef<int64_t> batch,
                                                   ArrayRef<int64_t> contract) {
  SmallVector<int64_t> free;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(batch, d) && !llvm::is_contained(contract, d))
      free.push_back(d);
  return free;
}

LogicalResult ContractOp::verify() {
  if (failed(checkStaticShapesAndElementType(
          *this, getLhs().getType(), getRhs().getType(), "lhs", "rhs")) ||
      failed(checkContractResultType()))
    return failure();
  auto lhs = tensorType(getLhs()).getShape();
  auto rhs = tensorType(getRhs()).getShape();
  ArrayRef<int64_t> lb = getLhsBatchingDimensions(),
                    rb = getRhsBatchingDimensions(),
                    lc = getLhsContractingDimensions(),
                    rc = getRhsContractingDimensions();
  if (lb.size() != rb.size())
    return emitOpError() << "lhs has " << lb.size() << " batch dimensions, rhs "
                         << rb.size();
  if (lc.size() != rc.size())
    return emitOpError() << "lhs has " << lc.size()
                         << " contracting dimensions, rhs " << rc.size();
  SmallVector<int64_t> lhsAll(lb), rhsAll(rb);
  llvm::append_range(lhsAll, lc);
  llvm::append_range(rhsAll, rc);
  if (failed(
          checkDimList(*this, lhsAll, lhs.size(), "lhs batch/contracting")) ||
      failed(checkDimList(*this, rhsAll, rhs.size(), "rhs batch/contracting")))
    return failure();
  for (size_t i = 0; i < lhsAll.size(); ++i)
    if (lhs[lhsAll[i]] != rhs[rhsAll[i]])
      return emitOpError() << "lhs dimension " << lhsAll[i] << " (size "
                           << lhs[lhsAll[i]]
                           << ") is paired with rhs dimension " << rhsAll[i]
                           << " (size " << rhs[rhsAll[i]] << ")";
  SmallVector<int64_t> expected;
  for (int64_t d : lb)
    expected.push_back(lhs[d]);
  for (int64_t d = 0; d < static_cast<int64_t>(lhs.size()); ++d)
    if (!llvm::is_contained(lhsAll, d))
      expected.push_back(lhs[d]);
  for (int64_t d = 0; d < static_cast<int64_t>(rhs.size()); ++d)
    if (!llvm::is_contained(rhsAll, d))
      expected.push_back(rhs[d]);
  return checkResultShape(*this, expected);
}

LogicalResult ReduceOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")))
    return failure();
  auto in = tensorType(getOperand()).getShape();
  if (failed(checkDimList(*this, getDimensions(), in.size(), "reduction")))
    return failure();
  SmallVector<int64_t> expected;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d)
    if (!llvm::is_contained(getDimensions(), d))
      expected.push_back(in[d]);
  return checkResultShape(*this, expected);
}

LogicalResult ArgReduceOp::verify() {
  if (getKind() != ReduceKind::max && getKind() != ReduceKind::min)
    return emitOpError() << "kind must be 'max' or 'min'";
  if (failed(checkStaticShapes(*this)))
    return failure();
  auto in = tensorType(getOperand()).getShape();
  if (failed(checkDim(*this, getDimension(), in.size(), "dimension")))
    return failure();
  SmallVector<int64_t> expected(in);
  expected.erase(expected.begin() + getDimension());
  return checkResultShape(*this, expected);
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

/// Ops over one dimension of a static tensor (cumsum, softmax, log_softmax).
static LogicalResult verifyAlongDimension(Operation *op, int64_t dimension,
                                          RankedTensorType type) {
  if (failed(checkStaticShapes(op)))
    return failure();
  return checkDim(op, dimension, type.getRank(), "dimension");
}

LogicalResult CumSumOp::verify() {
  return verifyAlongDimension(*this, getDimension(), getType());
}

LogicalResult SoftmaxOp::verify() {
  return verifyAlongDimension(*this, getDimension(), getType());
}

LogicalResult LogSoftmaxOp::verify() {
  return verifyAlongDimension(*this, getDimension(), getType());
}

int64_t AttentionOp::getGroupSize() {
  return tensorType(getQ()).getDimSize(1) /
         std::max<int64_t>(tensorType(getK()).getDimSize(1), 1);
}

int64_t AttentionGradOp::getGroupSize() {
  return tensorType(getQ()).getDimSize(1) /
         std::max<int64_t>(tensorType(getK()).getDimSize(1), 1);
}

/// The checks attention and attention_grad share: ranks, shapes and
/// element types of q, k, v and the bias, the attributes, and `result`
/// (the attention's result, or the gradient's `out`) against them.
static LogicalResult verifyAttention(Operation *op, Value qv, Value kv,
                                     Value vv, Value bias, Value result,
                                     StringRef resultName, double scale,
                                     double softcap, bool causal,
                                     int64_t causalOffset) {
  if (failed(checkStaticShapes(op)))
    return failure();
  for (auto [name, v] : {std::pair<StringRef, Value>{"q", qv},
                         {"k", kv},
                         {"v", vv},
                         {"bias", bias},
                         {resultName, result}})
    if (v && tensorType(v).getRank() != 4)
      return op->emitOpError()
             << name << " must have rank 4, got " << v.getType();
  for (auto [name, v] :
       {std::pair<StringRef, Value>{"k", kv}, {"v", vv}, {resultName, result}})
    if (failed(checkSameElementType(op, v.getType(), qv.getType(), name, "q")))
      return failure();
  ArrayRef<int64_t> q = tensorType(qv).getShape();
  ArrayRef<int64_t> k = tensorType(kv).getShape();
  ArrayRef<int64_t> v = tensorType(vv).getShape();
  ArrayRef<int64_t> r = tensorType(result).getShape();
  if (k[0] != q[0] || v[0] != q[0])
    return op->emitOpError() << "batch sizes differ: q " << shapeStr(q)
                             << ", k " << shapeStr(k) << ", v " << shapeStr(v);
  if (k[3] != q[3])
    return op->emitOpError()
           << "k's head size " << k[3] << " differs from q's " << q[3];
  if (v[1] != k[1] || v[2] != k[2])
    return op->emitOpError()
           << "v " << shapeStr(v) << " does not match k's heads and length "
           << shapeStr(k);
  if (k[1] == 0 || q[1] % k[1] != 0)
    return op->emitOpError()
           << "query heads (" << q[1]
           << ") are not a multiple of key/value heads (" << k[1] << ")";
  SmallVector<int64_t> expected = {q[0], q[1], q[2], v[3]};
  if (r != ArrayRef<int64_t>(expected))
    return op->emitOpError() << resultName << " shape " << shapeStr(r)
                             << " should be " << shapeStr(expected);
  if (bias) {
    ArrayRef<int64_t> m = tensorType(bias).getShape();
    SmallVector<int64_t> full = {q[0], q[1], q[2], k[2]};
    for (int64_t d = 0; d < 4; ++d)
      if (m[d] != full[d] && (d == 3 || m[d] != 1))
        return op->emitOpError()
               << "bias " << shapeStr(m) << " does not broadcast to the scores "
               << shapeStr(full);
  }
  if (!(scale > 0) || !std::isfinite(scale))
    return op->emitOpError() << "scale must be positive, got " << scale;
  if (!(softcap >= 0))
    return op->emitOpError() << "softcap must be non-negative, got " << softcap;
  if (causalOffset != 0 && !causal)
    return op->emitOpError() << "causal_offset needs causal";
  return success();
}

/// verifyAttention of any of the four attention ops, whose q, k, v, scale,
/// softcap and causal mask are named alike; `out` is the forward's result
/// or the gradients' operand.
template <typename OpTy>
static LogicalResult verifyAttentionOf(OpTy op, Value bias, Value out,
                                       StringRef outName) {
  return verifyAttention(op, op.getQ(), op.getK(), op.getV(), bias, out,
                         outName, op.getScale().convertToDouble(),
                         op.getSoftcap().convertToDouble(), op.getCausal(),
                         static_cast<int64_t>(op.getCausalOffset()));
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionOf(*this, getBias(), getResult(), "result");
}

/// The checks of an attention gradient's `dout` and results against its
/// operands (attention_grad and attention_block_grad).
static LogicalResult verifyAttentionGrads(Operation *op, Value q, Value k,
                                          Value v, Value out, Value dout,
                                          Value dq, Value dk, Value dv) {
  if (tensorType(dout).getShape() != tensorType(out).getShape())
    return op->emitOpError()
           << "dout " << dout.getType() << " does not have out's shape "
           << shapeStr(tensorType(out).getShape());
  Type gradType = tensorType(dq).getElementType();
  Type qType = tensorType(q).getElementType();
  if (gradType != qType && !gradType.isF32())
    return op->emitOpError() << "gradients must be " << qType
                             << " (q's element type) or f32, got " << gradType;
  for (auto [name, grad, of] :
       {std::tuple<StringRef, Value, Value>{"dq", dq, q},
        {"dk", dk, k},
        {"dv", dv, v}}) {
    if (tensorType(grad).getShape() != tensorType(of).getShape())
      return op->emitOpError()
             << name << " " << grad.getType() << " does not have the shape of "
             << name.drop_front() << " " << shapeStr(tensorType(of).getShape());
    if (tensorType(grad).getElementType() != gradType)
      return op->emitOpError()
             << name << " has element type "
             << tensorType(grad).getElementType() << ", dq has " << gradType;
  }
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionOf(*this, getBias(), getOut(), "out")))
    return failure();
  return verifyAttentionGrads(*this, getQ(), getK(), getV(), getOut(),
                              getDout(), getDq(), getDk(), getDv());
}

/// A block attention's positions (one per query row and key row) and the
/// rows' log-sum-exp (B x Hq x Sq).
static LogicalResult verifyBlockPositions(Operation *op, Value q, Value k,
                                          Value qPositions, Value kPositions,
                                          Value lse) {
  ArrayRef<int64_t> qs = tensorType(q).getShape();
  for (auto [name, positions, length] :
       {std::tuple<StringRef, Value, int64_t>{"q_positions", qPositions, qs[2]},
        {"k_positions", kPositions, tensorType(k).getDimSize(2)}})
    if (tensorType(positions).getShape() != ArrayRef<int64_t>{length})
      return op->emitOpError()
             << name << " " << positions.getType()
             << " should have one position per row (" << length << ")";
  SmallVector<int64_t> rows = {qs[0], qs[1], qs[2]};
  if (tensorType(lse).getShape() != ArrayRef<int64_t>(rows))
    return op->emitOpError() << "lse " << lse.getType() << " should be "
                             << shapeStr(rows) << " (one per query row)";
  return success();
}

LogicalResult AttentionBlockOp::verify() {
  if (failed(verifyAttentionOf(*this, Value(), getOut(), "out")))
    return failure();
  return verifyBlockPositions(*this, getQ(), getK(), getQPositions(),
                              getKPositions(), getLse());
}

LogicalResult AttentionBlockGradOp::verify() {
  if (failed(verifyAttentionOf(*this, Value(), getOut(), "out")) ||
      failed(verifyBlockPositions(*this, getQ(), getK(), getQPositions(),
                                  getKPositions(), getLse())))
    return failure();
  return verifyAttentionGrads(*this, getQ(), getK(), getV(), getOut(),
                              getDout(), getDq(), getDk(), getDv());
}

//===----------------------------------------------------------------------===//
// Expert GEMMs
//===----------------------------------------------------------------------===//

/// What grouped_matmul and its weight gradient share: static shapes, one
/// float element type, `x` M x K, group ids of M, and `weights` (w or the
/// weight gradient) E x K x N or, transposed, E x N x K. `rowsName` and
/// `rows` are the M x N tensor (the forward's result or the gradient's dy).
static LogicalResult verifyGroupedMatmul(Operation *op, Value x, Value weights,
                                         StringRef weightsName, Value rows,
                                         StringRef rowsName, Value ids,
                                         bool transposeW) {
  if (failed(checkStaticShapes(op)) ||
      failed(checkSameElementType(op, weights.getType(), x.getType(),
                                  weightsName, "x")) ||
      failed(
          checkSameElementType(op, rows.getType(), x.getType(), rowsName, "x")))
    return failure();
  auto xt = tensorType(x), wt = tensorType(weights), rt = tensorType(rows);
  auto it = tensorType(ids);
  if (xt.getRank() != 2)
    return op->emitOpError() << "x must have rank 2 (rows x K), got " << xt;
  if (wt.getRank() != 3)
    return op->emitOpError()
           << weightsName << " must have rank 3 (experts x "
           << (transposeW ? "N x K" : "K x N") << "), got " << wt;
  if (rt.getRank() != 2)
    return op->emitOpError()
           << rowsName << " must have rank 2 (rows x N), got " << rt;
  if (it.getRank() != 1 || it.getDimSize(0) != xt.getDimSize(0))
    return op->emitOpError()
           << "group_ids " << it << " must be one id per row of x " << xt;
  int64_t k = wt.getDimSize(transposeW ? 2 : 1);
  int64_t n = wt.getDimSize(transposeW ? 1 : 2);
  if (k != xt.getDimSize(1))
    return op->emitOpError() << weightsName << " " << wt << " has K = " << k
                             << " (transpose_w: " << (transposeW ? "yes" : "no")
                             << "), x has K = " << xt.getDimSize(1);
  if (rt.getDimSize(0) != xt.getDimSize(0) || rt.getDimSize(1) != n)
    return op->emitOpError()
           << rowsName << " shape " << shapeStr(rt.getShape())
           << " differs from rows x N = " << shapeStr({xt.getDimSize(0), n});
  if (wt.getDimSize(0) < 1)
    return op->emitOpError()
           << weightsName << " " << wt << " must hold at least one expert";
  return success();
}

LogicalResult GroupedMatmulOp::verify() {
  return verifyGroupedMatmul(*this, getX(), getW(), "w", getResult(), "result",
                             getGroupIds(), getTransposeW());
}

LogicalResult GroupedMatmulWeightGradOp::verify() {
  return verifyGroupedMatmul(*this, getX(), getResult(), "result", getDy(),
                             "dy", getGroupIds(), getTransposeW());
}

LogicalResult RotaryOp::verify() {
  if (failed(checkStaticShapes(*this)))
    return failure();
  for (auto [name, v] : {std::pair<StringRef, Value>{"cos", getCos()},
                         {"sin", getSin()},
                         {"result", getResult()}})
    if (failed(checkSameElementType(*this, v.getType(), getX().getType(), name,
                                    "x")))
      return failure();
  if (tensorType(getX()).getRank() != 4)
    return emitOpError() << "x must have rank 4 (B x H x S x D), got "
                         << getX().getType();
  if (getResult().getType() != getX().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " differs from x's " << getX().getType();
  ArrayRef<int64_t> x = tensorType(getX()).getShape();
  ArrayRef<int64_t> c = tensorType(getCos()).getShape();
  if (c.size() != 3)
    return emitOpError() << "cos must have rank 3 (B x S x R), got "
                         << getCos().getType();
  if (tensorType(getSin()).getShape() != c)
    return emitOpError() << "sin " << getSin().getType()
                         << " does not have cos's shape " << shapeStr(c);
  if ((c[0] != 1 && c[0] != x[0]) || c[1] != x[2])
    return emitOpError() << "cos " << shapeStr(c)
                         << " does not match x's batch and positions "
                         << shapeStr(x) << " (its batch may be 1)";
  if (2 * c[2] > x[3])
    return emitOpError() << "rotates " << 2 * c[2]
                         << " features, more than x's " << x[3];
  return success();
}

/// The checks layer_norm and rms_norm share: static shapes, the result
/// type, the axis, the scales' (scale, bias) types and shapes, epsilon.
static LogicalResult
verifyNormalization(Operation *op, Value operand, Value result, int64_t axis,
                    ArrayRef<std::pair<StringRef, Value>> scales,
                    double epsilon) {
  if (failed(checkStaticShapes(op)))
    return failure();
  if (operand.getType() != result.getType())
    return op->emitOpError()
           << "result type " << result.getType()
           << " differs from operand type " << operand.getType();
  auto in = tensorType(operand).getShape();
  if (failed(checkDim(op, axis, in.size(), "axis")))
    return failure();
  ArrayRef<int64_t> normalized = in.drop_front(axis);
  for (auto [name, v] : scales) {
    if (failed(checkSameElementType(op, v.getType(), result.getType(), name,
                                    "result")))
      return failure();
    if (tensorType(v).getShape() != normalized)
      return op->emitOpError()
             << name << " shape " << shapeStr(tensorType(v).getShape())
             << " differs from the normalized shape " << shapeStr(normalized);
  }
  if (!(epsilon >= 0))
    return op->emitOpError() << "epsilon must be non-negative, got " << epsilon;
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyNormalization(*this, getOperand(), getResult(), getAxis(),
                             {{"scale", getScale()}, {"bias", getBias()}},
                             getEpsilon().convertToDouble());
}

LogicalResult RmsNormOp::verify() {
  return verifyNormalization(*this, getOperand(), getResult(), getAxis(),
                             {{"scale", getScale()}},
                             getEpsilon().convertToDouble());
}

//===----------------------------------------------------------------------===//
// Convolution and windows
//===----------------------------------------------------------------------===//

/// Output size of a window of `k` elements with dilation `dil` moved by
/// `stride` over `size + lo + hi` elements.
static int64_t windowOutputSize(int64_t size, int64_t lo, int64_t hi, int64_t k,
                                int64_t stride, int64_t dil) {
  int64_t span = dil * (k - 1) + 1;
  int64_t padded = size + lo + hi;
  if (padded < span)
    return 0;
  return (padded - span) / stride + 1;
}

/// Checks that each of a window op's attributes has one entry per spatial
/// dimension.
static LogicalResult checkWindowArity(
    Operation *op, size_t spatial,
    std::initializer_list<std::pair<StringRef, ArrayRef<int64_t>>> attrs) {
  for (auto [name, arr] : attrs)
    if (arr.size() != spatial)
      return op->emitOpError()
             << name << " needs " << spatial << " entries, got " << arr.size();
  return success();
}

LogicalResult ConvOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getInput().getType(),
                                             getFilter().getType(), "input",
                                             "filter")) ||
      failed(checkSameElementType(*this, getInput().getType(), getType(),
                                  "input", "result")))
    return failure();
  auto in = tensorType(getInput()).getShape();
  auto w = tensorType(getFilter()).getShape();
  if (in.size() < 3)
    return emitOpError() << "input must have rank >= 3 (N x C x spatial...)";
  if (w.size() != in.size())
    return emitOpError() << "filter rank " << w.size()
                         << " differs from input rank " << in.size();
  size_t spatial = in.size() - 2;
  if (failed(checkWindowArity(*this, spatial,
                              {{"strides", getStrides()},
                               {"pad_low", getPadLow()},
                               {"pad_high", getPadHigh()},
                               {"dilations", getDilations()}})))
    return failure();
  int64_t groups = getGroups();
  if (groups < 1 || in[1] % groups != 0 || w[0] % groups != 0)
    return emitOpError() << "groups " << groups
                         << " must divide the input channels " << in[1]
                         << " and the output channels " << w[0];
  if (w[1] * groups != in[1])
    return emitOpError() << "filter has " << w[1]
                         << " input channels per group, expected "
                         << in[1] / groups;
  SmallVector<int64_t> expected = {in[0], w[0]};
  for (size_t i = 0; i < spatial; ++i) {
    if (w[i + 2] < 1)
      return emitOpError() << "filter has size " << w[i + 2]
                           << " in spatial dimension " << i
                           << ", expected at least 1";
    if (getStrides()[i] < 1 || getDilations()[i] < 1 || getPadLow()[i] < 0 ||
        getPadHigh()[i] < 0)
      return emitOpError() << "strides and dilations must be >= 1 and pads "
                              ">= 0 in spatial dimension "
                           << i;
    expected.push_back(windowOutputSize(in[i + 2], getPadLow()[i],
                                        getPadHigh()[i], w[i + 2],
                                        getStrides()[i], getDilations()[i]));
  }
  return checkResultShape(*this, expected);
}

LogicalResult Im2ColOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getInput().getType(),
                                             getType(), "input", "result")))
    return failure();
  auto in = tensorType(getInput()).getShape();
  if (in.size() < 3)
    return emitOpError() << "input must have rank >= 3 (N x C x spatial...)";
  size_t spatial = in.size() - 2;
  if (failed(checkWindowArity(*this, spatial,
                              {{"kernel", getKernel()},
                               {"strides", getStrides()},
                               {"pad_low", getPadLow()},
                               {"pad_high", getPadHigh()},
                               {"dilations", getDilations()}})))
    return failure();
  int64_t groups = getGroups();
  if (groups < 1 || in[1] % groups != 0)
    return emitOpError() << "groups " << groups
                         << " must divide the input channels " << in[1];
  SmallVector<int64_t> expected = {groups, in[1] / groups};
  llvm::append_range(expected, getKernel());
  expected.push_back(in[0]);
  for (size_t i = 0; i < spatial; ++i) {
    if (getKernel()[i] < 1 || getStrides()[i] < 1 || getDilations()[i] < 1 ||
        getPadLow()[i] < 0 || getPadHigh()[i] < 0)
      return emitOpError() << "kernel, strides and dilations must be >= 1 and "
                              "pads >= 0 in spatial dimension "
                           << i;
    expected.push_back(windowOutputSize(in[i + 2], getPadLow()[i],
                                        getPadHigh()[i], getKernel()[i],
                                        getStrides()[i], getDilations()[i]));
  }
  return checkResultShape(*this, expected);
}

LogicalResult ReduceWindowOp::verify() {
  if (failed(checkStaticShapesAndElementType(*this, getOperand().getType(),
                                             getType(), "operand", "result")))
    return failure();
  auto in = tensorType(getOperand()).getShape();
  if (failed(checkWindowArity(*this, in.size(),
                              {{"window", getWindow()},
                               {"strides", getStrides()},
                               {"pad_low", getPadLow()},
                               {"pad_high", getPadHigh()},
                               {"dilations", getDilations()}})))
    return failure();
  SmallVector<int64_t> expected;
  for (size_t i = 0; i < in.size(); ++i) {
    if (getWindow()[i] < 1 || getStrides()[i] < 1 || getDilations()[i] < 1 ||
        getPadLow()[i] < 0 || getPadHigh()[i] < 0)
      return emitOpError() << "window, strides and dilations must be >= 1 "
                              "and pads >= 0 in dimension "
                           << i;
    expected.push_back(windowOutputSize(in[i], getPadLow()[i], getPadHigh()[i],
                                        getWindow()[i], getStrides()[i],
                                        getDilations()[i]));
  }
  return checkResultShape(*this, expected);
}

#define GET_OP_CLASSES
#include "Cleave/IR/CleaveOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Pipeline stages
//===----------------------------------------------------------------------===//

LogicalResult PipelineTransferOp::verify() {
  if (getFrom() < 0 || getTo() < 0)
    return emitOpError() << "needs pipeline ranks, got from = " << getFrom()
                         << " to = " << getTo();
  return success();
}

LogicalResult PipelineSumOp::verify() {
  ArrayRef<int64_t> ranks = getRanks();
  if (getOperands().empty() || ranks.size() != getOperands().size())
    return emitOpError() << "needs one pipeline rank per operand, got "
                         << ranks.size() << " for " << getOperands().size();
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] < 0 || (i > 0 && ranks[i] <= ranks[i - 1]))
      return emitOpError()
             << "pipeline ranks must be non-negative and increasing";
  return success();
}
