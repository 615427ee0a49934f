//===- CublasLtDouble.cpp - Strict host double of cuBLASLt ----------------===//
//
// libcleave-cublaslt-double.so exports the cuBLASLt entry points the runtime
// loads (CLEAVE_CUBLASLT_SYMBOLS in runtime/src/CudaApi.h, and
// cublasLtGetStatusString) and computes the matmuls on the host, queued on
// the driver double's streams through cleave::cudadouble::enqueue()
// (DeviceDouble.h), so every byte a matmul touches is bounds- and
// race-checked like any other device operation.
//
// Semantics:
//  - Objects: every handle, matmul descriptor, matrix layout and preference
//    lives for the whole process; destroying one marks it dead. Destroying
//    it again, using it after, or passing a pointer the double never
//    returned aborts through fail(), naming the call and the object.
//  - Arguments: a null handle is CUBLAS_STATUS_NOT_INITIALIZED; null
//    pointers, wrong attribute sizes, ld < rows, inconsistent problems are
//    CUBLAS_STATUS_INVALID_VALUE; what the double does not model (an
//    attribute it does not know, other types, epilogues or compute types) is
//    CUBLAS_STATUS_NOT_SUPPORTED. Each such status is explained in one line
//    on stderr ("cleave cublaslt double: <call>: <why> (<status>)").
//  - Algorithms: cublasLtMatmulAlgoGetHeuristic returns one algorithm per
//    consistent, supported problem, whose workspace is min(4096, the
//    preference's MAX_WORKSPACE_BYTES); cublasLtMatmul writes those bytes of
//    the workspace, so a workspace freed too early is a use after free.
//  - Numerics: D = alpha op(A) op(B) + beta C with the products summed in
//    the compute type (f32, or f64 for CUBLAS_COMPUTE_64F; FAST_TF32 is
//    computed in full f32) in k order, f16/bf16 operands widened exactly,
//    then the epilogue in the compute type (bias, then tanh-form GELU, in
//    the operation order of runtime/src/Gemm.cpp) and one rounding to D's
//    type (nearest even). C is not read when beta is 0.
//
//===----------------------------------------------------------------------===//

#include "DeviceDouble.h"
#include "FastMath.h"
#include "Half.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

using namespace cleave::rt::cuda;
namespace dd = cleave::cudadouble;

namespace {

constexpr cublasStatus_t kNotInitialized = 1, kAllocFailed = 3,
                         kInvalidValue = 7, kNotSupported = 15;

/// The workspace an algorithm asks for, at most.
constexpr uint64_t kAlgoWorkspaceBytes = 4096;
/// algo.data[0] of the algorithms the heuristic returns ("CleaveLt").
constexpr uint64_t kAlgoMagic = 0x43'6c'65'61'76'65'4c'74ULL;

const char *statusName(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case 1:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case 3:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case 7:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case 8:
    return "CUBLAS_STATUS_ARCH_MISMATCH";
  case 11:
    return "CUBLAS_STATUS_MAPPING_ERROR";
  case 13:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case 14:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  case 15:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case 16:
    return "CUBLAS_STATUS_LICENSE_ERROR";
  default:
    return "<unknown>";
  }
}

/// Returns `s` after saying on stderr why `call` returns it.
cublasStatus_t reject(cublasStatus_t s, const char *call,
                      const std::string &why) {
  std::string command = dd::currentCommand();
  std::fprintf(stderr, "cleave cublaslt double: %s: %s (%s)%s%s\n", call,
               why.c_str(), statusName(s), command.empty() ? "" : " in ",
               command.c_str());
  return s;
}

