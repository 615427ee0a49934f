//===- CublasLtDoubleTest.cpp - Tests of the cuBLASLt host double ---------===//
//
// Drives libcleave-cublaslt-double.so through its C entry points the way
// runtime/src/CudaBackend.cpp does (a row-major GEMM as the column-major
// C^T = op(B)^T op(A)^T), on device memory and a stream of the driver
// double, and compares with a naive row-major reference computed here.
//
//===----------------------------------------------------------------------===//

#include "CudaApi.h"
#include "FastMath.h"
#include "Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

using namespace cleave::rt::cuda;

extern "C" {
// The driver double's entry points the tests use, by exported name.
CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);

// The cuBLASLt double, with the runtime's signatures.
#define CLEAVE_DECLARE(name, sym, type) std::remove_pointer_t<type> name;
CLEAVE_CUBLASLT_SYMBOLS(CLEAVE_DECLARE)
#undef CLEAVE_DECLARE
const char *cublasLtGetStatusString(cublasStatus_t);
}

namespace {

constexpr cublasStatus_t kNotInitialized = 1, kInvalidValue = 7,
                         kNotSupported = 15;

uint64_t elementBytes(int type) {
  return type == CUDA_R_64F ? 8 : type == CUDA_R_32F ? 4 : 2;
}

/// Host elements of one cudaDataType, read and written as double.
struct HostMatrix {
  int type = CUDA_R_32F;
  std::vector<uint8_t> bytes;

  HostMatrix() = default;
  HostMatrix(int type, uint64_t elements)
      : type(type), bytes(elements * elementBytes(type)) {}
  uint64_t size() const { return bytes.size() / elementBytes(type); }
  double get(uint64_t i) const {
    const uint8_t *p = bytes.data() + i * elementBytes(type);
    uint16_t h;
    float f;
    double d;
    switch (type) {
    case CUDA_R_64F:
      std::memcpy(&d, p, 8);
      return d;
    case CUDA_R_32F:
      std::memcpy(&f, p, 4);
      return f;
    case CUDA_R_16F:
      std::memcpy(&h, p, 2);
      return cleave::rt::halfToFloat(h);
    default:
      std::memcpy(&h, p, 2);
      return cleave::rt::bf16ToFloat(h);
    }
  }
  /// Stores `v` rounded once to the type (v is exact in float for the
  /// 32-bit compute paths).
  void set(uint64_t i, double v) {
    uint8_t *p = bytes.data() + i * elementBytes(type);
    uint16_t h;
    float f = static_cast<float>(v);
    switch (type) {
    case CUDA_R_64F:
      std::memcpy(p, &v, 8);
      return;
    case CUDA_R_32F:
      std::memcpy(p, &f, 4);
      return;
    case CUDA_R_16F:
      h = cleave::rt::floatToHalf(f);
      break;
    default:
      h = cleave::rt::floatToBf16(f);
      break;
    }
    std::memcpy(p, &h, 2);
  }
  uint64_t bits(uint64_t i) const {
    uint64_t b = 0;
    std::memcpy(&b, bytes.data() + i * elementBytes(type), elementBytes(type));
    return b;
  }
};

/// A row-major GEMM as a plan's Gemm command gives it: per batch,
/// C (M x N) = alpha op(A) op(B) + beta C, then the epilogue. A zero ld and
/// a negative stride mean tight ones.
struct Spec {
  int64_t M = 1, N = 1, K = 1;
  bool tA = false, tB = false;
  int64_t batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = -1, strideB = -1, strideC = -1;
  int abType = CUDA_R_32F, cType = CUDA_R_32F;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int biasType = -1; ///< -1: C's type.
  double alpha = 1, beta = 0;

