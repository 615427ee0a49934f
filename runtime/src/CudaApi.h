//===- CudaApi.h - CUDA driver, cuBLASLt, NCCL through dlopen ---*- C++ -*-===//
//
// The runtime has no link-time dependency on CUDA: the driver (libcuda.so.1),
// cuBLASLt (libcublasLt.so.13/.12) and NCCL (libnccl.so.2) are opened with
// dlopen and their entry points resolved into function-pointer tables (as
// IREE's CUDA HAL does). The few types and enumerators used are declared
// here, with the values of the CUDA 13 and NCCL 2.x headers;
// CudaApiHeaderTest.cpp checks them against cuda.h, cublasLt.h and nccl.h
// where they are installed. Names are versioned as the headers map them
// (cuMemAlloc -> cuMemAlloc_v2, ...).
//
// A library that is missing is not an error until a CUDA executor is made:
// then the loader reports UNAVAILABLE with the dlerror() text.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDAAPI_H
#define CLEAVE_RUNTIME_CUDAAPI_H

#include "Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace cleave::rt::cuda {

// --- Driver API types (cuda.h) ----------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
/// cuStreamQuery / cuEventQuery: the work is not finished yet.
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

/// One member of a symbol table (DriverApi, CublasLtApi, NcclApi) per entry
/// point: its function pointer type `<member>Fn` and the pointer, null until
/// resolved.
#define CLEAVE_CUDA_MEMBER(name, sym, type)                                    \
  using name##Fn = type;                                                       \
  name##Fn name = nullptr;

/// The driver entry points: X(member, exported symbol, signature).
#define CLEAVE_CUDA_DRIVER_SYMBOLS(X)                                          \
  X(cuInit, "cuInit", CUresult (*)(unsigned))                                  \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult (*)(int *))             \
  X(cuGetErrorString, "cuGetErrorString",                                      \
    CUresult (*)(CUresult, const char **))                                     \
  X(cuGetErrorName, "cuGetErrorName", CUresult (*)(CUresult, const char **))   \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult (*)(int *))                 \
  X(cuDeviceGet, "cuDeviceGet", CUresult (*)(CUdevice *, int))                 \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult (*)(char *, int, CUdevice))   \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute",                              \
    CUresult (*)(int *, int, CUdevice))                                        \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain",                      \
    CUresult (*)(CUcontext *, CUdevice))                                       \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",                 \
    CUresult (*)(CUdevice))                                                    \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult (*)(CUcontext))               \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult (*)(size_t *, size_t *))         \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult (*)(CUdeviceptr *, size_t))          \
  X(cuMemFree, "cuMemFree_v2", CUresult (*)(CUdeviceptr))                      \
  X(cuMemHostAlloc, "cuMemHostAlloc", CUresult (*)(void **, size_t, unsigned)) \
  X(cuMemFreeHost, "cuMemFreeHost", CUresult (*)(void *))                      \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2",                                           \
    CUresult (*)(CUdeviceptr, const void *, size_t))                           \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2",                                           \
    CUresult (*)(void *, CUdeviceptr, size_t))                                 \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                 \
    CUresult (*)(CUdeviceptr, const void *, size_t, CUstream))                 \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                 \
    CUresult (*)(void *, CUdeviceptr, size_t, CUstream))                       \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2",                                 \
    CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream))                  \
  X(cuMemsetD8Async, "cuMemsetD8Async",                                        \
    CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream))                \
  X(cuModuleLoadData, "cuModuleLoadData",                                      \
    CUresult (*)(CUmodule *, const void *))                                    \
  X(cuModuleUnload, "cuModuleUnload", CUresult (*)(CUmodule))                  \
  X(cuModuleGetFunction, "cuModuleGetFunction",                                \
    CUresult (*)(CUfunction *, CUmodule, const char *))                        \
  X(cuFuncSetAttribute, "cuFuncSetAttribute",                                  \
    CUresult (*)(CUfunction, int, int))                                        \
  X(cuLaunchKernel, "cuLaunchKernel",                                          \
    CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, \
                 unsigned, unsigned, CUstream, void **, void **))              \
  X(cuStreamCreate, "cuStreamCreate", CUresult (*)(CUstream *, unsigned))      \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult (*)(CUstream))             \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult (*)(CUstream))        \
  X(cuStreamQuery, "cuStreamQuery", CUresult (*)(CUstream))                    \
  X(cuStreamWaitEvent, "cuStreamWaitEvent",                                    \
    CUresult (*)(CUstream, CUevent, unsigned))                                 \
  X(cuEventCreate, "cuEventCreate", CUresult (*)(CUevent *, unsigned))         \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult (*)(CUevent))                \
  X(cuEventRecord, "cuEventRecord", CUresult (*)(CUevent, CUstream))           \
  X(cuEventQuery, "cuEventQuery", CUresult (*)(CUevent))                       \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2",                           \
    CUresult (*)(CUstream, int))                                               \
  X(cuStreamEndCapture, "cuStreamEndCapture",                                  \
    CUresult (*)(CUstream, CUgraph *))                                         \
  X(cuGraphInstantiate, "cuGraphInstantiateWithFlags",                         \
    CUresult (*)(CUgraphExec *, CUgraph, unsigned long long))                  \
  X(cuGraphLaunch, "cuGraphLaunch", CUresult (*)(CUgraphExec, CUstream))       \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult (*)(CUgraphExec))       \
  X(cuGraphDestroy, "cuGraphDestroy", CUresult (*)(CUgraph))