std::string hex(const void *p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

/// Element bytes of a cudaDataType the double supports, else 0.
uint64_t elementBytes(int type) {
  switch (type) {
  case CUDA_R_32F:
    return 4;
  case CUDA_R_64F:
    return 8;
  case CUDA_R_16F:
  case CUDA_R_16BF:
    return 2;
  default:
    return 0;
  }
}

std::string typeName(int type) {
  switch (type) {
  case CUDA_R_32F:
    return "f32";
  case CUDA_R_64F:
    return "f64";
  case CUDA_R_16F:
    return "f16";
  case CUDA_R_16BF:
    return "bf16";
  default:
    return "cudaDataType " + std::to_string(type);
  }
}

std::string epilogueName(uint32_t e) {
  switch (e) {
  case CUBLASLT_EPILOGUE_DEFAULT:
    return "DEFAULT";
  case CUBLASLT_EPILOGUE_BIAS:
    return "BIAS";
  case CUBLASLT_EPILOGUE_GELU:
    return "GELU";
  case CUBLASLT_EPILOGUE_GELU_BIAS:
    return "GELU_BIAS";
  default:
    return "epilogue " + std::to_string(e);
  }
}

bool epilogueHasBias(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS;
}

bool epilogueHasGelu(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS;
}

//===----------------------------------------------------------------------===//
// Objects
//===----------------------------------------------------------------------===//

enum class Kind { Handle, MatmulDesc, MatrixLayout, Preference };

const char *kindName(Kind k) {
  switch (k) {
  case Kind::Handle:
    return "cuBLASLt handle";
  case Kind::MatmulDesc:
    return "matmul descriptor";
  case Kind::MatrixLayout:
    return "matrix layout";
  case Kind::Preference:
    return "matmul preference";
  }
  return "object";
}

const char *creatorOf(Kind k) {
  switch (k) {
  case Kind::Handle:
    return "cublasLtCreate";
  case Kind::MatmulDesc:
    return "cublasLtMatmulDescCreate";
  case Kind::MatrixLayout:
    return "cublasLtMatrixLayoutCreate";
  case Kind::Preference:
    return "cublasLtMatmulPreferenceCreate";
  }
  return "";
}

const char *destroyerOf(Kind k) {
  switch (k) {
  case Kind::Handle:
    return "cublasLtDestroy";
  case Kind::MatmulDesc:
    return "cublasLtMatmulDescDestroy";
  case Kind::MatrixLayout:
    return "cublasLtMatrixLayoutDestroy";
  case Kind::Preference:
    return "cublasLtMatmulPreferenceDestroy";
  }
  return "";
}

struct Object {
  explicit Object(Kind kind) : kind(kind) {}
  virtual ~Object() = default;
  const Kind kind;
  bool live = true;
};

struct Handle : Object {
  static constexpr Kind kKind = Kind::Handle;
  Handle() : Object(kKind) {}
};

/// What a matmul descriptor holds.
struct DescState {
  int computeType = CUBLAS_COMPUTE_32F;
  int scaleType = CUDA_R_32F;
  int32_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  /// -1 (cuBLASLt's default): D's type.
  int32_t biasType = -1;
};

struct MatmulDesc : Object {
  static constexpr Kind kKind = Kind::MatmulDesc;
  MatmulDesc() : Object(kKind) {}
  DescState state;
};

/// A column-major matrix, or a strided batch of them.
struct Shape {
  int type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;

  bool operator==(const Shape &o) const {
    return type == o.type && rows == o.rows && cols == o.cols && ld == o.ld &&
           batch == o.batch && stride == o.stride;
  }
  std::string str() const {
    std::string s = std::to_string(rows) + "x" + std::to_string(cols) + " " +
                    typeName(type) + " ld " + std::to_string(ld);
    if (batch != 1)
      s += " batch " + std::to_string(batch) + " stride " +
           std::to_string(stride);
    return s;
  }
};

struct MatrixLayout : Object {
  static constexpr Kind kKind = Kind::MatrixLayout;
  MatrixLayout() : Object(kKind) {}
  Shape shape;
};

struct Preference : Object {
  static constexpr Kind kKind = Kind::Preference;
  Preference() : Object(kKind) {}
  uint64_t maxWorkspaceBytes = 0;
};

/// Every object ever created, by address (never erased, so a dead object's
/// address is never handed out again). Leaked on purpose: stream threads
/// may still run at exit.
struct Registry {
  std::mutex mutex;
  std::unordered_map<const void *, std::unique_ptr<Object>> objects;
};

Registry &registry() {
  static Registry *r = new Registry;
  return *r;
}

/// The live object of type T at non-null `p`, else fail() naming `call` and
/// the argument `role`. The caller holds the registry's mutex.
template <typename T>
T *lookup(const void *p, const char *call, const char *role) {
  auto &objects = registry().objects;
  auto it = objects.find(p);
  std::string where = std::string(call) + ": " + role + " " + hex(p);
  if (it == objects.end())
    dd::fail(where + " is not a " + kindName(T::kKind) + " that " +
             creatorOf(T::kKind) + " returned");
  if (it->second->kind != T::kKind)
    dd::fail(where + " is a " + kindName(it->second->kind) + ", not a " +
             kindName(T::kKind));
  if (!it->second->live)
    dd::fail(where + " is a " + kindName(T::kKind) + " that " +
             destroyerOf(T::kKind) + " already destroyed");
  return static_cast<T *>(it->second.get());
}

/// Creates a T into *out (an opaque handle type) for `call`.
template <typename T, typename Opaque>
cublasStatus_t create(Opaque *out, const char *call, T **made = nullptr) {
  if (!out)
    return reject(kInvalidValue, call, "the output pointer is null");
  std::unique_ptr<T> object(new (std::nothrow) T);
  if (!object)
    return reject(kAllocFailed, call, "out of host memory");
  T *raw = object.get();
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().objects.emplace(raw, std::move(object));
  }
  if (made)
    *made = raw;
  *out = reinterpret_cast<Opaque>(raw);
  return CUBLAS_STATUS_SUCCESS;
}

