//===- CudaApiHeaderTest.cpp - CudaApi.h against the CUDA headers ---------===//
//
// The runtime declares the few CUDA types and enumerators it uses itself (it
// must build without the toolkit). Where the toolkit's headers exist, this
// file checks at compile time that those declarations match them.
//
//===----------------------------------------------------------------------===//

#include "CudaApi.h" // Before cuda.h, whose macros rename cuMemAlloc & co.

#include <gtest/gtest.h>

#if defined(CLEAVE_TEST_HAVE_CUDA_HEADERS)
#include <cstddef>
#include <cublasLt.h>
#include <cuda.h>

namespace c = cleave::rt::cuda;

static_assert(c::CUDA_SUCCESS == ::CUDA_SUCCESS);
static_assert(c::CUDA_ERROR_NO_DEVICE == ::CUDA_ERROR_NO_DEVICE);
static_assert(c::CUDA_ERROR_NOT_READY == ::CUDA_ERROR_NOT_READY);
static_assert(c::CU_STREAM_NON_BLOCKING == ::CU_STREAM_NON_BLOCKING);
static_assert(c::CU_EVENT_DISABLE_TIMING == ::CU_EVENT_DISABLE_TIMING);
static_assert(c::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ==
              ::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(c::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ==
              ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(c::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ==
              ::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(c::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ==
              ::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(sizeof(c::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(sizeof(c::CUresult) == sizeof(::CUresult));
static_assert(c::CUBLAS_STATUS_SUCCESS == ::CUBLAS_STATUS_SUCCESS);
static_assert(c::CUBLAS_OP_N == ::CUBLAS_OP_N &&
              c::CUBLAS_OP_T == ::CUBLAS_OP_T);
static_assert(c::CUBLAS_COMPUTE_32F == ::CUBLAS_COMPUTE_32F);
static_assert(c::CUBLAS_COMPUTE_32F_FAST_TF32 ==
              ::CUBLAS_COMPUTE_32F_FAST_TF32);
static_assert(c::CUBLAS_COMPUTE_64F == ::CUBLAS_COMPUTE_64F);
static_assert(c::CUDA_R_32F == ::CUDA_R_32F && c::CUDA_R_64F == ::CUDA_R_64F &&
              c::CUDA_R_16F == ::CUDA_R_16F && c::CUDA_R_16BF == ::CUDA_R_16BF);
static_assert(c::CUBLASLT_MATMUL_DESC_TRANSA == ::CUBLASLT_MATMUL_DESC_TRANSA);
static_assert(c::CUBLASLT_MATMUL_DESC_TRANSB == ::CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(c::CUBLASLT_MATMUL_DESC_EPILOGUE ==
              ::CUBLASLT_MATMUL_DESC_EPILOGUE);
static_assert(c::CUBLASLT_MATMUL_DESC_BIAS_POINTER ==
              ::CUBLASLT_MATMUL_DESC_BIAS_POINTER);
static_assert(c::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE ==
              ::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
static_assert(c::CUBLASLT_EPILOGUE_DEFAULT == ::CUBLASLT_EPILOGUE_DEFAULT &&
              c::CUBLASLT_EPILOGUE_BIAS == ::CUBLASLT_EPILOGUE_BIAS &&
              c::CUBLASLT_EPILOGUE_GELU == ::CUBLASLT_EPILOGUE_GELU &&
              c::CUBLASLT_EPILOGUE_GELU_BIAS == ::CUBLASLT_EPILOGUE_GELU_BIAS);
static_assert(c::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT ==
              ::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
static_assert(c::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET ==
              ::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
static_assert(c::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES ==
              ::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(sizeof(c::cublasLtMatmulAlgo_t) ==
              sizeof(::cublasLtMatmulAlgo_t));
static_assert(sizeof(c::cublasLtMatmulHeuristicResult_t) ==
              sizeof(::cublasLtMatmulHeuristicResult_t));
static_assert(offsetof(c::cublasLtMatmulHeuristicResult_t, workspaceSize) ==
              offsetof(::cublasLtMatmulHeuristicResult_t, workspaceSize));
static_assert(offsetof(c::cublasLtMatmulHeuristicResult_t, state) ==
              offsetof(::cublasLtMatmulHeuristicResult_t, state));

TEST(CudaApi, DeclarationsMatchTheToolkitHeaders) { SUCCEED(); }
#else
TEST(CudaApi, DeclarationsMatchTheToolkitHeaders) {
  GTEST_SKIP() << "the CUDA toolkit headers were not found at configure time";
}
#endif

// NCCL ships apart from the toolkit: nccl.h may be missing where cuda.h is.
#if defined(CLEAVE_TEST_HAVE_CUDA_HEADERS) && __has_include(<nccl.h>)
#include <nccl.h>

static_assert(c::kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(c::ncclUniqueId) == sizeof(::ncclUniqueId));
static_assert(sizeof(c::ncclComm_t) == sizeof(::ncclComm_t));
static_assert(sizeof(c::ncclResult_t) == sizeof(::ncclResult_t));
static_assert(sizeof(c::ncclDataType_t) == sizeof(::ncclDataType_t));
static_assert(sizeof(c::ncclRedOp_t) == sizeof(::ncclRedOp_t));
static_assert(c::ncclSuccess == ::ncclSuccess &&
              c::ncclUnhandledCudaError == ::ncclUnhandledCudaError &&
              c::ncclSystemError == ::ncclSystemError &&
              c::ncclInternalError == ::ncclInternalError &&
              c::ncclInvalidArgument == ::ncclInvalidArgument &&
              c::ncclInvalidUsage == ::ncclInvalidUsage &&
              c::ncclRemoteError == ::ncclRemoteError &&
              c::ncclInProgress == ::ncclInProgress);
static_assert(c::ncclInt8 == ::ncclInt8 && c::ncclUint8 == ::ncclUint8 &&
              c::ncclInt32 == ::ncclInt32 && c::ncclUint32 == ::ncclUint32 &&
              c::ncclInt64 == ::ncclInt64 && c::ncclUint64 == ::ncclUint64 &&
              c::ncclFloat16 == ::ncclFloat16 &&
              c::ncclFloat32 == ::ncclFloat32 &&
              c::ncclFloat64 == ::ncclFloat64 &&
              c::ncclBfloat16 == ::ncclBfloat16);
static_assert(c::ncclSum == ::ncclSum && c::ncclProd == ::ncclProd &&
              c::ncclMax == ::ncclMax && c::ncclMin == ::ncclMin &&
              c::ncclAvg == ::ncclAvg);
static_assert(c::kMinNcclVersionCode == NCCL_VERSION(2, 18, 0));
static_assert(c::kNcclSplitNoColor == NCCL_SPLIT_NOCOLOR);

TEST(CudaApi, NcclDeclarationsMatchTheHeader) { SUCCEED(); }
#else
TEST(CudaApi, NcclDeclarationsMatchTheHeader) {
  GTEST_SKIP() << "nccl.h was not found next to the CUDA toolkit headers";
}
#endif
