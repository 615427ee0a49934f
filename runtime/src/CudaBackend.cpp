//===- CudaBackend.cpp - Runs a plan on an NVIDIA GPU ---------------------===//
//
// Design:
//  - Libraries: the driver API and cuBLASLt are loaded with dlopen
//    (CudaApi.h); without libcuda.so.1 or a device, creating the backend
//    returns UNAVAILABLE with the reason and nothing else happens. NCCL
//    (Nccl.h) is opened only for a plan whose collectives span more than one
//    rank; without it, other plans run as before.
//  - Context: the device's primary context ($CLEAVE_CUDA_DEVICE, else the
//    launcher's local rank, else for ranks that are threads of one process
//    the rank modulo the device count), made current on the calling thread
//    at every entry point.
//  - Memory: one cuMemAlloc for the whole arena; every tensor and command
//    buffer is arena base + the plan's static offset. Constants are copied at
//    creation, then the init commands run once. cuBLASLt gets one workspace
//    (32 MiB) allocated next to the arena.
//  - Streams: commands are enqueued on the compute stream (non-blocking).
//    Collectives run on a communication stream (NcclCollectives.h): the
//    compute stream records an event the communication stream waits on, the
//    NCCL calls run there, and the compute stream waits on an event recorded
//    after them (at once for a synchronous collective, at its Wait command
//    for an asynchronous one). Because both waits are event edges, such a
//    step stays capturable: the communication stream joins the capture
//    through the first wait and is joined back through the second (fork/join
//    capture). One NCCL communicator per mesh-axis group, split from a world
//    communicator whose id rank 0 hands out over the CPU communicator the
//    backend is created with.
//  - Commands: GpuLaunch -> cuLaunchKernel on the plan's cubin (the PTX in
//    metadata "kernel_ptx" is JIT-compiled if the cubin does not load, e.g.
//    on another architecture); Gemm -> cublasLtMatmul with descriptors,
//    layouts and algorithm chosen once at creation (row-major through the
//    transpose trick: C^T = op(B)^T op(A)^T in column-major); Copy ->
//    cuMemcpyDtoDAsync; Fill -> cuMemsetD8Async; Attention ->
//    cleave_attention_forward and AttentionBackward -> three kernels
//    (src/cuda/AttentionKernels.cu, PTX embedded at build time, loaded on
//    first use; the backward's per-row log-sum-exp and rowsum scratch, 8
//    bytes per query row of the largest command, is allocated next to the
//    arena). Kernel (host ELF) commands cannot appear in a CUDA plan (the
//    validator rejects them).
//  - CUDA graphs: the first run() enqueues the commands one by one; the
//    second captures the whole command list on the compute stream into a
//    graph, instantiates it and launches it; later runs only launch it. Inputs
//    are written into the arena before a run, so the captured addresses stay
//    right. Disabled by $CLEAVE_CUDA_GRAPH=0 or the plan metadata "cuda_graph"
//    = "0".
//  - Gemm epilogues map to cuBLASLt's: bias -> CUBLASLT_EPILOGUE_BIAS,
//    gelu_bias -> CUBLASLT_EPILOGUE_GELU_BIAS, gelu -> CUBLASLT_EPILOGUE_GELU
//    (tanh-form GELU, as the plan defines it), the bias through
//    CUBLASLT_MATMUL_DESC_BIAS_POINTER / BIAS_DATA_TYPE.
//  - f32 GEMMs use f32 compute; $CLEAVE_CUDA_TF32=1 (or plan metadata
//    "cuda_tf32" = "1") allows TF32 tensor cores. bf16/f16 operands
//    accumulate in f32, into an f32 D or one of their own type (rounded by
//    cuBLASLt).
//  - run() returns after the streams have finished: with NCCL communicators
//    it polls them and NCCL's asynchronous errors, and after an error or
//    --comm-timeout without progress aborts every communicator and names
//    the collective that did not complete. readTensor copies the tensor
//    into a host staging buffer kept until the next read of the same tensor.
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "CudaApi.h"
#include "Launch.h"
#include "Nccl.h"
#include "NcclCollectives.h"
#include "RandomInit.h"
#include "cuda/AttentionCommand.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

namespace cleave::rt {

using namespace plan;
using namespace cuda;

namespace {

bool envIs(const char *name, const char *value) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

/// A Gemm command, prepared for cublasLtMatmul.
struct GemmOp {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspaceBytes = 0;
  double alpha64 = 1, beta64 = 0;
  float alpha32 = 1, beta32 = 0;
  bool scale64 = false;
  bool empty = false; ///< M == 0 or N == 0: nothing to do.
  CUdeviceptr ptrA = 0, ptrB = 0, ptrC = 0;
};

/// A GpuLaunch command with its argument values.
struct LaunchOp {
  CUfunction fn = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared = 0;
  std::vector<CUdeviceptr> values;
  std::vector<void *> args; ///< args[i] = &values[i].
};

/// An Attention or AttentionBackward command: its kernels' argument and
/// grids.
struct AttentionOp {
  AttentionArgs args{};
  void *argv[1] = {&args};
  unsigned queryGrid[3] = {1, 1, 1}, keyGrid[3] = {1, 1, 1};
};

/// A command list with what each command needs at enqueue time.
struct Prepared {
  std::vector<std::unique_ptr<GemmOp>> gemms;      ///< One per command or null.
  std::vector<std::unique_ptr<LaunchOp>> launches; ///< Same.
  std::vector<std::unique_ptr<AttentionOp>> attentions; ///< Same.
};

class CudaBackend final : public Backend {
public:
  CudaBackend(PlanRef plan, const DriverApi *cu, Communicator *rankComm,
              const Plan *file)
      : plan(std::move(plan)), cu(*cu), rankComm(rankComm),
        file(file ? file : this->plan.get()) {}
  ~CudaBackend() override;
  cleave_rt_status init();

