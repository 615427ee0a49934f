//===- CudaDriverDouble.cpp - A strict host double of libcuda -------------===//
//
// libcleave-cuda-double.so: every entry point of CLEAVE_CUDA_DRIVER_SYMBOLS
// (runtime/src/CudaApi.h) under its exported name, plus cuStreamQuery,
// cuEventQuery, cuEventSynchronize and cuLaunchHostFunc, running on the
// host (DeviceDouble.h says what it checks). This file holds the shared
// state, messages, devices and contexts, and memory; DriverMemory.cpp the
// allocation table and the happens-before checker; DriverStreams.cpp
// streams, events and graphs; DriverKernels.cpp modules and launches.
//
// Environment: $CLEAVE_CUDA_DOUBLE_DEVICES (devices, default 8; 0 makes
// cuInit return CUDA_ERROR_NO_DEVICE), $CLEAVE_CUDA_DOUBLE_MEMORY (bytes
// per device, K/M/G/T suffixes allowed, default 8G).
//
// Misuse that would corrupt memory or hide a bug (an access outside a live
// allocation, a race, a double free, a dead handle) aborts through fail();
// errors a real driver reports as a result (out of memory, an image with
// no host kernels, capture rules) are printed and returned.
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <unistd.h>

namespace cleave::cudadouble {

CLEAVE_DOUBLE_EXPORT void fail(const std::string &message) {
  std::string text = "cleave cuda double: " + message;
  const std::string &command = driver::thread().command;
  if (!command.empty() && message.find(command) == std::string::npos)
    text += " [plan command: " + command + "]";
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  std::abort();
}

CLEAVE_DOUBLE_EXPORT std::string currentCommand() {
  return driver::thread().command;
}

} // namespace cleave::cudadouble

