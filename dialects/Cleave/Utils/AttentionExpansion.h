//===- AttentionExpansion.h - Attention and rotary spelled out --*- C++ -*-===//
//
// cleave.attention, its gradients and cleave.rotary as contractions, a
// masked softmax, slices and elementwise ops: the decomposition before
// planning (--cleave-decompose-attention, --cleave-decompose-rotary), the
// ONNX importer (attention probabilities as an output) and the VJP rules
// build them the same way.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_UTILS_ATTENTIONEXPANSION_H
#define CLEAVE_UTILS_ATTENTIONEXPANSION_H

#include "Cleave/IR/CleaveOps.h"
#include "Cleave/Utils/Emitter.h"

#include "llvm/ADT/SmallVector.h"

namespace cleave {

/// What attention and attention_grad share: the operands and attributes
/// of one attention.
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

/// An attention op's probabilities, spelled out.
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

/// cleave.rotary spelled out as slices, products and a concatenation.
mlir::Value rotaryOutput(Emitter &e, mlir::cleave::RotaryOp op);

/// The pairs a rotary op rotates: x1 and x2 (B x H x S x R each) of `x`
/// (B x H x S x D), and what passes through (null when 2R = D).
struct RotaryHalves {
  mlir::Value x1, x2, rest;
};
/// The halves of `x` that a rotary op with R = `r` rotates, interleaved
/// (pairs of neighbours) or not (the first R and the next R).
RotaryHalves rotaryHalves(Emitter &e, mlir::Value x, int64_t r,
                          bool interleaved);

} // namespace cleave

#endif // CLEAVE_UTILS_ATTENTIONEXPANSION_H
