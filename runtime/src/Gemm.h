//===- Gemm.h - Batched row-major GEMM through CBLAS -----------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_GEMM_H
#define CLEAVE_RUNTIME_GEMM_H

#include "cleave/PlanFormat.h"

#include <cstdint>
#include <string>

namespace cleave::rt {

class KernelThreads;

/// Runs a validated Gemm command (see PlanFormat.h) on `arena`. oneDNN's
/// products are cut into tiles by their shape alone, each computed by one
/// single-threaded call, spread over `threads` (null: the calling thread):
/// the result does not depend on the thread count.
void runGemm(const plan::Command &command, uint8_t *arena,
             const KernelThreads *threads);

/// C = alpha op(A) op(B) + beta C for row-major f32 matrices, one product on
/// the library GEMM (oneDNN where it loads, else OpenBLAS). Inside a
/// parallel region of the kernel threads (KernelThreads) oneDNN computes it
/// on the calling thread.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B,
           int64_t ldb, float beta, float *C, int64_t ldc);

/// The libraries GEMMs go to: "oneDNN 2.6.3 (f32, bf16), OpenBLAS (f64)"
/// when oneDNN loads, else "OpenBLAS" (see Gemm.cpp).
std::string gemmLibraries();

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_GEMM_H
