//===- Gemm.cpp - Batched row-major GEMM through oneDNN or CBLAS ----------===//
//
// f32 GEMMs call oneDNN's dnnl_sgemm when libdnnl.so.2 can be loaded
// (dlopen, so that a machine without it still runs: Debian's libdnnl2), else
// OpenBLAS's cblas_sgemm; f64 ones call cblas_dgemm. oneDNN's JIT sgemm is
// 1.3-2.5x faster than OpenBLAS 0.3.21's on the small and skinny products
// convolutions give (M=512 N=49 K=4608: 149 against 54-65 GFLOP/s on two
// AVX-512 cores) and as fast on large ones. Neither gives the same bits for
// every thread count on every machine (see "Thread-count invariance").
// CLEAVE_GEMM=openblas keeps every GEMM on OpenBLAS (CLEAVE_GEMM=onednn, the
// default, is the only other value).
//
// Mixed precision (a 16th parameter, the output dtype f32): bf16 operands
// call oneDNN's dnnl_gemm_bf16bf16f32, or OpenBLAS's cblas_sbgemm when the
// loaded OpenBLAS exports it (looked up with dlsym: Debian's 0.3.21
// declares it in cblas.h but is built without BUILD_BFLOAT16, so it is
// absent there); both accumulate the products in f32. Otherwise, and
// always for f16, the operands are converted to f32 (exactly, into
// per-thread scratch buffers) and go through sgemm, which accumulates in
// f32 too.
//
// Thread-count invariance: oneDNN's own threading splits K on some shapes
// on AVX2 machines (M=128 N=64 K=64 on an AMD EPYC without AVX-512 gives
// other sums at 4 threads than at 1), so its results would depend on the
// thread count. runGemm cuts each oneDNN product into tiles chosen by the
// shape alone (blocks of C's rows, or of its columns when it has few rows),
// computes each tile with one single-threaded call and spreads the tiles
// over the kernels' OpenMP team: every element comes from the same call
// whatever the team's size.
//
// Epilogues (bias, tanh-form GELU) run after the GEMM, one pass over each
// batch's C in C's element type, with the same operation order as the
// cleave ops the compiler fused (so bias-only results equal the unfused
// plan's bit for bit; f32 GELU takes tanh from a rational approximation
// within a few ulp, as generated kernels do).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "FastMath.h"
#include "Half.h"
#include "KernelThreads.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
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

/// How a product of M x N x K is cut into tiles: a function of its shape
/// only (never of the thread count). Small products stay whole; others get
/// blocks of at least kTileRows rows of C (at most kMaxTiles of them), or,
/// with fewer rows, blocks of kTileCols columns.
struct Tiling {
  int64_t rows, cols;         ///< Rows and columns of a full tile.
  int64_t rowTiles, colTiles; ///< Tiles per batch along each.
};
static Tiling tilingOf(int64_t M, int64_t N, int64_t K) {
  constexpr int64_t kMinWork = int64_t(1) << 16, kTileRows = 64,
                    kTileCols = 256, kMaxTiles = 32;
  Tiling t{M, N, 1, 1};
  if (M * N * std::max<int64_t>(K, 1) < kMinWork)
    return t;
  if (M > kTileRows) {
    t.rows = std::max(kTileRows, (M + kMaxTiles - 1) / kMaxTiles);
    t.rowTiles = (M + t.rows - 1) / t.rows;
  } else if (N > 2 * kTileCols) {
    t.cols = std::max(kTileCols, (N + kMaxTiles - 1) / kMaxTiles);
    t.colTiles = (N + t.cols - 1) / t.cols;
  }
  return t;
}

