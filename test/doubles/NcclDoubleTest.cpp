//===- NcclDoubleTest.cpp - Tests of the NCCL host double -----------------===//
//
// Rank threads, each with its own stream and memory from the driver double,
// run every collective against a host reference; the failure tests check
// the sequence check, fault injection and abort; one test runs two ranks in
// two processes (the test binary spawns itself).
//
//===----------------------------------------------------------------------===//

#include "CudaApi.h"
#include "Half.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

using namespace cleave::rt::cuda;

extern "C" {
CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuStreamCreate(CUstream *, unsigned);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamSynchronize(CUstream);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
CUresult cuMemcpyDtoH_v2(void *, CUdeviceptr, size_t);

#define CLEAVE_NCCL_DECLARE(name, sym, type) std::remove_pointer_t<type> name;
CLEAVE_NCCL_SYMBOLS(CLEAVE_NCCL_DECLARE)
#undef CLEAVE_NCCL_DECLARE
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t *, void *);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *, int, ncclUniqueId, int,
                                    void *);
ncclResult_t ncclCommFinalize(ncclComm_t);
extern char **environ;
}

namespace {

/// Whether `text` contains `part`, saying both when not.
::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << part << "\"";
}

CUcontext context() {
  static CUcontext ctx = [] {
    CUcontext c = nullptr;
    CUdevice d = 0;
    EXPECT_EQ(cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(cuDeviceGet(&d, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuDevicePrimaryCtxRetain(&c, d), CUDA_SUCCESS);
    return c;
  }();
  return ctx;
}

/// Device memory from the driver double.
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) {
    EXPECT_EQ(cuMemAlloc_v2(&ptr, bytes), CUDA_SUCCESS);
  }
  ~DeviceBuffer() { cuMemFree_v2(ptr); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  void *get(size_t offset = 0) const {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(ptr + offset));
  }
  void upload(const void *data, size_t n) {
    EXPECT_EQ(cuMemcpyHtoD_v2(ptr, data, n), CUDA_SUCCESS);
  }
  template <typename T> void upload(const std::vector<T> &v) {
    upload(v.data(), v.size() * sizeof(T));
  }
  template <typename T> std::vector<T> download(size_t n) const {
    std::vector<T> v(n);
    EXPECT_EQ(cuMemcpyDtoH_v2(v.data(), ptr, n * sizeof(T)), CUDA_SUCCESS);
    return v;
  }

private:
  CUdeviceptr ptr = 0;
};

/// One rank thread's stream and communicator.
struct Rank {
  int rank = 0, n = 0;
  CUstream stream = nullptr;
  ncclComm_t comm = nullptr;
  const ncclUniqueId *id = nullptr;

  void sync() { ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS); }
  ncclResult_t asyncError() {
    ncclResult_t e = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &e), ncclSuccess);
    return e;
  }
};

/// Runs `body` on n rank threads. With `init`, each rank joins a fresh
/// communicator first; after `body`, each synchronizes its stream and
/// destroys its communicator (unless body cleared it).
void runRanks(int n, const std::function<void(Rank &)> &body,
              bool init = true) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  CUcontext ctx = context();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
      Rank rank;
      rank.rank = r;
      rank.n = n;
      rank.id = &id;
      ASSERT_EQ(cuStreamCreate(&rank.stream, CU_STREAM_NON_BLOCKING),
                CUDA_SUCCESS);
      if (init) {
        ASSERT_EQ(ncclCommInitRank(&rank.comm, n, id, r), ncclSuccess)
            << ncclGetLastError(nullptr);
      }
      body(rank);
      EXPECT_EQ(cuStreamSynchronize(rank.stream), CUDA_SUCCESS);
      if (rank.comm) {
        EXPECT_EQ(ncclCommDestroy(rank.comm), ncclSuccess);
      }
      EXPECT_EQ(cuStreamDestroy_v2(rank.stream), CUDA_SUCCESS);
    });
  for (std::thread &t : threads)
    t.join();
}

/// Sets an environment variable for a scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    setenv(name, value, 1);
  }
  ~ScopedEnv() { unsetenv(name); }