  int64_t rowsA() const { return tA ? K : M; }
  int64_t colsA() const { return tA ? M : K; }
  int64_t rowsB() const { return tB ? N : K; }
  int64_t colsB() const { return tB ? K : N; }
  bool hasBias() const {
    return epilogue == CUBLASLT_EPILOGUE_BIAS ||
           epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  bool hasGelu() const {
    return epilogue == CUBLASLT_EPILOGUE_GELU ||
           epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  int resolvedBiasType() const { return biasType == -1 ? cType : biasType; }
  /// Fills in the tight ld and strides.
  Spec resolved() const {
    Spec s = *this;
    if (!s.lda)
      s.lda = colsA();
    if (!s.ldb)
      s.ldb = colsB();
    if (!s.ldc)
      s.ldc = N;
    if (s.strideA < 0)
      s.strideA = rowsA() * s.lda;
    if (s.strideB < 0)
      s.strideB = rowsB() * s.ldb;
    if (s.strideC < 0)
      s.strideC = M * s.ldc;
    return s;
  }
};

/// Elements from the first to the last of a row-major batched matrix.
uint64_t extent(int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                int64_t batch) {
  if (rows == 0 || cols == 0)
    return 0;
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

/// A matrix of `elements` random values in [-1, 1] (rounded to `type`).
HostMatrix randomMatrix(int type, uint64_t elements, std::mt19937 &rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  HostMatrix m(type, elements);
  for (uint64_t i = 0; i < elements; ++i)
    m.set(i, dist(rng));
  return m;
}

template <typename T> T tanhOf(T x) {
  if constexpr (std::is_same_v<T, float>)
    return cleave::rt::tanhF32(x); // the CPU backend's f32 tanh
  else
    return std::tanh(x);
}

/// The naive row-major reference, in T (float, or double for f64): the
/// products summed in k order, then alpha, beta C, bias, tanh-form GELU
/// (runtime/src/Gemm.cpp's order), one rounding to C's type.
template <typename T>
void referenceIn(const Spec &s, const HostMatrix &A, const HostMatrix &B,
                 HostMatrix &C, const HostMatrix *bias) {
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) {
        T acc = 0;
        for (int64_t q = 0; q < s.K; ++q) {
          T x = static_cast<T>(
              A.get(b * s.strideA + (s.tA ? q * s.lda + i : i * s.lda + q)));
          T y = static_cast<T>(
              B.get(b * s.strideB + (s.tB ? j * s.ldb + q : q * s.ldb + j)));
          T product = x * y;
          acc += product;
        }
        uint64_t at = b * s.strideC + i * s.ldc + j;
        T v = static_cast<T>(s.alpha) * acc;
        if (s.beta != 0) {
          T old = static_cast<T>(s.beta) * static_cast<T>(C.get(at));
          v = v + old;
        }
        if (s.hasBias())
          v = v + static_cast<T>(bias->get(j));
        if (s.hasGelu()) {
          T x3 = v * v * v;
          T inner = (v + x3 * static_cast<T>(0.044715)) *
                    static_cast<T>(0.7978845608028654);
          v = v * (T(1) + tanhOf(inner)) * static_cast<T>(0.5);
        }
        C.set(at, v);
      }
}

void reference(const Spec &s, const HostMatrix &A, const HostMatrix &B,
               HostMatrix &C, const HostMatrix *bias) {
  if (s.abType == CUDA_R_64F)
    referenceIn<double>(s, A, B, C, bias);
  else
    referenceIn<float>(s, A, B, C, bias);
}

/// The descriptors CudaBackend::prepareGemm makes for a Spec.
struct Prepared {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulHeuristicResult_t result{};
  int found = -1;
  cublasStatus_t heuristic = -1;

  void release() {
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l)
        EXPECT_EQ(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);
    if (desc)
      EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
    *this = Prepared();
  }
};

class CublasLtDoubleTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGet(&device, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&context, device), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(context), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  }

  void TearDown() override {
    if (stream)
      EXPECT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
    for (CUdeviceptr p : allocations)
      EXPECT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
    if (handle)
      EXPECT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
    if (stream)
      EXPECT_EQ(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
    if (context)
      EXPECT_EQ(cuDevicePrimaryCtxRelease_v2(device), CUDA_SUCCESS);
  }

  /// Device memory of exactly `bytes` (freed at TearDown), 0 for 0 bytes.
  CUdeviceptr alloc(uint64_t bytes) {
    if (bytes == 0)
      return 0;
    CUdeviceptr p = 0;
    EXPECT_EQ(cuMemAlloc_v2(&p, bytes), CUDA_SUCCESS);
    allocations.push_back(p);
    return p;
  }

  CUdeviceptr upload(const HostMatrix &m) {
    CUdeviceptr p = alloc(m.bytes.size());
    if (p)
      EXPECT_EQ(cuMemcpyHtoD_v2(p, m.bytes.data(), m.bytes.size()),
                CUDA_SUCCESS);
    return p;
  }

  /// A layout of a row-major rows x cols matrix (column-major cols x rows),
  /// with the batch attributes when batch > 1, as prepareGemm's lambda.
  cublasLtMatrixLayout_t layout(int type, int64_t rows, int64_t cols,
                                int64_t ld, int64_t stride, int64_t batch) {
    cublasLtMatrixLayout_t l = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, type, cols, rows, ld),
              CUBLAS_STATUS_SUCCESS);
    if (batch > 1) {
      int32_t count = static_cast<int32_t>(batch);
      EXPECT_EQ(
          cublasLtMatrixLayoutSetAttribute(
              l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
          CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(
                    l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                    sizeof(stride)),
                CUBLAS_STATUS_SUCCESS);
    }
    return l;
  }

