//===- ConvolutionsToGemm.cpp - Convolutions as im2col and a GEMM ---------===//
//
// conv(x, w) with G groups of O/G outputs becomes
//   cols = im2col(x)                         G x C/G x K... x N x S'...
//   p    = contract(reshape(w), cols)        G x O/G x N x S'...
//   y    = transpose(reshape(p))             N x O x S'...
// The filter, viewed as G x O/G x C/G x K..., is already in GEMM layout
// (contracting dimensions at the back); the columns have theirs after the
// batch. The transpose back to N-major is an indexing map in whatever kernel
// reads y; with N = 1 it only moves a unit dimension and canonicalizes to a
// reshape, a view of the GEMM's output.
//
//===----------------------------------------------------------------------===//

#include "cleave/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <numeric>

#define DEBUG_TYPE "cleave-convolutions-to-gemm"

namespace cleave {
#define GEN_PASS_DEF_CONVOLUTIONSTOGEMMPASS
#include "cleave/Transforms/Passes.h.inc"
} // namespace cleave

using namespace mlir;
using namespace mlir::cleave;

/// Rewrites `conv`; returns false (and leaves it) when it is not worth a GEMM.
static bool rewriteConvolution(ConvOp conv, int64_t minGroupOutputs) {
  auto inType = cast<RankedTensorType>(conv.getInput().getType());
  auto wType = cast<RankedTensorType>(conv.getFilter().getType());
  auto outType = cast<RankedTensorType>(conv.getType());
  if (inType.getNumElements() == 0 || wType.getNumElements() == 0 ||
      outType.getNumElements() == 0)
    return false;
  int64_t groups = conv.getGroups();
  int64_t outPerGroup = wType.getDimSize(0) / groups;
  if (outPerGroup < minGroupOutputs)
    return false;
  int64_t spatial = inType.getRank() - 2;
  ArrayRef<int64_t> kernel = wType.getShape().drop_front(2);
  ArrayRef<int64_t> outSpatial = outType.getShape().drop_front(2);
  int64_t batch = inType.getDimSize(0);
  Type elementType = outType.getElementType();

  OpBuilder b(conv);
  Location loc = conv.getLoc();
  SmallVector<int64_t> colsShape = {groups, wType.getDimSize(1)};
  llvm::append_range(colsShape, kernel);
  colsShape.push_back(batch);
  llvm::append_range(colsShape, outSpatial);
  Value cols = Im2ColOp::create(
      b, loc, RankedTensorType::get(colsShape, elementType), conv.getInput(),
      kernel, conv.getStrides(), conv.getPadLow(), conv.getPadHigh(),
      conv.getDilations(), groups);

  SmallVector<int64_t> filterShape = {groups, outPerGroup};
  llvm::append_range(filterShape, wType.getShape().drop_front(1));
  Value filter =
      ReshapeOp::create(b, loc, RankedTensorType::get(filterShape, elementType),
                        conv.getFilter());

  // Contract C/G x K... (filter dimensions 2.., columns 1..).
  SmallVector<int64_t> lhsContract(1 + spatial), rhsContract(1 + spatial);
  std::iota(lhsContract.begin(), lhsContract.end(), 2);
  std::iota(rhsContract.begin(), rhsContract.end(), 1);
  SmallVector<int64_t> productShape = {groups, outPerGroup, batch};
  llvm::append_range(productShape, outSpatial);
  Value product = ContractOp::create(
      b, loc, RankedTensorType::get(productShape, elementType), filter, cols,
      ArrayRef<int64_t>{0}, ArrayRef<int64_t>{0}, lhsContract, rhsContract);

  // G x O/G x N x S'... -> O x N x S'... (a view) -> N x O x S'...: the
  // transpose comes last so that the kernels reading the result fuse it.
  int64_t outChannels = wType.getDimSize(0);
  SmallVector<int64_t> mergedShape = {outChannels, batch};
  llvm::append_range(mergedShape, outSpatial);
  Value merged = ReshapeOp::create(
      b, loc, RankedTensorType::get(mergedShape, elementType), product);
  SmallVector<int64_t> perm = {1, 0};
  for (int64_t i = 0; i < spatial; ++i)
    perm.push_back(2 + i);
  Value result = TransposeOp::create(b, loc, outType, merged, perm);
  conv.replaceAllUsesWith(result);
  conv.erase();
  return true;
}

namespace {
struct ConvolutionsToGemmPass
    : ::cleave::impl::ConvolutionsToGemmPassBase<ConvolutionsToGemmPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<ConvOp> convs;
    getOperation().walk([&](ConvOp op) { convs.push_back(op); });
    for (ConvOp conv : convs)
      rewriteConvolution(conv, minGroupOutputs);
  }
};
} // namespace
