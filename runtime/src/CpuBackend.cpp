//===- CpuBackend.cpp - Runs a plan on the host CPU -----------------------===//

#include "Attention.h"
#include "Backend.h"
#include "Gemm.h"
#include "GroupedGemm.h"
#include "KernelLibrary.h"
#include "RandomInit.h"

#include <chrono>
#include <functional>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <tuple>

#include <unistd.h>

namespace cleave::rt {

using namespace plan;

namespace {
/// The communication stream of a rank: a thread that runs collectives in
/// the order they are submitted. Each submission completes an event that
/// the compute stream waits for. After a failure the later submissions are
/// skipped with the same error, so a failed step leaves no collective
/// touching the arena once every event has been waited for.
class CommStream {
public:
  using Task = std::function<cleave_rt_status()>;
  explicit CommStream(size_t numEvents) : events(numEvents) {
    thread = std::thread([this] { loop(); });
  }
  ~CommStream() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    cv.notify_all();
    thread.join();
    for (Event &e : events)
      cleave_rt_status_free(e.status);
  }
  /// Starts a run: every event pending, no failure.
  void reset() {
    std::lock_guard<std::mutex> lock(mu);
    for (Event &e : events) {
      cleave_rt_status_free(e.status);
      e = Event();
    }
    failed.clear();
  }
  void submit(size_t event, Task task) {
    {
      std::lock_guard<std::mutex> lock(mu);
      cleave_rt_status_free(events[event].status);
      events[event] = Event();
      queue.push_back({event, std::move(task)});
    }
    cv.notify_all();
  }
  /// Waits for `event` and returns its status (owned by the caller).
  cleave_rt_status wait(size_t event) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return events[event].done; });
    cleave_rt_status s = events[event].status;
    events[event].status = nullptr;
    return s;
  }
  /// Waits until every submitted task has finished.
  void drain() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return queue.empty() && !busy; });
  }

private:
  struct Event {
    bool done = false;
    cleave_rt_status status = nullptr;
  };
  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        return;
      auto [event, task] = std::move(queue.front());
      queue.pop_front();
      busy = true;
      cleave_rt_status s =
          failed.empty()
              ? nullptr
              : makeStatus(CLEAVE_RT_UNAVAILABLE,
                           "skipped after an earlier failure: " + failed);
      lock.unlock();
      if (!s)
        s = task();
      lock.lock();
      if (s && failed.empty())
        failed = cleave_rt_status_message(s);
      events[event].status = s;
      events[event].done = true;
      busy = false;
      cv.notify_all();
    }
  }

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<size_t, Task>> queue;
  std::vector<Event> events;
  std::string failed;
  bool stopping = false, busy = false;
  std::thread thread;
};

class CpuBackend final : public Backend {
public:
  CpuBackend(PlanRef plan, Communicator *comm)
      : plan(std::move(plan)), comm(comm) {}
  ~CpuBackend() override {
    comms.reset(); // joins the thread before the arena goes
    std::free(arena);
  }
  cleave_rt_status init();

  const char *name() const override { return "cpu"; }
  std::string deviceInfo() const override {
    return "cpu (kernels: " + threads.describe() +
           ", GEMMs: " + gemmLibraries() + ")";
  }
  cleave_rt_status writeTensor(const TensorInfo &tensor,
                               const void *data) override {
    if (tensor.byteSize())
      std::memcpy(arena + tensor.offset, data, tensor.byteSize());
    return nullptr;
  }
  cleave_rt_status readTensor(const TensorInfo &tensor,
                              const void **out_data) override {
    *out_data = arena + tensor.offset;
    return nullptr;
  }
  uint8_t *hostArena() override { return arena; }
  cleave_rt_status run() override {
    beginRun();
    if (comms)
      comms->reset();
    CLEAVE_RT_RETURN_IF_ERROR(settle(
        runCommands(plan->commands, profiling ? &profileRecords : nullptr)));
    profileRuns += profiling;
    return flushSends();
  }
  bool supportsProfiling() const override { return true; }
  void setProfiling(bool on) override;

private:
  /// Runs `commands`; with `profile`, adds each one's time to its record.
  cleave_rt_status
  runCommands(const std::vector<Command> &commands,
              std::vector<cleave_rt_command_profile_t> *profile = nullptr);
  /// Runs command `index` of `c`'s list.
  cleave_rt_status runCommand(size_t index, const Command &c);
  cleave_rt_status runCollective(size_t index, const Command &c);
  /// A RandomNormal init command of a sharded state (5 parameters).
  void fillShardNormal(const Command &c);
  /// Waits for every collective still in flight after a failed run, so
  /// nothing writes the arena after run() returns; returns `status`.
  cleave_rt_status settle(cleave_rt_status status);
  /// Waits until this run's sends have been delivered (Communicator::flush),
  /// on the thread that runs the collectives.
  cleave_rt_status flushSends();