/// batched() cut into tiles (tilingOf) over `threads`, for gemm functions
/// that thread by themselves (oneDNN's): each tile is one single-threaded
/// call, so the result does not depend on the team's size.
template <typename In, typename Out, typename Fn>
static void tiled(const std::vector<int64_t> &p, const In *A, const In *B,
                  Out *C, Fn gemm, const KernelThreads *threads) {
  struct Frame {
    const std::vector<int64_t> *p;
    const In *A, *B;
    Out *C;
    Fn gemm;
    Tiling t;
  };
  int64_t M = p[kGemmM], N = p[kGemmN];
  if (M == 0 || N == 0)
    return;
  Frame f{&p, A, B, C, gemm, tilingOf(M, N, p[kGemmK])};
  auto range = [](void *data, int64_t begin, int64_t end) {
    const Frame &f = *static_cast<const Frame *>(data);
    const std::vector<int64_t> &p = *f.p;
    bool transA = p[kGemmTransA], transB = p[kGemmTransB];
    auto tA = transA ? CblasTrans : CblasNoTrans;
    auto tB = transB ? CblasTrans : CblasNoTrans;
    int64_t M = p[kGemmM], N = p[kGemmN],
            perBatch = f.t.rowTiles * f.t.colTiles;
    int64_t lda = p[kGemmLda], ldb = p[kGemmLdb], ldc = p[kGemmLdc];
    Out alpha = static_cast<Out>(bitsToDouble(p[kGemmAlphaBits]));
    Out beta = static_cast<Out>(bitsToDouble(p[kGemmBetaBits]));
    for (int64_t tile = begin; tile < end; ++tile) {
      int64_t i = tile / perBatch, r = tile % perBatch / f.t.colTiles,
              c = tile % f.t.colTiles;
      int64_t r0 = r * f.t.rows, c0 = c * f.t.cols;
      int64_t rows = std::min(f.t.rows, M - r0),
              cols = std::min(f.t.cols, N - c0);
      // Rows of op(A) are A's columns when A is transposed; columns of
      // op(B) are B's rows when B is.
      const In *a = f.A + i * p[kGemmStrideA] + (transA ? r0 : r0 * lda);
      const In *b = f.B + i * p[kGemmStrideB] + (transB ? c0 * ldb : c0);
      Out *out = f.C + i * p[kGemmStrideC] + r0 * ldc + c0;
      f.gemm(CblasRowMajor, tA, tB, static_cast<int>(rows),
             static_cast<int>(cols), static_cast<int>(p[kGemmK]), alpha, a,
             static_cast<int>(lda), b, static_cast<int>(ldb), beta, out,
             static_cast<int>(ldc));
    }
  };
  KernelThreads::parallelForOneThreadEach(
      threads, range, &f, p[kGemmBatch] * f.t.rowTiles * f.t.colTiles);
}

/// The elements from the first to the last that a batched matrix of rows x
/// cols (leading dimension ld, batch stride) touches.
static size_t extentOf(int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                       int64_t batch) {
  if (rows <= 0 || cols <= 0)
    return 0;
  return static_cast<size_t>((batch - 1) * stride + (rows - 1) * ld + cols);
}

/// The f32 copy of a bf16/f16 operand: the elements a batched GEMM touches,
/// at the same element offsets.
template <float (*toFloat)(uint16_t)>
static const float *widen(const uint16_t *src, int64_t rows, int64_t cols,
                          int64_t ld, int64_t stride, int64_t batch,
                          std::vector<float> &scratch) {
  scratch.assign(extentOf(rows, cols, ld, stride, batch), 0.0f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t i = b * stride + r * ld + c;
        scratch[i] = toFloat(src[i]);
      }
  return scratch.data();
}

//===----------------------------------------------------------------------===//
// oneDNN
//===----------------------------------------------------------------------===//

namespace {
/// The oneDNN functions Cleave calls (dnnl.h; oneDNN's GEMMs are
/// row-major), or nulls.
struct OneDnn {
  using Sgemm = int (*)(char, char, int64_t, int64_t, int64_t, float,
                        const float *, int64_t, const float *, int64_t, float,
                        float *, int64_t);
  using GemmBf16 = int (*)(char, char, int64_t, int64_t, int64_t, float,
                           const uint16_t *, int64_t, const uint16_t *, int64_t,
                           float, float *, int64_t);
  struct Version {
    int major, minor, patch;
    const char *hash;
    unsigned cpuRuntime, gpuRuntime;
  };
  Sgemm sgemm = nullptr;
  GemmBf16 gemmBf16 = nullptr;
  std::string version;
};
} // namespace