/// Marks the T at `p` dead for `call` (destroying twice fails).
template <typename T> cublasStatus_t destroy(const void *p, const char *call) {
  if (!p)
    return CUBLAS_STATUS_SUCCESS;
  std::lock_guard<std::mutex> lock(registry().mutex);
  lookup<T>(p, call, kindName(T::kKind))->live = false;
  return CUBLAS_STATUS_SUCCESS;
}

/// Copies an attribute value of type V from `buf` after checking its size.
template <typename V>
cublasStatus_t readAttribute(const void *buf, size_t size, const char *call,
                             const char *name, V *out) {
  if (!buf)
    return reject(kInvalidValue, call, std::string(name) + ": null buffer");
  if (size != sizeof(V))
    return reject(kInvalidValue, call,
                  std::string(name) + " takes " + std::to_string(sizeof(V)) +
                      " bytes, not " + std::to_string(size));
  std::memcpy(out, buf, sizeof(V));
  return CUBLAS_STATUS_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Problems
//===----------------------------------------------------------------------===//

/// Bytes from a shape's first element to its last (0 when empty), or false
/// when that overflows.
bool extentBytes(const Shape &s, uint64_t *out) {
  *out = 0;
  if (s.rows == 0 || s.cols == 0)
    return true;
  using Wide = unsigned __int128;
  Wide elements =
      static_cast<Wide>(s.batch - 1) * static_cast<uint64_t>(s.stride) +
      static_cast<Wide>(s.cols - 1) * static_cast<uint64_t>(s.ld) + s.rows;
  Wide bytes = elements * elementBytes(s.type);
  if (bytes >= (static_cast<Wide>(1) << 62))
    return false;
  *out = static_cast<uint64_t>(bytes);
  return true;
}

/// A matmul checked for consistency: D (m x n) = op(A) (m x k) op(B) (k x n).
struct Problem {
  DescState desc;
  Shape a, b, c, d;
  uint64_t m = 0, n = 0, k = 0;
  int biasType = CUDA_R_32F; ///< Resolved (never -1).
  uint64_t bytesA = 0, bytesB = 0, bytesC = 0, bytesD = 0;

  std::string str() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) +
           " k=" + std::to_string(k) + " batch=" + std::to_string(d.batch) +
           " transa=" + (desc.transA == CUBLAS_OP_T ? "T" : "N") +
           " transb=" + (desc.transB == CUBLAS_OP_T ? "T" : "N") + " " +
           typeName(a.type) + "->" + typeName(d.type) + " epilogue " +
           epilogueName(desc.epilogue);
  }
};