namespace cleave::cudadouble::driver {

State &state() {
  static State *s = new State(); // Never destroyed: see State.
  return *s;
}

ThreadState &thread() {
  thread_local ThreadState t;
  return t;
}

uint32_t newAgent(State &s, std::string name) {
  s.agents.push_back(Agent{std::move(name), {}});
  return static_cast<uint32_t>(s.agents.size() - 1);
}

uint32_t hostAgent(State &s) {
  ThreadState &t = thread();
  if (t.agent == UINT32_MAX)
    t.agent = newAgent(s, "host thread #" + std::to_string(s.agents.size()));
  return t.agent;
}

std::string agentName(State &s, uint32_t agent) { return s.agents[agent].name; }

CUresult refuse(CUresult code, const std::string &message) {
  std::string text = "cleave cuda double: " + message;
  if (!thread().command.empty())
    text += " [plan command: " + thread().command + "]";
  std::fprintf(stderr, "%s\n", text.c_str());
  return code;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string rangeText(uint64_t begin, uint64_t bytes) {
  return "[" + hex(begin) + ", " + hex(begin + bytes) + ") (" +
         std::to_string(bytes) + " bytes)";
}

/// The calling thread's current context if it is retained, else null.
Context *currentContext() {
  Context *ctx = thread().ctx;
  return ctx && ctx->refs > 0 ? ctx : nullptr;
}

CUresult noContext(const char *call) {
  return refuse(kInvalidContext,
                std::string(call) +
                    ": no current context (cuDevicePrimaryCtxRetain and "
                    "cuCtxSetCurrent first)");
}

} // namespace cleave::cudadouble::driver

using namespace cleave::cudadouble;
using namespace cleave::cudadouble::driver;
using cleave::rt::cuda::CUdevice;

//===----------------------------------------------------------------------===//
// Helpers of the entry points
//===----------------------------------------------------------------------===//

namespace {

/// The unsigned value of environment variable `name` (a K/M/G/T suffix
/// multiplies by powers of 1024), or `fallback` when unset.
uint64_t envBytes(const char *name, uint64_t fallback, bool suffixes) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  int shift = 0;
  if (suffixes && end && *end) {
    const char *units = "KMGT";
    const char *u = std::strchr(units, *end);
    if (u && *u) {
      shift = 10 * static_cast<int>(u - units + 1);
      ++end;
    }
  }
  if (errno || end == v || *end || *v == '-')
    fail(std::string("$") + name + "='" + v + "' is not " +
         (suffixes ? "a byte count (e.g. 8589934592 or 8G)" : "a count"));
  return static_cast<uint64_t>(n) << shift;
}

CUresult notInitialized(const char *call) {
  return refuse(kNotInitialized, std::string(call) + " before cuInit");
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

extern "C" {

CLEAVE_DOUBLE_EXPORT void cleaveDoubleSetCommand(const char *label) {
  thread().command = label ? label : "";
}

CLEAVE_DOUBLE_EXPORT CUresult cuInit(unsigned flags) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (flags)
    return refuse(kInvalidValue, "cuInit: flags must be 0");
  if (s.initialized)
    return kSuccess;
  uint64_t devices = envBytes("CLEAVE_CUDA_DOUBLE_DEVICES", 8, false);
  if (devices > 1024)
    fail("$CLEAVE_CUDA_DOUBLE_DEVICES=" + std::to_string(devices) +
         " is more devices than the double models (1024)");
  s.memoryBudget =
      envBytes("CLEAVE_CUDA_DOUBLE_MEMORY", uint64_t(8) << 30, true);
  if (!devices)
    return refuse(kNoDevice, "cuInit: no device "
                             "($CLEAVE_CUDA_DOUBLE_DEVICES=0)");
  s.deviceCount = static_cast<int>(devices);
  for (int d = 0; d < s.deviceCount; ++d) {
    s.contexts.push_back(std::make_unique<Context>());
    s.contexts.back()->device = d;
  }
  s.deviceUsed.assign(devices, 0);
  s.initialized = true;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuDriverGetVersion(int *version) {
  if (!version)
    return refuse(kInvalidValue, "cuDriverGetVersion: null pointer");
  *version = 13000;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuGetErrorName(CUresult code, const char **out);
CLEAVE_DOUBLE_EXPORT CUresult cuGetErrorString(CUresult code, const char **out);

CLEAVE_DOUBLE_EXPORT CUresult cuDeviceGetCount(int *count) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.initialized)
    return notInitialized("cuDeviceGetCount");
  if (!count)
    return refuse(kInvalidValue, "cuDeviceGetCount: null pointer");
  *count = s.deviceCount;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuDeviceGet(CUdevice *out, int ordinal) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.initialized)
    return notInitialized("cuDeviceGet");
  if (!out)
    return refuse(kInvalidValue, "cuDeviceGet: null pointer");
  if (ordinal < 0 || ordinal >= s.deviceCount)
    return refuse(kInvalidDevice,
                  "cuDeviceGet: device " + std::to_string(ordinal) +
                      " does not exist (" + std::to_string(s.deviceCount) +
                      " devices, "
                      "$CLEAVE_CUDA_DOUBLE_DEVICES)");
  *out = ordinal;
  return kSuccess;
}

/// kInvalidDevice (printed) unless `device` exists; needs State::mu.
static CUresult checkDevice(State &s, CUdevice device, const char *call) {
  if (!s.initialized)
    return notInitialized(call);
  if (device < 0 || device >= s.deviceCount)
    return refuse(kInvalidDevice, std::string(call) + ": device " +
                                      std::to_string(device) +
                                      " does not exist");
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuDeviceGetName(char *name, int len,
                                              CUdevice device) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (CUresult r = checkDevice(s, device, "cuDeviceGetName"))
    return r;
  if (!name || len <= 0)
    return refuse(kInvalidValue, "cuDeviceGetName: null or empty buffer");
  std::snprintf(name, static_cast<size_t>(len), "%s", "Cleave host double");
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuDeviceGetAttribute(int *value, int attribute,
                                                   CUdevice device) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (CUresult r = checkDevice(s, device, "cuDeviceGetAttribute"))
    return r;
  if (!value)
    return refuse(kInvalidValue, "cuDeviceGetAttribute: null pointer");
  switch (attribute) {
  case 1: // MAX_THREADS_PER_BLOCK
    *value = 1024;
    return kSuccess;
  case 8: // MAX_SHARED_MEMORY_PER_BLOCK
    *value = 48 * 1024;
    return kSuccess;
  case 10: // WARP_SIZE
    *value = 32;
    return kSuccess;
  case 16: // MULTIPROCESSOR_COUNT
    *value = 132;
    return kSuccess;
  case 75: // COMPUTE_CAPABILITY_MAJOR
    *value = 9;
    return kSuccess;
  case 76: // COMPUTE_CAPABILITY_MINOR
    *value = 0;
    return kSuccess;
  case 97: // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    *value = 227 * 1024;
    return kSuccess;
  default:
    return refuse(kInvalidValue, "cuDeviceGetAttribute: attribute " +
                                     std::to_string(attribute) +
                                     " is not modelled by the double");
  }
}

CLEAVE_DOUBLE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *out,
                                                       CUdevice device) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (CUresult r = checkDevice(s, device, "cuDevicePrimaryCtxRetain"))
    return r;
  if (!out)
    return refuse(kInvalidValue, "cuDevicePrimaryCtxRetain: null pointer");
  Context *ctx = s.contexts[static_cast<size_t>(device)].get();
  ++ctx->refs;
  *out = reinterpret_cast<CUcontext>(ctx);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (CUresult r = checkDevice(s, device, "cuDevicePrimaryCtxRelease"))
    return r;
  Context *ctx = s.contexts[static_cast<size_t>(device)].get();
  if (ctx->refs <= 0)
    fail("cuDevicePrimaryCtxRelease: the primary context of device " +
         std::to_string(device) + " is released more often than retained");
  --ctx->refs;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuCtxSetCurrent(CUcontext h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.initialized)
    return notInitialized("cuCtxSetCurrent");
  auto *ctx = reinterpret_cast<Context *>(h);
  if (ctx) {
    bool known = false;
    for (const auto &c : s.contexts)
      known |= c.get() == ctx;
    if (!known)
      fail("cuCtxSetCurrent: " + hex(reinterpret_cast<uintptr_t>(h)) +
           " is not a context cuDevicePrimaryCtxRetain returned");
  }
  thread().ctx = ctx;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemGetInfo_v2(size_t *freeBytes,
                                              size_t *totalBytes) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Context *ctx = currentContext();
  if (!ctx)
    return noContext("cuMemGetInfo");
  if (!freeBytes || !totalBytes)
    return refuse(kInvalidValue, "cuMemGetInfo: null pointer");
  uint64_t used = s.deviceUsed[static_cast<size_t>(ctx->device)];
  *totalBytes = s.memoryBudget;
  *freeBytes = s.memoryBudget - used;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t bytes) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Context *ctx = currentContext();
  if (!ctx)
    return noContext("cuMemAlloc");
  if (!out)
    return refuse(kInvalidValue, "cuMemAlloc: null pointer");
  if (CUresult r = syncCallDuringCapture(s, "cuMemAlloc"))
    return r;
  return allocate(s, ctx->device, bytes, out);
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!currentContext())
    return noContext("cuMemFree");
  if (!ptr)
    return refuse(kInvalidValue, "cuMemFree: null pointer");
  if (CUresult r = syncCallDuringCapture(s, "cuMemFree"))
    return r;
  release(s, ptr);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemHostAlloc(void **out, size_t bytes,
                                             unsigned flags) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!currentContext())
    return noContext("cuMemHostAlloc");
  if (!out)
    return refuse(kInvalidValue, "cuMemHostAlloc: null pointer");
  if (!bytes)
    return refuse(kInvalidValue, "cuMemHostAlloc: 0 bytes requested");
  if (flags & ~0x7u)
    return refuse(kInvalidValue,
                  "cuMemHostAlloc: unknown flags " + std::to_string(flags));
  if (CUresult r = syncCallDuringCapture(s, "cuMemHostAlloc"))
    return r;
  void *p = std::malloc(bytes);
  if (!p)
    return refuse(kOutOfMemory, "cuMemHostAlloc: " + std::to_string(bytes) +
                                    " bytes of host memory");
  s.hostBlocks[p] = bytes;
  *out = p;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemFreeHost(void *p) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!currentContext())
    return noContext("cuMemFreeHost");
  auto it = s.hostBlocks.find(p);
  if (it == s.hostBlocks.end())
    fail("cuMemFreeHost: " + std::string(p ? "a pointer" : "null") +
         " that cuMemHostAlloc did not return");
  if (CUresult r = syncCallDuringCapture(s, "cuMemFreeHost"))
    return r;
  s.hostBlocks.erase(it);
  std::free(p);
  return kSuccess;
}

