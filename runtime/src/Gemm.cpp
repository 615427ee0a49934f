//===- Gemm.cpp - Batched row-major GEMM through CBLAS --------------------===//

#include "Gemm.h"

#include <cblas.h>
#include <cstring>

namespace cleave::rt {

using namespace plan;

static double bitsToDouble(int64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}

template <typename T, typename Fn>
static void batched(const std::vector<int64_t> &p,
                    const std::vector<uint64_t> &b, uint8_t *arena, Fn gemm) {
  auto tA = p[kGemmTransA] ? CblasTrans : CblasNoTrans;
  auto tB = p[kGemmTransB] ? CblasTrans : CblasNoTrans;
  int M = static_cast<int>(p[kGemmM]), N = static_cast<int>(p[kGemmN]),
      K = static_cast<int>(p[kGemmK]);
  if (M == 0 || N == 0)
    return;
  T alpha = static_cast<T>(bitsToDouble(p[kGemmAlphaBits]));
  T beta = static_cast<T>(bitsToDouble(p[kGemmBetaBits]));
  T *A = reinterpret_cast<T *>(arena + b[0]);
  T *B = reinterpret_cast<T *>(arena + b[1]);
  T *C = reinterpret_cast<T *>(arena + b[2]);
  for (int64_t i = 0; i < p[kGemmBatch]; ++i)
    gemm(CblasRowMajor, tA, tB, M, N, K, alpha, A + i * p[kGemmStrideA],
         static_cast<int>(p[kGemmLda]), B + i * p[kGemmStrideB],
         static_cast<int>(p[kGemmLdb]), beta, C + i * p[kGemmStrideC],
         static_cast<int>(p[kGemmLdc]));
}

void runGemm(const Command &command, uint8_t *arena) {
  if (command.params[kGemmDType] == static_cast<int64_t>(DType::F64))
    batched<double>(command.params, command.buffers, arena, cblas_dgemm);
  else
    batched<float>(command.params, command.buffers, arena, cblas_sgemm);
}

} // namespace cleave::rt