  /// prepareGemm: descriptor, transposes, epilogue, bias, layouts (first
  /// cuBLAS operand: our B; second: our A) and the heuristic.
  Prepared prepare(const Spec &s, CUdeviceptr bias, uint64_t maxWorkspace) {
    Prepared p;
    bool f64 = s.abType == CUDA_R_64F;
    EXPECT_EQ(cublasLtMatmulDescCreate(
                  &p.desc, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                  f64 ? CUDA_R_64F : CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    int32_t opFirst = s.tB ? CUBLAS_OP_T : CUBLAS_OP_N;
    int32_t opSecond = s.tA ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(p.desc,
                                             CUBLASLT_MATMUL_DESC_TRANSA,
                                             &opFirst, sizeof(opFirst)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(p.desc,
                                             CUBLASLT_MATMUL_DESC_TRANSB,
                                             &opSecond, sizeof(opSecond)),
              CUBLAS_STATUS_SUCCESS);
    if (s.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(p.desc,
                                               CUBLASLT_MATMUL_DESC_EPILOGUE,
                                               &s.epilogue, sizeof(s.epilogue)),
                CUBLAS_STATUS_SUCCESS);
    if (s.hasBias()) {
      const void *ptr = reinterpret_cast<const void *>(bias);
      int32_t type = s.resolvedBiasType();
      EXPECT_EQ(
          cublasLtMatmulDescSetAttribute(
              p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof(ptr)),
          CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(
          cublasLtMatmulDescSetAttribute(
              p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)),
          CUBLAS_STATUS_SUCCESS);
    }
    p.a = layout(s.abType, s.rowsB(), s.colsB(), s.ldb, s.strideB, s.batch);
    p.b = layout(s.abType, s.rowsA(), s.colsA(), s.lda, s.strideA, s.batch);
    p.c = layout(s.cType, s.M, s.N, s.ldc, s.strideC, s.batch);
    cublasLtMatmulPreference_t pref = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                  pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &maxWorkspace,
                  sizeof(maxWorkspace)),
              CUBLAS_STATUS_SUCCESS);
    p.heuristic = cublasLtMatmulAlgoGetHeuristic(
        handle, p.desc, p.a, p.b, p.c, p.c, pref, 1, &p.result, &p.found);
    EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
    return p;
  }

  /// The enqueue of a Gemm command: cublasLtMatmul with C as C and D.
  cublasStatus_t matmul(const Spec &s, const Prepared &p, CUdeviceptr A,
                        CUdeviceptr B, CUdeviceptr C, CUdeviceptr workspace,
                        uint64_t workspaceBytes) {
    float alpha32 = static_cast<float>(s.alpha),
          beta32 = static_cast<float>(s.beta);
    bool f64 = s.abType == CUDA_R_64F;
    const void *alpha = f64 ? static_cast<const void *>(&s.alpha) : &alpha32;
    const void *beta = f64 ? static_cast<const void *>(&s.beta) : &beta32;
    return cublasLtMatmul(
        handle, p.desc, alpha, reinterpret_cast<const void *>(B), p.a,
        reinterpret_cast<const void *>(A), p.b, beta,
        reinterpret_cast<const void *>(C), p.c, reinterpret_cast<void *>(C),
        p.c, &p.result.algo, reinterpret_cast<void *>(workspace),
        workspaceBytes, stream);
  }