  const char *name() const override { return "cuda"; }
  bool supportsTracing() const override { return false; }
  cleave_rt_status writeTensor(const TensorInfo &tensor,
                               const void *data) override;
  cleave_rt_status readTensor(const TensorInfo &tensor,
                              const void **out_data) override;
  cleave_rt_status readTensorInto(const TensorInfo &tensor, void *dst) override;
  cleave_rt_status allocHost(size_t bytes, void **out) override;
  void freeHost(void *data) override;
  cleave_rt_status run() override;
  std::string deviceInfo() const override;

private:
  cleave_rt_status check(CUresult r, const char *what) {
    return checkDriver(cu, r, what);
  }
  cleave_rt_status makeCurrent() {
    return check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }
  cleave_rt_status loadModule();
  /// Copies host memory into the arena on the compute stream and waits for
  /// it: a plain cuMemcpyHtoD runs on the legacy stream, which the
  /// non-blocking compute stream does not wait for, and from pageable
  /// memory it may return before the copy has landed.
  cleave_rt_status upload(CUdeviceptr dst, const void *src, size_t bytes,
                          const char *what);
  cleave_rt_status prepare(const std::vector<Command> &commands, Prepared *out);
  cleave_rt_status prepareGemm(const Command &c, GemmOp *op);
  cleave_rt_status prepareAttention(const Command &c, AttentionOp *op);
  cleave_rt_status launchAttention(const Command &c, AttentionOp &op);
  /// Enqueues `commands` on the streams (the host doubles are told which
  /// command each call belongs to).
  cleave_rt_status enqueue(const std::vector<Command> &commands,
                           const Prepared &prepared);
  cleave_rt_status enqueueCommands(const std::vector<Command> &commands,
                                   const Prepared &prepared);
  /// Tells the host doubles (cleaveDoubleSetCommand) that what the calling
  /// thread enqueues next belongs to command `i` of `commands`.
  void labelCommand(const std::vector<Command> &commands, size_t i);
  cleave_rt_status capture();

