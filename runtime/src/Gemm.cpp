//===- Gemm.cpp - Batched row-major GEMM through CBLAS --------------------===//
//
// f32 and f64 call sgemm/dgemm. Mixed precision (a 16th parameter, the
// output dtype f32): bf16 operands call OpenBLAS's cblas_sbgemm (products
// accumulated in f32) when the loaded OpenBLAS exports it (looked up with
// dlsym: Debian's 0.3.21 declares it in cblas.h but is built without
// BUILD_BFLOAT16, so it is absent there). Otherwise, and always for f16,
// the operands are converted to f32 (exactly, into per-thread scratch
// buffers) and go through sgemm, which accumulates in f32 too.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <cblas.h>
#include <cmath>
#include <dlfcn.h>
#include <cstring>
#include <vector>

namespace cleave::rt {

using namespace plan;

static double bitsToDouble(int64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d;
}

template <typename In, typename Out, typename Fn>
static void batched(const std::vector<int64_t> &p, const In *A, const In *B,
                    Out *C, Fn gemm) {
  auto tA = p[kGemmTransA] ? CblasTrans : CblasNoTrans;
  auto tB = p[kGemmTransB] ? CblasTrans : CblasNoTrans;
  int M = static_cast<int>(p[kGemmM]), N = static_cast<int>(p[kGemmN]),
      K = static_cast<int>(p[kGemmK]);
  if (M == 0 || N == 0)
    return;
  Out alpha = static_cast<Out>(bitsToDouble(p[kGemmAlphaBits]));
  Out beta = static_cast<Out>(bitsToDouble(p[kGemmBetaBits]));
  for (int64_t i = 0; i < p[kGemmBatch]; ++i)
    gemm(CblasRowMajor, tA, tB, M, N, K, alpha, A + i * p[kGemmStrideA],
         static_cast<int>(p[kGemmLda]), B + i * p[kGemmStrideB],
         static_cast<int>(p[kGemmLdb]), beta, C + i * p[kGemmStrideC],
         static_cast<int>(p[kGemmLdc]));
}

/// IEEE half to float.
static float halfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

static float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE,
                          blasint, blasint, blasint, float, const bfloat16 *,
                          blasint, const bfloat16 *, blasint, float, float *,
                          blasint);

/// cblas_sbgemm of the loaded OpenBLAS, or null.
static SbgemmFn findSbgemm() {
  static SbgemmFn fn =
      reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  return fn;
}

/// The f32 copy of a bf16/f16 operand: the elements a batched GEMM touches,
/// at the same element offsets.
template <float (*toFloat)(uint16_t)>
static const float *widen(const uint16_t *src, int64_t rows, int64_t cols,
                          int64_t ld, int64_t stride, int64_t batch,
                          std::vector<float> &scratch) {
  int64_t extent = 0;
  if (rows > 0 && cols > 0)
    extent = (batch - 1) * stride + (rows - 1) * ld + cols;
  scratch.assign(static_cast<size_t>(extent), 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t i = b * stride + r * ld + c;
        scratch[i] = toFloat(src[i]);
      }
  return scratch.data();
}

void runGemm(const Command &command, uint8_t *arena) {
  const std::vector<int64_t> &p = command.params;
  const std::vector<uint64_t> &b = command.buffers;
  int64_t dtype = p[kGemmDType];
  if (dtype == static_cast<int64_t>(DType::F64)) {
    batched(p, reinterpret_cast<const double *>(arena + b[0]),
            reinterpret_cast<const double *>(arena + b[1]),
            reinterpret_cast<double *>(arena + b[2]), cblas_dgemm);
    return;
  }
  float *C = reinterpret_cast<float *>(arena + b[2]);
  bool bf16 = dtype == static_cast<int64_t>(DType::BF16);
  if (bf16) {
    if (SbgemmFn sbgemm = findSbgemm()) {
      batched(p, reinterpret_cast<const bfloat16 *>(arena + b[0]),
              reinterpret_cast<const bfloat16 *>(arena + b[1]), C, sbgemm);
      return;
    }
  }
  if (bf16 || dtype == static_cast<int64_t>(DType::F16)) {
    thread_local std::vector<float> scratchA, scratchB;
    auto widenAny = bf16 ? widen<bf16ToFloat> : widen<halfToFloat>;
    int64_t M = p[kGemmM], N = p[kGemmN], K = p[kGemmK];
    bool tA = p[kGemmTransA], tB = p[kGemmTransB];
    const float *A = widenAny(reinterpret_cast<const uint16_t *>(arena + b[0]),
                              tA ? K : M, tA ? M : K, p[kGemmLda],
                              p[kGemmStrideA], p[kGemmBatch], scratchA);
    const float *B = widenAny(reinterpret_cast<const uint16_t *>(arena + b[1]),
                              tB ? N : K, tB ? K : N, p[kGemmLdb],
                              p[kGemmStrideB], p[kGemmBatch], scratchB);
    batched(p, A, B, C, cblas_sgemm);
    return;
  }
  batched(p, reinterpret_cast<const float *>(arena + b[0]),
          reinterpret_cast<const float *>(arena + b[1]), C, cblas_sgemm);
}

} // namespace cleave::rt
