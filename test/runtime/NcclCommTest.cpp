//===- NcclCommTest.cpp - NCCL collectives of 4 ranks under the doubles ---===//
//
// NcclCommunicator, CudaCollectives and the CUDA backend's collectives run
// by 4 rank threads on the host doubles of libcuda and NCCL
// (test/doubles; skipped where they are not built): every NCCL call, every
// collective of a plan against the CPU communicators' reference, the
// bootstrap over a local CPU communicator, and the failures: a collective a
// peer never reaches (timeout), an injected asynchronous error, an injected
// init failure and a mismatched count ($CLEAVE_NCCL_DOUBLE_FAULT).
//
//===----------------------------------------------------------------------===//

#include "Backend.h"
#include "Half.h"
#include "NcclCollectives.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/stat.h>
#include <thread>

#ifndef CLEAVE_TEST_DOUBLES_DIR
#define CLEAVE_TEST_DOUBLES_DIR ""
#endif

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::rt;
using namespace cleave::rt::cuda;

namespace {

constexpr int kRanks = 4;

/// Takes a status: its message, "" for null.
std::string take(cleave_rt_status s) {
  if (!s)
    return "";
  std::string m = cleave_rt_status_message(s);
  cleave_rt_status_free(s);
  return m;
}

std::string doublesDir() {
  const char *env = std::getenv("CLEAVE_TEST_DOUBLES_DIR");
  return env && *env ? env : CLEAVE_TEST_DOUBLES_DIR;
}

std::string driverPath() { return doublesDir() + "/libcleave-cuda-double.so"; }
std::string ncclPath() { return doublesDir() + "/libcleave-nccl-double.so"; }

bool exists(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

/// The doubles, loaded once for the whole test program (they are the
/// same libraries the runtime's loaders would open by path).
struct Doubles {
  DriverApi cu;
  NcclLibrary nccl;
  std::string why; ///< Non-empty: not usable.
};

const Doubles &doubles() {
  static Doubles d;
  static bool once = [] {
    if (doublesDir().empty() || !exists(driverPath()) || !exists(ncclPath())) {
      d.why = "the host doubles are not built (" + driverPath() + ")";
      return true;
    }
    d.cu.handle = dlopen(driverPath().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!d.cu.handle) {
      d.why = dlerror();
      return true;
    }
#define RESOLVE(name, sym, type)                                               \
  d.cu.name = reinterpret_cast<type>(dlsym(d.cu.handle, sym));                 \
  if (!d.cu.name) {                                                            \
    d.why = std::string("the driver double lacks ") + sym;                     \
    return true;                                                               \
  }
    CLEAVE_CUDA_DRIVER_SYMBOLS(RESOLVE)
#undef RESOLVE
    if (d.cu.cuInit(0) != CUDA_SUCCESS) {
      d.why = "cuInit of the driver double failed";
      return true;
    }
    d.why = take(NcclLibrary::loadFrom(ncclPath(), &d.nccl));
    return true;
  }();
  (void)once;
  return d;
}

#define REQUIRE_DOUBLES()                                                      \
  const Doubles &dd = doubles();                                               \
  if (!dd.why.empty())                                                         \
  GTEST_SKIP() << dd.why
#define CU(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

/// Sets an environment variable for the scope of a test.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char *n, const char *value) : name(n) { setenv(n, value, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

/// One rank's device: its primary context, made current on the calling
/// thread, and two streams (compute, communication).
struct RankDevice {
  const DriverApi &cu;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUstream compute = nullptr, comm = nullptr;
  CUdeviceptr memory = 0;
  explicit RankDevice(const DriverApi &cu) : cu(cu) {}
  bool open(int ordinal, size_t bytes) {
    return cu.cuDeviceGet(&device, ordinal) == CUDA_SUCCESS &&
           cu.cuDevicePrimaryCtxRetain(&ctx, device) == CUDA_SUCCESS &&
           cu.cuCtxSetCurrent(ctx) == CUDA_SUCCESS &&
           cu.cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING) ==
               CUDA_SUCCESS &&
           cu.cuStreamCreate(&comm, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
           cu.cuMemAlloc(&memory, bytes) == CUDA_SUCCESS &&
           cu.cuMemsetD8Async(memory, 0, bytes, compute) == CUDA_SUCCESS &&
           cu.cuStreamSynchronize(compute) == CUDA_SUCCESS;
  }
  void put(CUdeviceptr at, const void *data, size_t bytes) {
    cu.cuMemcpyHtoDAsync(at, data, bytes, compute);
    cu.cuStreamSynchronize(compute);
  }
  template <typename T> std::vector<T> get(CUdeviceptr at, size_t n) {
    std::vector<T> out(n);
    cu.cuStreamSynchronize(compute);
    cu.cuMemcpyDtoH(out.data(), at, n * sizeof(T));
    return out;
  }
  ~RankDevice() {
    if (!ctx)
      return;
    cu.cuCtxSetCurrent(ctx);
    if (memory)
      cu.cuMemFree(memory);
    for (CUstream s : {compute, comm})
      if (s)
        cu.cuStreamDestroy(s);
    cu.cuDevicePrimaryCtxRelease(device);
  }
};

/// Runs fn(rank) on kRanks threads.
template <typename F> void onRanks(F fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back(fn, r);
  for (std::thread &t : threads)
    t.join();
}

/// A barrier for the rank threads (the last to leave resets it).
struct Barrier {
  std::atomic<int> arrived{0};
  void wait() {
    arrived.fetch_add(1);
    while (arrived.load() < kRanks)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

Command collective(CollectiveOp op, std::vector<uint32_t> axes, int64_t count,
                   uint64_t src, uint64_t dst, uint32_t id) {
  Command c;
  c.kind = CommandKind::Collective;
  c.buffers = {src, dst};
  c.collective.op = op;
  c.collective.axes = std::move(axes);
  c.collective.count = count;
  c.collective.splitInner = count;
  c.collective.id = id;
  c.collective.source = "node /n" + std::to_string(id);
  return c;
}

/// An f32 tensor of `n` elements at `offset`.
TensorInfo tensorInfo(std::string name, uint64_t offset, uint64_t n = 8) {
  TensorInfo t;
  t.name = std::move(name);
  t.dtype = DType::F32;
  t.shape = {static_cast<int64_t>(n)};
  t.offset = offset;
  return t;
}

/// Rank r's operand: 8 floats, 100 r + i.
std::vector<float> operandOf(int64_t r) {
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i)
    v[i] = float(100 * r + i);
  return v;
}

/// A plan over dp=2 x tp=2 with one collective of each kind (the operand at
/// 0, results from 256 on, 256 bytes apart).
Plan everyCollectivePlan() {
  Plan p;
  p.target = "cuda-sm_90";
  p.arenaBytes = 4096;
  p.alignment = 256;
  p.mesh = {{"dp", "tp"}, {2, 2}};
  p.commands.push_back(
      collective(CollectiveOp::AllReduce, {0, 1}, 8, 0, 256, 0));
  Command gather = collective(CollectiveOp::AllGather, {1}, 8, 0, 512, 1);
  gather.collective.splitOuter = 2; // [2, 4] -> [2, G, 4]
  gather.collective.splitInner = 4;
  gather.stream = kCommStream;
  gather.event = 0;
  p.commands.push_back(gather);
  Command scatter = collective(CollectiveOp::ReduceScatter, {0}, 8, 0, 768, 2);
  scatter.collective.splitOuter = 2; // [2, G, 2] -> [2, 2]
  scatter.collective.splitInner = 2;
  scatter.collective.reduce = ReduceOp::Avg;
  p.commands.push_back(scatter);
  Command wait;
  wait.kind = CommandKind::Wait;
  wait.event = 0;
  p.commands.push_back(wait);
  Command a2a = collective(CollectiveOp::AllToAll, {0, 1}, 8, 0, 1024, 3);
  a2a.collective.splitOuter = 2; // [2, 4, 1] -> [1, 4, 2]
  a2a.collective.splitInner = 1;
  a2a.collective.concatOuter = 1;
  a2a.collective.concatInner = 2;
  p.commands.push_back(a2a);
  Command permute = collective(CollectiveOp::Permute, {1}, 8, 0, 1280, 4);
  permute.collective.pairs = {0, 1};
  p.commands.push_back(permute);
  Command bcast = collective(CollectiveOp::Broadcast, {0}, 8, 0, 1536, 5);
  bcast.collective.root = 1;
  p.commands.push_back(bcast);
  Command slice = collective(CollectiveOp::AllSlice, {1}, 8, 0, 1792, 6);
  slice.collective.splitOuter = 2;
  slice.collective.splitInner = 2;
  p.commands.push_back(slice);
  p.numEvents = 1;
  return p;
}

/// The CPU communicators' result of command `c` for rank `rank`.
std::vector<float> reference(const Plan &p, const Command &c, int64_t rank) {
  Group g = groupOf(p.mesh, c.collective.axes, rank);
  int64_t size = static_cast<int64_t>(g.ranks.size());
  std::vector<std::vector<float>> operands;
  std::vector<const void *> srcs;
  for (int64_t r : g.ranks)
    operands.push_back(operandOf(r));
  for (auto &o : operands)
    srcs.push_back(o.data());
  std::vector<float> out(collectiveResultBytes(c.collective, size) / 4);
  computeCollective(c.collective, g.index, size, srcs.data(), out.data());
  return out;
}

/// Enqueues every collective and wait of `commands` and waits.
cleave_rt_status runList(CudaCollectives &cc,
                         const std::vector<Command> &commands) {
  cc.beginList();
  for (size_t i = 0; i < commands.size(); ++i)
    if (commands[i].kind == CommandKind::Collective ||
        commands[i].kind == CommandKind::Wait)
      CLEAVE_RT_RETURN_IF_ERROR(cc.enqueue(commands, i, false));
  CLEAVE_RT_RETURN_IF_ERROR(cc.finishList());
  return cc.wait("the test's commands");
}

/// Rank r of a CudaCollectives test: device, CPU communicator, collectives
/// of `plan` (file: `file`), then `body`.
template <typename Body>
void collectivesRank(const Doubles &dd, std::shared_ptr<LocalWorld> world,
                     int r, const Plan &plan, const Plan &file, double timeout,
                     std::string *initError, Body body) {
  RankDevice d(dd.cu);
  if (!d.open(r, 4096)) {
    *initError = "cannot open device " + std::to_string(r);
    return;
  }
  std::unique_ptr<Communicator> comm = localCommunicator(world, r);
  {
    CudaCollectives cc(dd.cu);
    *initError = take(cc.init(plan, file, r, comm.get(), timeout, d.compute,
                              d.comm, d.memory, &dd.nccl));
    if (initError->empty())
      body(d, cc);
    else
      comm->abort(*initError); // As the drivers do: peers stop waiting.
    cc.closeCommunicators();
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// NcclCommunicator
//===----------------------------------------------------------------------===//

TEST(NcclDouble, EveryCallOverFourRanks) {
  REQUIRE_DOUBLES();
  ncclUniqueId id;
  ASSERT_EQ(take(dd.nccl.getUniqueId(&id)), "");
  std::string errors[kRanks];
  std::vector<float> got[kRanks][8];
  std::vector<uint16_t> bf16[kRanks];
  int splitRank[kRanks], splitSize[kRanks];
  onRanks([&](int r) {
    std::string &error = errors[r];
    RankDevice d(dd.cu);
    if (!d.open(r, 4096)) {
      error = "device";
      return;
    }
    NcclCommunicator comm;
    if (!(error = take(comm.init(dd.nccl, r, kRanks, id))).empty())
      return;
    std::vector<float> in = operandOf(r);
    CUdeviceptr src = d.memory, dst = d.memory + 256;
    d.put(src, in.data(), 32);
    auto step = [&](int k, cleave_rt_status s, size_t n) {
      if (error.empty())
        error = take(s);
      if (error.empty())
        got[r][k] = d.get<float>(dst, n);
    };
    CUstream s = d.compute;
    step(0, comm.allReduce(src, dst, 8, ncclFloat32, ncclSum, s), 8);
    step(1, comm.allReduce(src, dst, 8, ncclFloat32, ncclAvg, s), 8);
    step(2, comm.reduceScatter(src, dst, 2, ncclFloat32, ncclMax, s), 2);
    step(3, comm.allGather(src, dst, 2, ncclFloat32, s), 8);
    step(4, comm.broadcast(src, dst, 8, ncclFloat32, 2, s), 8);
    // A ring of grouped sends and receives.
    if (error.empty()) {
      error = take(dd.nccl.groupStart());
      if (error.empty())
        error = take(comm.send(src, 2, ncclFloat32, (r + 1) % kRanks, s));
      if (error.empty())
        error = take(comm.recv(dst, 2, ncclFloat32, (r + 3) % kRanks, s));
      step(5, dd.nccl.groupEnd(), 2);
    }
    // bf16 sums (small integers are exact).
    std::vector<uint16_t> h(4, floatToBf16(float(r + 1)));
    d.put(src, h.data(), 8);
    if (error.empty())
      error = take(comm.allReduce(src, dst, 4, ncclBfloat16, ncclSum, s));
    if (error.empty())
      bf16[r] = d.get<uint16_t>(dst, 4);
    // A split into the even and the odd ranks.
    NcclCommunicator half;
    if (error.empty())
      error = take(half.split(comm, r % 2, r));
    splitRank[r] = half.rank();
    splitSize[r] = half.worldSize();
    d.put(src, in.data(), 32);
    if (error.empty())
      step(6, half.allReduce(src, dst, 1, ncclFloat32, ncclSum, s), 1);
    if (error.empty())
      error = take(half.asyncError());
    if (error.empty())
      error = take(comm.asyncError());
    if (error.empty())
      error = take(half.destroy());
    if (error.empty())
      error = take(comm.destroy());
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(got[r][0][i], 600.0f + 4 * i) << "sum, rank " << r;
      EXPECT_EQ(got[r][1][i], 150.0f + i) << "avg, rank " << r;
      EXPECT_EQ(got[r][3][i], float(100 * (i / 2) + i % 2)) << "gather";
      EXPECT_EQ(got[r][4][i], float(200 + i)) << "broadcast, rank " << r;
    }
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(got[r][2][k], float(300 + 2 * r + k)) << "max scatter";
      EXPECT_EQ(got[r][5][k], float(100 * ((r + 3) % kRanks) + k)) << "ring";
    }
    for (uint16_t v : bf16[r])
      EXPECT_EQ(bf16ToFloat(v), 10.0f) << "bf16, rank " << r;
    EXPECT_EQ(splitSize[r], 2);
    EXPECT_EQ(splitRank[r], r / 2);
    EXPECT_EQ(got[r][6][0], r % 2 ? 400.0f : 200.0f) << "split, rank " << r;
  }
}

//===----------------------------------------------------------------------===//
// CudaCollectives: a plan's collectives
//===----------------------------------------------------------------------===//

TEST(NcclDouble, EveryCollectiveOfAPlanMatchesTheCpuCommunicators) {
  REQUIRE_DOUBLES();
  Plan plan = everyCollectivePlan();
  auto world = createLocalWorld(kRanks, 30);
  std::string errors[kRanks];
  onRanks([&](int r) {
    collectivesRank(dd, world, r, plan, plan, 30, &errors[r],
                    [&](RankDevice &d, CudaCollectives &cc) {
                      std::vector<float> in = operandOf(r);
                      for (int run = 0; run < 2; ++run) {
                        d.put(0 + d.memory, in.data(), 32);
                        std::string e = take(runList(cc, plan.commands));
                        if (!e.empty()) {
                          errors[r] = e;
                          return;
                        }
                        for (const Command &c : plan.commands) {
                          if (c.kind != CommandKind::Collective)
                            continue;
                          std::vector<float> want = reference(plan, c, r);
                          std::vector<float> have = d.get<float>(
                              d.memory + c.buffers[1], want.size());
                          if (have != want)
                            errors[r] += describe(c.collective) +
                                         " differs (run " +
                                         std::to_string(run) + "); ";
                        }
                      }
                    });
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(NcclDouble, PipelineSendsAreBufferedSoCrossedMessagesFlow) {
  // Stage 0 sends A and B, then receives C; stage 1 receives A, sends C,
  // then receives B. Sends that waited for their receivers would deadlock
  // (stage 0 in B, stage 1 in C); buffered ones, as on the CPU, do not.
  REQUIRE_DOUBLES();
  Plan file;
  file.target = "cuda-sm_90";
  file.mesh = {{"pp", "dp"}, {2, 2}};
  auto p2p = [](CollectiveOp op, uint64_t buffer, uint32_t id) {
    Command c = collective(op, {0}, 8, buffer, 0, id);
    c.buffers = {buffer};
    c.collective.root = 0; // The sender's group index (stage 0).
    c.collective.peer = 1; // The receiver's.
    return c;
  };
  Plan stage0, stage1;
  for (Plan *stage : {&stage0, &stage1}) {
    stage->target = file.target;
    stage->mesh = file.mesh;
    stage->arenaBytes = 4096;
  }
  Command a = p2p(CollectiveOp::Send, 0, 0),
          b = p2p(CollectiveOp::Send, 256, 1);
  Command c = p2p(CollectiveOp::Recv, 512, 2);
  std::swap(c.collective.root, c.collective.peer); // From stage 1 to 0.
  stage0.commands = {a, b, c};
  Command ra = p2p(CollectiveOp::Recv, 0, 0),
          rb = p2p(CollectiveOp::Recv, 512, 1);
  Command sc = p2p(CollectiveOp::Send, 256, 2);
  std::swap(sc.collective.root, sc.collective.peer);
  stage1.commands = {ra, sc, rb};
  file.stages = {stage0, stage1};
  auto world = createLocalWorld(kRanks, 30);
  std::string errors[kRanks];
  std::vector<float> at0[kRanks], at512[kRanks];
  onRanks([&](int r) {
    const Plan &mine = file.stages[r / 2];
    collectivesRank(dd, world, r, mine, file, 10, &errors[r],
                    [&](RankDevice &d, CudaCollectives &cc) {
                      std::vector<float> in = operandOf(r), more = in;
                      for (float &v : more)
                        v += 1000;
                      d.put(d.memory, in.data(), 32);
                      d.put(d.memory + 256, more.data(), 32);
                      errors[r] = take(runList(cc, mine.commands));
                      at0[r] = d.get<float>(d.memory, 8);
                      at512[r] = d.get<float>(d.memory + 512, 8);
                    });
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    int partner = r < 2 ? r + 2 : r - 2;
    std::vector<float> theirs = operandOf(partner), theirsMore = theirs;
    for (float &v : theirsMore)
      v += 1000;
    EXPECT_EQ(at512[r], theirsMore) << "rank " << r;
    EXPECT_EQ(at0[r], r < 2 ? operandOf(r) : theirs) << "rank " << r;
  }
}

TEST(NcclDouble, APeerThatNeverComesTimesOutNamingTheCollective) {
  REQUIRE_DOUBLES();
  Plan file;
  file.target = "cuda-sm_90";
  file.arenaBytes = 4096;
  file.mesh = {{"dp"}, {kRanks}};
  file.commands.push_back(
      collective(CollectiveOp::AllReduce, {0}, 8, 0, 256, 3));
  file.commands.back().collective.source = "node /x";
  Plan skipping = file; // Rank 3 runs no collective.
  skipping.commands.clear();
  // The CPU communicator's timeout bounds the liveness check that names
  // rank 3 after the NCCL timeout.
  auto world = createLocalWorld(kRanks, 2);
  std::string errors[kRanks], runs[kRanks];
  Barrier done;
  onRanks([&](int r) {
    collectivesRank(
        dd, world, r, r == 3 ? skipping : file, file, 1.0, &errors[r],
        [&](RankDevice &, CudaCollectives &cc) {
          runs[r] =
              take(runList(cc, r == 3 ? skipping.commands : file.commands));
          // Rank 3 keeps its communicators until the others
          // gave up.
          done.wait();
          if (r != 3)
            runs[r] += " | then: " + take(runList(cc, file.commands));
        });
  });
  // The first rank to give up names the timeout; the others may see its
  // abort first. Every rank names itself and the collective.
  int timedOut = 0;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    if (r == 3) {
      EXPECT_EQ(runs[r], "");
      continue;
    }
    std::string prefix = "rank " + std::to_string(r) +
                         ": all_reduce #3 (node /x) did not complete";
    EXPECT_EQ(runs[r].rfind(prefix, 0), 0u) << runs[r];
    timedOut += runs[r].rfind(prefix + " within 0.5 s (the 1 s communication "
                                       "timeout less the 0.5 s of the "
                                       "liveness check); ",
                              0) == 0;
    // NCCL cannot say who is missing; the liveness check over the CPU
    // communicator does.
    EXPECT_NE(runs[r].find("rank 3 never reached all_reduce (liveness check "
                           "after an NCCL failure)"),
              std::string::npos)
        << runs[r];
    // The communicators are gone: a later run says so.
    EXPECT_NE(runs[r].find(" | then: rank " + std::to_string(r) +
                           ": the NCCL communicators were aborted after an "
                           "earlier failure (all_reduce #3"),
              std::string::npos)
        << runs[r];
  }
  EXPECT_GE(timedOut, 1);
}

namespace {
/// Runs two all-reduces on every rank with $CLEAVE_NCCL_DOUBLE_FAULT set;
/// returns each rank's init error and run error.
void runWithFault(const char *fault, std::string *initErrors,
                  std::string *runErrors) {
  const Doubles &dd = doubles();
  ScopedEnv env("CLEAVE_NCCL_DOUBLE_FAULT", fault);
  ScopedEnv initTimeout("CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT", "3");
  Plan plan;
  plan.target = "cuda-sm_90";
  plan.arenaBytes = 4096;
  plan.mesh = {{"dp"}, {kRanks}};
  plan.commands.push_back(
      collective(CollectiveOp::AllReduce, {0}, 8, 0, 256, 0));
  plan.commands.push_back(
      collective(CollectiveOp::AllReduce, {0}, 8, 0, 512, 1));
  auto world = createLocalWorld(kRanks, 20);
  onRanks([&](int r) {
    collectivesRank(dd, world, r, plan, plan, 20, &initErrors[r],
                    [&](RankDevice &, CudaCollectives &cc) {
                      runErrors[r] = take(runList(cc, plan.commands));
                    });
  });
}
} // namespace

TEST(NcclDouble, AnAsyncErrorAbortsAndNamesTheCollective) {
  REQUIRE_DOUBLES();
  std::string init[kRanks], run[kRanks];
  runWithFault("kind=async,rank=1,call=2", init, run);
  // Every rank fails (rank 1 by the fault, the others because it aborted),
  // naming itself, a collective and NCCL's text.
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(init[r], "") << "rank " << r;
    EXPECT_EQ(run[r].rfind("rank " + std::to_string(r) + ": all_reduce #", 0),
              0u)
        << run[r];
    EXPECT_NE(run[r].find(" did not complete: an asynchronous NCCL operation "
                          "failed: ncclResult "),
              std::string::npos)
        << run[r];
  }
  EXPECT_NE(run[1].find("ncclResult 2 (unhandled system error): injected "
                        "fault: rank 1's call #2"),
            std::string::npos)
      << run[1];
}

TEST(NcclDouble, AMismatchedCountIsReportedWithNcclsText) {
  REQUIRE_DOUBLES();
  std::string init[kRanks], run[kRanks];
  runWithFault("kind=count,rank=1,call=1", init, run);
  int withText = 0;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(init[r], "") << "rank " << r;
    EXPECT_EQ(run[r].rfind("rank " + std::to_string(r) + ": all_reduce #", 0),
              0u)
        << run[r];
    withText +=
        run[r].find("ncclResult 5 (invalid usage): ") != std::string::npos &&
        run[r].find("rank 1 called ncclAllReduce(count=9") != std::string::npos;
  }
  EXPECT_GE(withText, 1) << run[0] << "\n" << run[1];
}

TEST(NcclDouble, AnInitFailureNamesTheRankAndNcclsText) {
  REQUIRE_DOUBLES();
  std::string init[kRanks], run[kRanks];
  runWithFault("kind=init,rank=1", init, run);
  EXPECT_EQ(init[1].rfind("rank 1: cannot join the NCCL world communicator "
                          "of 4 ranks: ncclCommInitRank failed: ncclResult 2 ",
                          0),
            0u)
      << init[1];
  EXPECT_NE(init[1].find("injected init failure of rank 1"), std::string::npos)
      << init[1];
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(init[r], "") << "rank " << r << " joined a broken world";
    EXPECT_EQ(init[r].rfind("rank " + std::to_string(r) + ": ", 0), 0u)
        << init[r];
  }
}

//===----------------------------------------------------------------------===//
// The CUDA backend: eager, captured and replayed runs
//===----------------------------------------------------------------------===//

TEST(NcclDouble, CudaBackendRunsCollectivesEagerlyAndInAGraph) {
  REQUIRE_DOUBLES();
  // The runtime's own loaders, pointed at the doubles before their first
  // use in this process.
  ScopedEnv driver("CLEAVE_CUDA_DRIVER_LIBRARY", driverPath().c_str());
  ScopedEnv nccl("CLEAVE_NCCL_LIBRARY", ncclPath().c_str());
  const DriverApi *cu = nullptr;
  const NcclLibrary *lib = nullptr;
  std::string why = take(loadDriver(&cu));
  if (why.empty())
    why = take(NcclLibrary::load(&lib));
  if (!why.empty() || cu->handle == nullptr ||
      !dlsym(cu->handle, "cleaveDoubleSetCommand"))
    GTEST_SKIP() << "this process loaded another driver or NCCL first (run "
                    "the test alone, as ctest does): "
                 << why;
  Plan plan = everyCollectivePlan();
  plan.inputs.push_back(tensorInfo("x", 0));
  for (const Command &c : plan.commands)
    if (c.kind == CommandKind::Collective)
      plan.outputs.push_back(
          tensorInfo(describe(c.collective), c.buffers[1],
                     collectiveResultBytes(
                         c.collective, c.collective.axes.size() == 2 ? 4 : 2) /
                         4));
  auto shared = std::make_shared<const Plan>(plan);
  auto world = createLocalWorld(kRanks, 30);
  std::string errors[kRanks];
  onRanks([&](int r) {
    std::unique_ptr<Communicator> comm = localCommunicator(world, r);
    std::unique_ptr<Backend> backend;
    errors[r] = take(createBackend("cuda", shared, comm.get(), &backend));
    if (!errors[r].empty())
      return;
    std::vector<float> in = operandOf(r);
    // Run 0 is eager, run 1 captures a graph, run 2 replays it.
    for (int run = 0; run < 3 && errors[r].empty(); ++run) {
      errors[r] = take(backend->writeTensor(plan.inputs[0], in.data()));
      if (errors[r].empty())
        errors[r] = take(backend->run());
      size_t k = 0;
      for (const Command &c : plan.commands) {
        if (!errors[r].empty() || c.kind != CommandKind::Collective)
          continue;
        const void *data = nullptr;
        errors[r] = take(backend->readTensor(plan.outputs[k++], &data));
        std::vector<float> want = reference(plan, c, r);
        if (errors[r].empty() &&
            std::memcmp(data, want.data(), want.size() * 4) != 0)
          errors[r] =
              describe(c.collective) + " differs in run " + std::to_string(run);
      }
    }
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}