  PlanRef plan;
  const DriverApi &cu;
  /// The CPU communicator of this rank (null: one rank), and the whole plan
  /// file (the NCCL groups are those of every stage and entry).
  Communicator *rankComm;
  const Plan *file;
  int64_t rank = 0;
  const CublasLtApi *lt = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  bool ctxRetained = false;
  int ccMajor = 0, ccMinor = 0;
  CUdeviceptr arena = 0, workspace = 0;
  size_t workspaceBytes = 0;
  CUmodule module = nullptr;
  std::vector<CUfunction> functions;
  /// The attention kernels' module and functions (forward, backward rows,
  /// dq, dk/dv), loaded by the first attention command; its scratch.
  CUmodule attentionModule = nullptr;
  CUfunction attentionFns[4] = {};
  CUdeviceptr attentionScratch = 0;
  size_t attentionScratchBytes = 0;
  CUstream compute = nullptr;
  /// The communication stream: collectives (see the design note above).
  CUstream comm = nullptr;
  std::unique_ptr<CudaCollectives> collectives;
  bool capturing = false; ///< capture() is enqueueing into a graph.
  cublasLtHandle_t ltHandle = nullptr;
  bool tf32 = false, useGraph = true;
  Prepared initPrepared, runPrepared;
  CUgraph graph = nullptr;
  CUgraphExec graphExec = nullptr;
  uint64_t runs = 0;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint8_t>> staging;
};

} // namespace

CudaBackend::~CudaBackend() {
  if (!ctxRetained)
    return;
  cu.cuCtxSetCurrent(ctx);
  // NCCL communicators first: destroyed after clean runs (their work is
  // done once the compute stream is), aborted after a failure so that no
  // collective waits for a peer that is gone.
  if (collectives)
    collectives->closeCommunicators();
  if (compute)
    cu.cuStreamSynchronize(compute);
  collectives.reset();
  if (graphExec)
    cu.cuGraphExecDestroy(graphExec);
  if (graph)
    cu.cuGraphDestroy(graph);
  for (Prepared *p : {&initPrepared, &runPrepared})
    for (auto &g : p->gemms)
      if (g) {
        if (g->a)
          lt->cublasLtMatrixLayoutDestroy(g->a);
        if (g->b)
          lt->cublasLtMatrixLayoutDestroy(g->b);
        if (g->c)
          lt->cublasLtMatrixLayoutDestroy(g->c);
        if (g->desc)
          lt->cublasLtMatmulDescDestroy(g->desc);
      }
  if (ltHandle)
    lt->cublasLtDestroy(ltHandle);
  if (module)
    cu.cuModuleUnload(module);
  if (attentionModule)
    cu.cuModuleUnload(attentionModule);
  if (attentionScratch)
    cu.cuMemFree(attentionScratch);
  for (CUstream s : {compute, comm})
    if (s)
      cu.cuStreamDestroy(s);
  if (workspace)
    cu.cuMemFree(workspace);
  if (arena)
    cu.cuMemFree(arena);
  cu.cuDevicePrimaryCtxRelease(device);
}

cleave_rt_status CudaBackend::init() {
  // The device: $CLEAVE_CUDA_DEVICE, else the launcher's local rank (one
  // GPU per rank), else 0.
  int count = 0;
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  LaunchEnv launch;
  std::string why;
  if (!readLaunchEnv([](const char *v) { return std::getenv(v); }, &launch,
                     &why))
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION, why);
  rank = rankComm ? rankComm->rank() : launch.rank;
  if (rankComm && launch.launcher.empty() && count > 0) {
    // Ranks that are threads of this process (--ranks N): one device each,
    // round robin.
    launch.rank = rank;
    launch.localRank = rank % count;
  }
  int ordinal = 0;
  if (!cudaDeviceOf(launch, std::getenv("CLEAVE_CUDA_DEVICE"), count, &ordinal,
                    &why))
    return makeStatus(CLEAVE_RT_UNAVAILABLE, why);
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuDeviceGet(&device, ordinal), "cuDeviceGet"));
  CLEAVE_RT_RETURN_IF_ERROR(check(cu.cuDevicePrimaryCtxRetain(&ctx, device),
                                  "cuDevicePrimaryCtxRetain"));
  ctxRetained = true;
  CLEAVE_RT_RETURN_IF_ERROR(makeCurrent());
  cu.cuDeviceGetAttribute(&ccMajor,
                          CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  cu.cuDeviceGetAttribute(&ccMinor,
                          CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);

  useGraph = !envIs("CLEAVE_CUDA_GRAPH", "0") &&
             getMetadata(*plan, meta::kCudaGraph) != "0";
  tf32 = envIs("CLEAVE_CUDA_TF32", "1") ||
         getMetadata(*plan, meta::kCudaTf32) == "1";

  CLEAVE_RT_RETURN_IF_ERROR(check(
      cu.cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  CLEAVE_RT_RETURN_IF_ERROR(check(
      cu.cuStreamCreate(&comm, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));

  uint64_t align = plan->alignment < 256 ? 256 : plan->alignment;
  uint64_t bytes = (plan->arenaBytes + align - 1) / align * align;
  if (bytes == 0)
    bytes = align;
  if (CUresult r = cu.cuMemAlloc(&arena, bytes)) {
    size_t freeBytes = 0, totalBytes = 0;
    cu.cuMemGetInfo(&freeBytes, &totalBytes);
    return makeStatus(CLEAVE_RT_RESOURCE_EXHAUSTED,
                      "cannot allocate the arena of " +
                          std::to_string(plan->arenaBytes) +
                          " bytes on the GPU (" + std::to_string(freeBytes) +
                          " of " + std::to_string(totalBytes) +
                          " bytes free): " + driverErrorString(cu, r));
  }
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuMemsetD8Async(arena, 0, bytes, compute), "cuMemsetD8Async"));
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuStreamSynchronize(compute), "cuStreamSynchronize"));
  // The NCCL communicators (a collective call of every rank, so made before
  // the slower set-up below) and each collective's calls.
  collectives = std::make_unique<CudaCollectives>(cu);
  CLEAVE_RT_RETURN_IF_ERROR(collectives->init(
      *plan, *file, rank, rankComm, rankComm ? rankComm->timeoutSeconds() : 0.0,
      compute, comm, arena));
  CLEAVE_RT_RETURN_IF_ERROR(forEachConstantValue(
      *plan, rank,
      [&](const Constant &c, const uint8_t *bytes) {
        return upload(arena + c.info.offset, bytes, c.info.byteSize(),
                      "constant");
      },
      &bytesReadFromFiles));

  bool anyGemm = false;
  for (const auto *list : {&plan->commands, &plan->initCommands})
    for (const Command &c : *list)
      anyGemm |= c.kind == CommandKind::Gemm;
  if (anyGemm) {
    CLEAVE_RT_RETURN_IF_ERROR(loadCublasLt(&lt));
    CLEAVE_RT_RETURN_IF_ERROR(
        checkCublas(*lt, lt->cublasLtCreate(&ltHandle), "cublasLtCreate"));
    workspaceBytes = size_t(32) << 20;
    CLEAVE_RT_RETURN_IF_ERROR(check(cu.cuMemAlloc(&workspace, workspaceBytes),
                                    "cuMemAlloc (cuBLASLt workspace)"));
  }
  CLEAVE_RT_RETURN_IF_ERROR(loadModule());
  CLEAVE_RT_RETURN_IF_ERROR(prepare(plan->initCommands, &initPrepared));
  CLEAVE_RT_RETURN_IF_ERROR(prepare(plan->commands, &runPrepared));
  // Once, after the constants: e.g. zeroing the optimizer state.
  CLEAVE_RT_RETURN_IF_ERROR(enqueue(plan->initCommands, initPrepared));
  CLEAVE_RT_RETURN_IF_ERROR(collectives->wait("init commands"));
  std::string mutation;
  CLEAVE_RT_RETURN_IF_ERROR(cudaMutation(&mutation));
  if (mutation == "free-workspace-early" && workspace)
    cu.cuMemFree(workspace); // the mutation: later GEMMs use freed memory
  return nullptr;
}