private:
  const char *name;
};

//===----------------------------------------------------------------------===//
// Host values of every NCCL type
//===----------------------------------------------------------------------===//

const ncclDataType_t kAllTypes[] = {
    ncclInt8,   ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
    ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};

size_t typeSize(ncclDataType_t t) { return ncclTypeSize(t); }

bool isUnsigned(ncclDataType_t t) {
  return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

bool isInteger(ncclDataType_t t) {
  return t == ncclInt8 || t == ncclInt32 || t == ncclInt64 || isUnsigned(t);
}

template <typename T> void put(std::vector<uint8_t> &b, size_t i, T v) {
  std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}
template <typename T> T get(const std::vector<uint8_t> &b, size_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}

/// Encodes values (exactly representable in t) as elements of type t.
std::vector<uint8_t> encode(ncclDataType_t t, const std::vector<double> &v) {
  std::vector<uint8_t> b(v.size() * typeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t) {
    case ncclInt8:
      put<int8_t>(b, i, int8_t(v[i]));
      break;
    case ncclUint8:
      put<uint8_t>(b, i, uint8_t(v[i]));
      break;
    case ncclInt32:
      put<int32_t>(b, i, int32_t(v[i]));
      break;
    case ncclUint32:
      put<uint32_t>(b, i, uint32_t(v[i]));
      break;
    case ncclInt64:
      put<int64_t>(b, i, int64_t(v[i]));
      break;
    case ncclUint64:
      put<uint64_t>(b, i, uint64_t(v[i]));
      break;
    case ncclFloat16:
      put<uint16_t>(b, i, cleave::rt::floatToHalf(float(v[i])));
      break;
    case ncclBfloat16:
      put<uint16_t>(b, i, cleave::rt::floatToBf16(float(v[i])));
      break;
    case ncclFloat32:
      put<float>(b, i, float(v[i]));
      break;
    default:
      put<double>(b, i, v[i]);
      break;
    }
  }
  return b;
}

std::vector<double> decode(ncclDataType_t t, const std::vector<uint8_t> &b) {
  std::vector<double> v(b.size() / typeSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t) {
    case ncclInt8:
      v[i] = get<int8_t>(b, i);
      break;
    case ncclUint8:
      v[i] = get<uint8_t>(b, i);
      break;
    case ncclInt32:
      v[i] = get<int32_t>(b, i);
      break;
    case ncclUint32:
      v[i] = get<uint32_t>(b, i);
      break;
    case ncclInt64:
      v[i] = double(get<int64_t>(b, i));
      break;
    case ncclUint64:
      v[i] = double(get<uint64_t>(b, i));
      break;
    case ncclFloat16:
      v[i] = cleave::rt::halfToFloat(get<uint16_t>(b, i));
      break;
    case ncclBfloat16:
      v[i] = cleave::rt::bf16ToFloat(get<uint16_t>(b, i));
      break;
    case ncclFloat32:
      v[i] = get<float>(b, i);
      break;
    default:
      v[i] = get<double>(b, i);
      break;
    }
  }
  return v;
}

/// Small values whose sums, products and quarters are exact in every type.
double inputValue(ncclDataType_t t, int rank, size_t i) {
  int v = int((rank * 7 + i * 3) % 6);
  return isUnsigned(t) ? v % 4 : v - 2;
}

/// The reference reduction of the ranks' inputs at element i.
double referenceReduce(ncclDataType_t t, ncclRedOp_t op, int n, size_t i) {
  double acc = inputValue(t, 0, i);
  for (int q = 1; q < n; ++q) {
    double v = inputValue(t, q, i);
    switch (op) {
    case ncclProd:
      acc *= v;
      break;
    case ncclMax:
      acc = std::max(acc, v);
      break;
    case ncclMin:
      acc = std::min(acc, v);
      break;
    default:
      acc += v;
      break;
    }
  }
  if (op == ncclAvg)
    acc = isInteger(t) ? std::trunc(acc / n) : acc / n;
  return acc;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

TEST(NcclDouble, VersionErrorStringsAndBadHandles) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 22809);
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidUsage), "invalid usage");
  int count = 0;
  auto bogus = reinterpret_cast<ncclComm_t>(uintptr_t(0x1234));
  EXPECT_EQ(ncclCommCount(bogus, &count), ncclInvalidArgument);
  EXPECT_TRUE(
      contains(ncclGetLastError(nullptr), "is not a live communicator"));
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ncclGetUniqueId"));
}