struct DriverApi {
  CLEAVE_CUDA_DRIVER_SYMBOLS(CLEAVE_CUDA_MEMBER)
  /// Optional, exported by the CUDA host doubles only
  /// (test/doubles/DeviceDouble.h); null with a real driver. The label of
  /// the plan command the calling thread enqueues next, for their messages.
  void (*cleaveDoubleSetCommand)(const char *label) = nullptr;
  /// Optional, the doubles only: hands them the plan's kernels compiled for
  /// the host (plan::Plan::hostKernelObject) for the image the next
  /// cuModuleLoadData loads.
  int (*cleaveDoubleAttachHostKernels)(const void *image, const void *object,
                                       uint64_t objectBytes,
                                       const char *const *names,
                                       const uint32_t *numArgs,
                                       const uint64_t *argBytes,
                                       const uint8_t *argWrites,
                                       uint32_t numNames) = nullptr;
  void *handle = nullptr;
};

/// Opens libcuda.so.1, or the library $CLEAVE_CUDA_DRIVER_LIBRARY names
/// (once per process), resolves every symbol and calls cuInit(0). UNAVAILABLE:
/// "CUDA driver library libcuda.so.1 not found: ...", "no CUDA device: ..."
/// (cuInit or cuDeviceGetCount), or a missing symbol.
cleave_rt_status loadDriver(const DriverApi **out);

/// "CUDA_ERROR_X (text)" for a driver result.
std::string driverErrorString(const DriverApi &api, CUresult r);

/// A status naming the call when r != CUDA_SUCCESS, else null.
cleave_rt_status checkDriver(const DriverApi &api, CUresult r,
                             const char *what);

// --- cuBLASLt types (cublasLt.h, cublas_api.h, library_types.h) -------------
using cublasStatus_t = int;
using cublasLtHandle_t = struct cublasLtContext *;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque_t *;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque_t *;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque_t *;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
constexpr int CUBLAS_OP_N = 0, CUBLAS_OP_T = 1;
constexpr int CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
              CUBLAS_COMPUTE_64F = 70;
constexpr int CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14;
constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4;
constexpr int CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
              CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
              CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26;
constexpr uint32_t CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4,
                   CUBLASLT_EPILOGUE_GELU = 32,
                   CUBLASLT_EPILOGUE_GELU_BIAS = 36;
constexpr int CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
              CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;
constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;