cleave_rt_status CudaBackend::loadModule() {
  if (plan->kernelNames.empty())
    return nullptr;
  std::string arch = "sm_" + std::to_string(ccMajor) + std::to_string(ccMinor);
  if (cu.cleaveDoubleAttachHostKernels && !plan->hostKernelObject.empty()) {
    // The CUDA host doubles run the plan's host kernels in place of the
    // cubin's (--cuda-host-kernels); a real driver has no such entry.
    std::vector<const char *> names;
    std::vector<uint32_t> numArgs;
    std::vector<uint64_t> argBytes;
    std::vector<uint8_t> argWrites;
    for (size_t k = 0; k < plan->kernelNames.size(); ++k) {
      names.push_back(plan->kernelNames[k].c_str());
      numArgs.push_back(static_cast<uint32_t>(plan->hostKernelArgs[k].size()));
      for (const HostKernelArg &a : plan->hostKernelArgs[k]) {
        argBytes.push_back(a.bytes);
        argWrites.push_back(a.written ? 1 : 0);
      }
    }
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cleaveDoubleAttachHostKernels(
                  plan->kernelObject.data(), plan->hostKernelObject.data(),
                  plan->hostKernelObject.size(), names.data(), numArgs.data(),
                  argBytes.data(), argWrites.data(),
                  static_cast<uint32_t>(names.size())),
              "cleaveDoubleAttachHostKernels"));
  }
  CUresult r = cu.cuModuleLoadData(&module, plan->kernelObject.data());
  if (r != CUDA_SUCCESS) {
    module = nullptr;
    std::string why = "the plan's cubin (target '" + plan->target +
                      "') does not load on this " + arch +
                      " device: " + driverErrorString(cu, r);
    const std::string *ptx = findMetadata(*plan, meta::kKernelPtx.name);
    if (!ptx || ptx->empty())
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                        why +
                            "; the plan carries no PTX (metadata kernel_ptx)");
    std::string text = *ptx; // NUL-terminated copy for the JIT.
    r = cu.cuModuleLoadData(&module, text.c_str());
    if (r != CUDA_SUCCESS) {
      module = nullptr;
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                        why + "; JIT compilation of its PTX failed too: " +
                            driverErrorString(cu, r));
    }
  }
  functions.resize(plan->kernelNames.size());
  for (size_t i = 0; i < functions.size(); ++i) {
    r = cu.cuModuleGetFunction(&functions[i], module,
                               plan->kernelNames[i].c_str());
    if (r != CUDA_SUCCESS)
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                        "kernel '" + plan->kernelNames[i] +
                            "' is not in the plan's kernel object: " +
                            driverErrorString(cu, r));
  }
  return nullptr;
}

