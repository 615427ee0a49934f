//===- DriverDoubleTest.cpp - Tests of the libcuda host double ------------===//
//
// Calls the driver double through the runtime's own function table
// (resolved with dlsym, so every exported name is checked too): memory
// bounds, use after free, double free, the happens-before checker with and
// without an event edge, graph capture and replay over two streams, capture
// errors, host kernels attached to an image, and the attention kernels'
// PTX mapped to their host emulation.
//
//===----------------------------------------------------------------------===//

#include "DeviceDouble.h"
#include "cuda/AttentionArgs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

using namespace cleave::rt::cuda;

namespace {

constexpr CUresult kNotReady = 600, kOutOfMemory = 2, kInvalidImage = 200,
                   kCaptureUnsupported = 900, kCaptureInvalidated = 901,
                   kCaptureUnjoined = 904;

/// The double through the runtime's table, plus the calls outside it.
struct Driver {
  DriverApi api;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuLaunchHostFunc)(CUstream, void (*)(void *), void *) = nullptr;
  std::vector<std::string> missing;

  Driver() {
#define CLEAVE_RESOLVE(name, sym, type)                                        \
  api.name = reinterpret_cast<type>(::dlsym(RTLD_DEFAULT, sym));               \
  if (!api.name)                                                               \
    missing.push_back(sym);
    CLEAVE_CUDA_DRIVER_SYMBOLS(CLEAVE_RESOLVE)
#undef CLEAVE_RESOLVE
    cuEventSynchronize = reinterpret_cast<CUresult (*)(CUevent)>(
        ::dlsym(RTLD_DEFAULT, "cuEventSynchronize"));
    cuLaunchHostFunc =
        reinterpret_cast<CUresult (*)(CUstream, void (*)(void *), void *)>(
            ::dlsym(RTLD_DEFAULT, "cuLaunchHostFunc"));
    if (!cuEventSynchronize)
      missing.push_back("cuEventSynchronize");
    if (!cuLaunchHostFunc)
      missing.push_back("cuLaunchHostFunc");
  }
};

const Driver &driver() {
  static Driver d;
  return d;
}

class DriverDouble : public ::testing::Test {
protected:
  const DriverApi &cu = driver().api;