TEST(NcclDouble, AllReduceMatchesTheReferenceForEveryTypeAndOp) {
  const int n = 4;
  const size_t count = 37;
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  runRanks(n, [&](Rank &rk) {
    for (ncclDataType_t t : kAllTypes) {
      std::vector<double> in(count);
      for (size_t i = 0; i < count; ++i)
        in[i] = inputValue(t, rk.rank, i);
      std::vector<uint8_t> bytes = encode(t, in);
      for (ncclRedOp_t op : ops) {
        DeviceBuffer send(bytes.size()), recv(bytes.size());
        send.upload(bytes);
        // Max runs in place (send == recv), as NCCL allows.
        void *out = op == ncclMax ? send.get() : recv.get();
        ASSERT_EQ(
            ncclAllReduce(send.get(), out, count, t, op, rk.comm, rk.stream),
            ncclSuccess);
        rk.sync();
        const DeviceBuffer &result = op == ncclMax ? send : recv;
        std::vector<double> got =
            decode(t, result.download<uint8_t>(bytes.size()));
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(got[i], referenceReduce(t, op, n, i))
              << "type " << t << " op " << op << " element " << i << " rank "
              << rk.rank;
      }
    }
    EXPECT_EQ(rk.asyncError(), ncclSuccess);
  });
}

TEST(NcclDouble, AllGatherReduceScatterAndBroadcast) {
  const int n = 4;
  const size_t count = 50;
  runRanks(n, [&](Rank &rk) {
    const int r = rk.rank;
    // All-gather of int32, the second time in place.
    std::vector<int32_t> mine(count);
    for (size_t i = 0; i < count; ++i)
      mine[i] = int32_t(r * 1000 + i);
    DeviceBuffer gsend(count * 4), grecv(n * count * 4);
    gsend.upload(mine);
    ASSERT_EQ(ncclAllGather(gsend.get(), grecv.get(), count, ncclInt32, rk.comm,
                            rk.stream),
              ncclSuccess);
    rk.sync();
    auto gathered = grecv.download<int32_t>(n * count);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(gathered[q * count + i], int32_t(q * 1000 + i));
    DeviceBuffer inplace(n * count * 4);
    inplace.upload(std::vector<int32_t>(n * count, -1));
    cuMemcpyHtoD_v2(reinterpret_cast<uintptr_t>(inplace.get(r * count * 4)),
                    mine.data(), count * 4);
    ASSERT_EQ(ncclAllGather(inplace.get(r * count * 4), inplace.get(), count,
                            ncclInt32, rk.comm, rk.stream),
              ncclSuccess);
    rk.sync();
    EXPECT_EQ(inplace.download<int32_t>(n * count), gathered);

    // Reduce-scatter of float: rank r gets block r of the sum.
    std::vector<float> blocks(n * count);
    for (size_t j = 0; j < blocks.size(); ++j)
      blocks[j] = float(r + 1) * float(j);
    DeviceBuffer rsend(n * count * 4), rrecv(count * 4);
    rsend.upload(blocks);
    ASSERT_EQ(ncclReduceScatter(rsend.get(), rrecv.get(), count, ncclFloat32,
                                ncclSum, rk.comm, rk.stream),
              ncclSuccess);
    // In place: recv is block r of send.
    ASSERT_EQ(ncclReduceScatter(rsend.get(), rsend.get(r * count * 4), count,
                                ncclFloat32, ncclMax, rk.comm, rk.stream),
              ncclSuccess);
    rk.sync();
    auto scattered = rrecv.download<float>(count);
    auto maxed = rsend.download<float>(n * count);
    for (size_t i = 0; i < count; ++i) {
      float j = float(r * count + i);
      ASSERT_EQ(scattered[i], 10.0f * j); // (1 + 2 + 3 + 4) j
      ASSERT_EQ(maxed[r * count + i], 4.0f * j);
    }

    // Broadcast from rank 2; rank 1's send buffer is not read.
    DeviceBuffer bsend(count * 8), brecv(count * 8);
    std::vector<double> values(count, -1.0);
    if (r == 2)
      for (size_t i = 0; i < count; ++i)
        values[i] = 0.5 * double(i);
    bsend.upload(values);
    ASSERT_EQ(ncclBroadcast(r == 1 ? nullptr : bsend.get(), brecv.get(), count,
                            ncclFloat64, 2, rk.comm, rk.stream),
              ncclSuccess);
    rk.sync();
    auto got = brecv.download<double>(count);
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[i], 0.5 * double(i));
    EXPECT_EQ(rk.asyncError(), ncclSuccess);
  });
}