/// Checks the problem the heuristic and the matmul are given; on success
/// fills *out. Mismatched dimensions are INVALID_VALUE, what the double does
/// not model NOT_SUPPORTED.
cublasStatus_t checkProblem(const char *call, const DescState &desc,
                            const Shape &a, const Shape &b, const Shape &c,
                            const Shape &d, Problem *out) {
  if (a.type != b.type)
    return reject(kNotSupported, call,
                  "A is " + typeName(a.type) + " but B is " + typeName(b.type) +
                      ": the double needs one type for A and B");
  if (c.type != d.type)
    return reject(kNotSupported, call,
                  "C is " + typeName(c.type) + " but D is " + typeName(d.type));
  if (d.type != CUDA_R_32F && d.type != a.type)
    return reject(kNotSupported, call,
                  typeName(a.type) + " A/B with a " + typeName(d.type) +
                      " D (supported: D f32 or A's type)");
  bool f64 = a.type == CUDA_R_64F;
  if (f64 != (desc.computeType == CUBLAS_COMPUTE_64F) ||
      (f64 && d.type != CUDA_R_64F))
    return reject(kNotSupported, call,
                  typeName(a.type) + " A/B to " + typeName(d.type) +
                      " D needs CUBLAS_COMPUTE_64F exactly when all are f64");
  if (desc.computeType == CUBLAS_COMPUTE_32F_FAST_TF32 && a.type != CUDA_R_32F)
    return reject(kNotSupported, call,
                  "CUBLAS_COMPUTE_32F_FAST_TF32 with " + typeName(a.type) +
                      " A/B (f32 only)");
  uint32_t e = desc.epilogue;
  if (e != CUBLASLT_EPILOGUE_DEFAULT && !epilogueHasBias(e) &&
      !epilogueHasGelu(e))
    return reject(kNotSupported, call,
                  "the double supports the epilogues DEFAULT, BIAS, GELU and "
                  "GELU_BIAS, not " +
                      epilogueName(e));
  int biasType = desc.biasType == -1 ? d.type : desc.biasType;
  if (epilogueHasBias(e) && biasType != d.type &&
      !(biasType == CUDA_R_32F &&
        (d.type == CUDA_R_16F || d.type == CUDA_R_16BF)))
    return reject(kNotSupported, call,
                  "a " + typeName(biasType) + " bias with a " +
                      typeName(d.type) +
                      " D (supported: D's type, or f32 "
                      "for an f16/bf16 D)");

  bool tA = desc.transA == CUBLAS_OP_T, tB = desc.transB == CUBLAS_OP_T;
  uint64_t m = tA ? a.cols : a.rows, k = tA ? a.rows : a.cols;
  uint64_t kB = tB ? b.cols : b.rows, n = tB ? b.rows : b.cols;
  auto dims = [](uint64_t r, uint64_t c) {
    return std::to_string(r) + "x" + std::to_string(c);
  };
  if (kB != k)
    return reject(kInvalidValue, call,
                  "op(A) is " + dims(m, k) + " but op(B) is " + dims(kB, n));
  if (c.rows != m || c.cols != n)
    return reject(kInvalidValue, call,
                  "C is " + dims(c.rows, c.cols) + " but op(A) op(B) is " +
                      dims(m, n));
  if (d.rows != m || d.cols != n)
    return reject(kInvalidValue, call,
                  "D is " + dims(d.rows, d.cols) + " but op(A) op(B) is " +
                      dims(m, n));
  if (a.batch != d.batch || b.batch != d.batch || c.batch != d.batch)
    return reject(kInvalidValue, call,
                  "batch counts differ: A " + std::to_string(a.batch) + ", B " +
                      std::to_string(b.batch) + ", C " +
                      std::to_string(c.batch) + ", D " +
                      std::to_string(d.batch));

  Problem p;
  p.desc = desc;
  p.a = a, p.b = b, p.c = c, p.d = d;
  p.m = m, p.n = n, p.k = k;
  p.biasType = biasType;
  const std::pair<const Shape *, uint64_t *> extents[] = {
      {&a, &p.bytesA}, {&b, &p.bytesB}, {&c, &p.bytesC}, {&d, &p.bytesD}};
  for (const auto &[shape, bytes] : extents)
    if (!extentBytes(*shape, bytes))
      return reject(kInvalidValue, call,
                    "the extent of " + shape->str() + " overflows");
  uint64_t oneD = d.rows && d.cols ? (d.cols - 1) * d.ld + d.rows : 0;
  if (d.batch > 1 && oneD && static_cast<uint64_t>(d.stride) < oneD)
    return reject(kInvalidValue, call,
                  "D's batches overlap (stride " + std::to_string(d.stride) +
                      " < " + std::to_string(oneD) +
                      " elements of one matrix)");
  *out = p;
  return CUBLAS_STATUS_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Host computation
//===----------------------------------------------------------------------===//

/// A queued matmul: the problem and the pointers, copied at enqueue time.
struct Work {
  Problem p;
  const void *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  void *d = nullptr, *workspace = nullptr;
  uint64_t workspaceBytes = 0;
  double alpha = 1, beta = 0; ///< Exactly the float ones for 32F scale.
};

/// Element `i` of `base` (of `type`), widened exactly.
double load(int type, const void *base, uint64_t i) {
  switch (type) {
  case CUDA_R_64F:
    return static_cast<const double *>(base)[i];
  case CUDA_R_16F:
    return cleave::rt::halfToFloat(static_cast<const uint16_t *>(base)[i]);
  case CUDA_R_16BF:
    return cleave::rt::bf16ToFloat(static_cast<const uint16_t *>(base)[i]);
  default:
    return static_cast<const float *>(base)[i];
  }
}

/// Stores `v` into element `i` of `base`, rounded once to `type`.
template <typename Acc> void store(int type, void *base, uint64_t i, Acc v) {
  switch (type) {
  case CUDA_R_64F:
    static_cast<double *>(base)[i] = v;
    break;
  case CUDA_R_16F:
    static_cast<uint16_t *>(base)[i] =
        cleave::rt::floatToHalf(static_cast<float>(v));
    break;
  case CUDA_R_16BF:
    static_cast<uint16_t *>(base)[i] =
        cleave::rt::floatToBf16(static_cast<float>(v));
    break;
  default:
    static_cast<float *>(base)[i] = static_cast<float>(v);
    break;
  }
}

float tanhOf(float x) { return cleave::rt::tanhF32(x); }
double tanhOf(double x) { return std::tanh(x); }

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in T, in the operation
/// order of runtime/src/Gemm.cpp's epilogue.
template <typename T> T geluTanh(T x) {
  const T c = static_cast<T>(0.7978845608028654); // sqrt(2/pi)
  T x3 = x * x * x;
  T inner = (x + x3 * static_cast<T>(0.044715)) * c;
  return x * (T(1) + tanhOf(inner)) * static_cast<T>(0.5);
}

/// Runs `w` with products accumulated in Acc.
template <typename Acc> void compute(const Work &w) {
  const Problem &p = w.p;
  if (w.workspaceBytes)
    std::memset(w.workspace, 0xA5, w.workspaceBytes);
  uint64_t m = p.m, n = p.n, k = p.k;
  if (m == 0 || n == 0)
    return;
  bool tA = p.desc.transA == CUBLAS_OP_T, tB = p.desc.transB == CUBLAS_OP_T;
  bool bias = epilogueHasBias(p.desc.epilogue);
  bool gelu = epilogueHasGelu(p.desc.epilogue);
  Acc alpha = static_cast<Acc>(w.alpha), beta = static_cast<Acc>(w.beta);
  uint64_t lda = p.a.ld, ldb = p.b.ld, ldc = p.c.ld, ldd = p.d.ld;
  // op(A) row by row (m x k) and op(B) row by row (k x n), widened.
  std::vector<Acc> opA(m * k), opB(k * n), acc(n);
  for (int64_t batch = 0; batch < p.d.batch; ++batch) {
    uint64_t atA = batch * p.a.stride, atB = batch * p.b.stride,
             atC = batch * p.c.stride, atD = batch * p.d.stride;
    for (uint64_t i = 0; i < m; ++i)
      for (uint64_t q = 0; q < k; ++q)
        opA[i * k + q] = static_cast<Acc>(
            load(p.a.type, w.a, atA + (tA ? i * lda + q : q * lda + i)));
    for (uint64_t q = 0; q < k; ++q)
      for (uint64_t j = 0; j < n; ++j)
        opB[q * n + j] = static_cast<Acc>(
            load(p.b.type, w.b, atB + (tB ? q * ldb + j : j * ldb + q)));
    for (uint64_t i = 0; i < m; ++i) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (uint64_t q = 0; q < k; ++q) {
        Acc x = opA[i * k + q];
        const Acc *row = &opB[q * n];
        for (uint64_t j = 0; j < n; ++j) {
          Acc product = x * row[j]; // two statements: never contracted
          acc[j] += product;
        }
      }
      Acc b = bias ? static_cast<Acc>(load(p.biasType, w.bias, i)) : Acc(0);
      for (uint64_t j = 0; j < n; ++j) {
        Acc v = alpha * acc[j];
        if (w.beta != 0) {
          Acc old =
              beta * static_cast<Acc>(load(p.c.type, w.c, atC + j * ldc + i));
          v = v + old;
        }
        if (bias)
          v = v + b;
        if (gelu)
          v = geluTanh(v);
        store(p.d.type, w.d, atD + j * ldd + i, v);
      }
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

#define CLEAVE_EXPORT extern "C" __attribute__((visibility("default")))

CLEAVE_EXPORT const char *cublasLtGetStatusString(cublasStatus_t status) {
  return statusName(status);
}

CLEAVE_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  return create<Handle>(handle, "cublasLtCreate");
}

CLEAVE_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle)
    return reject(kNotInitialized, "cublasLtDestroy", "the handle is null");
  return destroy<Handle>(handle, "cublasLtDestroy");
}