  void SetUp() override {
    // Death tests re-run the test in a fresh process: the double's worker
    // threads do not survive fork.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    ASSERT_TRUE(driver().missing.empty()) << driver().missing.front();
    ASSERT_EQ(cu.cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  }
  void TearDown() override {
    cu.cuCtxSetCurrent(nullptr);
    cu.cuDevicePrimaryCtxRelease(0);
  }

  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(cu.cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    return p;
  }
  CUstream stream() {
    CUstream s = nullptr;
    EXPECT_EQ(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    return s;
  }
  CUevent event() {
    CUevent e = nullptr;
    EXPECT_EQ(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
    return e;
  }

  CUcontext ctx = nullptr;
};

TEST_F(DriverDouble, ExportsEveryDriverSymbol) {
  EXPECT_TRUE(driver().missing.empty());
  EXPECT_NE(::dlsym(RTLD_DEFAULT, "cleaveDoubleSetCommand"), nullptr);
  EXPECT_NE(::dlsym(RTLD_DEFAULT, "cleaveDoubleAttachHostKernels"), nullptr);
}

TEST_F(DriverDouble, DescribesTheDevice) {
  int count = 0, major = 0, minor = -1, version = 0;
  ASSERT_EQ(cu.cuDeviceGetCount(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, 8); // $CLEAVE_CUDA_DOUBLE_DEVICES unset
  char name[64] = "";
  ASSERT_EQ(cu.cuDeviceGetName(name, sizeof(name), 0), CUDA_SUCCESS);
  EXPECT_STREQ(name, "Cleave host double");
  cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                          0);
  cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                          0);
  EXPECT_EQ(major, 9);
  EXPECT_EQ(minor, 0);
  ASSERT_EQ(cu.cuDriverGetVersion(&version), CUDA_SUCCESS);
  EXPECT_EQ(version, 13000);
  CUdevice dev = 0;
  EXPECT_EQ(cu.cuDeviceGet(&dev, count), 101); // CUDA_ERROR_INVALID_DEVICE
  const char *text = nullptr;
  for (CUresult r : {0, 1, 2, 200, 400, 600, 900, 901, 904}) {
    EXPECT_EQ(cu.cuGetErrorName(r, &text), CUDA_SUCCESS) << r;
    EXPECT_NE(text, nullptr);
    EXPECT_EQ(cu.cuGetErrorString(r, &text), CUDA_SUCCESS) << r;
  }
  EXPECT_EQ(cu.cuGetErrorName(904, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED");
}

TEST_F(DriverDouble, CountsMemoryAgainstTheBudget) {
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cu.cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, size_t(8) << 30);
  CUdeviceptr p = alloc(1 << 20);
  EXPECT_EQ(p % 256, 0u);
  size_t free1 = 0;
  cu.cuMemGetInfo(&free1, &total);
  EXPECT_EQ(free0 - free1, size_t(1) << 20);
  CUdeviceptr big = 0;
  EXPECT_EQ(cu.cuMemAlloc(&big, free1 + 1), kOutOfMemory);
  ASSERT_EQ(cu.cuMemFree(p), CUDA_SUCCESS);
  cu.cuMemGetInfo(&free1, &total);
  EXPECT_EQ(free1, free0);
}

TEST_F(DriverDouble, CopiesThroughAStream) {
  CUstream s = stream();
  CUdeviceptr a = alloc(64), b = alloc(64);
  std::vector<float> in(16), out(16, 0.0f);
  for (int i = 0; i < 16; ++i)
    in[i] = float(i) * 0.5f;
  ASSERT_EQ(cu.cuMemcpyHtoDAsync(a, in.data(), 64, s), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyDtoDAsync(b, a, 64, s), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemsetD8Async(a, 0, 64, s), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyDtoHAsync(out.data(), b, 64, s), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(out, in);
  std::vector<float> zeros(16, 1.0f);
  ASSERT_EQ(cu.cuMemcpyDtoH(zeros.data(), a, 64), CUDA_SUCCESS);
  EXPECT_EQ(zeros, std::vector<float>(16, 0.0f));
  cu.cuStreamDestroy(s);
  cu.cuMemFree(a);
  cu.cuMemFree(b);
}

TEST_F(DriverDouble, QueryReportsPendingWork) {
  CUstream s = stream();
  CUevent e = event();
  std::atomic<bool> go{false};
  auto block = [](void *flag) {
    while (!static_cast<std::atomic<bool> *>(flag)->load())
      std::this_thread::yield();
  };
  ASSERT_EQ(driver().cuLaunchHostFunc(s, block, &go), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuEventRecord(e, s), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuStreamQuery(s), kNotReady);
  EXPECT_EQ(cu.cuEventQuery(e), kNotReady);
  go = true;
  ASSERT_EQ(driver().cuEventSynchronize(e), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuEventQuery(e), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuStreamQuery(s), CUDA_SUCCESS);
  cu.cuEventDestroy(e);
  cu.cuStreamDestroy(s);
}

TEST_F(DriverDouble, OutOfBoundsCopyFails) {
  EXPECT_DEATH(
      ([&] {
        CUdeviceptr p = alloc(64);
        std::vector<uint8_t> host(65);
        cleaveDoubleSetCommand("command 7 (copy x)");
        cu.cuMemcpyHtoD(p, host.data(), 65);
      })(),
      "'cuMemcpyHtoD' \\(plan command: command 7 \\(copy x\\)\\) on host "
      "thread #[0-9]+ writes 'destination'.*runs 1 bytes past the end of "
      "allocation #[0-9]+");
}

TEST_F(DriverDouble, UseAfterFreeFails) {
  EXPECT_DEATH(([&] {
                 CUstream s = stream();
                 CUdeviceptr p = alloc(64);
                 cu.cuMemFree(p);
                 cu.cuMemsetD8Async(p, 0, 16, s);
               })(),
               "cuMemsetD8Async.*freed by cuMemFree.*use after free");
}

TEST_F(DriverDouble, PageLockedHostMemoryTakesCopies) {
  CUdeviceptr d = alloc(64);
  void *host = nullptr;
  ASSERT_EQ(cu.cuMemHostAlloc(&host, 64, 0), CUDA_SUCCESS);
  std::vector<uint8_t> pattern(64);
  for (size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = static_cast<uint8_t>(i * 7);
  ASSERT_EQ(cu.cuMemcpyHtoD(d, pattern.data(), 64), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyDtoH(host, d, 64), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(host, pattern.data(), 64), 0);
  EXPECT_EQ(cu.cuMemFreeHost(host), CUDA_SUCCESS);
  EXPECT_NE(cu.cuMemHostAlloc(&host, 0, 0), CUDA_SUCCESS);
  cu.cuMemFree(d);
}

TEST_F(DriverDouble, FreeingHostMemoryNotFromHostAllocFails) {
  EXPECT_DEATH(([&] {
                 std::vector<uint8_t> pageable(16);
                 cu.cuMemFreeHost(pageable.data());
               })(),
               "cuMemFreeHost: a pointer that cuMemHostAlloc did not return");
}

TEST_F(DriverDouble, FreedMemoryIsPoisoned) {
  CUdeviceptr p = alloc(16);
  ASSERT_EQ(cu.cuMemFree(p), CUDA_SUCCESS);
  float f = 0.0f;
  std::memcpy(&f, cleave::cudadouble::hostPointer(p),
              sizeof(f)); // still mapped (quarantine)
  EXPECT_TRUE(std::isnan(f));
  CUdeviceptr q = alloc(16);
  EXPECT_NE(q, p); // not handed out again at once
  cu.cuMemFree(q);
}

TEST_F(DriverDouble, DoubleFreeFails) {
  EXPECT_DEATH(([&] {
                 CUdeviceptr p = alloc(64);
                 cu.cuMemFree(p);
                 cu.cuMemFree(p);
               })(),
               "cuMemFree: 0x[0-9a-f]+ was already freed.*double free");
}

TEST_F(DriverDouble, FreeWhileAStreamUsesItFails) {
  EXPECT_DEATH(([&] {
                 CUstream s = stream();
                 CUdeviceptr p = alloc(64);
                 cu.cuMemsetD8Async(p, 1, 64, s);
                 cu.cuMemFree(p); // no cuStreamSynchronize
               })(),
               "cuMemFree: allocation #[0-9]+.*freed on host thread.*while "
               "'cuMemsetD8Async' on stream #[0-9]+.*may still use it");
}

TEST_F(DriverDouble, MissingEventWaitIsARace) {
  EXPECT_DEATH(
      ([&] {
        CUstream producer = stream(), consumer = stream();
        CUdeviceptr p = alloc(64);
        cu.cuStreamSynchronize(producer);
        cleaveDoubleSetCommand("command 1 (fill)");
        cu.cuMemsetD8Async(p, 3, 64, producer);
        cleaveDoubleSetCommand("command 2 (read)");
        std::vector<uint8_t> host(32);
        cu.cuMemcpyDtoHAsync(host.data(), p + 16, 32, consumer);
      })(),
      "race on allocation #[0-9]+: 'cuMemcpyDtoHAsync' \\(plan command: "
      "command 2 \\(read\\)\\) on stream #[0-9]+ reads 'source'.*is not "
      "ordered after 'cuMemsetD8Async' \\(plan command: command 1 "
      "\\(fill\\)\\) on stream #[0-9]+, which writes 'destination'");
}

TEST_F(DriverDouble, EventWaitOrdersTheStreams) {
  CUstream producer = stream(), consumer = stream();
  CUevent done = event();
  CUdeviceptr p = alloc(64);
  ASSERT_EQ(cu.cuMemsetD8Async(p, 3, 64, producer), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuEventRecord(done, producer), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamWaitEvent(consumer, done, 0), CUDA_SUCCESS);
  std::vector<uint8_t> host(32, 0);
  ASSERT_EQ(cu.cuMemcpyDtoHAsync(host.data(), p + 16, 32, consumer),
            CUDA_SUCCESS);
  // A write on the consumer after its read, then a host read: ordered by
  // the synchronize.
  ASSERT_EQ(cu.cuMemsetD8Async(p, 5, 8, consumer), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(consumer), CUDA_SUCCESS);
  EXPECT_EQ(host, std::vector<uint8_t>(32, 3));
  uint8_t first = 0;
  ASSERT_EQ(cu.cuMemcpyDtoH(&first, p, 1), CUDA_SUCCESS);
  EXPECT_EQ(first, 5);
  // The producer was never synchronized, but the consumer's synchronize
  // covers it through the event: freeing is ordered.
  EXPECT_EQ(cu.cuMemFree(p), CUDA_SUCCESS);
  cu.cuEventDestroy(done);
  cu.cuStreamDestroy(producer);
  cu.cuStreamDestroy(consumer);
}

void waitForFlag(void *flag) {
  while (!static_cast<std::atomic<bool> *>(flag)->load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
void setFlag(void *flag) {
  static_cast<std::atomic<bool> *>(flag)->store(true);
}

TEST_F(DriverDouble, WaitIsForTheRecordingBeforeIt) {
  // An event recorded on a blocked stream, waited for, then recorded again
  // on an idle stream: the wait is for the first recording, which has not
  // run, even though the second has.
  CUstream blocked = stream(), idle = stream(), waiter = stream();
  CUevent e = event();
  std::atomic<bool> release{false}, ran{false};
  ASSERT_EQ(driver().cuLaunchHostFunc(blocked, waitForFlag, &release),
            CUDA_SUCCESS);
  ASSERT_EQ(cu.cuEventRecord(e, blocked), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamWaitEvent(waiter, e, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuEventRecord(e, idle), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(idle), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuLaunchHostFunc(waiter, setFlag, &ran), CUDA_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(ran.load());
  release = true;
  ASSERT_EQ(cu.cuStreamSynchronize(waiter), CUDA_SUCCESS);
  EXPECT_TRUE(ran.load());
  ASSERT_EQ(cu.cuStreamSynchronize(blocked), CUDA_SUCCESS);
  cu.cuEventDestroy(e);
  for (CUstream s : {blocked, idle, waiter})
    cu.cuStreamDestroy(s);
}

TEST_F(DriverDouble, WaitOnAnEventNeverRecordedIsANoOp) {
  CUstream s = stream();
  CUevent e = event();
  EXPECT_EQ(cu.cuStreamWaitEvent(s, e, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuEventQuery(e), CUDA_SUCCESS);
  cu.cuEventDestroy(e);
  cu.cuStreamDestroy(s);
}

void countCall(void *counter) { ++*static_cast<std::atomic<int> *>(counter); }

TEST_F(DriverDouble, GraphReplaysForkAndJoinAtEveryLaunch) {
  CUstream main = stream(), side = stream();
  CUevent forkEvent = event(), joinEvent = event();
  CUdeviceptr a = alloc(64), b = alloc(64);
  std::vector<uint8_t> host(64, 0);
  std::atomic<int> mainCalls{0}, sideCalls{0};
  ASSERT_EQ(cu.cuStreamBeginCapture(main, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemsetD8Async(a, 9, 64, main), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuLaunchHostFunc(main, countCall, &mainCalls),
            CUDA_SUCCESS);
  ASSERT_EQ(cu.cuEventRecord(forkEvent, main), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamWaitEvent(side, forkEvent, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyDtoDAsync(b, a, 64, side), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuLaunchHostFunc(side, countCall, &sideCalls),
            CUDA_SUCCESS);
  ASSERT_EQ(cu.cuEventRecord(joinEvent, side), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamWaitEvent(main, joinEvent, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyDtoHAsync(host.data(), b, 64, main), CUDA_SUCCESS);
  CUgraph graph = nullptr;
  ASSERT_EQ(cu.cuStreamEndCapture(main, &graph), CUDA_SUCCESS);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(mainCalls, 0); // captured, not run
  EXPECT_EQ(host[0], 0);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(cu.cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  for (int i = 1; i <= 3; ++i) {
    host.assign(64, 0);
    ASSERT_EQ(cu.cuGraphLaunch(exec, main), CUDA_SUCCESS);
    ASSERT_EQ(cu.cuStreamSynchronize(main), CUDA_SUCCESS);
    EXPECT_EQ(mainCalls, i);
    EXPECT_EQ(sideCalls, i);
    EXPECT_EQ(host, std::vector<uint8_t>(64, 9));
  }
  // The join edge orders the side stream before main's synchronize.
  EXPECT_EQ(cu.cuMemFree(b), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuMemFree(a), CUDA_SUCCESS);
  cu.cuGraphExecDestroy(exec);
  cu.cuGraphDestroy(graph);
  cu.cuEventDestroy(forkEvent);
  cu.cuEventDestroy(joinEvent);
  cu.cuStreamDestroy(side);
  cu.cuStreamDestroy(main);
}

TEST_F(DriverDouble, ReplayIsCheckedLikeEagerWork) {
  EXPECT_DEATH(
      ([&] {
        CUstream main = stream(), other = stream();
        CUdeviceptr a = alloc(64);
        cu.cuStreamBeginCapture(main, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
        cu.cuMemsetD8Async(a, 1, 64, main);
        CUgraph graph = nullptr;
        CUgraphExec exec = nullptr;
        cu.cuStreamEndCapture(main, &graph);
        cu.cuGraphInstantiate(&exec, graph, 0);
        cu.cuMemsetD8Async(a, 2, 64, other); // not ordered with the replay
        cu.cuGraphLaunch(exec, main);
      })(),
      "race on allocation.*'cuMemsetD8Async \\(graph #[0-9]+\\)'.*is not "
      "ordered after 'cuMemsetD8Async' on stream");
}

TEST_F(DriverDouble, UnjoinedCaptureIsAnError) {
  CUstream main = stream(), side = stream();
  CUevent forkEvent = event();
  std::atomic<int> calls{0};
  ASSERT_EQ(cu.cuStreamBeginCapture(main, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  ASSERT_EQ(cu.cuEventRecord(forkEvent, main), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamWaitEvent(side, forkEvent, 0), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuLaunchHostFunc(side, countCall, &calls), CUDA_SUCCESS);
  CUgraph graph = reinterpret_cast<CUgraph>(1);
  EXPECT_EQ(cu.cuStreamEndCapture(main, &graph), kCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(calls, 0);
  // Both streams left capture mode: ordinary work runs again.
  ASSERT_EQ(driver().cuLaunchHostFunc(side, countCall, &calls), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(side), CUDA_SUCCESS);
  EXPECT_EQ(calls, 1);
  cu.cuEventDestroy(forkEvent);
  cu.cuStreamDestroy(side);
  cu.cuStreamDestroy(main);
}

TEST_F(DriverDouble, SynchronousCallsDuringCaptureAreRefused) {
  CUstream s = stream();
  CUdeviceptr p = alloc(16);
  uint8_t byte = 0;
  ASSERT_EQ(cu.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  EXPECT_EQ(cu.cuStreamSynchronize(s), kCaptureUnsupported);
  EXPECT_EQ(cu.cuMemcpyHtoD(p, &byte, 1), kCaptureUnsupported);
  CUgraph graph = nullptr;
  EXPECT_EQ(cu.cuStreamEndCapture(s, &graph), kCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(cu.cuMemcpyHtoD(p, &byte, 1), CUDA_SUCCESS);
  cu.cuMemFree(p);
  cu.cuStreamDestroy(s);
}

TEST_F(DriverDouble, EnqueueIsTheWayOtherDoublesQueueWork) {
  using cleave::cudadouble::Access;
  using cleave::cudadouble::enqueue;
  CUstream s = stream();
  CUdeviceptr p = alloc(64);
  std::atomic<int> ran{0};
  // The legacy stream runs the work before returning.
  ASSERT_EQ(enqueue(nullptr, "legacy fill", {Access{p, 64, true, "buffer"}},
                    [&] {
                      std::memset(cleave::cudadouble::hostPointer(p), 7, 64);
                      ++ran;
                    }),
            CUDA_SUCCESS);
  EXPECT_EQ(ran, 1);
  ASSERT_EQ(enqueue(s, "stream read", {Access{p, 64, false, "buffer"}},
                    [&] { ++ran; }),
            CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(ran, 2);
  cu.cuStreamDestroy(s);
  EXPECT_EQ(enqueue(s, "dead stream", {}, [] {}), 400);
  cu.cuMemFree(p);
}

TEST_F(DriverDouble, RankThreadsRunIndependently) {
  auto rank = [this](int device, float *result) {
    CUcontext c = nullptr;
    ASSERT_EQ(cu.cuDevicePrimaryCtxRetain(&c, device), CUDA_SUCCESS);
    ASSERT_EQ(cu.cuCtxSetCurrent(c), CUDA_SUCCESS);
    CUstream s = stream();
    CUdeviceptr p = alloc(4 * 1024);
    std::vector<float> host(1024, float(device));
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ(cu.cuMemcpyHtoDAsync(p, host.data(), 4096, s), CUDA_SUCCESS);
      ASSERT_EQ(cu.cuMemcpyDtoHAsync(host.data(), p, 4096, s), CUDA_SUCCESS);
      ASSERT_EQ(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
    }
    *result = host[1023];
    EXPECT_EQ(cu.cuMemFree(p), CUDA_SUCCESS);
    cu.cuStreamDestroy(s);
    cu.cuDevicePrimaryCtxRelease(device);
  };
  float r1 = 0, r2 = 0;
  std::thread t1(rank, 1, &r1), t2(rank, 2, &r2);
  t1.join();
  t2.join();
  EXPECT_EQ(r1, 1.0f);
  EXPECT_EQ(r2, 2.0f);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

std::vector<uint8_t> testKernelObject() {
  std::ifstream in(CLEAVE_DOUBLE_TEST_KERNELS, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A stand-in for a plan's cubin: the double finds host code by pointer.
const char kFakeCubin[] = "\x7f"
                          "ELF fake cubin";

/// Attaches the test kernels: cleave_test_args (16, 16, 24 bytes; writes
/// the last) and cleave_test_add (three 16-byte buffers; writes the last).
void attachTestKernels(uint64_t addOutBytes = 16) {
  std::vector<uint8_t> object = testKernelObject();
  ASSERT_FALSE(object.empty()) << CLEAVE_DOUBLE_TEST_KERNELS;
  const char *names[] = {"cleave_test_args", "cleave_test_add"};
  uint32_t numArgs[] = {3, 3};
  uint64_t argBytes[] = {16, 16, 24, 16, 16, addOutBytes};
  uint8_t argWrites[] = {0, 0, 1, 0, 0, 1};
  ASSERT_EQ(cleaveDoubleAttachHostKernels(kFakeCubin, object.data(),
                                          object.size(), names, numArgs,
                                          argBytes, argWrites, 2),
            0);
}

TEST_F(DriverDouble, HostKernelGetsItsArguments) {
  attachTestKernels();
  CUmodule module = nullptr;
  ASSERT_EQ(cu.cuModuleLoadData(&module, kFakeCubin), CUDA_SUCCESS);
  CUfunction argsFn = nullptr, addFn = nullptr, missing = nullptr;
  ASSERT_EQ(cu.cuModuleGetFunction(&argsFn, module, "cleave_test_args"),
            CUDA_SUCCESS);
  ASSERT_EQ(cu.cuModuleGetFunction(&addFn, module, "cleave_test_add"),
            CUDA_SUCCESS);
  EXPECT_EQ(cu.cuModuleGetFunction(&missing, module, "nope"), 500);
  CUstream s = stream();
  CUdeviceptr a = alloc(16), b = alloc(16), out = alloc(24);
  float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40};
  ASSERT_EQ(cu.cuMemcpyHtoD(a, av, 16), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemcpyHtoD(b, bv, 16), CUDA_SUCCESS);
  void *params[] = {&a, &b, &out};
  ASSERT_EQ(cu.cuLaunchKernel(argsFn, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr),
            CUDA_SUCCESS);
  uint64_t seen[3] = {};
  ASSERT_EQ(cu.cuMemcpyDtoHAsync(seen, out, 24, s), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuLaunchKernel(addFn, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr),
            CUDA_SUCCESS);
  float sum[4] = {};
  ASSERT_EQ(cu.cuMemcpyDtoHAsync(sum, out, 16, s), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
  EXPECT_EQ(seen[0], a);
  EXPECT_EQ(seen[1], b);
  EXPECT_EQ(seen[2], out);
  EXPECT_EQ(sum[0], 11.0f);
  EXPECT_EQ(sum[3], 44.0f);
  EXPECT_EQ(
      cu.cuFuncSetAttribute(
          addFn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 227 * 1024),
      CUDA_SUCCESS);
  EXPECT_EQ(cu.cuFuncSetAttribute(
                addFn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                227 * 1024 + 1),
            1);
  cu.cuStreamDestroy(s);
  cu.cuModuleUnload(module);
  for (CUdeviceptr p : {a, b, out})
    cu.cuMemFree(p);
}

TEST_F(DriverDouble, HostKernelArgumentOutOfBoundsFails) {
  EXPECT_DEATH(([&] {
                 attachTestKernels(/*addOutBytes=*/32);
                 CUmodule module = nullptr;
                 CUfunction addFn = nullptr;
                 cu.cuModuleLoadData(&module, kFakeCubin);
                 cu.cuModuleGetFunction(&addFn, module, "cleave_test_add");
                 CUstream s = stream();
                 CUdeviceptr a = alloc(16), b = alloc(16), out = alloc(16);
                 void *params[] = {&a, &b, &out};
                 cu.cuLaunchKernel(addFn, 1, 1, 1, 1, 1, 1, 0, s, params,
                                   nullptr);
               })(),
               "'cuLaunchKernel\\(cleave_test_add\\)' on stream #[0-9]+ writes "
               "'argument 2'.*runs 16 bytes past the end");
}

TEST_F(DriverDouble, ImageWithoutHostKernelsIsInvalid) {
  static const char otherCubin[] = "\x7f"
                                   "ELF another";
  CUmodule module = nullptr;
  testing::internal::CaptureStderr();
  EXPECT_EQ(cu.cuModuleLoadData(&module, otherCubin), kInvalidImage);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("compile it with --cuda-host-kernels"), std::string::npos)
      << err;
}

TEST_F(DriverDouble, AttentionPtxRunsOnTheHost) {
  static const char ptx[] =
      "//\n// Generated by NVIDIA NVVM Compiler\n.version 8.0\n"
      ".target sm_90\n.visible .entry cleave_attention_forward(\n"
      ".param .align 8 .b8 cleave_attention_forward_param_0[200]\n)\n{ret;}\n";
  CUmodule module = nullptr;
  ASSERT_EQ(cu.cuModuleLoadData(&module, ptx), CUDA_SUCCESS);
  CUfunction fwd = nullptr;
  ASSERT_EQ(cu.cuModuleGetFunction(&fwd, module, "cleave_attention_forward"),
            CUDA_SUCCESS);
  // One query, two keys, head dimension 1: out = softmax([0, 1]) . [2, 4].
  CUstream s = stream();
  CUdeviceptr q = alloc(4), k = alloc(8), v = alloc(8), out = alloc(4);
  float qv = 1, kv[2] = {0, 1}, vv[2] = {2, 4};
  cu.cuMemcpyHtoD(q, &qv, 4);
  cu.cuMemcpyHtoD(k, kv, 8);
  cu.cuMemcpyHtoD(v, vv, 8);
  AttentionArgs a{};
  a.q = q;
  a.k = k;
  a.v = v;
  a.result = out;
  a.dtype = a.doutDType = a.gradDType = 1;
  a.B = a.Hq = a.Hkv = a.G = a.Sq = a.D = a.Dv = 1;
  a.Skv = 2;
  a.biasB = a.biasH = a.biasSq = 1;
  a.scale = 1.0f;
  void *params[] = {&a};
  ASSERT_EQ(cu.cuLaunchKernel(fwd, 1, 1, 1, kAttentionThreads, 1, 1, 0, s,
                              params, nullptr),
            CUDA_SUCCESS);
  float result = 0;
  ASSERT_EQ(cu.cuMemcpyDtoHAsync(&result, out, 4, s), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuStreamSynchronize(s), CUDA_SUCCESS);
  float e = std::exp(1.0f);
  EXPECT_NEAR(result, (2.0f + 4.0f * e) / (1.0f + e), 1e-5f);
  // The result's extent comes from the arguments: Sq = 2 needs 8 bytes.
  a.Sq = 2;
  EXPECT_DEATH(cu.cuLaunchKernel(fwd, 1, 1, 1, kAttentionThreads, 1, 1, 0, s,
                                 params, nullptr),
               "cleave_attention_forward.*reads 'q'.*past the end");
  cu.cuStreamDestroy(s);
  cu.cuModuleUnload(module);
  for (CUdeviceptr p : {q, k, v, out})
    cu.cuMemFree(p);
}

} // namespace