static const OneDnn &oneDnn() {
  static const OneDnn loaded = [] {
    OneDnn d;
    const char *choice = std::getenv("CLEAVE_GEMM");
    if (choice && std::strcmp(choice, "openblas") == 0)
      return d;
    if (choice && *choice && std::strcmp(choice, "onednn") != 0)
      std::fprintf(stderr,
                   "cleave: CLEAVE_GEMM='%s' is neither 'onednn' nor "
                   "'openblas'; using oneDNN where it loads\n",
                   choice);
    void *lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return d;
    d.sgemm = reinterpret_cast<OneDnn::Sgemm>(dlsym(lib, "dnnl_sgemm"));
    d.gemmBf16 =
        reinterpret_cast<OneDnn::GemmBf16>(dlsym(lib, "dnnl_gemm_bf16bf16f32"));
    using VersionFn = const OneDnn::Version *(*)();
    if (auto fn = reinterpret_cast<VersionFn>(dlsym(lib, "dnnl_version")))
      if (const OneDnn::Version *v = fn())
        d.version = std::to_string(v->major) + "." + std::to_string(v->minor) +
                    "." + std::to_string(v->patch);
    return d;
  }();
  return loaded;
}

static char transChar(CBLAS_TRANSPOSE t) { return t == CblasTrans ? 'T' : 'N'; }

/// dnnl_sgemm behind cblas_sgemm's signature (row-major only).
static void oneDnnSgemm(CBLAS_ORDER, CBLAS_TRANSPOSE tA, CBLAS_TRANSPOSE tB,
                        blasint M, blasint N, blasint K, float alpha,
                        const float *A, blasint lda, const float *B,
                        blasint ldb, float beta, float *C, blasint ldc) {
  // A status other than dnnl_success (0; e.g. no memory for its packing
  // buffers) leaves C unwritten: OpenBLAS computes it instead.
  if (oneDnn().sgemm(transChar(tA), transChar(tB), M, N, K, alpha, A, lda, B,
                     ldb, beta, C, ldc) != 0)
    cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

/// dnnl_gemm_bf16bf16f32 behind cblas_sbgemm's signature (row-major only).
static void oneDnnGemmBf16(CBLAS_ORDER, CBLAS_TRANSPOSE tA, CBLAS_TRANSPOSE tB,
                           blasint M, blasint N, blasint K, float alpha,
                           const bfloat16 *A, blasint lda, const bfloat16 *B,
                           blasint ldb, float beta, float *C, blasint ldc) {
  if (oneDnn().gemmBf16(transChar(tA), transChar(tB), M, N, K, alpha,
                        reinterpret_cast<const uint16_t *>(A), lda,
                        reinterpret_cast<const uint16_t *>(B), ldb, beta, C,
                        ldc) == 0)
    return;
  // Failed (see oneDnnSgemm): the operands widened to f32, exactly, and
  // OpenBLAS.
  std::vector<float> a, b;
  bool transA = tA == CblasTrans, transB = tB == CblasTrans;
  widen<bf16ToFloat>(A, transA ? K : M, transA ? M : K, lda, 0, 1, a);
  widen<bf16ToFloat>(B, transB ? N : K, transB ? K : N, ldb, 0, 1, b);
  cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, alpha, a.data(), lda, b.data(),
              ldb, beta, C, ldc);
}

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B,
           int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  auto tA = transA ? CblasTrans : CblasNoTrans;
  auto tB = transB ? CblasTrans : CblasNoTrans;
  // oneDNN wants K >= 1 (see runProduct).
  if (K > 0 && oneDnn().sgemm)
    oneDnnSgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
  else
    cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

std::string gemmLibraries() {
  const OneDnn &d = oneDnn();
  if (!d.sgemm)
    return "OpenBLAS";
  return "oneDNN " + d.version + " (f32" + (d.gemmBf16 ? ", bf16" : "") +
         "), OpenBLAS (f64)";
}