  PlanRef plan;
  Communicator *comm;
  /// Per command index: the group of its collective (for this rank).
  std::vector<Group> groups;
  /// Only plans with asynchronous collectives have one; synchronous ones
  /// then go through it too, to keep the plan's order of collectives.
  std::unique_ptr<CommStream> comms;
  /// Event used by synchronous collectives on the communication thread.
  size_t syncEvent = 0;
  uint8_t *arena = nullptr;
  KernelThreads threads;
  std::unique_ptr<KernelLibrary> kernels;
  std::vector<void *> args; ///< Scratch for kernel arguments.
  bool profiling = false;
  std::vector<std::string> profileLabels; ///< Owns the records' labels.
};
} // namespace

cleave_rt_status CpuBackend::init() {
  // One block, aligned to at least 64 bytes, never empty so the base pointer
  // is valid even for plans without buffers.
  uint64_t align = plan->alignment < 64 ? 64 : plan->alignment;
  uint64_t bytes = (plan->arenaBytes + align - 1) / align * align;
  if (bytes == 0)
    bytes = align;
  if (bytes < plan->arenaBytes || bytes > SIZE_MAX)
    return makeStatus(CLEAVE_RT_RESOURCE_EXHAUSTED,
                      "arena of " + std::to_string(plan->arenaBytes) +
                          " bytes is too large for this machine");
  // More than the machine's memory would be granted lazily and end in the
  // kernel's out-of-memory killer when the arena is zeroed: refuse it here.
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && pageSize > 0 &&
      bytes > static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize))
    return makeStatus(CLEAVE_RT_RESOURCE_EXHAUSTED,
                      "the plan's arena of " +
                          std::to_string(plan->arenaBytes) +
                          " bytes is more than this machine's " +
                          std::to_string(static_cast<uint64_t>(pages) *
                                         static_cast<uint64_t>(pageSize)) +
                          " bytes of memory");
  arena = static_cast<uint8_t *>(std::aligned_alloc(align, bytes));
  if (!arena)
    return makeStatus(CLEAVE_RT_RESOURCE_EXHAUSTED,
                      "cannot allocate the arena of " +
                          std::to_string(plan->arenaBytes) + " bytes");
  std::memset(arena, 0, bytes);
  int64_t rank = comm ? comm->rank() : 0;
  // Each constant's value, or this rank's shard of it.
  CLEAVE_RT_RETURN_IF_ERROR(forEachConstantValue(
      *plan, rank,
      [&](const Constant &c, const uint8_t *bytes) -> cleave_rt_status {
        std::memcpy(arena + c.info.offset, bytes, c.info.byteSize());
        return nullptr;
      },
      &bytesReadFromFiles));
  size_t maxArgs = 0;
  for (const auto *list : {&plan->commands, &plan->initCommands})
    for (const Command &c : *list)
      if (c.kind == CommandKind::Kernel && c.buffers.size() > maxArgs)
        maxArgs = c.buffers.size();
  args.resize(maxArgs);
  CLEAVE_RT_RETURN_IF_ERROR(KernelLibrary::load(
      plan->kernelObject, plan->kernelNames, &threads, &kernels));
  groups.resize(plan->commands.size());
  bool async = false;
  for (size_t i = 0; i < plan->commands.size(); ++i) {
    const Command &c = plan->commands[i];
    if (c.kind != CommandKind::Collective)
      continue;
    groups[i] = groupOf(plan->mesh, c.collective.axes, rank);
    async |= c.stream == kCommStream;
  }
  if (async) {
    syncEvent = static_cast<size_t>(plan->numEvents);
    comms = std::make_unique<CommStream>(syncEvent + 1);
  }
  // Once, after the constants: e.g. zeroing the optimizer state.
  return runCommands(plan->initCommands);
}