  /// Runs `spec` on random operands (C's padding and old values random
  /// too) through the double and checks every element of C against the
  /// reference: bit for bit for f16/bf16 results, within 1e-6 relative for
  /// f32/f64 ones.
  void check(const Spec &spec, uint32_t seed = 1) {
    Spec s = spec.resolved();
    SCOPED_TRACE("M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
                 " K=" + std::to_string(s.K) + " tA=" + std::to_string(s.tA) +
                 " tB=" + std::to_string(s.tB) +
                 " batch=" + std::to_string(s.batch));
    std::mt19937 rng(seed);
    HostMatrix A = randomMatrix(
        s.abType, extent(s.rowsA(), s.colsA(), s.lda, s.strideA, s.batch), rng);
    HostMatrix B = randomMatrix(
        s.abType, extent(s.rowsB(), s.colsB(), s.ldb, s.strideB, s.batch), rng);
    HostMatrix C =
        randomMatrix(s.cType, extent(s.M, s.N, s.ldc, s.strideC, s.batch), rng);
    HostMatrix bias;
    if (s.hasBias())
      bias = randomMatrix(s.resolvedBiasType(), s.N, rng);
    CUdeviceptr dA = upload(A), dB = upload(B), dC = upload(C);
    CUdeviceptr dBias = s.hasBias() ? upload(bias) : 0;
    CUdeviceptr workspace = alloc(1 << 16);

    Prepared p = prepare(s, dBias, 1 << 16);
    ASSERT_EQ(p.heuristic, CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(p.found, 1);
    EXPECT_EQ(p.result.workspaceSize, 4096u);
    ASSERT_EQ(matmul(s, p, dA, dB, dC, workspace, p.result.workspaceSize),
              CUBLAS_STATUS_SUCCESS);
    // The queued matmul does not need its descriptors any more.
    p.release();
    ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);

    HostMatrix got(s.cType, C.size());
    ASSERT_EQ(cuMemcpyDtoH_v2(got.bytes.data(), dC, got.bytes.size()),
              CUDA_SUCCESS);
    HostMatrix want = C;
    reference(s, A, B, want, s.hasBias() ? &bias : nullptr);
    bool exact = s.cType == CUDA_R_16F || s.cType == CUDA_R_16BF;
    int mismatches = 0;
    for (uint64_t i = 0; i < want.size() && mismatches < 8; ++i) {
      if (exact) {
        EXPECT_EQ(got.bits(i), want.bits(i))
            << "element " << i << ": " << got.get(i) << " vs " << want.get(i);
        mismatches += got.bits(i) != want.bits(i);
      } else {
        double tol = 1e-6 * std::max(1.0, std::fabs(want.get(i)));
        EXPECT_NEAR(got.get(i), want.get(i), tol) << "element " << i;
        mismatches += !(std::fabs(got.get(i) - want.get(i)) <= tol);
      }
    }
  }

  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  cublasLtHandle_t handle = nullptr;
  std::vector<CUdeviceptr> allocations;
};

//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