//===----------------------------------------------------------------------===//
// CBLAS
//===----------------------------------------------------------------------===//

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

/// tanh in f32 branch-free (FastMath.h), in f64 from libm.
static float tanhOf(float x) { return tanhF32(x); }
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

/// C = alpha op(A) op(B) + beta C, without the epilogue; f32 products
/// write `C` (C's buffer, or the f32 scratch of a bf16/f16 result).
static void runProduct(const Command &command, uint8_t *arena, float *C,
                       const KernelThreads *threads) {
  const std::vector<int64_t> &p = command.params;
  const std::vector<uint64_t> &b = command.buffers;
  int64_t dtype = p[kGemmDType];
  if (dtype == static_cast<int64_t>(DType::F64)) {
    batched(p, reinterpret_cast<const double *>(arena + b[0]),
            reinterpret_cast<const double *>(arena + b[1]),
            reinterpret_cast<double *>(arena + b[2]), cblas_dgemm);
    return;
  }
  bool bf16 = dtype == static_cast<int64_t>(DType::BF16);
  // oneDNN wants K >= 1; an empty product (C = beta C) goes to CBLAS.
  bool useOneDnn = p[kGemmK] > 0;
  if (bf16) {
    if (useOneDnn && oneDnn().gemmBf16) {
      tiled(p, reinterpret_cast<const bfloat16 *>(arena + b[0]),
            reinterpret_cast<const bfloat16 *>(arena + b[1]), C, oneDnnGemmBf16,
            threads);
      return;
    }
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
    if (useOneDnn && oneDnn().sgemm)
      tiled(p, A, B, C, oneDnnSgemm, threads);
    else
      batched(p, A, B, C, cblas_sgemm);
    return;
  }
  const float *A = reinterpret_cast<const float *>(arena + b[0]);
  const float *B = reinterpret_cast<const float *>(arena + b[1]);
  if (useOneDnn && oneDnn().sgemm)
    tiled(p, A, B, C, oneDnnSgemm, threads);
  else
    batched(p, A, B, C, cblas_sgemm);
}

/// A bf16/f16 result (bf16/f16 operands, the trailing C type equal to
/// theirs): the product accumulates in f32 scratch at C's element offsets
/// (C widened first when beta reads it) and is rounded once, as cuBLASLt
/// rounds a low-precision D.
static void runLowPrecisionResult(const Command &command, uint8_t *arena,
                                  bool bf16, const KernelThreads *threads) {
  const std::vector<int64_t> &p = command.params;
  thread_local std::vector<float> scratchC;
  auto *C = reinterpret_cast<uint16_t *>(arena + command.buffers[2]);
  int64_t M = p[kGemmM], N = p[kGemmN], batch = p[kGemmBatch];
  int64_t ld = p[kGemmLdc], stride = p[kGemmStrideC];
  if (bitsToDouble(p[kGemmBetaBits]) != 0.0)
    (bf16 ? widen<bf16ToFloat> : widen<halfToFloat>)(C, M, N, ld, stride, batch,
                                                     scratchC);
  else
    scratchC.assign(extentOf(M, N, ld, stride, batch), 0.0f);
  runProduct(command, arena, scratchC.data(), threads);
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t at = i * stride + m * ld + n;
        C[at] = bf16 ? floatToBf16(scratchC[at]) : floatToHalf(scratchC[at]);
      }
}

void runGemm(const Command &command, uint8_t *arena,
             const KernelThreads *threads) {
  int64_t out = gemmOutDTypeOf(command);
  if (out == static_cast<int64_t>(DType::BF16) ||
      out == static_cast<int64_t>(DType::F16)) {
    // Validated: no epilogue.
    runLowPrecisionResult(command, arena,
                          out == static_cast<int64_t>(DType::BF16), threads);
    return;
  }
  runProduct(command, arena,
             reinterpret_cast<float *>(arena + command.buffers[2]), threads);
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
