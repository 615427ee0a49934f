//===- Emitter.h - A small emitter of cleave ops ----------------*- C++ -*-===//
//
// Builds cleave ops at a builder's insertion point: constants, elementwise
// arithmetic, data movement, "sum to shape" (unbroadcast) and "broadcast
// back" (keep-dims). Shared by the VJP rules, the composite recognition and
// decomposition passes and the ONNX importer.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_UTILS_EMITTER_H
#define CLEAVE_UTILS_EMITTER_H

#include "Cleave/IR/CleaveOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/ArrayRef.h"

namespace cleave {

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

} // namespace cleave

#endif // CLEAVE_UTILS_EMITTER_H
