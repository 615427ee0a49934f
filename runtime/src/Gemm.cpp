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
// Epilogues (bias, tanh-form GELU) run after the GEMM, one pass over each
// batch's C in C's element type, with the same operation order as the
// cleave ops the compiler fused (so bias-only results equal the unfused
// plan's bit for bit; f32 GELU takes tanh from a rational approximation
// within a few ulp, as generated kernels do).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "Half.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <dlfcn.h>
#include <cstring>
#include <vector>

namespace cleave::rt {

using namespace plan;

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

/// tanh in f32 as Eigen's rational approximation (the one MLIR's
/// polynomial approximation of math.tanh uses too): within a few ulp of
/// std::tanh, and branch-free, so the epilogue loop vectorizes where a libm
/// call per element would dominate it.
static float tanhOf(float x) {
  const float bound = 7.90531110763549805f; // tanh(bound) rounds to 1.
  float c = std::min(std::max(x, -bound), bound);
  float c2 = c * c;
  float p = -2.76076847742355e-16f;
  p = p * c2 + 2.00018790482477e-13f;
  p = p * c2 - 8.60467152213735e-11f;
  p = p * c2 + 5.12229709037114e-08f;
  p = p * c2 + 1.48572235717979e-05f;
  p = p * c2 + 6.37261928875436e-04f;
  p = p * c2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * c2 + 1.18534705686654e-04f;
  q = q * c2 + 2.26843463243900e-03f;
  q = q * c2 + 4.89352518554385e-03f;
  float t = c * p / q;
  return std::fabs(x) < 0.0004f ? x : t; // tanh(x) = x to f32 precision.
}

static double tanhOf(double x) { return std::tanh(x); }

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in T, in the order of
/// the ops ONNX Gelu(approximate="tanh") imports to.
template <typename T> static T geluTanh(T x) {
  const T c = static_cast<T>(0.7978845608028654); // sqrt(2/pi)
  T x3 = x * x * x;
  T inner = (x + x3 * static_cast<T>(0.044715)) * c;
  return x * (T(1) + tanhOf(inner)) * static_cast<T>(0.5);
}

template <typename T>
static void applyEpilogue(const std::vector<int64_t> &p, GemmEpilogue epilogue,
                          T *C, const T *bias) {
  int64_t M = p[kGemmM], N = p[kGemmN];
  bool gelu =
      epilogue == GemmEpilogue::Gelu || epilogue == GemmEpilogue::GeluBias;
  for (int64_t i = 0; i < p[kGemmBatch]; ++i)
    for (int64_t m = 0; m < M; ++m) {
      T *row = C + i * p[kGemmStrideC] + m * p[kGemmLdc];
      if (bias)
        for (int64_t n = 0; n < N; ++n)
          row[n] += bias[n];
      if (gelu)
        for (int64_t n = 0; n < N; ++n)
          row[n] = geluTanh(row[n]);
    }
}

/// C = alpha op(A) op(B) + beta C, without the epilogue.
static void runProduct(const Command &command, uint8_t *arena) {
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

void runGemm(const Command &command, uint8_t *arena) {
  runProduct(command, arena);
  GemmEpilogue epilogue = gemmEpilogueOf(command);
  if (epilogue == GemmEpilogue::None)
    return;
  const std::vector<uint64_t> &b = command.buffers;
  bool hasBias = gemmEpilogueHasBias(epilogue);
  // C's element type: F64 for f64 GEMMs, F32 otherwise (validated).
  if (command.params[kGemmDType] == static_cast<int64_t>(DType::F64))
    applyEpilogue(
        command.params, epilogue, reinterpret_cast<double *>(arena + b[2]),
        hasBias ? reinterpret_cast<const double *>(arena + b[3]) : nullptr);
  else
    applyEpilogue(
        command.params, epilogue, reinterpret_cast<float *>(arena + b[2]),
        hasBias ? reinterpret_cast<const float *>(arena + b[3]) : nullptr);
}

} // namespace cleave::rt
