//===- NcclTest.cpp - NCCL loaded with dlopen, and its communicator -------===//
//
// Three kinds of tests:
//  - without any library: version strings, dtype mapping, argument checks,
//    and the loader's errors against a bogus path, a library that is not
//    NCCL and fake NCCL libraries built with clang at test time;
//  - with the NCCL library of this machine (skipped where none loads):
//    loading, the version, error texts, ncclGetUniqueId;
//  - on GPUs (skipped elsewhere): a one-rank communicator on one GPU and a
//    two-rank all-reduce on two GPUs, one thread per rank.
//
//===----------------------------------------------------------------------===//

#include "Nccl.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>

using namespace cleave::rt::cuda;
using namespace cleave::test;
using cleave::plan::DType;

namespace {

/// Takes a status: its code, and its message in *message.
cleave_rt_status_code_t take(cleave_rt_status s, std::string *message) {
  cleave_rt_status_code_t code = cleave_rt_status_code(s);
  *message = cleave_rt_status_message(s);
  cleave_rt_status_free(s);
  return code;
}

/// The process's NCCL library, or null with *why set.
const NcclLibrary *systemNccl(std::string *why) {
  const NcclLibrary *lib = nullptr;
  if (cleave_rt_status s = NcclLibrary::load(&lib)) {
    take(s, why);
    return nullptr;
  }
  return lib;
}

#define REQUIRE_NCCL(lib)                                                      \
  std::string why_;                                                            \
  const NcclLibrary *lib = systemNccl(&why_);                                  \
  if (!lib)                                                                    \
  GTEST_SKIP() << "no usable NCCL library: " << why_

/// The number of CUDA devices, through the runtime's own driver loader (the
/// check the CUDA executor makes); 0 with *why set when there is none.
int cudaDeviceCount(const DriverApi **cu, std::string *why) {
  if (cleave_rt_status s = loadDriver(cu)) {
    take(s, why);
    return 0;
  }
  int count = 0;
  if ((*cu)->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0)
    *why = "cuDeviceGetCount found no device";
  return count;
}

/// Builds a fake NCCL library with clang: every entry point but `omit`,
/// ncclGetVersion reporting `code`. Empty when clang is missing or fails.
std::string buildFakeNccl(const TempDir &dir, const std::string &name, int code,
                          const std::string &omit = "") {
  std::string clang = CLEAVE_TEST_CLANG;
  if (clang.empty())
    return "";
  std::string src =
      "int ncclGetVersion(int *v) { *v = " + std::to_string(code) +
      "; return 0; }\n" +
      "const char *ncclGetErrorString(int r) { return \"fake\"; "
      "}\nconst char *ncclGetLastError(void *c) { return \"\"; }\n";
  for (const char *sym :
       {"ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy",
        "ncclCommAbort", "ncclCommSplit", "ncclCommGetAsyncError",
        "ncclCommCount", "ncclCommUserRank", "ncclAllReduce",
        "ncclReduceScatter", "ncclAllGather", "ncclBroadcast", "ncclSend",
        "ncclRecv", "ncclGroupStart", "ncclGroupEnd"})
    if (omit != sym)
      src += std::string("int ") + sym + "(void) { return 0; }\n";
  std::string c = dir.file(name + ".c"), so = dir.file(name);
  if (!writeBytes(c, std::vector<uint8_t>(src.begin(), src.end())))
    return "";
  std::string cmd = clang + " -shared -fPIC -o '" + so + "' '" + c + "' 2>'" +
                    dir.file(name + ".log") + "'";
  return std::system(cmd.c_str()) == 0 ? so : "";
}

/// One rank on one GPU: its context, stream and a buffer of `floats`.
struct RankDevice {
  const DriverApi *cu = nullptr;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr buffer = 0;
  std::string error;