CLEAVE_EXPORT cublasStatus_t cublasLtMatmulDescCreate(
    cublasLtMatmulDesc_t *desc, int computeType, int scaleType) {
  const char *call = "cublasLtMatmulDescCreate";
  if (computeType != CUBLAS_COMPUTE_32F &&
      computeType != CUBLAS_COMPUTE_32F_FAST_TF32 &&
      computeType != CUBLAS_COMPUTE_64F)
    return reject(kNotSupported, call,
                  "the double supports CUBLAS_COMPUTE_32F, _32F_FAST_TF32 "
                  "and _64F, not compute type " +
                      std::to_string(computeType));
  int wanted = computeType == CUBLAS_COMPUTE_64F ? CUDA_R_64F : CUDA_R_32F;
  if (scaleType != wanted)
    return reject(kInvalidValue, call,
                  "compute type " + std::to_string(computeType) + " takes a " +
                      typeName(wanted) + " scale type, not " +
                      typeName(scaleType));
  MatmulDesc *made = nullptr;
  cublasStatus_t s = create<MatmulDesc>(desc, call, &made);
  if (s == CUBLAS_STATUS_SUCCESS) {
    std::lock_guard<std::mutex> lock(registry().mutex);
    made->state.computeType = computeType;
    made->state.scaleType = scaleType;
  }
  return s;
}