TEST(NcclDouble, Bf16SumsAccumulateInFloatAndRoundOnce) {
  // 256 + 1 + 1 + 1: rounding each partial sum to bf16 gives 256 (ties to
  // even), rounding once gives bf16(259) = 260, on every rank.
  runRanks(4, [&](Rank &rk) {
    uint16_t v = cleave::rt::floatToBf16(rk.rank == 0 ? 256.0f : 1.0f);
    std::vector<uint16_t> in(3, v);
    DeviceBuffer send(6), recv(6);
    send.upload(in);
    ASSERT_EQ(ncclAllReduce(send.get(), recv.get(), 3, ncclBfloat16, ncclSum,
                            rk.comm, rk.stream),
              ncclSuccess);
    rk.sync();
    for (uint16_t x : recv.download<uint16_t>(3))
      EXPECT_EQ(cleave::rt::bf16ToFloat(x), 260.0f);
  });
}

TEST(NcclDouble, SplitMakesOneCommunicatorPerColorOrderedByKey) {
  runRanks(4, [&](Rank &rk) {
    const int r = rk.rank;
    // Ranks 0 and 2 (color 0) and rank 1 (color 1); rank 3 joins none.
    // Keys reverse the order: parent rank 2 becomes rank 0 of color 0.
    int color = r == 3 ? -1 : r % 2;
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommSplit(rk.comm, color, -r, &child, nullptr), ncclSuccess)
        << ncclGetLastError(rk.comm);
    if (r == 3) {
      EXPECT_EQ(child, nullptr);
    } else {
      ASSERT_NE(child, nullptr);
      int size = 0, childRank = -1;
      ASSERT_EQ(ncclCommCount(child, &size), ncclSuccess);
      ASSERT_EQ(ncclCommUserRank(child, &childRank), ncclSuccess);
      EXPECT_EQ(size, r == 1 ? 1 : 2);
      EXPECT_EQ(childRank, r == 0 ? 1 : 0);
      DeviceBuffer buf(4), bsend(4);
      buf.upload(std::vector<float>{float(r + 1)});
      bsend.upload(std::vector<float>{float(r + 1) * 10});
      ASSERT_EQ(ncclAllReduce(buf.get(), buf.get(), 1, ncclFloat32, ncclSum,
                              child, rk.stream),
                ncclSuccess);
      // Child rank 0 (parent 2 in color 0) is the root.
      ASSERT_EQ(ncclBroadcast(bsend.get(), bsend.get(), 1, ncclFloat32, 0,
                              child, rk.stream),
                ncclSuccess);
      rk.sync();
      EXPECT_EQ(buf.download<float>(1)[0], r == 1 ? 2.0f : 4.0f);
      EXPECT_EQ(bsend.download<float>(1)[0], r == 1 ? 20.0f : 30.0f);
      EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
    }
    // The parent still works after the split.
    DeviceBuffer all(4);
    all.upload(std::vector<int32_t>{1});
    ASSERT_EQ(ncclAllReduce(all.get(), all.get(), 1, ncclInt32, ncclSum,
                            rk.comm, rk.stream),
              ncclSuccess);
    rk.sync();
    EXPECT_EQ(all.download<int32_t>(1)[0], 4);
  });
}