// A 2x2 product whose result is known by hand, so the reference cannot
// share a mistake with the double unseen.
TEST_F(CublasLtDoubleTest, KnownProduct) {
  Spec s;
  s.M = s.N = s.K = 2;
  s = s.resolved();
  HostMatrix A(CUDA_R_32F, 4), B(CUDA_R_32F, 4), C(CUDA_R_32F, 4);
  for (int i = 0; i < 4; ++i) {
    A.set(i, i + 1); // [[1, 2], [3, 4]]
    B.set(i, i + 5); // [[5, 6], [7, 8]]
  }
  CUdeviceptr dA = upload(A), dB = upload(B), dC = upload(C);
  CUdeviceptr workspace = alloc(4096);
  Prepared p = prepare(s, 0, 4096);
  ASSERT_EQ(p.heuristic, CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(matmul(s, p, dA, dB, dC, workspace, 4096), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  p.release();
  float out[4];
  ASSERT_EQ(cuMemcpyDtoH_v2(out, dC, sizeof(out)), CUDA_SUCCESS);
  EXPECT_EQ(out[0], 19.0f);
  EXPECT_EQ(out[1], 22.0f);
  EXPECT_EQ(out[2], 43.0f);
  EXPECT_EQ(out[3], 50.0f);
}

TEST_F(CublasLtDoubleTest, EveryTransposeCombination) {
  for (bool tA : {false, true})
    for (bool tB : {false, true}) {
      Spec s;
      s.M = 3, s.N = 4, s.K = 5, s.tA = tA, s.tB = tB;
      check(s);
    }
}

// Batches with strides larger than one matrix and every ld above the
// row length: the padding must come back untouched (check() compares the
// whole buffer of C).
TEST_F(CublasLtDoubleTest, BatchedWithStridesAndPaddedLd) {
  for (bool tA : {false, true})
    for (bool tB : {false, true}) {
      Spec s;
      s.M = 4, s.N = 3, s.K = 6, s.tA = tA, s.tB = tB, s.batch = 3;
      s.lda = s.colsA() + 2, s.ldb = s.colsB() + 1, s.ldc = s.N + 3;
      s.strideA = s.rowsA() * s.lda + 5;
      s.strideB = s.rowsB() * s.ldb + 2;
      s.strideC = s.M * s.ldc + 7;
      check(s, 7);
    }
}

// A shared operand (batch stride 0), as a broadcast weight.
TEST_F(CublasLtDoubleTest, BatchStrideZeroSharesAnOperand) {
  Spec s;
  s.M = 2, s.N = 5, s.K = 3, s.batch = 4;
  s.strideB = 0;
  check(s, 3);
}

TEST_F(CublasLtDoubleTest, AlphaAndBetaScaleAndAccumulate) {
  Spec s;
  s.M = 5, s.N = 2, s.K = 4, s.tB = true, s.alpha = 1.5, s.beta = 0.75;
  check(s, 11);
  s.batch = 2, s.tA = true;
  check(s, 12);
}

// With beta 0, C is not read: NaNs already in C do not reach the result.
TEST_F(CublasLtDoubleTest, BetaZeroDoesNotReadC) {
  Spec s;
  s.M = 2, s.N = 2, s.K = 2;
  s = s.resolved();
  HostMatrix A(CUDA_R_32F, 4), B(CUDA_R_32F, 4), C(CUDA_R_32F, 4);
  for (int i = 0; i < 4; ++i) {
    A.set(i, 1);
    B.set(i, 1);
    C.set(i, NAN);
  }
  CUdeviceptr dA = upload(A), dB = upload(B), dC = upload(C);
  CUdeviceptr workspace = alloc(4096);
  Prepared p = prepare(s, 0, 4096);
  ASSERT_EQ(matmul(s, p, dA, dB, dC, workspace, 4096), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  p.release();
  float out[4];
  ASSERT_EQ(cuMemcpyDtoH_v2(out, dC, sizeof(out)), CUDA_SUCCESS);
  for (float v : out)
    EXPECT_EQ(v, 2.0f);
}

TEST_F(CublasLtDoubleTest, Epilogues) {
  for (uint32_t e : {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU,
                     CUBLASLT_EPILOGUE_GELU_BIAS}) {
    SCOPED_TRACE("epilogue " + std::to_string(e));
    Spec s;
    s.M = 4, s.N = 6, s.K = 3, s.epilogue = e, s.tA = true;
    check(s, 20 + e);
    // The bias is shared between batches (bias batch stride 0).
    s.batch = 2, s.ldc = s.N + 2, s.beta = 0.5;
    check(s, 40 + e);
  }
}

// GELU really is applied: its value at 1 (tanh form) is 0.8411920.
TEST_F(CublasLtDoubleTest, GeluValue) {
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_GELU;
  s = s.resolved();
  HostMatrix one(CUDA_R_32F, 1), C(CUDA_R_32F, 1);
  one.set(0, 1.0);
  CUdeviceptr dA = upload(one), dB = upload(one), dC = upload(C);
  CUdeviceptr workspace = alloc(4096);
  Prepared p = prepare(s, 0, 4096);
  ASSERT_EQ(matmul(s, p, dA, dB, dC, workspace, 4096), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  p.release();
  float out = 0;
  ASSERT_EQ(cuMemcpyDtoH_v2(&out, dC, sizeof(out)), CUDA_SUCCESS);
  EXPECT_NEAR(out, 0.8411920f, 1e-6f);
}

TEST_F(CublasLtDoubleTest, Bf16AndF16Operands) {
  struct Case {
    int ab, c;
  };
  for (Case k : {Case{CUDA_R_16BF, CUDA_R_32F}, Case{CUDA_R_16BF, CUDA_R_16BF},
                 Case{CUDA_R_16F, CUDA_R_32F}, Case{CUDA_R_16F, CUDA_R_16F}}) {
    SCOPED_TRACE("types " + std::to_string(k.ab) + " -> " +
                 std::to_string(k.c));
    Spec s;
    s.abType = k.ab, s.cType = k.c;
    s.M = 7, s.N = 5, s.K = 33, s.tB = true;
    check(s, 60 + k.ab + k.c);
    s.batch = 2, s.beta = 0.5, s.tA = true, s.ldc = s.N + 1;
    check(s, 70 + k.ab + k.c);
  }
}

// A bf16 result with an epilogue and an f32 bias: bias and GELU in f32,
// then one rounding.
TEST_F(CublasLtDoubleTest, Bf16ResultWithEpilogue) {
  Spec s;
  s.abType = s.cType = CUDA_R_16BF;
  s.biasType = CUDA_R_32F;
  s.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  s.M = 3, s.N = 8, s.K = 16;
  check(s, 90);
}

TEST_F(CublasLtDoubleTest, F64) {
  Spec s;
  s.abType = s.cType = CUDA_R_64F;
  s.M = 3, s.N = 4, s.K = 9, s.tA = true, s.beta = 2, s.batch = 2;
  check(s, 100);
  s.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  check(s, 101);
}

TEST_F(CublasLtDoubleTest, EmptyInnerDimensionScalesC) {
  Spec s;
  s.M = 3, s.N = 2, s.K = 0, s.beta = 0.5, s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  check(s, 110);
}

//===----------------------------------------------------------------------===//
// Algorithms and workspaces
//===----------------------------------------------------------------------===//

TEST_F(CublasLtDoubleTest, HeuristicWorkspaceIsAtMost4096) {
  Spec s;
  s.M = s.N = s.K = 2;
  s = s.resolved();
  const std::pair<uint64_t, uint64_t> cases[] = {
      {1000, 1000}, {1 << 20, 4096}, {0, 0}};
  for (auto [limit, want] : cases) {
    Prepared p = prepare(s, 0, limit);
    EXPECT_EQ(p.heuristic, CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(p.found, 1);
    EXPECT_EQ(p.result.workspaceSize, want) << "limit " << limit;
    EXPECT_EQ(p.result.state, CUBLAS_STATUS_SUCCESS);
    p.release();
  }
}

// The algorithm's workspace is really written: bytes past it are not.
TEST_F(CublasLtDoubleTest, WorkspaceIsWritten) {
  Spec s;
  s.M = s.N = s.K = 2;
  s = s.resolved();
  std::vector<uint8_t> zeros(8192, 0), back(8192, 0);
  CUdeviceptr dA = alloc(16), dB = alloc(16), dC = alloc(16);
  CUdeviceptr workspace = alloc(zeros.size());
  ASSERT_EQ(cuMemcpyHtoD_v2(dA, zeros.data(), 16), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD_v2(dB, zeros.data(), 16), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyHtoD_v2(workspace, zeros.data(), zeros.size()),
            CUDA_SUCCESS);
  Prepared p = prepare(s, 0, 1000);
  ASSERT_EQ(matmul(s, p, dA, dB, dC, workspace, 1000), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  p.release();
  ASSERT_EQ(cuMemcpyDtoH_v2(back.data(), workspace, back.size()), CUDA_SUCCESS);
  int written = 0;
  for (size_t i = 0; i < back.size(); ++i)
    written += back[i] != 0;
  EXPECT_EQ(written, 1000);
  EXPECT_NE(back[999], 0);
  EXPECT_EQ(back[1000], 0);
}

//===----------------------------------------------------------------------===//
// Misuse: statuses
//===----------------------------------------------------------------------===//

TEST_F(CublasLtDoubleTest, StatusStrings) {
  EXPECT_STREQ(cublasLtGetStatusString(0), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasLtGetStatusString(kInvalidValue),
               "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasLtGetStatusString(kNotSupported),
               "CUBLAS_STATUS_NOT_SUPPORTED");
}

// Layouts whose inner dimensions disagree: the heuristic finds nothing and
// the matmul refuses, with INVALID_VALUE.
TEST_F(CublasLtDoubleTest, MismatchedDimensionsAreInvalid) {
  Spec s;
  s.M = 3, s.N = 4, s.K = 5;
  s = s.resolved();
  Prepared p = prepare(s, 0, 4096);
  ASSERT_EQ(p.found, 1);
  // op(A) of the column-major problem is N x K; give op(B) K+1 rows.
  cublasLtMatrixLayout_t wrongK =
      layout(CUDA_R_32F, s.M, s.K + 1, s.K + 1, 0, 1);
  cublasLtMatrixLayout_t wrongC = layout(CUDA_R_32F, s.M + 1, s.N, s.N, 0, 1);
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, wrongK, p.c,
                                           p.c, pref, 1, &result, &found),
            kInvalidValue);
  EXPECT_EQ(found, 0);
  found = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, wrongC,
                                           wrongC, pref, 1, &result, &found),
            kInvalidValue);
  EXPECT_EQ(found, 0);
  // D differs from C.
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.c,
                                           wrongC, pref, 1, &result, &found),
            kInvalidValue);

  CUdeviceptr A = alloc(4096), B = alloc(4096), C = alloc(4096);
  CUdeviceptr workspace = alloc(4096);
  float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(handle, p.desc, &one,
                           reinterpret_cast<const void *>(B), p.a,
                           reinterpret_cast<const void *>(A), wrongK, &zero,
                           reinterpret_cast<const void *>(C), p.c,
                           reinterpret_cast<void *>(C), p.c, &p.result.algo,
                           reinterpret_cast<void *>(workspace), 4096, stream),
            kInvalidValue);
  // Batch counts that differ.
  cublasLtMatrixLayout_t batched =
      layout(CUDA_R_32F, s.M, s.N, s.N, s.M * s.N, 2);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, batched,
                                           batched, pref, 1, &result, &found),
            kInvalidValue);
  // Too small a workspace for the algorithm.
  EXPECT_EQ(matmul(s, p, A, B, C, workspace, 100), kInvalidValue);
  // A null handle.
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(nullptr, p.desc, p.a, p.b, p.c, p.c,
                                           pref, 1, &result, &found),
            kNotInitialized);
  for (cublasLtMatrixLayout_t l : {wrongK, wrongC, batched})
    EXPECT_EQ(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
  p.release();
}