CLEAVE_EXPORT cublasStatus_t
cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  return destroy<MatmulDesc>(desc, "cublasLtMatmulDescDestroy");
}

CLEAVE_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(
    cublasLtMatmulDesc_t desc, int attr, const void *buf, size_t size) {
  const char *call = "cublasLtMatmulDescSetAttribute";
  if (!desc)
    return reject(kInvalidValue, call, "the descriptor is null");
  std::lock_guard<std::mutex> lock(registry().mutex);
  DescState &st = lookup<MatmulDesc>(desc, call, "descriptor")->state;
  cublasStatus_t s;
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
  case CUBLASLT_MATMUL_DESC_TRANSB: {
    const char *name =
        attr == CUBLASLT_MATMUL_DESC_TRANSA ? "TRANSA" : "TRANSB";
    int32_t op;
    if ((s = readAttribute(buf, size, call, name, &op)))
      return s;
    if (op != CUBLAS_OP_N && op != CUBLAS_OP_T)
      return reject(kInvalidValue, call,
                    std::string(name) + " " + std::to_string(op) +
                        " is neither CUBLAS_OP_N nor CUBLAS_OP_T");
    (attr == CUBLASLT_MATMUL_DESC_TRANSA ? st.transA : st.transB) = op;
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    // Checked against what the double models by the heuristic, as cuBLASLt.
    return readAttribute(buf, size, call, "EPILOGUE", &st.epilogue);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return readAttribute(buf, size, call, "BIAS_POINTER", &st.bias);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: {
    int32_t type;
    if ((s = readAttribute(buf, size, call, "BIAS_DATA_TYPE", &type)))
      return s;
    if (type != -1 && elementBytes(type) == 0)
      return reject(kNotSupported, call,
                    "BIAS_DATA_TYPE " + typeName(type) +
                        " (the double supports f32, f64, f16, bf16)");
    st.biasType = type;
    return CUBLAS_STATUS_SUCCESS;
  }
  default:
    return reject(kNotSupported, call,
                  "the double does not know matmul descriptor attribute " +
                      std::to_string(attr));
  }
}

CLEAVE_EXPORT cublasStatus_t
cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, int type,
                           uint64_t rows, uint64_t cols, int64_t ld) {
  const char *call = "cublasLtMatrixLayoutCreate";
  if (elementBytes(type) == 0)
    return reject(kNotSupported, call,
                  "the double supports f32, f64, f16 and bf16 matrices, not " +
                      typeName(type));
  if (ld < 0 || static_cast<uint64_t>(ld) < rows)
    return reject(kInvalidValue, call,
                  "ld " + std::to_string(ld) + " is less than rows " +
                      std::to_string(rows) + " (column-major)");
  MatrixLayout *made = nullptr;
  cublasStatus_t s = create<MatrixLayout>(layout, call, &made);
  if (s == CUBLAS_STATUS_SUCCESS) {
    std::lock_guard<std::mutex> lock(registry().mutex);
    made->shape.type = type;
    made->shape.rows = rows;
    made->shape.cols = cols;
    made->shape.ld = ld;
  }
  return s;
}

CLEAVE_EXPORT cublasStatus_t
cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  return destroy<MatrixLayout>(layout, "cublasLtMatrixLayoutDestroy");
}