/// A synchronous copy: an access of the calling thread, checked like any
/// other, then done on this thread.
static CUresult hostCopy(const char *call, Access access, void *dst,
                         const void *src) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!currentContext())
    return noContext(call);
  if (CUresult r = syncCallDuringCapture(s, call))
    return r;
  if (!access.bytes)
    return kSuccess;
  if (!dst || !src)
    fail(std::string(call) + ": null host pointer for " +
         std::to_string(access.bytes) + " bytes");
  uint32_t host = hostAgent(s);
  Clock &clock = s.agents[host].clock;
  uint64_t stamp = tick(clock, host);
  auto info = std::make_shared<OpInfo>(
      OpInfo{call, thread().command, agentName(s, host)});
  checkAndRecord(s, {access}, clock, host, stamp, info);
  lock.unlock();
  std::memcpy(dst, src, access.bytes);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src,
                                              size_t bytes) {
  return hostCopy("cuMemcpyHtoD", Access{dst, bytes, true, "destination"},
                  hostPointer(dst), src);
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src,
                                              size_t bytes) {
  return hostCopy("cuMemcpyDtoH", Access{src, bytes, false, "source"}, dst,
                  hostPointer(src));
}

/// Queues `work` on stream `h` for `call`; fails on a dead stream.
static CUresult queue(const char *call, CUstream h,
                      std::vector<Access> accesses,
                      std::function<void()> work) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  streamOrFail(s, h, call);
  return enqueueLocked(s, lock, h, call, std::move(accesses), std::move(work));
}