TEST_F(CublasLtDoubleTest, UnsupportedProblemsFindNothing) {
  Spec s;
  s.M = s.N = s.K = 2;
  // f32 operands into a bf16 D.
  s.cType = CUDA_R_16BF;
  Prepared p = prepare(s.resolved(), 0, 4096);
  EXPECT_EQ(p.heuristic, kNotSupported);
  EXPECT_EQ(p.found, 0);
  p.release();
  // An epilogue the double does not model (RELU = 2).
  s.cType = CUDA_R_32F;
  s.epilogue = 2;
  p = prepare(s.resolved(), 0, 4096);
  EXPECT_EQ(p.heuristic, kNotSupported);
  EXPECT_EQ(p.found, 0);
  p.release();
}

TEST_F(CublasLtDoubleTest, DescriptorAndLayoutArgumentsAreChecked) {
  cublasLtMatmulDesc_t desc = nullptr;
  EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_64F, CUDA_R_32F),
            kInvalidValue);
  EXPECT_EQ(
      cublasLtMatmulDescCreate(&desc, 64 /* CUBLAS_COMPUTE_16F */, CUDA_R_16F),
      kNotSupported);
  EXPECT_EQ(cublasLtMatmulDescCreate(nullptr, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            kInvalidValue);
  ASSERT_EQ(
      cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F),
      CUBLAS_STATUS_SUCCESS);
  int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &wide, sizeof(wide)),
            kInvalidValue);
  int32_t op = 7;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                           &op, sizeof(op)),
            kInvalidValue);
  int32_t biasStride = 0; // CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10
  EXPECT_EQ(
      cublasLtMatmulDescSetAttribute(desc, 10, &biasStride, sizeof(biasStride)),
      kNotSupported);
  int32_t biasType = 3; // CUDA_R_8I
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                           &biasType, sizeof(biasType)),
            kNotSupported);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);

  cublasLtMatrixLayout_t l = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 2, 3),
            kInvalidValue); // ld < rows
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, 3 /* CUDA_R_8I */, 4, 2, 4),
            kNotSupported);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 2, 4),
            CUBLAS_STATUS_SUCCESS);
  int64_t batch64 = 2;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l,
                                             CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                             &batch64, sizeof(batch64)),
            kInvalidValue);
  int32_t order = 0; // CUBLASLT_MATRIX_LAYOUT_ORDER = 1
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, 1, &order, sizeof(order)),
            kNotSupported);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);

  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  uint32_t narrow = 16;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &narrow,
                sizeof(narrow)),
            kInvalidValue);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtDestroy(nullptr), kNotInitialized);
}