#define CLEAVE_CUBLASLT_SYMBOLS(X)                                             \
  X(cublasLtCreate, "cublasLtCreate", cublasStatus_t (*)(cublasLtHandle_t *))  \
  X(cublasLtDestroy, "cublasLtDestroy", cublasStatus_t (*)(cublasLtHandle_t))  \
  X(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate",                      \
    cublasStatus_t (*)(cublasLtMatmulDesc_t *, int, int))                      \
  X(cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy",                    \
    cublasStatus_t (*)(cublasLtMatmulDesc_t))                                  \
  X(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute",          \
    cublasStatus_t (*)(cublasLtMatmulDesc_t, int, const void *, size_t))       \
  X(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate",                  \
    cublasStatus_t (*)(cublasLtMatrixLayout_t *, int, uint64_t, uint64_t,      \
                       int64_t))                                               \
  X(cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy",                \
    cublasStatus_t (*)(cublasLtMatrixLayout_t))                                \
  X(cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute",      \
    cublasStatus_t (*)(cublasLtMatrixLayout_t, int, const void *, size_t))     \
  X(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate",          \
    cublasStatus_t (*)(cublasLtMatmulPreference_t *))                          \
  X(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy",        \
    cublasStatus_t (*)(cublasLtMatmulPreference_t))                            \
  X(cublasLtMatmulPreferenceSetAttribute,                                      \
    "cublasLtMatmulPreferenceSetAttribute",                                    \
    cublasStatus_t (*)(cublasLtMatmulPreference_t, int, const void *, size_t)) \
  X(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic",          \
    cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t,                 \
                       cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,         \
                       cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,         \
                       cublasLtMatmulPreference_t, int,                        \
                       cublasLtMatmulHeuristicResult_t *, int *))              \
  X(cublasLtMatmul, "cublasLtMatmul",                                          \
    cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *,   \
                       const void *, cublasLtMatrixLayout_t, const void *,     \
                       cublasLtMatrixLayout_t, const void *, const void *,     \
                       cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t, \
                       const cublasLtMatmulAlgo_t *, void *, size_t,           \
                       CUstream))

struct CublasLtApi {
  CLEAVE_CUBLASLT_SYMBOLS(CLEAVE_CUDA_MEMBER)
  /// Optional (absent in old releases): status text.
  const char *(*cublasLtGetStatusString)(cublasStatus_t) = nullptr;
  void *handle = nullptr;
};

/// Opens cuBLASLt (once per process): $CLEAVE_CUBLASLT_LIBRARY if set, else
/// libcublasLt.so.13, .so.12, .so, then the same under /usr/local/cuda/lib64.
cleave_rt_status loadCublasLt(const CublasLtApi **out);

cleave_rt_status checkCublas(const CublasLtApi &api, cublasStatus_t s,
                             const char *what);

// --- NCCL types (nccl.h, NCCL 2.x) ------------------------------------------
// Loaded the same way for collectives across GPUs; see Nccl.h for the C++
// wrapper (library, communicator) the executor uses.
using ncclResult_t = int;
using ncclDataType_t = int;
using ncclRedOp_t = int;
using ncclComm_t = struct ncclComm *;
/// NCCL_UNIQUE_ID_BYTES (a macro in nccl.h, hence another name here).
constexpr int kNcclUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};

constexpr ncclResult_t ncclSuccess = 0, ncclUnhandledCudaError = 1,
                       ncclSystemError = 2, ncclInternalError = 3,
                       ncclInvalidArgument = 4, ncclInvalidUsage = 5,
                       ncclRemoteError = 6, ncclInProgress = 7;
constexpr ncclDataType_t ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2,
                         ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
                         ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8,
                         ncclBfloat16 = 9;
/// NCCL_SPLIT_NOCOLOR: ncclCommSplit's color of a rank that joins no group.
constexpr int kNcclSplitNoColor = -1;
constexpr ncclRedOp_t ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3,
                      ncclAvg = 4;