static int cudaType(int64_t dtype) {
  switch (static_cast<DType>(dtype)) {
  case DType::F64:
    return CUDA_R_64F;
  case DType::F16:
    return CUDA_R_16F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

cleave_rt_status CudaBackend::prepareGemm(const Command &c, GemmOp *op) {
  const std::vector<int64_t> &p = c.params;
  int64_t M = p[kGemmM], N = p[kGemmN], K = p[kGemmK];
  op->empty = M == 0 || N == 0;
  if (op->empty)
    return nullptr;
  bool tA = p[kGemmTransA], tB = p[kGemmTransB];
  int64_t outDType = gemmOutDTypeOf(c);
  int abType = cudaType(p[kGemmDType]), cType = cudaType(outDType);
  op->scale64 = abType == CUDA_R_64F;
  int computeType = op->scale64 ? CUBLAS_COMPUTE_64F
                    : (tf32 && abType == CUDA_R_32F)
                        ? CUBLAS_COMPUTE_32F_FAST_TF32
                        : CUBLAS_COMPUTE_32F;
  op->alpha64 = bitsToDouble(p[kGemmAlphaBits]);
  op->beta64 = bitsToDouble(p[kGemmBetaBits]);
  op->alpha32 = static_cast<float>(op->alpha64);
  op->beta32 = static_cast<float>(op->beta64);
  const CublasLtApi &L = *lt;
  CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
      L,
      L.cublasLtMatmulDescCreate(&op->desc, computeType,
                                 op->scale64 ? CUDA_R_64F : CUDA_R_32F),
      "cublasLtMatmulDescCreate"));
  // Column-major view: C^T (N x M) = op(B)^T (N x K) * op(A)^T (K x M).
  int32_t opFirst = tB ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t opSecond = tA ? CUBLAS_OP_T : CUBLAS_OP_N;
  CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
      L,
      L.cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                       &opFirst, sizeof(opFirst)),
      "cublasLtMatmulDescSetAttribute(TRANSA)"));
  CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
      L,
      L.cublasLtMatmulDescSetAttribute(op->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                       &opSecond, sizeof(opSecond)),
      "cublasLtMatmulDescSetAttribute(TRANSB)"));
  GemmEpilogue epilogue = gemmEpilogueOf(c);
  if (epilogue != GemmEpilogue::None) {
    uint32_t ltEpilogue =
        epilogue == GemmEpilogue::Bias       ? CUBLASLT_EPILOGUE_BIAS
        : epilogue == GemmEpilogue::GeluBias ? CUBLASLT_EPILOGUE_GELU_BIAS
                                             : CUBLASLT_EPILOGUE_GELU;
    CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
        L,
        L.cublasLtMatmulDescSetAttribute(op->desc,
                                         CUBLASLT_MATMUL_DESC_EPILOGUE,
                                         &ltEpilogue, sizeof(ltEpilogue)),
        "cublasLtMatmulDescSetAttribute(EPILOGUE)"));
  }
  if (gemmEpilogueHasBias(epilogue)) {
    // Row-major C (M x N) is the column-major D (N x M) cuBLASLt computes:
    // our bias of N elements runs down D's rows, the vector that
    // CUBLASLT_EPILOGUE_BIAS broadcasts over D's columns (its length is D's
    // row count). The default bias batch stride, 0, shares it between the
    // batches. Set before the heuristic, which looks at its alignment.
    const void *bias = reinterpret_cast<const void *>(arena + c.buffers[3]);
    int32_t biasType = cudaType(p[kGemmBiasDType]);
    CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
        L,
        L.cublasLtMatmulDescSetAttribute(
            op->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
        "cublasLtMatmulDescSetAttribute(BIAS_POINTER)"));
    CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
        L,
        L.cublasLtMatmulDescSetAttribute(op->desc,
                                         CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                         &biasType, sizeof(biasType)),
        "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)"));
  }
  // A row-major rows x cols matrix is a column-major cols x rows matrix.
  auto layout = [&](cublasLtMatrixLayout_t *l, int type, int64_t storedRows,
                    int64_t storedCols, int64_t ld, int64_t stride) {
    CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
        L, L.cublasLtMatrixLayoutCreate(l, type, storedCols, storedRows, ld),
        "cublasLtMatrixLayoutCreate"));
    if (p[kGemmBatch] > 1) {
      int32_t batch = static_cast<int32_t>(p[kGemmBatch]);
      CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
          L,
          L.cublasLtMatrixLayoutSetAttribute(
              *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
          "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
      CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
          L,
          L.cublasLtMatrixLayoutSetAttribute(
              *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
              sizeof(stride)),
          "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"));
    }
    return static_cast<cleave_rt_status>(nullptr);
  };
  // First cuBLAS operand: our B; second: our A.
  CLEAVE_RT_RETURN_IF_ERROR(layout(&op->a, abType, tB ? N : K, tB ? K : N,
                                   p[kGemmLdb], p[kGemmStrideB]));
  CLEAVE_RT_RETURN_IF_ERROR(layout(&op->b, abType, tA ? K : M, tA ? M : K,
                                   p[kGemmLda], p[kGemmStrideA]));
  CLEAVE_RT_RETURN_IF_ERROR(
      layout(&op->c, cType, M, N, p[kGemmLdc], p[kGemmStrideC]));

  cublasLtMatmulPreference_t pref = nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(checkCublas(L,
                                        L.cublasLtMatmulPreferenceCreate(&pref),
                                        "cublasLtMatmulPreferenceCreate"));
  uint64_t ws = workspaceBytes;
  L.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s = L.cublasLtMatmulAlgoGetHeuristic(
      ltHandle, op->desc, op->a, op->b, op->c, op->c, pref, 1, &result, &found);
  L.cublasLtMatmulPreferenceDestroy(pref);
  CLEAVE_RT_RETURN_IF_ERROR(
      checkCublas(L, s, "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0)
    return makeStatus(
        CLEAVE_RT_UNIMPLEMENTED,
        "cuBLASLt has no algorithm for the GEMM M=" + std::to_string(M) +
            " N=" + std::to_string(N) + " K=" + std::to_string(K) +
            " batch=" + std::to_string(p[kGemmBatch]) + " " +
            dtypeName(static_cast<DType>(p[kGemmDType])) + " -> " +
            dtypeName(static_cast<DType>(outDType)) + " with epilogue " +
            gemmEpilogueName(epilogue));
  op->algo = result.algo;
  op->workspaceBytes = result.workspaceSize;
  op->ptrA = arena + c.buffers[0];
  op->ptrB = arena + c.buffers[1];
  op->ptrC = arena + c.buffers[2];
  return nullptr;
}

#ifdef CLEAVE_HAVE_CUDA_ATTENTION
extern "C" const char cleave_attention_ptx[];
#endif
static_assert(kAttentionMaxHeadDim == kCudaAttentionMaxHeadDim,
              "the kernels' row width is the plan format's limit");

cleave_rt_status CudaBackend::prepareAttention(const Command &c,
                                               AttentionOp *op) {
#ifndef CLEAVE_HAVE_CUDA_ATTENTION
  (void)c;
  (void)op;
  return makeStatus(CLEAVE_RT_UNIMPLEMENTED,
                    "this cleave-run was built without the CUDA attention "
                    "kernels (nvcc was not found); compile the plan with "
                    "--no-fused-attention");
#else
  if (!attentionModule) {
    if (CUresult r =
            cu.cuModuleLoadData(&attentionModule, cleave_attention_ptx)) {
      attentionModule = nullptr;
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                        "the attention kernels' PTX does not load (JIT) on "
                        "this device: " +
                            driverErrorString(cu, r));
    }
    const char *names[4] = {
        "cleave_attention_forward", "cleave_attention_backward_rows",
        "cleave_attention_backward_dq", "cleave_attention_backward_dkdv"};
    for (int i = 0; i < 4; ++i)
      CLEAVE_RT_RETURN_IF_ERROR(check(
          cu.cuModuleGetFunction(&attentionFns[i], attentionModule, names[i]),
          names[i]));
  }
  op->args = attentionArgsOf(c, static_cast<unsigned long long>(arena));
  const AttentionArgs &a = op->args;
  bool backward = c.kind == CommandKind::AttentionBackward;
  auto blocks = [](int n, int per) {
    return static_cast<unsigned>((n + per - 1) / per);
  };
  op->queryGrid[0] = blocks(a.Sq, kAttentionRowsPerBlock);
  op->queryGrid[1] = static_cast<unsigned>(a.Hq);
  op->queryGrid[2] = static_cast<unsigned>(a.B);
  op->keyGrid[0] = blocks(a.Skv, kAttentionKeysPerBlock);
  op->keyGrid[1] = static_cast<unsigned>(a.Hkv);
  op->keyGrid[2] = static_cast<unsigned>(a.B);
  if (backward) {
    // Two floats per query row; commands run one at a time on the compute
    // stream, so one scratch of the largest size serves them all.
    size_t rows = size_t(a.B) * size_t(a.Hq) * size_t(a.Sq);
    size_t need = 2 * rows * sizeof(float);
    if (need > attentionScratchBytes) {
      if (attentionScratch)
        cu.cuMemFree(attentionScratch);
      attentionScratch = 0;
      CLEAVE_RT_RETURN_IF_ERROR(check(cu.cuMemAlloc(&attentionScratch, need),
                                      "cuMemAlloc (attention scratch)"));
      attentionScratchBytes = need;
    }
  }
  return nullptr;
#endif
}