CLEAVE_EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(
    cublasLtMatrixLayout_t layout, int attr, const void *buf, size_t size) {
  const char *call = "cublasLtMatrixLayoutSetAttribute";
  if (!layout)
    return reject(kInvalidValue, call, "the layout is null");
  std::lock_guard<std::mutex> lock(registry().mutex);
  Shape &shape = lookup<MatrixLayout>(layout, call, "layout")->shape;
  cublasStatus_t s;
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: {
    int32_t batch;
    if ((s = readAttribute(buf, size, call, "BATCH_COUNT", &batch)))
      return s;
    if (batch < 1)
      return reject(kInvalidValue, call,
                    "BATCH_COUNT " + std::to_string(batch) + " is below 1");
    shape.batch = batch;
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: {
    int64_t stride;
    if ((s = readAttribute(buf, size, call, "STRIDED_BATCH_OFFSET", &stride)))
      return s;
    if (stride < 0)
      return reject(kNotSupported, call,
                    "STRIDED_BATCH_OFFSET " + std::to_string(stride) +
                        ": the double does not model negative strides");
    shape.stride = stride;
    return CUBLAS_STATUS_SUCCESS;
  }
  default:
    return reject(kNotSupported, call,
                  "the double does not know matrix layout attribute " +
                      std::to_string(attr));
  }
}

CLEAVE_EXPORT cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  return create<Preference>(pref, "cublasLtMatmulPreferenceCreate");
}

CLEAVE_EXPORT cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return destroy<Preference>(pref, "cublasLtMatmulPreferenceDestroy");
}

CLEAVE_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, int attr, const void *buf, size_t size) {
  const char *call = "cublasLtMatmulPreferenceSetAttribute";
  if (!pref)
    return reject(kInvalidValue, call, "the preference is null");
  std::lock_guard<std::mutex> lock(registry().mutex);
  Preference *p = lookup<Preference>(pref, call, "preference");
  if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    return reject(kNotSupported, call,
                  "the double does not know matmul preference attribute " +
                      std::to_string(attr));
  return readAttribute(buf, size, call, "MAX_WORKSPACE_BYTES",
                       &p->maxWorkspaceBytes);
}

CLEAVE_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
    cublasLtMatrixLayout_t aDesc, cublasLtMatrixLayout_t bDesc,
    cublasLtMatrixLayout_t cDesc, cublasLtMatrixLayout_t dDesc,
    cublasLtMatmulPreference_t pref, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t *results, int *returnAlgoCount) {
  const char *call = "cublasLtMatmulAlgoGetHeuristic";
  if (!handle)
    return reject(kNotInitialized, call, "the handle is null");
  if (returnAlgoCount)
    *returnAlgoCount = 0;
  if (!desc || !aDesc || !bDesc || !cDesc || !dDesc || !pref || !results ||
      !returnAlgoCount)
    return reject(kInvalidValue, call,
                  "a null descriptor, layout, "
                  "preference or output pointer");
  if (requestedAlgoCount < 1)
    return reject(kInvalidValue, call,
                  "requestedAlgoCount " + std::to_string(requestedAlgoCount) +
                      " is below 1");
  Problem p;
  uint64_t maxWorkspace;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    lookup<Handle>(handle, call, "handle");
    const DescState &st = lookup<MatmulDesc>(desc, call, "descriptor")->state;
    const Shape &a = lookup<MatrixLayout>(aDesc, call, "Adesc")->shape;
    const Shape &b = lookup<MatrixLayout>(bDesc, call, "Bdesc")->shape;
    const Shape &c = lookup<MatrixLayout>(cDesc, call, "Cdesc")->shape;
    const Shape &d = lookup<MatrixLayout>(dDesc, call, "Ddesc")->shape;
    maxWorkspace =
        lookup<Preference>(pref, call, "preference")->maxWorkspaceBytes;
    if (cublasStatus_t s = checkProblem(call, st, a, b, c, d, &p))
      return s;
  }
  cublasLtMatmulHeuristicResult_t r;
  std::memset(&r, 0, sizeof(r));
  r.algo.data[0] = kAlgoMagic;
  r.algo.data[1] = std::min(kAlgoWorkspaceBytes, maxWorkspace);
  r.workspaceSize = static_cast<size_t>(r.algo.data[1]);
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  results[0] = r;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