/// Bytes of one element of `dtype`, or 0 when it is not an NCCL type.
inline size_t ncclTypeSize(ncclDataType_t dtype) {
  switch (dtype) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

/// NCCL_VERSION(2, 18, 0): the oldest release accepted, the first with
/// ncclCommSplit (one communicator per mesh-axis group).
constexpr int kMinNcclVersionCode = 21800;

#define CLEAVE_NCCL_SYMBOLS(X)                                                 \
  X(ncclGetVersion, "ncclGetVersion", ncclResult_t (*)(int *))                 \
  X(ncclGetErrorString, "ncclGetErrorString", const char *(*)(ncclResult_t))   \
  X(ncclGetLastError, "ncclGetLastError", const char *(*)(ncclComm_t))         \
  X(ncclGetUniqueId, "ncclGetUniqueId", ncclResult_t (*)(ncclUniqueId *))      \
  X(ncclCommInitRank, "ncclCommInitRank",                                      \
    ncclResult_t (*)(ncclComm_t *, int, ncclUniqueId, int))                    \
  X(ncclCommDestroy, "ncclCommDestroy", ncclResult_t (*)(ncclComm_t))          \
  X(ncclCommAbort, "ncclCommAbort", ncclResult_t (*)(ncclComm_t))              \
  X(ncclCommSplit, "ncclCommSplit",                                            \
    ncclResult_t (*)(ncclComm_t, int, int, ncclComm_t *, void *))              \
  X(ncclCommGetAsyncError, "ncclCommGetAsyncError",                            \
    ncclResult_t (*)(ncclComm_t, ncclResult_t *))                              \
  X(ncclCommCount, "ncclCommCount", ncclResult_t (*)(ncclComm_t, int *))       \
  X(ncclCommUserRank, "ncclCommUserRank", ncclResult_t (*)(ncclComm_t, int *)) \
  X(ncclAllReduce, "ncclAllReduce",                                            \
    ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t,             \
                     ncclRedOp_t, ncclComm_t, CUstream))                       \
  X(ncclReduceScatter, "ncclReduceScatter",                                    \
    ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t,             \
                     ncclRedOp_t, ncclComm_t, CUstream))                       \
  X(ncclAllGather, "ncclAllGather",                                            \
    ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, \
                     CUstream))                                                \
  X(ncclBroadcast, "ncclBroadcast",                                            \
    ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, int,        \
                     ncclComm_t, CUstream))                                    \
  X(ncclSend, "ncclSend",                                                      \
    ncclResult_t (*)(const void *, size_t, ncclDataType_t, int, ncclComm_t,    \
                     CUstream))                                                \
  X(ncclRecv, "ncclRecv",                                                      \
    ncclResult_t (*)(void *, size_t, ncclDataType_t, int, ncclComm_t,          \
                     CUstream))                                                \
  X(ncclGroupStart, "ncclGroupStart", ncclResult_t (*)())                      \
  X(ncclGroupEnd, "ncclGroupEnd", ncclResult_t (*)())

struct NcclApi {
  CLEAVE_NCCL_SYMBOLS(CLEAVE_CUDA_MEMBER)
  /// Optional: the config is an ncclConfig_t laid out for the loaded release
  /// (the struct grows between releases, so it is not declared here).
  ncclResult_t (*ncclCommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int,
                                         void *config) = nullptr;
  /// NCCL_VERSION(major, minor, patch) of the loaded library.
  int versionCode = 0;
  void *handle = nullptr;
};

/// Opens NCCL (once per process): $CLEAVE_NCCL_LIBRARY if set, else
/// libnccl.so.2 then libnccl.so on the loader path, under $CUDA_HOME/lib64
/// and under /usr/local/cuda/lib64. UNAVAILABLE when no library opens (with
/// the dlerror() text), when it lacks a symbol (named) or when its version
/// is older than kMinNcclVersionCode (named).
cleave_rt_status loadNccl(const NcclApi **out);

/// Opens the NCCL library at `path` alone, not cached (tests, tools). On
/// success the library stays loaded for the rest of the process.
cleave_rt_status loadNcclFrom(const std::string &path, NcclApi *out);

/// "2.28.9" for an NCCL_VERSION code (both encodings: before 2.9 the code is
/// major * 1000 + minor * 100 + patch, then major * 10000 + ...).
std::string ncclVersionString(int code);

/// A status naming the call and NCCL's error text (and ncclGetLastError's
/// detail when it has one) when r != ncclSuccess, else null.
cleave_rt_status checkNccl(const NcclApi &api, ncclResult_t r, const char *what,
                           ncclComm_t comm = nullptr);

#undef CLEAVE_CUDA_MEMBER

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_CUDAAPI_H