TEST(NcclDouble, GroupedSendRecvMakeAnAllToAllAndARing) {
  const int n = 4;
  const size_t block = 33;
  runRanks(n, [&](Rank &rk) {
    const int r = rk.rank;
    // All-to-all, self included, in nested groups: sends first, recvs last.
    std::vector<int64_t> out(n * block);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < block; ++i)
        out[q * block + i] = r * 100000 + q * 1000 + int64_t(i);
    DeviceBuffer send(n * block * 8), recv(n * block * 8);
    send.upload(out);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int q = 0; q < n; ++q)
      ASSERT_EQ(ncclSend(send.get(q * block * 8), block, ncclInt64, q, rk.comm,
                         rk.stream),
                ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    for (int q = 0; q < n; ++q)
      ASSERT_EQ(ncclRecv(recv.get(q * block * 8), block, ncclInt64, q, rk.comm,
                         rk.stream),
                ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    rk.sync();
    auto in = recv.download<int64_t>(n * block);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < block; ++i)
        ASSERT_EQ(in[p * block + i], p * 100000 + r * 1000 + int64_t(i));

    // A ring with two messages to the same peer in one group.
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    DeviceBuffer a(8), b(8), ra(8), rb(8);
    a.upload(std::vector<int64_t>{r * 10 + 1});
    b.upload(std::vector<int64_t>{r * 10 + 2});
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(a.get(), 1, ncclInt64, next, rk.comm, rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclSend(b.get(), 1, ncclInt64, next, rk.comm, rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclRecv(ra.get(), 1, ncclInt64, prev, rk.comm, rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclRecv(rb.get(), 1, ncclInt64, prev, rk.comm, rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    rk.sync();
    EXPECT_EQ(ra.download<int64_t>(1)[0], prev * 10 + 1);
    EXPECT_EQ(rb.download<int64_t>(1)[0], prev * 10 + 2);
    EXPECT_EQ(rk.asyncError(), ncclSuccess);
  });
}

TEST(NcclDouble, OneThreadDrivesEveryRankThroughGroups) {
  // The single-process pattern: inits and collectives of all ranks inside
  // groups, one stream per rank.
  const int n = 4;
  ASSERT_EQ(cuCtxSetCurrent(context()), CUDA_SUCCESS);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(n, nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclCommInitRank(&comms[r], n, id, r), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<CUstream> streams(n);
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  for (int r = 0; r < n; ++r) {
    ASSERT_NE(comms[r], nullptr);
    ASSERT_EQ(cuStreamCreate(&streams[r], CU_STREAM_NON_BLOCKING),
              CUDA_SUCCESS);
    bufs.push_back(std::make_unique<DeviceBuffer>(8 * 4));
    bufs[r]->upload(std::vector<int32_t>(8, r + 1));
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r]->get(), bufs[r]->get(), 8, ncclInt32,
                            ncclSum, comms[r], streams[r]),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(cuStreamSynchronize(streams[r]), CUDA_SUCCESS);
    EXPECT_EQ(bufs[r]->download<int32_t>(8), std::vector<int32_t>(8, 10));
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    EXPECT_EQ(cuStreamDestroy_v2(streams[r]), CUDA_SUCCESS);
  }
}

TEST(NcclDouble, MessagesLargerThanTheDataAreaMoveInChunks) {
  const int n = 4;
  const size_t count = (1 << 18) + 3; // floats: 1 MiB, over 256 KiB staging
  runRanks(n, [&](Rank &rk) {
    const int r = rk.rank;
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i)
      in[i] = float((i % 1000) + r);
    DeviceBuffer send(count * 4), recv(count * 4), gathered(n * count * 4),
        scattered(count / n * 4), p2p(count * 4);
    send.upload(in);
    ASSERT_EQ(ncclAllReduce(send.get(), recv.get(), count, ncclFloat32, ncclSum,
                            rk.comm, rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclAllGather(send.get(), gathered.get(), count, ncclFloat32,
                            rk.comm, rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclReduceScatter(send.get(), scattered.get(), count / n,
                                ncclFloat32, ncclMax, rk.comm, rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(send.get(), count, ncclFloat32, (r + 1) % n, rk.comm,
                       rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclRecv(p2p.get(), count, ncclFloat32, (r + n - 1) % n, rk.comm,
                       rk.stream),
              ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    rk.sync();
    auto sum = recv.download<float>(count);
    auto all = gathered.download<float>(n * count);
    auto mx = scattered.download<float>(count / n);
    auto got = p2p.download<float>(count);
    int prev = (r + n - 1) % n;
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(sum[i], float(4 * (i % 1000) + 6)) << i;
      ASSERT_EQ(got[i], float((i % 1000) + prev)) << i;
      for (int q = 0; q < n; ++q)
        ASSERT_EQ(all[q * count + i], float((i % 1000) + q)) << i;
    }
    for (size_t i = 0; i < count / n; ++i)
      ASSERT_EQ(mx[i], float(((r * (count / n) + i) % 1000) + 3)) << i;
  });
}

//===----------------------------------------------------------------------===//
// Failures
//===----------------------------------------------------------------------===//

TEST(NcclDouble, MismatchedCountIsInvalidUsageOnEveryRank) {
  const char *expected =
      "rank 1 called ncclAllReduce(count=10, float32, sum) as call #2 where "
      "rank 0 called ncclAllReduce(count=12, float32, sum)";
  testing::internal::CaptureStderr();
  runRanks(4, [&](Rank &rk) {
    DeviceBuffer send(48), recv(48);
    send.upload(std::vector<float>(12, 1.0f));
    recv.upload(std::vector<float>(12, -7.0f));
    ASSERT_EQ(ncclAllReduce(send.get(), send.get(), 12, ncclFloat32, ncclSum,
                            rk.comm, rk.stream),
              ncclSuccess);
    size_t count = rk.rank == 1 ? 10 : 12;
    ASSERT_EQ(ncclAllReduce(send.get(), recv.get(), count, ncclFloat32, ncclSum,
                            rk.comm, rk.stream),
              ncclSuccess);
    rk.sync();
    EXPECT_EQ(rk.asyncError(), ncclInvalidUsage);
    EXPECT_TRUE(contains(ncclGetLastError(rk.comm), expected));
    EXPECT_EQ(send.download<float>(1)[0], 4.0f); // call #1 ran
    for (float x : recv.download<float>(12))
      ASSERT_EQ(x, -7.0f); // call #2 left recv alone
  });
  std::string err = testing::internal::GetCapturedStderr();
  // Ranks 0 and 1 are involved, and each prints the line once.
  size_t lines = 0;
  for (size_t p = err.find(expected); p != std::string::npos;
       p = err.find(expected, p + 1))
    ++lines;
  EXPECT_EQ(lines, 2u) << err;
}

TEST(NcclDouble, SendRecvCountMismatchIsInvalidUsageOnBothSides) {
  testing::internal::CaptureStderr();
  runRanks(2, [&](Rank &rk) {
    DeviceBuffer buf(48);
    if (rk.rank == 0)
      ASSERT_EQ(ncclSend(buf.get(), 10, ncclFloat32, 1, rk.comm, rk.stream),
                ncclSuccess);
    else
      ASSERT_EQ(ncclRecv(buf.get(), 12, ncclFloat32, 0, rk.comm, rk.stream),
                ncclSuccess);
    rk.sync();
    EXPECT_EQ(rk.asyncError(), ncclInvalidUsage);
    EXPECT_TRUE(contains(ncclGetLastError(rk.comm),
                         "rank 0 called ncclSend(count=10, float32, peer=1) "
                         "as send #1 to rank 1 where rank 1 called "
                         "ncclRecv(count=12, float32, peer=0) as recv #1 "
                         "from rank 0"));
  });
  EXPECT_TRUE(contains(testing::internal::GetCapturedStderr(),
                       "cleave nccl double: communicator"));
}

TEST(NcclDouble, InjectedCountFaultFiresTheSequenceCheck) {
  ScopedEnv fault("CLEAVE_NCCL_DOUBLE_FAULT", "kind=count,rank=2,call=1");
  testing::internal::CaptureStderr();
  runRanks(3, [&](Rank &rk) {
    DeviceBuffer buf(32);
    ASSERT_EQ(ncclAllReduce(buf.get(), buf.get(), 8, ncclFloat32, ncclSum,
                            rk.comm, rk.stream),
              ncclSuccess);
    rk.sync();
    EXPECT_EQ(rk.asyncError(), ncclInvalidUsage);
    EXPECT_TRUE(contains(ncclGetLastError(rk.comm),
                         "rank 2 called ncclAllReduce(count=9, float32, sum) "
                         "as call #1 where rank 0 called "
                         "ncclAllReduce(count=8, float32, sum)"));
  });
  testing::internal::GetCapturedStderr();
}

TEST(NcclDouble, InjectedInitFailureNamesTheRankThatNeverJoined) {
  ScopedEnv fault("CLEAVE_NCCL_DOUBLE_FAULT", "kind=init,rank=2");
  ScopedEnv timeout("CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT", "0.5");
  runRanks(
      4,
      [&](Rank &rk) {
        EXPECT_EQ(ncclCommInitRank(&rk.comm, rk.n, *rk.id, rk.rank),
                  ncclSystemError);
        EXPECT_EQ(rk.comm, nullptr);
        EXPECT_TRUE(contains(ncclGetLastError(nullptr),
                             rk.rank == 2
                                 ? "injected init failure of rank 2"
                                 : "rank 2 of 4 never joined communicator"));
      },
      /*init=*/false);
}

TEST(NcclDouble, AbortReleasesAPeerBlockedInACollective) {
  runRanks(4, [&](Rank &rk) {
    if (rk.rank == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      EXPECT_EQ(ncclCommAbort(rk.comm), ncclSuccess);
      rk.comm = nullptr;
      return;
    }
    DeviceBuffer send(64), recv(64);
    recv.upload(std::vector<float>(16, -7.0f));
    ASSERT_EQ(ncclAllReduce(send.get(), recv.get(), 16, ncclFloat32, ncclSum,
                            rk.comm, rk.stream),
              ncclSuccess);
    rk.sync(); // returns once rank 3 aborts
    EXPECT_EQ(rk.asyncError(), ncclRemoteError);
    EXPECT_TRUE(
        contains(ncclGetLastError(rk.comm), "rank 3 aborted the communicator"));
    EXPECT_EQ(recv.download<float>(1)[0], -7.0f);
    // Later work ends at once with the same error.
    ASSERT_EQ(ncclAllReduce(send.get(), recv.get(), 16, ncclFloat32, ncclSum,
                            rk.comm, rk.stream),
              ncclSuccess);
    rk.sync();
    EXPECT_EQ(rk.asyncError(), ncclRemoteError);
  });
}

TEST(NcclDouble, InjectedAsyncErrorThenAbortReleasesThePeers) {
  ScopedEnv fault("CLEAVE_NCCL_DOUBLE_FAULT", "kind=async,rank=1,call=2");
  runRanks(3, [&](Rank &rk) {
    DeviceBuffer buf(16);
    buf.upload(std::vector<int32_t>(4, 1));
    for (int k = 0; k < 2; ++k)
      ASSERT_EQ(ncclAllReduce(buf.get(), buf.get(), 4, ncclInt32, ncclSum,
                              rk.comm, rk.stream),
                ncclSuccess);
    if (rk.rank == 1) {
      rk.sync();
      EXPECT_EQ(rk.asyncError(), ncclSystemError);
      EXPECT_TRUE(contains(ncclGetLastError(rk.comm), "injected"));
      EXPECT_EQ(buf.download<int32_t>(1)[0], 3); // call #1 ran
      EXPECT_EQ(ncclCommAbort(rk.comm), ncclSuccess);
      rk.comm = nullptr;
      return;
    }
    rk.sync();
    EXPECT_EQ(rk.asyncError(), ncclRemoteError);
    EXPECT_TRUE(contains(ncclGetLastError(rk.comm), "rank 1 aborted"));
    EXPECT_EQ(buf.download<int32_t>(1)[0], 3);
  });
}

TEST(NcclDoubleDeathTest, BadFaultSpecIsAFailure) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        setenv("CLEAVE_NCCL_DOUBLE_FAULT", "kind=async,rank=1", 1);
        ncclUniqueId id;
        ncclGetUniqueId(&id);
        ncclComm_t c = nullptr;
        ncclCommInitRank(&c, 1, id, 0);
      },
      "CLEAVE_NCCL_DOUBLE_FAULT=\"kind=async,rank=1\": kind=async and "
      "kind=count need call=N");
}

TEST(NcclDoubleDeathTest, ARecvBufferOneElementShortIsCaughtAtEnqueue) {
  // The other tests give every call buffers of exactly the bytes it
  // touches; one element less is an access outside the allocation.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ncclUniqueId id;
        ncclGetUniqueId(&id);
        ncclComm_t c = nullptr;
        ncclCommInitRank(&c, 1, id, 0);
        cuCtxSetCurrent(context());
        CUstream s = nullptr;
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
        DeviceBuffer send(16);
        DeviceBuffer recv(12);
        ncclAllGather(send.get(), recv.get(), 4, ncclFloat32, c, s);
      },
      "ncclAllGather recv buffer");
}

