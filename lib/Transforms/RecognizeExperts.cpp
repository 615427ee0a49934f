//===- RecognizeExperts.cpp - Gathered expert weights as grouped matmuls --===//
//
// A mixture of experts exported with static shapes (HF's "batched_mm"
// experts) gathers every routed row's expert weights, `w[ids]` of an
// `E x A x B` tensor, and multiplies each row by its copy as a batched
// matrix-vector product. The gather makes a copy of the weights per row
// (rows x A x B), and its gradient scatters them back. When the product
// contracts each gathered matrix with its own row (the batch dimensions are
// the ids'), the pair is `cleave.grouped_matmul` of the rows, the weights
// and the ids: the same sums, each expert's weights read in place.
//
// cleave.gather and cleave.grouped_matmul treat ids alike (negative from
// the end; out of range: a zero matrix, hence a zero row), so whatever
// computed the gather's indices (GatherND's linear index with its
// out-of-range sentinel) becomes the op's ids unchanged.
//
//===----------------------------------------------------------------------===//

#include "Recognize.h"

#include "llvm/ADT/STLExtras.h"

#define DEBUG_TYPE "cleave-recognize-composites"

namespace cleave::recognize {

namespace {

/// Whether `dims` is 0, 1, ..., n - 1.
bool isLeading(ArrayRef<int64_t> dims, size_t n) {
  if (dims.size() != n)
    return false;
  for (auto [i, d] : llvm::enumerate(dims))
    if (d != static_cast<int64_t>(i))
      return false;
  return true;
}

} // namespace

bool recognizeGroupedMatmul(ContractOp op) {
  // One operand is the gathered weights, ids.shape + [A, B], batched over
  // the ids' dimensions and contracted over A or B; the other is the rows,
  // ids.shape + [K] with any size-1 dimensions, batched alike.
  auto reject = [&](StringRef why) {
    (void)miss(op, why);
    return false;
  };
  for (int side = 0; side < 2; ++side) {
    Value gathered = op->getOperand(side), rows = op->getOperand(1 - side);
    auto gather = gathered.getDefiningOp<GatherOp>();
    if (!gather || gather.getAxis() != 0)
      continue;
    RankedTensorType gt = typeOf(gathered), rt = typeOf(rows);
    RankedTensorType wt = typeOf(gather.getOperand());
    Value ids = gather.getIndices();
    int64_t batch = typeOf(ids).getRank();
    if (wt.getRank() != 3 || gt.getRank() != batch + 2 || batch < 1)
      return reject("the gathered weights are not E x A x B");
    ArrayRef<int64_t> gb = side == 0 ? op.getLhsBatchingDimensions()
                                     : op.getRhsBatchingDimensions();
    ArrayRef<int64_t> rb = side == 0 ? op.getRhsBatchingDimensions()
                                     : op.getLhsBatchingDimensions();
    ArrayRef<int64_t> gc = side == 0 ? op.getLhsContractingDimensions()
                                     : op.getRhsContractingDimensions();
    ArrayRef<int64_t> rc = side == 0 ? op.getRhsContractingDimensions()
                                     : op.getLhsContractingDimensions();
    if (!isLeading(gb, batch) || !isLeading(rb, batch))
      return reject("not batched over the ids' dimensions");
    if (gc.size() != 1 || rc.size() != 1 || gc[0] < batch)
      return reject("not one contracted weight dimension");
    // The rows: every dimension past the batch but the contracted one is 1.
    for (int64_t d = batch; d < rt.getRank(); ++d)
      if (d != rc[0] && rt.getDimSize(d) != 1)
        return reject("the rows are not vectors");
    if (rt.getShape().take_front(batch) != gt.getShape().take_front(batch))
      return reject("rows and ids differ in shape");
    Type et = wt.getElementType();
    if (rt.getElementType() != et || op.getType().getElementType() != et)
      return reject("mixed element types");
    // The types cleave.grouped_matmul (and its command) takes.
    if (!et.isF32() && !et.isBF16() && !et.isF16())
      return reject("not f32, bf16 or f16");
    Type idType = typeOf(ids).getElementType();
    if (!idType.isInteger(32) && !idType.isInteger(64))
      return reject("ids are not i32 or i64");
    // Contracting the gathered matrices' last dimension (B) reads w as
    // E x N x K (transposed); their first (A), as E x K x N.
    bool transposeW = gc[0] == batch + 1;
    Value w = gather.getOperand();
    // A transpose of the weights' last two dimensions is the other layout.
    if (auto t = w.getDefiningOp<TransposeOp>();
        t && t.getPermutation() == ArrayRef<int64_t>{0, 2, 1}) {
      w = t.getOperand();
      transposeW = !transposeW;
    }
    int64_t m = typeOf(ids).getNumElements();
    int64_t k = rt.getDimSize(rc[0]);
    int64_t n = typeOf(w).getDimSize(transposeW ? 1 : 2);
    if (typeOf(w).getDimSize(transposeW ? 2 : 1) != k)
      return reject("the weights' K is not the rows'");

    OpBuilder b(op);
    Location loc = op.getLoc();
    auto flat = [&](Value v, ArrayRef<int64_t> shape) -> Value {
      if (typeOf(v).getShape() == shape)
        return v;
      return ReshapeOp::create(b, loc, typeOf(v).clone(shape), v);
    };
    Value x2 = flat(rows, {m, k});
    Value ids1 = flat(ids, {m});
    auto resultType = RankedTensorType::get({m, n}, et);
    Value y =
        GroupedMatmulOp::create(b, loc, resultType, x2, w, ids1,
                                transposeW ? b.getUnitAttr() : UnitAttr());
    // The product's result is the batch, then the free dimensions of each
    // operand in order: N and size-1 dimensions, row-major [M, N] either way.
    op.getResult().replaceAllUsesWith(flat(y, op.getType().getShape()));
    eraseDead({op.getOperation()});
    return true;
  }
  return false;
}

} // namespace cleave::recognize