// In place (C == D) with layouts that differ is refused.
TEST_F(CublasLtDoubleTest, InPlaceNeedsOneLayout) {
  Spec s;
  s.M = s.N = s.K = 2;
  s = s.resolved();
  Prepared p = prepare(s, 0, 4096);
  cublasLtMatrixLayout_t padded = layout(CUDA_R_32F, s.M, s.N, s.N + 1, 0, 1);
  CUdeviceptr A = alloc(64), B = alloc(64), C = alloc(64);
  float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(handle, p.desc, &one,
                           reinterpret_cast<const void *>(B), p.a,
                           reinterpret_cast<const void *>(A), p.b, &zero,
                           reinterpret_cast<const void *>(C), p.c,
                           reinterpret_cast<void *>(C), padded, nullptr,
                           nullptr, 0, stream),
            kInvalidValue);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(padded), CUBLAS_STATUS_SUCCESS);
  p.release();
}

//===----------------------------------------------------------------------===//
// Misuse: aborts
//===----------------------------------------------------------------------===//

class CublasLtDoubleDeathTest : public CublasLtDoubleTest {
protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    CublasLtDoubleTest::SetUp();
  }
};

// C (which is D) one element short of its extent: enqueue names the matmul
// and the D range.
TEST_F(CublasLtDoubleDeathTest, DOutsideItsAllocation) {
  Spec s;
  s.M = 3, s.N = 4, s.K = 2;
  s = s.resolved();
  CUdeviceptr A = alloc(6 * 4), B = alloc(8 * 4), C = alloc(11 * 4);
  CUdeviceptr workspace = alloc(4096);
  Prepared p = prepare(s, 0, 4096);
  ASSERT_EQ(p.found, 1);
  EXPECT_DEATH(matmul(s, p, A, B, C, workspace, 4096),
               "cublasLtMatmul m=4 n=3 k=2 .* writes 'D' .*\\(48 bytes\\), "
               "which runs 4 bytes past the end");
  p.release();
}