void CpuBackend::setProfiling(bool on) {
  profiling = on;
  profileRuns = 0;
  profileRecords.clear();
  profileLabels.clear();
  if (!on)
    return;
  profileLabels.reserve(plan->commands.size());
  for (const Command &c : plan->commands) {
    std::string label;
    switch (c.kind) {
    case CommandKind::Kernel:
      label = plan->kernelNames[static_cast<size_t>(c.params[0])];
      break;
    case CommandKind::Gemm:
      label = "M=" + std::to_string(c.params[kGemmM]) +
              " N=" + std::to_string(c.params[kGemmN]) +
              " K=" + std::to_string(c.params[kGemmK]);
      if (c.params[kGemmBatch] != 1)
        label += " batch " + std::to_string(c.params[kGemmBatch]);
      break;
    case CommandKind::Attention:
    case CommandKind::AttentionBackward:
      label = "B=" + std::to_string(c.params[kAttnBatch]) +
              " H=" + std::to_string(c.params[kAttnQHeads]) + "/" +
              std::to_string(c.params[kAttnKVHeads]) +
              " Sq=" + std::to_string(c.params[kAttnQLen]) +
              " Skv=" + std::to_string(c.params[kAttnKVLen]) +
              " D=" + std::to_string(c.params[kAttnHeadDim]);
      break;
    case CommandKind::GroupedGemm:
      label = std::string(c.params[kGroupedWeightGrad] ? "dW " : "") +
              "rows=" + std::to_string(c.params[kGroupedRows]) +
              " N=" + std::to_string(c.params[kGroupedN]) +
              " K=" + std::to_string(c.params[kGroupedK]) + " experts " +
              std::to_string(c.params[kGroupedExperts]);
      break;
    case CommandKind::Copy:
    case CommandKind::Fill:
      label = std::to_string(c.params[0]) + " bytes";
      break;
    default:
      break;
    }
    profileLabels.push_back(std::move(label));
  }
  for (size_t i = 0; i < plan->commands.size(); ++i)
    profileRecords.push_back({commandKindName(plan->commands[i].kind),
                              profileLabels[i].c_str(), 0.0});
}

cleave_rt_status
CpuBackend::runCommands(const std::vector<Command> &commands,
                        std::vector<cleave_rt_command_profile_t> *profile) {
  for (size_t i = 0; i < commands.size(); ++i) {
    if (!profile) {
      CLEAVE_RT_RETURN_IF_ERROR(runCommand(i, commands[i]));
      continue;
    }
    auto started = std::chrono::steady_clock::now();
    cleave_rt_status status = runCommand(i, commands[i]);
    (*profile)[i].seconds += std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - started)
                                 .count();
    if (status)
      return status;
  }
  return nullptr;
}

cleave_rt_status CpuBackend::runCommand(size_t index, const Command &c) {
  switch (c.kind) {
  case CommandKind::Kernel:
    for (size_t i = 0; i < c.buffers.size(); ++i)
      args[i] = arena + c.buffers[i];
    kernels->kernel(static_cast<size_t>(c.params[0]))(args.data());
    break;
  case CommandKind::Gemm:
    runGemm(c, arena, &threads);
    break;
  case CommandKind::Attention:
  case CommandKind::AttentionBackward:
    runAttention(c, arena, threads);
    break;
  case CommandKind::GroupedGemm:
    runGroupedGemm(c, arena, &threads);
    break;
  case CommandKind::Copy:
    if (c.params[0])
      std::memmove(arena + c.buffers[1], arena + c.buffers[0],
                   static_cast<size_t>(c.params[0]));
    break;
  case CommandKind::Fill:
    if (c.params[0])
      std::memset(arena + c.buffers[0], static_cast<int>(c.params[1]),
                  static_cast<size_t>(c.params[0]));
    break;
  case CommandKind::RandomNormal:
    if (c.params.size() == 5)
      fillShardNormal(c);
    else
      fillNormal(c, 0, c.params[0],
                 reinterpret_cast<float *>(arena + c.buffers[0]));
    break;
  case CommandKind::Collective:
    CLEAVE_RT_RETURN_IF_ERROR(runCollective(index, c));
    break;
  case CommandKind::Wait:
    CLEAVE_RT_RETURN_IF_ERROR(comms->wait(static_cast<size_t>(c.event)));
    break;
  case CommandKind::Marker:
    mark(c);
    break;
  case CommandKind::GpuLaunch: // Rejected by the validator.
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "GPU launch command in a CPU plan");
  }
  return nullptr;
}