  bool ok(CUresult r, const char *what) {
    if (r == CUDA_SUCCESS)
      return true;
    if (error.empty())
      error = std::string(what) + ": " + driverErrorString(*cu, r);
    return false;
  }
  bool open(const DriverApi *api, int ordinal, size_t floats) {
    cu = api;
    return ok(cu->cuDeviceGet(&device, ordinal), "cuDeviceGet") &&
           ok(cu->cuDevicePrimaryCtxRetain(&ctx, device),
              "cuDevicePrimaryCtxRetain") &&
           ok(cu->cuCtxSetCurrent(ctx), "cuCtxSetCurrent") &&
           ok(cu->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate") &&
           ok(cu->cuMemAlloc(&buffer, floats * sizeof(float)), "cuMemAlloc");
  }
  ~RankDevice() {
    if (!ctx)
      return;
    cu->cuCtxSetCurrent(ctx);
    if (buffer)
      cu->cuMemFree(buffer);
    if (stream)
      cu->cuStreamDestroy(stream);
    cu->cuDevicePrimaryCtxRelease(device);
  }
};

} // namespace

//===--- Without a library ------------------------------------------------===//

TEST(Nccl, VersionStrings) {
  EXPECT_EQ(ncclVersionString(22809), "2.28.9");
  EXPECT_EQ(ncclVersionString(21800), "2.18.0");
  EXPECT_EQ(ncclVersionString(2803), "2.8.3"); // The pre-2.9 encoding.
  EXPECT_EQ(ncclVersionString(30102), "3.1.2");
  EXPECT_EQ(ncclVersionString(kMinNcclVersionCode), "2.18.0");
}

TEST(Nccl, DataTypes) {
  ncclDataType_t t = -1;
  std::string message;
  EXPECT_EQ(ncclDataTypeOf(DType::F32, &t), nullptr);
  EXPECT_EQ(t, ncclFloat32);
  EXPECT_EQ(ncclDataTypeOf(DType::BF16, &t), nullptr);
  EXPECT_EQ(t, ncclBfloat16);
  EXPECT_EQ(ncclDataTypeOf(DType::I64, &t), nullptr);
  EXPECT_EQ(t, ncclInt64);
  t = -1;
  EXPECT_EQ(take(ncclDataTypeOf(DType::Bool, &t), &message),
            CLEAVE_RT_INVALID_ARGUMENT);
  EXPECT_NE(message.find("bool"), std::string::npos) << message;
  EXPECT_EQ(t, -1);
}

TEST(Nccl, BogusPathIsUnavailable) {
  NcclLibrary lib;
  std::string message;
  EXPECT_EQ(
      take(NcclLibrary::loadFrom("/nonexistent/libnccl.so.2", &lib), &message),
      CLEAVE_RT_UNAVAILABLE);
  EXPECT_NE(
      message.find("cannot open the NCCL library /nonexistent/libnccl.so.2: "),
      std::string::npos)
      << message;
  // The dlerror() text follows.
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
  EXPECT_EQ(lib.api().handle, nullptr);
}

TEST(Nccl, LibraryThatIsNotNcclNamesTheMissingSymbol) {
  NcclLibrary lib;
  std::string message;
  EXPECT_EQ(take(NcclLibrary::loadFrom("libm.so.6", &lib), &message),
            CLEAVE_RT_UNAVAILABLE);
  EXPECT_NE(message.find("libm.so.6 lacks ncclGetVersion (not an NCCL "
                         "library)"),
            std::string::npos)
      << message;
}

TEST(Nccl, FakeLibrariesLoadOrFailClearly) {
  TempDir dir;
  std::string good = buildFakeNccl(dir, "libgood.so", 22809);
  if (good.empty())
    GTEST_SKIP() << "no clang to build a fake NCCL library";
  NcclLibrary lib;
  std::string message;
  ASSERT_EQ(take(NcclLibrary::loadFrom(good, &lib), &message), CLEAVE_RT_OK)
      << message;
  EXPECT_EQ(lib.version(), "2.28.9");
  EXPECT_EQ(lib.api().ncclCommInitRankConfig, nullptr); // Optional.

  std::string old = buildFakeNccl(dir, "libold.so", 21703);
  ASSERT_FALSE(old.empty());
  EXPECT_EQ(take(NcclLibrary::loadFrom(old, &lib), &message),
            CLEAVE_RT_UNAVAILABLE);
  EXPECT_NE(message.find("NCCL 2.17.3 (" + old +
                         ") is too old: this runtime "
                         "needs NCCL 2.18.0 or newer"),
            std::string::npos)
      << message;

  // A release too old for the table is named by its version, not by the
  // first symbol it lacks.
  std::string veryOld =
      buildFakeNccl(dir, "libveryold.so", 2803, "ncclAllGather");
  ASSERT_FALSE(veryOld.empty());
  EXPECT_EQ(take(NcclLibrary::loadFrom(veryOld, &lib), &message),
            CLEAVE_RT_UNAVAILABLE);
  EXPECT_NE(message.find("NCCL 2.8.3 "), std::string::npos) << message;

  std::string partial =
      buildFakeNccl(dir, "libpartial.so", 22809, "ncclReduceScatter");
  ASSERT_FALSE(partial.empty());
  EXPECT_EQ(take(NcclLibrary::loadFrom(partial, &lib), &message),
            CLEAVE_RT_UNAVAILABLE);
  EXPECT_NE(message.find(partial + " (NCCL 2.28.9) lacks ncclReduceScatter"),
            std::string::npos)
      << message;
}

TEST(Nccl, CommunicatorChecksArgumentsBeforeCallingNccl) {
  NcclLibrary none; // No entry points: nothing below may reach NCCL.
  NcclCommunicator comm;
  ncclUniqueId id{};
  std::string message;
  EXPECT_EQ(take(comm.init(none, 2, 2, id), &message),
            CLEAVE_RT_INVALID_ARGUMENT);
  EXPECT_NE(message.find("NCCL rank 2 is outside a world of 2 ranks"),
            std::string::npos)
      << message;
  EXPECT_EQ(take(comm.init(none, 0, 0, id), &message),
            CLEAVE_RT_INVALID_ARGUMENT);
  EXPECT_FALSE(comm.initialized());
  EXPECT_EQ(
      take(comm.allReduce(0, 0, 4, ncclFloat32, ncclSum, nullptr), &message),
      CLEAVE_RT_FAILED_PRECONDITION);
  EXPECT_NE(message.find("ncclAllReduce on an NCCL communicator that is not "
                         "initialized"),
            std::string::npos)
      << message;
  EXPECT_EQ(take(comm.reduceScatter(0, 0, 4, ncclFloat32, ncclSum, nullptr),
                 &message),
            CLEAVE_RT_FAILED_PRECONDITION);
  EXPECT_EQ(take(comm.allGather(0, 0, 4, ncclFloat32, nullptr), &message),
            CLEAVE_RT_FAILED_PRECONDITION);
  EXPECT_EQ(take(comm.asyncError(), &message), CLEAVE_RT_FAILED_PRECONDITION);
  EXPECT_EQ(comm.destroy(), nullptr);
  EXPECT_EQ(comm.abort(), nullptr);
}

//===--- With this machine's NCCL (skipped without one) -------------------===//

TEST(Nccl, LoadsAndReportsAVersion2x) {
  REQUIRE_NCCL(lib);
  std::string v = lib->version();
  EXPECT_EQ(v.rfind("2.", 0), 0u) << v;
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  EXPECT_GE(lib->versionCode(), kMinNcclVersionCode);
  // The process-wide library is loaded once.
  const NcclLibrary *again = nullptr;
  ASSERT_EQ(NcclLibrary::load(&again), nullptr);
  EXPECT_EQ(again, lib);
  int code = 0;
  ASSERT_EQ(lib->api().ncclGetVersion(&code), ncclSuccess);
  EXPECT_EQ(code, lib->versionCode());
}

TEST(Nccl, ErrorsNameTheCallAndNcclsText) {
  REQUIRE_NCCL(lib);
  EXPECT_EQ(lib->check(ncclSuccess, "ncclAllReduce"), nullptr);
  std::string message;
  EXPECT_EQ(take(lib->check(ncclInvalidArgument, "ncclAllReduce"), &message),
            CLEAVE_RT_INTERNAL);
  EXPECT_EQ(message.rfind("ncclAllReduce failed: ncclResult 4 (", 0), 0u)
      << message;
  EXPECT_NE(message.find("invalid argument"), std::string::npos) << message;
}

TEST(Nccl, GetUniqueId) {
  REQUIRE_NCCL(lib);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::string message;
  if (take(lib->getUniqueId(&id), &message) != CLEAVE_RT_OK) {
    const DriverApi *cu = nullptr;
    std::string why;
    if (cudaDeviceCount(&cu, &why) == 0)
      GTEST_SKIP() << "ncclGetUniqueId failed without a GPU (" << why
                   << "): " << message;
    FAIL() << message;
  }
  ncclUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_NE(std::memcmp(&id, &zero, sizeof(id)), 0);
}

//===--- On GPUs (skipped elsewhere) --------------------------------------===//

TEST(NcclGpu, OneRankCollectives) {
  REQUIRE_NCCL(lib);
  const DriverApi *cu = nullptr;
  std::string why;
  if (cudaDeviceCount(&cu, &why) < 1)
    GTEST_SKIP() << "no CUDA device: " << why;
  RankDevice d;
  ASSERT_TRUE(d.open(cu, 0, 8)) << d.error;
  std::vector<float> in = {1, 2, 3, 4};
  ASSERT_TRUE(d.ok(cu->cuMemcpyHtoD(d.buffer, in.data(), 16), "cuMemcpyHtoD"))
      << d.error;
  ncclUniqueId id;
  ASSERT_EQ(lib->getUniqueId(&id), nullptr);
  NcclCommunicator comm;
  std::string message;
  ASSERT_EQ(take(comm.init(*lib, 0, 1, id), &message), CLEAVE_RT_OK) << message;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.worldSize(), 1);
  int count = 0;
  ASSERT_EQ(lib->api().ncclCommCount(comm.handle(), &count), ncclSuccess);
  EXPECT_EQ(count, 1);
  // One rank: each collective copies [0, 4) to [4, 8).
  CUdeviceptr a = d.buffer, b = d.buffer + 16;
  for (int which = 0; which < 3; ++which) {
    ASSERT_TRUE(d.ok(cu->cuMemsetD8Async(b, 0, 16, d.stream), "memset"));
    cleave_rt_status s =
        which == 0 ? comm.allReduce(a, b, 4, ncclFloat32, ncclSum, d.stream)
        : which == 1
            ? comm.reduceScatter(a, b, 4, ncclFloat32, ncclSum, d.stream)
            : comm.allGather(a, b, 4, ncclFloat32, d.stream);
    ASSERT_EQ(take(s, &message), CLEAVE_RT_OK) << message;
    ASSERT_TRUE(d.ok(cu->cuStreamSynchronize(d.stream), "sync")) << d.error;
    std::vector<float> out(4);
    ASSERT_TRUE(d.ok(cu->cuMemcpyDtoH(out.data(), b, 16), "cuMemcpyDtoH"));
    EXPECT_EQ(out, in) << "collective " << which;
  }
  EXPECT_EQ(take(comm.asyncError(), &message), CLEAVE_RT_OK) << message;
  EXPECT_EQ(take(comm.destroy(), &message), CLEAVE_RT_OK) << message;
  EXPECT_FALSE(comm.initialized());
}