CLEAVE_EXPORT cublasStatus_t
cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
               const void *alpha, const void *A, cublasLtMatrixLayout_t aDesc,
               const void *B, cublasLtMatrixLayout_t bDesc, const void *beta,
               const void *C, cublasLtMatrixLayout_t cDesc, void *D,
               cublasLtMatrixLayout_t dDesc, const cublasLtMatmulAlgo_t *algo,
               void *workspace, size_t workspaceSize, CUstream stream) {
  const char *call = "cublasLtMatmul";
  if (!handle)
    return reject(kNotInitialized, call, "the handle is null");
  if (!desc || !aDesc || !bDesc || !cDesc || !dDesc)
    return reject(kInvalidValue, call, "a null descriptor or layout");
  if (!alpha || !beta)
    return reject(kInvalidValue, call, "alpha or beta is null");
  Work w;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    lookup<Handle>(handle, call, "handle");
    const DescState &st = lookup<MatmulDesc>(desc, call, "descriptor")->state;
    const Shape &a = lookup<MatrixLayout>(aDesc, call, "Adesc")->shape;
    const Shape &b = lookup<MatrixLayout>(bDesc, call, "Bdesc")->shape;
    const Shape &c = lookup<MatrixLayout>(cDesc, call, "Cdesc")->shape;
    const Shape &d = lookup<MatrixLayout>(dDesc, call, "Ddesc")->shape;
    if (cublasStatus_t s = checkProblem(call, st, a, b, c, d, &w.p))
      return s;
  }
  const Problem &p = w.p;
  if (C == D && !(p.c == p.d))
    return reject(kInvalidValue, call,
                  "C and D are the same memory but their layouts differ (C " +
                      p.c.str() + ", D " + p.d.str() + ")");
  if (p.desc.scaleType == CUDA_R_64F) {
    w.alpha = *static_cast<const double *>(alpha);
    w.beta = *static_cast<const double *>(beta);
  } else {
    w.alpha = *static_cast<const float *>(alpha);
    w.beta = *static_cast<const float *>(beta);
  }
  uint64_t wanted = std::min<uint64_t>(kAlgoWorkspaceBytes, workspaceSize);
  if (algo) {
    if (algo->data[0] != kAlgoMagic)
      return reject(kInvalidValue, call,
                    "the algorithm was not returned by "
                    "cublasLtMatmulAlgoGetHeuristic");
    wanted = algo->data[1];
    if (workspaceSize < wanted)
      return reject(kInvalidValue, call,
                    "the algorithm needs " + std::to_string(wanted) +
                        " bytes of workspace, given " +
                        std::to_string(workspaceSize));
  }
  if (wanted && !workspace)
    return reject(kInvalidValue, call,
                  "the workspace is null but its size is " +
                      std::to_string(workspaceSize));
  bool bias = epilogueHasBias(p.desc.epilogue);
  bool readsC = w.beta != 0;
  bool product = p.m && p.n;
  if ((p.bytesA && p.bytesB && !(A && B)) || (p.bytesD && !D) ||
      (readsC && p.bytesC && !C) || (product && bias && !p.desc.bias))
    return reject(kInvalidValue, call,
                  "a null A, B, D, C (beta is not 0) or bias (epilogue " +
                      epilogueName(p.desc.epilogue) + ") pointer");
  w.a = A, w.b = B, w.c = C, w.d = D, w.bias = p.desc.bias;
  w.workspace = workspace;
  w.workspaceBytes = wanted;

  std::vector<dd::Access> accesses;
  auto add = [&](const void *ptr, uint64_t bytes, bool write,
                 const char *role) {
    if (bytes)
      accesses.push_back(
          {reinterpret_cast<CUdeviceptr>(ptr), bytes, write, role});
  };
  if (product && p.k) {
    add(A, p.bytesA, false, "A");
    add(B, p.bytesB, false, "B");
  }
  if (readsC)
    add(C, p.bytesC, false, "C");
  add(D, p.bytesD, true, "D");
  if (product && bias)
    add(p.desc.bias, p.m * elementBytes(p.biasType), false, "bias");
  add(workspace, wanted, true, "workspace");

  std::string what = std::string(call) + " " + p.str();
  bool f64 = p.desc.computeType == CUBLAS_COMPUTE_64F;
  CUresult r = dd::enqueue(stream, what, std::move(accesses), [w, f64] {
    if (f64)
      compute<double>(w);
    else
      compute<float>(w);
  });
  if (r != CUDA_SUCCESS)
    dd::fail(what + ": stream " + hex(stream) +
             " is not a live stream (CUresult " + std::to_string(r) + ")");
  return CUBLAS_STATUS_SUCCESS;
}

// The exports have exactly the runtime's signatures.
#define CLEAVE_CHECK_SIGNATURE(name, sym, type)                                \
  static_assert(std::is_same_v<decltype(&::name), CublasLtApi::name##Fn>,      \
                sym " differs from CudaApi.h");
CLEAVE_CUBLASLT_SYMBOLS(CLEAVE_CHECK_SIGNATURE)
#undef CLEAVE_CHECK_SIGNATURE
static_assert(std::is_same_v<decltype(&::cublasLtGetStatusString),
                             decltype(CublasLtApi::cublasLtGetStatusString)>,
              "cublasLtGetStatusString differs from CudaApi.h");