/// True if `h` is a live stream being captured.
static bool capturing(CUstream h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Stream *t = findStream(s, h);
  return t && t->capture;
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst,
                                                   const void *src,
                                                   size_t bytes, CUstream h) {
  if (bytes && !src)
    fail("cuMemcpyHtoDAsync: null host pointer for " + std::to_string(bytes) +
         " bytes");
  std::function<void()> work;
  if (capturing(h)) {
    // A graph's copy reads the host buffer when it runs.
    work = [dst, src, bytes] { std::memcpy(hostPointer(dst), src, bytes); };
  } else {
    // Pageable memory: the driver stages the source before returning.
    auto staged = std::make_shared<std::vector<uint8_t>>(
        static_cast<const uint8_t *>(src),
        static_cast<const uint8_t *>(src) + bytes);
    work = [dst, staged] {
      std::memcpy(hostPointer(dst), staged->data(), staged->size());
    };
  }
  return queue("cuMemcpyHtoDAsync", h,
               {Access{dst, bytes, true, "destination"}}, std::move(work));
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src,
                                                   size_t bytes, CUstream h) {
  if (bytes && !dst)
    fail("cuMemcpyDtoHAsync: null host pointer for " + std::to_string(bytes) +
         " bytes");
  return queue(
      "cuMemcpyDtoHAsync", h, {Access{src, bytes, false, "source"}},
      [dst, src, bytes] { std::memcpy(dst, hostPointer(src), bytes); });
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst,
                                                   CUdeviceptr src,
                                                   size_t bytes, CUstream h) {
  return queue("cuMemcpyDtoDAsync", h,
               {Access{src, bytes, false, "source"},
                Access{dst, bytes, true, "destination"}},
               [dst, src, bytes] {
                 std::memmove(hostPointer(dst), hostPointer(src), bytes);
               });
}

