//===- GemmEpilogue.h - Elementwise tails of Gemm commands -----*- C++ -*-===//
//
// The plan builder's matcher for GEMM epilogues: a bias added along the
// output's last (N) dimension, and after it (or alone) the tanh-form GELU,
// which a Gemm command applies itself (cuBLASLt's BIAS / GELU_BIAS / GELU
// epilogues on CUDA, a pass over C after sgemm on the CPU).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_LIB_PLAN_GEMMEPILOGUE_H
#define CLEAVE_LIB_PLAN_GEMMEPILOGUE_H

#include "Cleave/IR/CleaveOps.h"
#include "cleave/Analysis/GemmShape.h"
#include "cleave/PlanFormat.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallVector.h"

namespace cleave {

/// The ops after a contraction that its Gemm command can compute.
struct GemmEpilogueMatch {
  plan::GemmEpilogue kind = plan::GemmEpilogue::None;
  /// The bias: N elements of the result's element type, whose shape is the
  /// result's trailing dimensions. Null when there is no bias or when the
  /// addend is a splat constant (then `splatBias` holds its value, and the
  /// caller materializes an N-element constant).
  mlir::Value bias;
  mlir::DenseElementsAttr splatBias;
  /// The value the Gemm command writes into C: the bias add's or the
  /// GELU's result.
  mlir::Value result;
  /// The ops the command absorbs (the add, the GELU's ops), in no
  /// particular order. None of their results but `result` is used elsewhere.
  llvm::SmallVector<mlir::Operation *> ops;
};

/// Matches, after a GEMM contraction of shape `shape`:
///  - bias: the contraction's only use is an add of a broadcast_in_dim of a
///    [..., N] tensor along the result's trailing dimensions (the same bias
///    for every row and batch), or of a splat constant;
///  - GELU: then (or directly on the contraction's result) the tanh-form
///    GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as ONNX
///    Gelu(approximate="tanh") imports and PyTorch exports it (products in
///    any grouping and order, x^3 as x*x*x or pow(x, 3)), when x has no use
///    outside it. The erf form is never matched: cuBLASLt's GELU is the
///    tanh one, and swapping them would change the model's numerics.
/// Only f32 results: bf16/f16 operands with an f32 result included, but
/// mixed-precision programs add the bias after rounding the product to
/// bf16/f16 (convert, then add in the low type), which the command cannot
/// reproduce, so they stay unfused; f64 epilogues are not assumed of
/// cuBLASLt. Returns kind None when nothing matches.
GemmEpilogueMatch matchGemmEpilogue(mlir::cleave::ContractOp contract,
                                    const GemmShape &shape);

} // namespace cleave

#endif // CLEAVE_LIB_PLAN_GEMMEPILOGUE_H
