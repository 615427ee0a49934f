//===- VJPHelpers.h - Building blocks of the VJP rules ----------*- C++ -*-===//
//
// A small emitter of cleave ops shared by the VJP rules (VJPRules*.cpp):
// constants, elementwise arithmetic, "sum to shape" (unbroadcast) and
// "broadcast back" (keep-dims) helpers, and the rule declarations that
// VJPRules.cpp attaches to the ops.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_TRANSFORMS_AUTODIFF_VJPHELPERS_H
#define CLEAVE_LIB_TRANSFORMS_AUTODIFF_VJPHELPERS_H

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace cleave::autodiff {

using VJPResult = mlir::FailureOr<llvm::SmallVector<mlir::Value>>;

/// True for tensors of a float element type (the differentiable values).
bool isFloatTensor(mlir::Value v);

/// Emits cleave ops at `b`'s insertion point with location `loc`.
struct Emitter {
  mlir::OpBuilder &b;
  mlir::Location loc;

  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }

  /// A splat constant of `type` (a float, integer or i1 tensor type).
  mlir::Value splat(mlir::Type type, double value);
  mlir::Value zerosLike(mlir::Value v) { return splat(v.getType(), 0.0); }
  /// `value` as a constant of `like`'s type.
  mlir::Value splatLike(mlir::Value like, double value) {
    return splat(like.getType(), value);
  }

  mlir::Value unary(mlir::cleave::UnaryKind kind, mlir::Value x);
  mlir::Value binary(mlir::cleave::BinaryKind kind, mlir::Value x,
                     mlir::Value y);
  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value sub(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  mlir::Value div(mlir::Value x, mlir::Value y);
  mlir::Value neg(mlir::Value x);
  /// `x * c` for a scalar constant `c`.
  mlir::Value scale(mlir::Value x, double c) { return mul(x, splatLike(x, c)); }

  mlir::Value compare(mlir::cleave::CompareKind kind, mlir::Value x,
                      mlir::Value y);
  mlir::Value select(mlir::Value cond, mlir::Value onTrue, mlir::Value onFalse);
  mlir::Value convert(mlir::Value x, mlir::Type elementType);

  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  /// `result.shape[i] = x.shape[perm[i]]`; no op for the identity.
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> perm);
  mlir::Value slice(mlir::Value x, llvm::ArrayRef<int64_t> start,
                    llvm::ArrayRef<int64_t> limit,
                    llvm::ArrayRef<int64_t> strides);
  /// Constant-mode padding with zeros.
  mlir::Value padZeros(mlir::Value x, llvm::ArrayRef<int64_t> low,
                       llvm::ArrayRef<int64_t> high);
  mlir::Value concat(mlir::ValueRange xs, int64_t dim);

  /// Sum over `dims` (removed from the result).
  mlir::Value reduceSum(mlir::Value x, llvm::ArrayRef<int64_t> dims);
  /// Sum over every dimension, giving a 0-d tensor.
  mlir::Value sumAll(mlir::Value x);
  mlir::Value broadcastInDim(mlir::Value x, mlir::RankedTensorType to,
                             llvm::ArrayRef<int64_t> dims);
  /// Broadcasts `reduced`, the result of a reduction of a `full`-typed
  /// tensor over `reducedDims`, back to `full` (keep-dims broadcast).
  mlir::Value broadcastBack(mlir::Value reduced, mlir::RankedTensorType full,
                            llvm::ArrayRef<int64_t> reducedDims);
  /// The inverse of a broadcast_in_dim of an `operandType` tensor with
  /// `dims`: sums `g` over the new and the repeated dimensions ("sum to
  /// shape").
  mlir::Value unbroadcast(mlir::Value g, mlir::RankedTensorType operandType,
                          llvm::ArrayRef<int64_t> dims);
};

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

/// What attention and attention_grad share: the operands and attributes
/// of one attention (VJPRulesAttention.cpp).
struct AttentionOperands {
  mlir::Value q, k, v, bias;
  double scale = 1.0, softcap = 0.0;
  bool causal = false;
  int64_t causalOffset = 0;
  /// The attention's result shape, B x Hq x Sq x Dv.
  llvm::SmallVector<int64_t, 4> resultShape;
  static AttentionOperands of(mlir::cleave::AttentionOp op);
  static AttentionOperands of(mlir::cleave::AttentionGradOp op);
  int64_t groupSize() const;
};

/// An attention op's probabilities, spelled out (VJPRulesAttention.cpp).
struct AttentionProbabilities {
  /// q viewed as B x Hkv x G x Sq x D.
  mlir::Value q;
  /// B x Hkv x G x Sq x Skv, in f32 for bf16/f16 operands; masked keys and
  /// rows with every key masked are 0.
  mlir::Value probs;
  /// tanh(scores / softcap) when the op has a softcap, else null.
  mlir::Value tanh;
  /// The scaled (and softcapped) scores, before the bias and the mask; and
  /// after them (the softmax's input). Same shape and type as `probs`.
  mlir::Value scores, masked;
};
AttentionProbabilities attentionProbabilities(Emitter &e,
                                              const AttentionOperands &op);
/// The attention's result from its probabilities.
mlir::Value attentionOutput(Emitter &e, const AttentionOperands &op,
                            const AttentionProbabilities &parts);

/// The gradients of an attention given its result's cotangent, spelled out
/// from recomputed probabilities: dq, dk, dv in the scores' type (f32 for
/// bf16 and f16 operands, else theirs), and dbias (null without a bias) in
/// the bias's.
struct AttentionGradients {
  mlir::Value dq, dk, dv, dbias;
};
AttentionGradients attentionGradients(Emitter &e, const AttentionOperands &op,
                                      mlir::Value cotangent);

/// cleave.rotary spelled out as slices, products and a concatenation
/// (VJPRulesAttention.cpp).
mlir::Value rotaryOutput(Emitter &e, mlir::cleave::RotaryOp op);

/// The pad rule's reflect and edge modes and the scatter rule's mul, max and
/// min kinds (VJPRulesNN.cpp).
VJPResult vjpPadFolded(mlir::cleave::PadOp op, mlir::OpBuilder &b,
                       mlir::ValueRange cotangents);
VJPResult vjpScatterCombine(mlir::cleave::ScatterOp op, mlir::OpBuilder &b,
                            mlir::ValueRange cotangents);

} // namespace cleave::autodiff

#endif // CLEAVE_LIB_TRANSFORMS_AUTODIFF_VJPHELPERS_H