CLEAVE_DOUBLE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst,
                                              unsigned char value, size_t bytes,
                                              CUstream h) {
  return queue(
      "cuMemsetD8Async", h, {Access{dst, bytes, true, "destination"}},
      [dst, value, bytes] { std::memset(hostPointer(dst), value, bytes); });
}

namespace {
struct ErrorText {
  CUresult code;
  const char *name;
  const char *text;
};
const ErrorText kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in "
     "the present state"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE",
     "operation would result in a merge of separate capture sequences"},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not ended in the same stream as it began"},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capturing stream has unjoined work"},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking "
     "stream"},
    {907, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing "
     "stream"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another "
     "thread"},
};
const ErrorText *findError(CUresult code) {
  for (const ErrorText &e : kErrors)
    if (e.code == code)
      return &e;
  return nullptr;
}
} // namespace

CLEAVE_DOUBLE_EXPORT CUresult cuGetErrorName(CUresult code, const char **out) {
  if (!out)
    return kInvalidValue;
  const ErrorText *e = findError(code);
  *out = e ? e->name : nullptr;
  return e ? kSuccess : kInvalidValue;
}

CLEAVE_DOUBLE_EXPORT CUresult cuGetErrorString(CUresult code,
                                               const char **out) {
  if (!out)
    return kInvalidValue;
  const ErrorText *e = findError(code);
  *out = e ? e->text : nullptr;
  return e ? kSuccess : kInvalidValue;
}

CLEAVE_DOUBLE_EXPORT CUresult cuModuleLoadData(CUmodule *, const void *);
CLEAVE_DOUBLE_EXPORT CUresult cuModuleUnload(CUmodule);
CLEAVE_DOUBLE_EXPORT CUresult cuModuleGetFunction(CUfunction *, CUmodule,
                                                  const char *);
CLEAVE_DOUBLE_EXPORT CUresult cuFuncSetAttribute(CUfunction, int, int);
CLEAVE_DOUBLE_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned, unsigned,
                                             unsigned, unsigned, unsigned,
                                             unsigned, unsigned, CUstream,
                                             void **, void **);
CLEAVE_DOUBLE_EXPORT CUresult cuStreamQuery(CUstream);
CLEAVE_DOUBLE_EXPORT CUresult cuEventQuery(CUevent);
CLEAVE_DOUBLE_EXPORT CUresult cuEventSynchronize(CUevent);
CLEAVE_DOUBLE_EXPORT CUresult cuLaunchHostFunc(CUstream, void (*)(void *),
                                               void *);
CLEAVE_DOUBLE_EXPORT CUresult cuStreamCreate(CUstream *, unsigned);
CLEAVE_DOUBLE_EXPORT CUresult cuStreamDestroy_v2(CUstream);
CLEAVE_DOUBLE_EXPORT CUresult cuStreamSynchronize(CUstream);
CLEAVE_DOUBLE_EXPORT CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CLEAVE_DOUBLE_EXPORT CUresult cuEventCreate(CUevent *, unsigned);
CLEAVE_DOUBLE_EXPORT CUresult cuEventDestroy_v2(CUevent);
CLEAVE_DOUBLE_EXPORT CUresult cuEventRecord(CUevent, CUstream);
CLEAVE_DOUBLE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream, int);
CLEAVE_DOUBLE_EXPORT CUresult cuStreamEndCapture(CUstream, CUgraph *);
CLEAVE_DOUBLE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *,
                                                          CUgraph,
                                                          unsigned long long);
CLEAVE_DOUBLE_EXPORT CUresult cuGraphLaunch(CUgraphExec, CUstream);
CLEAVE_DOUBLE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec);
CLEAVE_DOUBLE_EXPORT CUresult cuGraphDestroy(CUgraph);

} // extern "C"