cleave_rt_status CudaBackend::launchAttention(const Command &c,
                                              AttentionOp &op) {
  auto launch = [&](int fn, const unsigned *grid) {
    return check(cu.cuLaunchKernel(attentionFns[fn], grid[0], grid[1], grid[2],
                                   kAttentionThreads, 1, 1, 0, compute, op.argv,
                                   nullptr),
                 "cuLaunchKernel(attention)");
  };
  if (c.kind == CommandKind::Attention)
    return launch(0, op.queryGrid);
  // The scratch may have grown since this command was prepared.
  size_t rows = size_t(op.args.B) * size_t(op.args.Hq) * size_t(op.args.Sq);
  op.args.lse = attentionScratch;
  op.args.rowDot = attentionScratch + rows * sizeof(float);
  CLEAVE_RT_RETURN_IF_ERROR(launch(1, op.queryGrid));
  CLEAVE_RT_RETURN_IF_ERROR(launch(2, op.queryGrid));
  return launch(3, op.keyGrid);
}

cleave_rt_status CudaBackend::prepare(const std::vector<Command> &commands,
                                      Prepared *out) {
  out->gemms.resize(commands.size());
  out->launches.resize(commands.size());
  out->attentions.resize(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    const Command &c = commands[i];
    if (c.kind == CommandKind::Attention ||
        c.kind == CommandKind::AttentionBackward) {
      out->attentions[i] = std::make_unique<AttentionOp>();
      CLEAVE_RT_RETURN_IF_ERROR(prepareAttention(c, out->attentions[i].get()));
    } else if (c.kind == CommandKind::Gemm) {
      out->gemms[i] = std::make_unique<GemmOp>();
      CLEAVE_RT_RETURN_IF_ERROR(prepareGemm(c, out->gemms[i].get()));
    } else if (c.kind == CommandKind::GpuLaunch) {
      auto op = std::make_unique<LaunchOp>();
      op->fn = functions[static_cast<size_t>(c.params[kGpuKernelIndex])];
      for (int d = 0; d < 3; ++d) {
        op->grid[d] = static_cast<unsigned>(c.params[kGpuGridX + d]);
        op->block[d] = static_cast<unsigned>(c.params[kGpuBlockX + d]);
      }
      op->shared = static_cast<unsigned>(c.params[kGpuSharedBytes]);
      if (op->shared > 48 * 1024)
        CLEAVE_RT_RETURN_IF_ERROR(
            check(cu.cuFuncSetAttribute(
                      op->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                      static_cast<int>(op->shared)),
                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
      op->values.resize(c.buffers.size());
      op->args.resize(c.buffers.size());
      for (size_t j = 0; j < c.buffers.size(); ++j) {
        op->values[j] = arena + c.buffers[j];
        op->args[j] = &op->values[j];
      }
      out->launches[i] = std::move(op);
    } else if (c.kind == CommandKind::Kernel) {
      return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                        "command " + std::to_string(i) +
                            " is a host kernel, which a CUDA plan cannot hold");
    }
  }
  return nullptr;
}

cleave_rt_status CudaBackend::enqueue(const std::vector<Command> &commands,
                                      const Prepared &prepared) {
  collectives->beginList();
  cleave_rt_status status = enqueueCommands(commands, prepared);
  if (!status)
    status = collectives->finishList();
  if (cu.cleaveDoubleSetCommand)
    cu.cleaveDoubleSetCommand(nullptr);
  return status;
}

void CudaBackend::labelCommand(const std::vector<Command> &commands, size_t i) {
  const Command &c = commands[i];
  std::string label =
      (&commands == &plan->initCommands ? "init command " : "command ") +
      std::to_string(i) + " (" + commandKindName(c.kind);
  if (c.kind == CommandKind::GpuLaunch)
    label += " " + plan->kernelNames[static_cast<size_t>(c.params[0])];
  else if (c.kind == CommandKind::Collective)
    label += " " + describe(c.collective);
  cu.cleaveDoubleSetCommand((label + ")").c_str());
}

cleave_rt_status
CudaBackend::enqueueCommands(const std::vector<Command> &commands,
                             const Prepared &prepared) {
  for (size_t i = 0; i < commands.size(); ++i) {
    const Command &c = commands[i];
    if (cu.cleaveDoubleSetCommand)
      labelCommand(commands, i);
    switch (c.kind) {
    case CommandKind::GpuLaunch: {
      const LaunchOp &op = *prepared.launches[i];
      CUresult r = cu.cuLaunchKernel(
          op.fn, op.grid[0], op.grid[1], op.grid[2], op.block[0], op.block[1],
          op.block[2], op.shared, compute, const_cast<void **>(op.args.data()),
          nullptr);
      if (r != CUDA_SUCCESS)
        return check(r,
                     ("cuLaunchKernel(" +
                      plan->kernelNames[static_cast<size_t>(c.params[0])] + ")")
                         .c_str());
      break;
    }
    case CommandKind::Gemm: {
      const GemmOp &op = *prepared.gemms[i];
      if (op.empty)
        break;
      const void *alpha = op.scale64 ? static_cast<const void *>(&op.alpha64)
                                     : static_cast<const void *>(&op.alpha32);
      const void *beta = op.scale64 ? static_cast<const void *>(&op.beta64)
                                    : static_cast<const void *>(&op.beta32);
      CLEAVE_RT_RETURN_IF_ERROR(checkCublas(
          *lt,
          lt->cublasLtMatmul(
              ltHandle, op.desc, alpha, reinterpret_cast<const void *>(op.ptrB),
              op.a, reinterpret_cast<const void *>(op.ptrA), op.b, beta,
              reinterpret_cast<const void *>(op.ptrC), op.c,
              reinterpret_cast<void *>(op.ptrC), op.c, &op.algo,
              reinterpret_cast<void *>(workspace), op.workspaceBytes, compute),
          "cublasLtMatmul"));
      break;
    }
    case CommandKind::Copy:
      if (c.params[0])
        CLEAVE_RT_RETURN_IF_ERROR(check(
            cu.cuMemcpyDtoDAsync(arena + c.buffers[1], arena + c.buffers[0],
                                 static_cast<size_t>(c.params[0]), compute),
            "cuMemcpyDtoDAsync"));
      break;
    case CommandKind::Fill:
      if (c.params[0])
        CLEAVE_RT_RETURN_IF_ERROR(
            check(cu.cuMemsetD8Async(arena + c.buffers[0],
                                     static_cast<unsigned char>(c.params[1]),
                                     static_cast<size_t>(c.params[0]), compute),
                  "cuMemsetD8Async"));
      break;
    case CommandKind::RandomNormal: {
      // Init commands only (never captured): generated on the host with the
      // CPU backend's generator, a bounded piece at a time, each copied in
      // stream order after the commands before it.
      constexpr int64_t kPiece = int64_t(1) << 22; // 16 MiB of floats
      std::vector<float> piece;
      if (c.params.size() == 5) {
        // A sharded state: each element drawn at its global index, as the
        // CPU backend does (this rank's shard, uploaded at once).
        const TensorInfo &t =
            plan->states[static_cast<size_t>(c.params[4])].info;
        piece.resize(static_cast<size_t>(c.params[0]));
        forEachShardRow(globalShape(t, plan->mesh), t.shape,
                        shardOffsets(t, plan->mesh, rank),
                        [&](int64_t g, int64_t l, int64_t n) {
                          fillNormal(c, g, g + n, piece.data() + l);
                        });
        CLEAVE_RT_RETURN_IF_ERROR(upload(arena + c.buffers[0], piece.data(),
                                         piece.size() * sizeof(float),
                                         "random_normal"));
        break;
      }
      for (int64_t begin = 0, n = c.params[0]; begin < n; begin += kPiece) {
        int64_t end = std::min(n, begin + kPiece);
        piece.resize(static_cast<size_t>(end - begin));
        fillNormal(c, begin, end, piece.data());
        CLEAVE_RT_RETURN_IF_ERROR(
            upload(arena + c.buffers[0] + begin * sizeof(float), piece.data(),
                   piece.size() * sizeof(float), "random_normal"));
      }
      break;
    }
    case CommandKind::Kernel:
      return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                        "host kernel command in a CUDA plan");
    case CommandKind::GroupedGemm:
      return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                        "grouped GEMM command in a CUDA plan (CPU plans only)");
    case CommandKind::Attention:
    case CommandKind::AttentionBackward:
      CLEAVE_RT_RETURN_IF_ERROR(launchAttention(c, *prepared.attentions[i]));
      break;
    case CommandKind::Marker: // tracing is not supported here
      break;
    case CommandKind::Collective:
    case CommandKind::Wait:
      CLEAVE_RT_RETURN_IF_ERROR(collectives->enqueue(commands, i, capturing));
      break;
    }
  }
  return nullptr;
}