void CpuBackend::fillShardNormal(const Command &c) {
  // Each element of the shard is drawn at its index in the global tensor.
  const TensorInfo &t = plan->states[static_cast<size_t>(c.params[4])].info;
  float *dst = reinterpret_cast<float *>(arena + c.buffers[0]);
  forEachShardRow(globalShape(t, plan->mesh), t.shape,
                  shardOffsets(t, plan->mesh, comm ? comm->rank() : 0),
                  [&](int64_t g, int64_t l, int64_t n) {
                    fillNormal(c, g, g + n, dst + l);
                  });
}

cleave_rt_status CpuBackend::runCollective(size_t index, const Command &c) {
  const CollectiveInfo &info = c.collective;
  const Group &group = groups[index];
  const void *src;
  void *dst;
  std::tie(src, dst) = collectiveBuffers(c, arena);
  if (info.op == CollectiveOp::AllSlice) {
    // Local: this rank's slice, chosen by its group index.
    sliceShard(info, group.index,
               std::max<int64_t>(static_cast<int64_t>(group.ranks.size()), 1),
               src, dst);
    return nullptr;
  }
  // Queued now; the communication thread may start it later.
  int64_t enqueued =
      comm && comm->flightRecorder() ? FlightRecorder::nowNs() : 0;
  auto task = [this, &info, &group, src, dst, enqueued]() -> cleave_rt_status {
    if (!comm) {
      // A one-rank mesh: every group is this rank alone.
      if (dst)
        computeCollective(info, 0, 1, &src, dst);
      return nullptr;
    }
    return comm->run(info, group, src, dst, enqueued);
  };
  if (!comms)
    return task();
  if (c.stream == kCommStream) {
    comms->submit(static_cast<size_t>(c.event), task);
    return nullptr;
  }
  comms->submit(syncEvent, task);
  return comms->wait(syncEvent);
}

cleave_rt_status CpuBackend::settle(cleave_rt_status status) {
  // The peers are told by the driver (cleave_rt_communicator_abort), which
  // reports the error first: an MPI abort ends every process at once.
  if (!status)
    return nullptr;
  if (comms)
    comms->drain();
  return status;
}

cleave_rt_status CpuBackend::flushSends() {
  if (!comm)
    return nullptr;
  if (!comms)
    return comm->flush();
  comms->submit(syncEvent, [this] { return comm->flush(); });
  return comms->wait(syncEvent);
}

cleave_rt_status createCpuBackend(PlanRef plan, Communicator *comm,
                                  std::unique_ptr<Backend> *out) {
  if (plan->target.rfind("cpu", 0) != 0)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "the plan targets '" + plan->target +
                          "' and cannot run on the cpu backend");
  auto backend = std::make_unique<CpuBackend>(std::move(plan), comm);
  CLEAVE_RT_RETURN_IF_ERROR(backend->init());
  *out = std::move(backend);
  return nullptr;
}

cleave_rt_status createBackend(const std::string &name, PlanRef plan,
                               Communicator *comm,
                               std::unique_ptr<Backend> *out,
                               const Plan *file) {
  if (name.empty() || name == "cpu")
    return createCpuBackend(std::move(plan), comm, out);
  if (name == "cuda")
    return createCudaBackend(std::move(plan), comm, file, out);
  return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                    "unknown backend '" + name + "' (known: cpu, cuda)");
}

} // namespace cleave::rt
