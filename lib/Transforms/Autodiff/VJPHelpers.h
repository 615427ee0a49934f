//===- VJPHelpers.h - Building blocks of the VJP rules ----------*- C++ -*-===//
//
// What the VJP rules (VJPRules*.cpp) share: the rule declarations that
// VJPRules.cpp attaches to the ops, over the cleave op emitter
// (Cleave/Utils/Emitter.h) and attention spelled out
// (Cleave/Utils/AttentionExpansion.h).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_AUTODIFF_VJPHELPERS_H
#define CLEAVE_LIB_TRANSFORMS_AUTODIFF_VJPHELPERS_H

#include "Cleave/IR/CleaveOps.h"
#include "Cleave/Utils/AttentionExpansion.h"
#include "Cleave/Utils/Emitter.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace cleave::autodiff {

using VJPResult = mlir::FailureOr<llvm::SmallVector<mlir::Value>>;

/// True for tensors of a float element type (the differentiable values).
bool isFloatTensor(mlir::Value v);

/// The end of spreading a tensor of `shape` along `dim` so that element j
/// lands at j * `stride` (the gradient of a strided slice, a dilated
/// cotangent): `spread` holds each element followed by its stride - 1
/// zeros in a new dimension dim + 1; merges the two dimensions and drops the
/// trailing zeros, [r] -> [(r - 1) * stride + 1].
mlir::Value mergeSpread(Emitter &e, mlir::Value spread,
                        llvm::ArrayRef<int64_t> shape, int64_t dim,
                        int64_t stride);

//===----------------------------------------------------------------------===//
// Rules (one per op; see VJPRules*.cpp)
//===----------------------------------------------------------------------===//

#define CLEAVE_VJP_RULE(OP)                                                    \
  VJPResult vjp(mlir::cleave::OP op, mlir::OpBuilder &b,                       \
                mlir::ValueRange cotangents);
// Elementwise (VJPRulesElementwise.cpp).
CLEAVE_VJP_RULE(ConstantOp)
CLEAVE_VJP_RULE(IotaOp)
CLEAVE_VJP_RULE(RngKeyOp)
CLEAVE_VJP_RULE(PipelineTransferOp)
CLEAVE_VJP_RULE(CompareOp)
CLEAVE_VJP_RULE(ArgReduceOp)
CLEAVE_VJP_RULE(UnaryOp)
CLEAVE_VJP_RULE(BinaryOp)
CLEAVE_VJP_RULE(SelectOp)
CLEAVE_VJP_RULE(ConvertOp)
// Data movement (VJPRulesDataMovement.cpp).
CLEAVE_VJP_RULE(BroadcastInDimOp)
CLEAVE_VJP_RULE(ReshapeOp)
CLEAVE_VJP_RULE(TransposeOp)
CLEAVE_VJP_RULE(SliceOp)
CLEAVE_VJP_RULE(ReverseOp)
CLEAVE_VJP_RULE(ConcatOp)
CLEAVE_VJP_RULE(PadOp)
CLEAVE_VJP_RULE(GatherOp)
CLEAVE_VJP_RULE(GatherElementsOp)
CLEAVE_VJP_RULE(ScatterOp)
CLEAVE_VJP_RULE(TopKOp)
// Contractions, reductions and composites (VJPRulesReductions.cpp).
CLEAVE_VJP_RULE(ContractOp)
CLEAVE_VJP_RULE(GroupedMatmulOp)
CLEAVE_VJP_RULE(ReduceOp)
CLEAVE_VJP_RULE(CumSumOp)
CLEAVE_VJP_RULE(SoftmaxOp)
CLEAVE_VJP_RULE(LogSoftmaxOp)
CLEAVE_VJP_RULE(LayerNormOp)
CLEAVE_VJP_RULE(RmsNormOp)
// Attention (VJPRulesAttention.cpp).
CLEAVE_VJP_RULE(AttentionOp)
CLEAVE_VJP_RULE(RotaryOp)
// Convolution and windowed reductions (VJPRulesNN.cpp).
CLEAVE_VJP_RULE(ConvOp)
CLEAVE_VJP_RULE(ReduceWindowOp)
#undef CLEAVE_VJP_RULE

/// The pad rule's reflect and edge modes and the scatter rule's mul, max and
/// min kinds (VJPRulesNN.cpp).
VJPResult vjpPadFolded(mlir::cleave::PadOp op, mlir::OpBuilder &b,
                       mlir::ValueRange cotangents);
VJPResult vjpScatterCombine(mlir::cleave::ScatterOp op, mlir::OpBuilder &b,
                            mlir::ValueRange cotangents);

} // namespace cleave::autodiff

#endif // CLEAVE_LIB_TRANSFORMS_AUTODIFF_VJPHELPERS_H