//===----------------------------------------------------------------------===//
// Two processes
//===----------------------------------------------------------------------===//

constexpr char kIdFdVariable[] = "CLEAVE_NCCL_DOUBLE_TEST_ID_FD";
constexpr size_t kProcessCount = 100003; // floats, over the staging area

/// One rank of the two-process test: all-reduces and checks the result.
void processRank(const ncclUniqueId &id, int rank) {
  CUstream stream = nullptr;
  ASSERT_EQ(cuCtxSetCurrent(context()), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, rank), ncclSuccess)
      << ncclGetLastError(nullptr);
  std::vector<float> in(kProcessCount);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i % 100) * float(rank + 1);
  {
    DeviceBuffer buf(in.size() * 4);
    buf.upload(in);
    ASSERT_EQ(ncclAllReduce(buf.get(), buf.get(), in.size(), ncclFloat32,
                            ncclSum, comm, stream),
              ncclSuccess);
    ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
    auto out = buf.download<float>(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i], float(i % 100) * 3.0f) << "rank " << rank << " " << i;
  }
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(cuStreamDestroy_v2(stream), CUDA_SUCCESS);
}

TEST(NcclDoubleProcess, TwoProcessesShareAnIdThroughAPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(len, 0);
  exe[len] = 0;
  std::string filter = "--gtest_filter=NcclDoubleProcess.ChildRank";
  std::vector<char *> argv = {exe, filter.data(), nullptr};
  std::string fdSetting =
      std::string(kIdFdVariable) + "=" + std::to_string(fds[0]);
  std::vector<char *> env;
  for (char **e = environ; *e; ++e)
    env.push_back(*e);
  env.push_back(fdSetting.data());
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t child = 0;
  ASSERT_EQ(
      posix_spawn(&child, exe, &actions, nullptr, argv.data(), env.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[0]);

  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ASSERT_EQ(write(fds[1], &id, sizeof(id)), ssize_t(sizeof(id)));
  close(fds[1]);
  processRank(id, 0);

  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child rank failed";
}

TEST(NcclDoubleProcess, ChildRank) {
  const char *fd = std::getenv(kIdFdVariable);
  if (!fd)
    GTEST_SKIP() << "rank 1 of TwoProcessesShareAnIdThroughAPipe";
  ncclUniqueId id;
  size_t got = 0;
  while (got < sizeof(id)) {
    ssize_t n = read(std::atoi(fd), reinterpret_cast<char *>(&id) + got,
                     sizeof(id) - got);
    ASSERT_GT(n, 0) << "the id pipe closed early";
    got += size_t(n);
  }
  processRank(id, 1);
}

} // namespace