TEST(NcclGpu, TwoRankAllReduceOnTwoGpus) {
  REQUIRE_NCCL(lib);
  const DriverApi *cu = nullptr;
  std::string why;
  int devices = cudaDeviceCount(&cu, &why);
  if (devices < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << devices
                 << (why.empty() ? "" : ": " + why);
  ncclUniqueId id;
  ASSERT_EQ(lib->getUniqueId(&id), nullptr);
  constexpr size_t n = 1024;
  std::string errors[2];
  std::vector<float> results[2];
  auto rank = [&](int r) {
    RankDevice d;
    if (!d.open(cu, r, n)) {
      errors[r] = d.error;
      return;
    }
    std::vector<float> in(n);
    for (size_t i = 0; i < n; ++i)
      in[i] = float(r + 1) * float(i);
    if (!d.ok(cu->cuMemcpyHtoD(d.buffer, in.data(), n * 4), "cuMemcpyHtoD")) {
      errors[r] = d.error;
      return;
    }
    NcclCommunicator comm;
    std::string message;
    if (take(comm.init(*lib, r, 2, id), &message) != CLEAVE_RT_OK ||
        take(comm.allReduce(d.buffer, d.buffer, n, ncclFloat32, ncclSum,
                            d.stream),
             &message) != CLEAVE_RT_OK) {
      errors[r] = message;
      cleave_rt_status_free(comm.abort());
      return;
    }
    results[r].resize(n);
    if (!d.ok(cu->cuStreamSynchronize(d.stream), "cuStreamSynchronize") ||
        !d.ok(cu->cuMemcpyDtoH(results[r].data(), d.buffer, n * 4),
              "cuMemcpyDtoH"))
      errors[r] = d.error;
    else if (take(comm.destroy(), &message) != CLEAVE_RT_OK)
      errors[r] = message;
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(results[r].size(), n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(results[r][i], 3.0f * float(i)) << "rank " << r << " i " << i;
  }
}