// The bias is read over D's rows (the row-major N): one element short dies.
TEST_F(CublasLtDoubleDeathTest, BiasShorterThanDRows) {
  Spec s;
  s.M = 2, s.N = 5, s.K = 3, s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  s = s.resolved();
  CUdeviceptr A = alloc(6 * 4), B = alloc(15 * 4), C = alloc(10 * 4);
  CUdeviceptr bias = alloc(4 * 4), workspace = alloc(4096);
  Prepared p = prepare(s, bias, 4096);
  ASSERT_EQ(p.found, 1);
  EXPECT_DEATH(matmul(s, p, A, B, C, workspace, 4096),
               "cublasLtMatmul m=5 n=2 k=3 .* reads 'bias' .*\\(20 bytes\\), "
               "which runs 4 bytes past the end");
  p.release();
}

TEST_F(CublasLtDoubleDeathTest, DestroyingTwice) {
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  EXPECT_DEATH(cublasLtMatmulDescDestroy(desc),
               "cublasLtMatmulDescDestroy: .* cublasLtMatmulDescDestroy "
               "already destroyed");
}

TEST_F(CublasLtDoubleDeathTest, UsingADestroyedLayout) {
  Spec s;
  s.M = s.N = s.K = 2;
  s = s.resolved();
  Prepared p = prepare(s, 0, 4096);
  ASSERT_EQ(cublasLtMatrixLayoutDestroy(p.b), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  EXPECT_DEATH(cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.c,
                                              p.c, pref, 1, &result, &found),
               "cublasLtMatmulAlgoGetHeuristic: Bdesc .* already destroyed");
  p.b = nullptr;
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
  p.release();
}

TEST_F(CublasLtDoubleDeathTest, ForeignObject) {
  int notAPreference = 0;
  EXPECT_DEATH(
      cublasLtMatmulPreferenceDestroy(
          reinterpret_cast<cublasLtMatmulPreference_t>(&notAPreference)),
      "is not a matmul preference");
}

// Freeing the workspace before the stream has run the matmul: the
// workspace is a range the matmul writes, so the driver double objects.
TEST_F(CublasLtDoubleDeathTest, WorkspaceFreedTooEarly) {
  Spec s;
  s.M = s.N = s.K = 2;
  s = s.resolved();
  CUdeviceptr A = alloc(16), B = alloc(16), C = alloc(16);
  CUdeviceptr workspace = 0;
  ASSERT_EQ(cuMemAlloc_v2(&workspace, 4096), CUDA_SUCCESS);
  Prepared p = prepare(s, 0, 4096);
  EXPECT_DEATH(
      {
        matmul(s, p, A, B, C, workspace, 4096);
        cuMemFree_v2(workspace);
      },
      "cuMemFree: .* while 'cublasLtMatmul m=2 n=2 k=2 .* writes "
      "'workspace' .*\\(4096 bytes\\) may still use it");
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(workspace), CUDA_SUCCESS);
  p.release();
}

} // namespace