cleave_rt_status CudaBackend::capture() {
  CLEAVE_RT_RETURN_IF_ERROR(check(
      cu.cuStreamBeginCapture(compute, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
      "cuStreamBeginCapture"));
  capturing = true;
  cleave_rt_status s = enqueue(plan->commands, runPrepared);
  capturing = false;
  CUgraph g = nullptr;
  CUresult r = cu.cuStreamEndCapture(compute, &g);
  if (s) {
    if (g)
      cu.cuGraphDestroy(g);
    return s;
  }
  CLEAVE_RT_RETURN_IF_ERROR(check(r, "cuStreamEndCapture"));
  graph = g;
  return check(cu.cuGraphInstantiate(&graphExec, graph, 0),
               "cuGraphInstantiate");
}

cleave_rt_status CudaBackend::run() {
  CLEAVE_RT_RETURN_IF_ERROR(collectives->usable());
  CLEAVE_RT_RETURN_IF_ERROR(makeCurrent());
  // The first run is eager (libraries finish their lazy set-up outside any
  // capture); the second captures the graph, which every later run replays.
  if (useGraph && !plan->commands.empty() && runs++ > 0) {
    if (!graphExec)
      CLEAVE_RT_RETURN_IF_ERROR(capture());
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuGraphLaunch(graphExec, compute), "cuGraphLaunch"));
  } else {
    CLEAVE_RT_RETURN_IF_ERROR(enqueue(plan->commands, runPrepared));
  }
  return collectives->wait("running the plan");
}

