//===- DoublesTsanTest.cpp - The host doubles under ThreadSanitizer ------===//
//
// Built with -fsanitize=thread together with TSan builds of the libcuda and
// NCCL doubles (cleave-doubles-tsan-tests). Every stream of the doubles is a
// worker thread, so work on two streams that no event orders is a real data
// race, which ThreadSanitizer reports by itself, beside the driver double's
// own happens-before checker:
//  - an ordered step (a fill, an event edge to a second stream, an NCCL
//    all-reduce across two rank threads, a copy back) runs with no report;
//  - two streams touching the same bytes without the event wait are
//    reported ("ThreadSanitizer: data race"), and with it they are not.
//
//===----------------------------------------------------------------------===//

#include "CudaApi.h"
#include "DeviceDouble.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

using namespace cleave::rt::cuda;

extern "C" {
CUresult cuInit(unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamWaitEvent(CUstream, CUevent, unsigned);
CUresult cuEventCreate(CUevent *, unsigned);
CUresult cuEventDestroy_v2(CUevent);
CUresult cuEventRecord(CUevent, CUstream);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemsetD8Async(CUdeviceptr, unsigned char, size_t, CUstream);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);
CUresult cuLaunchHostFunc(CUstream, void (*)(void *), void *);

#define CLEAVE_NCCL_DECLARE(name, sym, type) std::remove_pointer_t<type> name;
CLEAVE_NCCL_SYMBOLS(CLEAVE_NCCL_DECLARE)
#undef CLEAVE_NCCL_DECLARE
}

namespace {

/// A context on device `device`, current on the calling thread.
void useDevice(int device) {
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, device), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

/// Two streams' host functions on the same bytes. The reader reads after
/// the writer has written and, without the event wait, the writer stays in
/// its function until the reader has read; the flags are relaxed atomics,
/// which order nothing for ThreadSanitizer, so the two accesses meet while
/// neither stream thread has passed the other: only an event edge could
/// order them.
struct Shared {
  CUdeviceptr bytes = 0;
  std::atomic<bool> written{false}, read{false};
  bool spin = false;
};

void writeBytes(void *data) {
  auto *s = static_cast<Shared *>(data);
  std::memset(cleave::cudadouble::hostPointer(s->bytes), 7, 64);
  s->written.store(true, std::memory_order_relaxed);
  while (s->spin && !s->read.load(std::memory_order_relaxed))
    std::this_thread::yield();
}

void readBytes(void *data) {
  auto *s = static_cast<Shared *>(data);
  while (!s->written.load(std::memory_order_relaxed))
    std::this_thread::yield();
  volatile uint8_t sum = 0;
  const auto *p =
      static_cast<const uint8_t *>(cleave::cudadouble::hostPointer(s->bytes));
  for (int i = 0; i < 64; ++i)
    sum = sum + p[i];
  s->read.store(true, std::memory_order_relaxed);
}

/// Writes on one stream, reads on another; with `wait`, the reader's
/// stream waits for an event recorded after the write.
void twoStreams(bool wait) {
  useDevice(0);
  CUstream writer = nullptr, reader = nullptr;
  CUevent written = nullptr;
  ASSERT_EQ(cuStreamCreate(&writer, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&reader, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuEventCreate(&written, 2), CUDA_SUCCESS);
  Shared s;
  ASSERT_EQ(cuMemAlloc_v2(&s.bytes, 64), CUDA_SUCCESS);
  s.spin = !wait;
  ASSERT_EQ(cuLaunchHostFunc(writer, writeBytes, &s), CUDA_SUCCESS);
  if (wait) {
    ASSERT_EQ(cuEventRecord(written, writer), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamWaitEvent(reader, written, 0), CUDA_SUCCESS);
  }
  ASSERT_EQ(cuLaunchHostFunc(reader, readBytes, &s), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(reader), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(writer), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree_v2(s.bytes), CUDA_SUCCESS);
  cuEventDestroy_v2(written);
  cuStreamDestroy_v2(writer);
  cuStreamDestroy_v2(reader);
}

} // namespace

TEST(DoublesUnderTsan, AnOrderedStepHasNoRace) {
  // Two rank threads, each: fill on its compute stream, an event edge to
  // its communication stream, an all-reduce there, an edge back, a copy.
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  float got[2] = {0, 0};
  auto rank = [&](int r) {
    useDevice(r);
    CUstream compute = nullptr, comm = nullptr;
    CUevent ready = nullptr, done = nullptr;
    ASSERT_EQ(cuStreamCreate(&compute, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&comm, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuEventCreate(&ready, 2), CUDA_SUCCESS);
    ASSERT_EQ(cuEventCreate(&done, 2), CUDA_SUCCESS);
    ncclComm_t nccl = nullptr;
    ASSERT_EQ(ncclCommInitRank(&nccl, 2, id, r), ncclSuccess);
    CUdeviceptr buf = 0;
    ASSERT_EQ(cuMemAlloc_v2(&buf, 4 * sizeof(float)), CUDA_SUCCESS);
    // Zero the buffer, then write r + 1 into it from the compute stream's
    // thread.
    ASSERT_EQ(cuMemsetD8Async(buf, 0, 4 * sizeof(float), compute),
              CUDA_SUCCESS);
    struct Fill {
      CUdeviceptr buf;
      float value;
    } fill{buf, static_cast<float>(r + 1)};
    ASSERT_EQ(cuLaunchHostFunc(
                  compute,
                  [](void *data) {
                    auto *f = static_cast<Fill *>(data);
                    auto *p = static_cast<float *>(
                        cleave::cudadouble::hostPointer(f->buf));
                    for (int i = 0; i < 4; ++i)
                      p[i] += f->value;
                  },
                  &fill),
              CUDA_SUCCESS);
    ASSERT_EQ(cuEventRecord(ready, compute), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamWaitEvent(comm, ready, 0), CUDA_SUCCESS);
    ASSERT_EQ(ncclAllReduce(reinterpret_cast<void *>(buf),
                            reinterpret_cast<void *>(buf), 4, ncclFloat32,
                            ncclSum, nccl, comm),
              ncclSuccess);
    ASSERT_EQ(cuEventRecord(done, comm), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamWaitEvent(compute, done, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(compute), CUDA_SUCCESS);
    float host[4] = {0, 0, 0, 0};
    ASSERT_EQ(cuMemcpyDtoH_v2(host, buf, sizeof(host)), CUDA_SUCCESS);
    got[r] = host[0];
    ASSERT_EQ(ncclCommDestroy(nccl), ncclSuccess);
    ASSERT_EQ(cuMemFree_v2(buf), CUDA_SUCCESS);
    for (CUevent e : {ready, done})
      cuEventDestroy_v2(e);
    for (CUstream s : {compute, comm})
      cuStreamDestroy_v2(s);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(got[0], 3.0f);
  EXPECT_EQ(got[1], 3.0f);
}

TEST(DoublesUnderTsan, WithTheEventWaitTheStreamsDoNotRace) {
  twoStreams(/*wait=*/true);
}

TEST(DoublesUnderTsan, WithoutTheEventWaitTsanReportsTheRace) {
  // The driver double's own checker sees nothing here (host functions
  // declare no accesses); ThreadSanitizer alone reports the race and ends
  // the process with its exit code.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The child (this binary run again) stops at the first report.
  setenv("TSAN_OPTIONS", "halt_on_error=1 exitcode=66", 1);
  EXPECT_EXIT(twoStreams(/*wait=*/false), ::testing::ExitedWithCode(66),
              "ThreadSanitizer: data race");
}
