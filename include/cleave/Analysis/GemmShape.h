//===- GemmShape.h - Contractions in batched-GEMM form ----------*- C++ -*-===//
//
// Which cleave.contract ops are batched GEMMs, and their sizes: read by
// --cleave-canonicalize-contractions, which puts contractions in this form,
// and by the plan builder, which turns them into GEMM commands.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_ANALYSIS_GEMMSHAPE_H
#define CLEAVE_ANALYSIS_GEMMSHAPE_H

#include "Cleave/IR/CleaveOps.h"

#include "mlir/Support/LLVM.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace cleave {

/// Describes a contraction in batched-GEMM form, or fails if the operands
/// are not laid out as CanonicalizeContractionsPass produces.
struct GemmShape {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool transA = false, transB = false;
};
mlir::FailureOr<GemmShape> getGemmShape(mlir::cleave::ContractOp op);

/// True if `dims` is `start, start + 1, ...` (or empty).
bool isDimRange(llvm::ArrayRef<int64_t> dims, int64_t start);

} // namespace cleave

#endif // CLEAVE_ANALYSIS_GEMMSHAPE_H