cleave_rt_status CudaBackend::writeTensor(const TensorInfo &tensor,
                                          const void *data) {
  if (!tensor.byteSize())
    return nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(makeCurrent());
  return upload(arena + tensor.offset, data, tensor.byteSize(), "input");
}

cleave_rt_status CudaBackend::upload(CUdeviceptr dst, const void *src,
                                     size_t bytes, const char *what) {
  std::string name = std::string("cuMemcpyHtoDAsync (") + what + ")";
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuMemcpyHtoDAsync(dst, src, bytes, compute), name.c_str()));
  return check(cu.cuStreamSynchronize(compute), "cuStreamSynchronize");
}

cleave_rt_status CudaBackend::readTensor(const TensorInfo &tensor,
                                         const void **out_data) {
  std::vector<uint8_t> &buf = staging[{tensor.offset, tensor.byteSize()}];
  buf.resize(tensor.byteSize() ? tensor.byteSize() : 1);
  if (tensor.byteSize()) {
    CLEAVE_RT_RETURN_IF_ERROR(makeCurrent());
    CLEAVE_RT_RETURN_IF_ERROR(check(
        cu.cuMemcpyDtoH(buf.data(), arena + tensor.offset, tensor.byteSize()),
        "cuMemcpyDtoH"));
  }
  *out_data = buf.data();
  return nullptr;
}

cleave_rt_status CudaBackend::readTensorInto(const TensorInfo &tensor,
                                             void *dst) {
  // Straight into `dst`: from page-locked memory (allocHost) a DMA.
  if (!tensor.byteSize())
    return nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(makeCurrent());
  return check(cu.cuMemcpyDtoH(dst, arena + tensor.offset, tensor.byteSize()),
               "cuMemcpyDtoH");
}

cleave_rt_status CudaBackend::allocHost(size_t bytes, void **out) {
  CLEAVE_RT_RETURN_IF_ERROR(makeCurrent());
  return check(cu.cuMemHostAlloc(out, bytes ? bytes : 1, 0), "cuMemHostAlloc");
}

void CudaBackend::freeHost(void *data) {
  if (!data)
    return;
  if (cleave_rt_status s = makeCurrent()) {
    cleave_rt_status_free(s);
    return;
  }
  cu.cuMemFreeHost(data);
}

std::string CudaBackend::deviceInfo() const {
  char deviceName[256] = "";
  cu.cuDeviceGetName(deviceName, sizeof(deviceName), device);
  int driver = 0;
  cu.cuDriverGetVersion(&driver);
  std::string info = "cuda: " + std::string(deviceName) + " (device " +
                     std::to_string(device) + ", sm_" +
                     std::to_string(ccMajor) + std::to_string(ccMinor) +
                     "), driver " + std::to_string(driver / 1000) + "." +
                     std::to_string(driver % 1000 / 10);
  const NcclLibrary *nccl = nullptr;
  if (cleave_rt_status s = NcclLibrary::load(&nccl)) {
    info += std::string(", NCCL unavailable: ") + cleave_rt_status_message(s);
    cleave_rt_status_free(s);
  } else {
    info += ", NCCL " + nccl->version();
  }
  return info;
}

cleave_rt_status createCudaBackend(PlanRef plan, Communicator *comm,
                                   const Plan *file,
                                   std::unique_ptr<Backend> *out) {
  if (!isCudaTarget(plan->target))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "the plan targets '" + plan->target +
                          "' and cannot run on the cuda backend (compile it "
                          "with --target=cuda)");
  const DriverApi *cu = nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(loadDriver(&cu));
  auto backend = std::make_unique<CudaBackend>(std::move(plan), cu, comm, file);
  CLEAVE_RT_RETURN_IF_ERROR(backend->init());
  *out = std::move(backend);
  return nullptr;
}

} // namespace cleave::rt