// Every exported entry point has exactly the signature the runtime's
// function table expects.
using cleave::rt::cuda::DriverApi;
#define CLEAVE_CHECK_SIGNATURE(member, exported)                               \
  static_assert(std::is_same_v<decltype(&exported), DriverApi::member##Fn>,    \
                #exported " does not match DriverApi::" #member);
CLEAVE_CHECK_SIGNATURE(cuInit, cuInit)
CLEAVE_CHECK_SIGNATURE(cuDriverGetVersion, cuDriverGetVersion)
CLEAVE_CHECK_SIGNATURE(cuGetErrorString, cuGetErrorString)
CLEAVE_CHECK_SIGNATURE(cuGetErrorName, cuGetErrorName)
CLEAVE_CHECK_SIGNATURE(cuDeviceGetCount, cuDeviceGetCount)
CLEAVE_CHECK_SIGNATURE(cuDeviceGet, cuDeviceGet)
CLEAVE_CHECK_SIGNATURE(cuDeviceGetName, cuDeviceGetName)
CLEAVE_CHECK_SIGNATURE(cuDeviceGetAttribute, cuDeviceGetAttribute)
CLEAVE_CHECK_SIGNATURE(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)
CLEAVE_CHECK_SIGNATURE(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)
CLEAVE_CHECK_SIGNATURE(cuCtxSetCurrent, cuCtxSetCurrent)
CLEAVE_CHECK_SIGNATURE(cuMemGetInfo, cuMemGetInfo_v2)
CLEAVE_CHECK_SIGNATURE(cuMemAlloc, cuMemAlloc_v2)
CLEAVE_CHECK_SIGNATURE(cuMemFree, cuMemFree_v2)
CLEAVE_CHECK_SIGNATURE(cuMemcpyHtoD, cuMemcpyHtoD_v2)
CLEAVE_CHECK_SIGNATURE(cuMemcpyDtoH, cuMemcpyDtoH_v2)
CLEAVE_CHECK_SIGNATURE(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2)
CLEAVE_CHECK_SIGNATURE(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)
CLEAVE_CHECK_SIGNATURE(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2)
CLEAVE_CHECK_SIGNATURE(cuMemsetD8Async, cuMemsetD8Async)
CLEAVE_CHECK_SIGNATURE(cuModuleLoadData, cuModuleLoadData)
CLEAVE_CHECK_SIGNATURE(cuModuleUnload, cuModuleUnload)
CLEAVE_CHECK_SIGNATURE(cuModuleGetFunction, cuModuleGetFunction)
CLEAVE_CHECK_SIGNATURE(cuFuncSetAttribute, cuFuncSetAttribute)
CLEAVE_CHECK_SIGNATURE(cuLaunchKernel, cuLaunchKernel)
CLEAVE_CHECK_SIGNATURE(cuStreamCreate, cuStreamCreate)
CLEAVE_CHECK_SIGNATURE(cuStreamDestroy, cuStreamDestroy_v2)
CLEAVE_CHECK_SIGNATURE(cuStreamSynchronize, cuStreamSynchronize)
CLEAVE_CHECK_SIGNATURE(cuStreamWaitEvent, cuStreamWaitEvent)
CLEAVE_CHECK_SIGNATURE(cuStreamQuery, cuStreamQuery)
CLEAVE_CHECK_SIGNATURE(cuEventQuery, cuEventQuery)
CLEAVE_CHECK_SIGNATURE(cuEventCreate, cuEventCreate)
CLEAVE_CHECK_SIGNATURE(cuEventDestroy, cuEventDestroy_v2)
CLEAVE_CHECK_SIGNATURE(cuEventRecord, cuEventRecord)
CLEAVE_CHECK_SIGNATURE(cuStreamBeginCapture, cuStreamBeginCapture_v2)
CLEAVE_CHECK_SIGNATURE(cuStreamEndCapture, cuStreamEndCapture)
CLEAVE_CHECK_SIGNATURE(cuGraphInstantiate, cuGraphInstantiateWithFlags)
CLEAVE_CHECK_SIGNATURE(cuGraphLaunch, cuGraphLaunch)
CLEAVE_CHECK_SIGNATURE(cuGraphExecDestroy, cuGraphExecDestroy)
CLEAVE_CHECK_SIGNATURE(cuGraphDestroy, cuGraphDestroy)
#undef CLEAVE_CHECK_SIGNATURE
