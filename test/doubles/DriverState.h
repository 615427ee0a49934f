//===- DriverState.h - State of the libcuda host double --------*- C++ -*-===//
//
// The tables the driver double keeps (DeviceDouble.h says what it checks):
// live allocations with their access history, agents (host threads and
// streams) with their vector clocks, streams with their worker threads and
// queues, events, stream captures and graphs. Everything is guarded by one
// mutex (State::mu); work itself always runs without it.
//
// Split by responsibility: DriverMemory.cpp (allocation table and the
// happens-before checker), DriverStreams.cpp (streams, events, enqueue,
// capture and graphs), DriverKernels.cpp (modules and kernel launches),
// CudaDriverDouble.cpp (shared state, devices, contexts and memory).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_DOUBLES_DRIVERSTATE_H
#define CLEAVE_TEST_DOUBLES_DRIVERSTATE_H

#include "DeviceDouble.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

/// Exported with default visibility whatever the build's preset.
#define CLEAVE_DOUBLE_EXPORT __attribute__((visibility("default")))

namespace cleave::cudadouble::driver {

using cleave::rt::cuda::CUcontext;
using cleave::rt::cuda::CUevent;
using cleave::rt::cuda::CUfunction;
using cleave::rt::cuda::CUgraph;
using cleave::rt::cuda::CUgraphExec;
using cleave::rt::cuda::CUmodule;

// Result codes of cuda.h (CUDA 13) the double returns.
constexpr CUresult kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2,
                   kNotInitialized = 3, kNoDevice = 100, kInvalidDevice = 101,
                   kInvalidImage = 200, kInvalidContext = 201,
                   kInvalidHandle = 400, kIllegalState = 401, kNotFound = 500,
                   kNotReady = 600, kNotSupported = 801,
                   kCaptureUnsupported = 900, kCaptureInvalidated = 901,
                   kCaptureMerge = 902, kCaptureUnmatched = 903,
                   kCaptureUnjoined = 904, kCaptureIsolation = 905,
                   kCaptureImplicit = 906, kCapturedEvent = 907,
                   kCaptureWrongThread = 908;

/// A vector clock: entry i is the last operation of agent i known to have
/// happened before.
using Clock = std::vector<uint64_t>;

inline uint64_t entryOf(const Clock &c, uint32_t agent) {
  return agent < c.size() ? c[agent] : 0;
}
void joinInto(Clock &into, const Clock &from);
/// Increments `agent`'s own entry of `c` and returns it.
uint64_t tick(Clock &c, uint32_t agent);

/// What an operation is, for messages; shared by its access records.
struct OpInfo {
  std::string what;
  std::string command;
  std::string agentName;
};

/// One recorded access of an allocation's bytes [begin, end).
struct AccessRecord {
  uint64_t begin = 0, end = 0;
  bool write = false;
  uint32_t agent = 0;
  uint64_t stamp = 0;
  std::string role;
  std::shared_ptr<const OpInfo> op;
};

/// A live block of device memory (host memory from mmap).
struct Allocation {
  CUdeviceptr base = 0;
  uint64_t bytes = 0;  ///< As requested.
  uint64_t mapped = 0; ///< Rounded up to pages.
  uint64_t id = 0;     ///< Sequence number, from 1.
  int device = 0;
  /// Accesses not yet known to be superseded, by begin address.
  std::multimap<uint64_t, AccessRecord> history;
  uint64_t longest = 0; ///< The longest record ever inserted.
};

/// A freed block, kept for messages (and its address kept out of reuse).
struct FreedBlock {
  CUdeviceptr base = 0;
  uint64_t bytes = 0, mapped = 0, id = 0;
  bool readable = true; ///< Still mapped (poisoned), else PROT_NONE.
  std::string freedBy;
};

/// A host thread or a stream: a clock and a name for messages.
struct Agent {
  std::string name;
  Clock clock;
};

struct Context {
  int device = 0;
  int refs = 0;
};

struct Capture;

/// A recording state shared by the event handle, the queued markers and
/// waits (an event may be destroyed while they are pending).
struct EventState {
  uint64_t recorded = 0; ///< Generations recorded so far (outside capture).
  /// Every generation up to this one has run its marker; `doneAbove` holds
  /// those above it that have. Kept per generation, not as the latest one
  /// that ran: an event recorded again on another stream may complete
  /// there first, and a wait on the earlier recording must still wait for
  /// it, as CUDA's does.
  uint64_t donePrefix = 0;
  std::set<uint64_t> doneAbove;
  bool isDone(uint64_t generation) const {
    return generation <= donePrefix || doneAbove.count(generation);
  }
  void markDone(uint64_t generation) {
    if (generation <= donePrefix)
      return;
    doneAbove.insert(generation);
    while (doneAbove.count(donePrefix + 1))
      doneAbove.erase(++donePrefix);
  }
  Clock clock;            ///< Snapshot of the last recording.
  std::string recordedOn; ///< Agent of the last recording.
  /// Set while the last record was made in a capture.
  std::shared_ptr<Capture> capture;
  size_t captureNode = 0;
};

struct Event {
  std::shared_ptr<EventState> state;
  uint64_t id = 0;
};

enum class OpKind { Work, Record, Wait };

/// One queued operation of a stream.
struct Op {
  OpKind kind = OpKind::Work;
  std::function<void()> work;
  std::vector<Access> accesses;
  std::vector<uint64_t> allocationIds; ///< Per access, 0 if empty.
  std::shared_ptr<const OpInfo> info;
  std::shared_ptr<EventState> event;
  uint64_t generation = 0;
};

struct Stream {
  uint64_t id = 0;
  uint32_t agent = 0;
  Context *ctx = nullptr;
  std::deque<Op> queue;
  uint64_t enqueued = 0, completed = 0;
  bool stop = false;
  std::thread worker;
  std::shared_ptr<Capture> capture; ///< Non-null while capturing.
};

/// One operation recorded by a capture.
struct GraphNode {
  OpKind kind = OpKind::Work;
  size_t stream = 0; ///< Index into the capture's / graph's streams.
  std::string what, command;
  std::vector<Access> accesses;
  std::function<void()> work;
  size_t recordNode = 0; ///< Wait: the Record node it waits for.
};

struct Capture {
  Stream *origin = nullptr;
  int mode = 0;
  std::thread::id thread;
  bool active = true;
  bool invalidated = false;
  std::string invalidatedBy;
  std::vector<Stream *> streams; ///< streams[0] is the origin.
  std::vector<GraphNode> nodes;
};

/// A captured graph (and, shared, its instantiations): nodes and the ids of
/// the streams they were captured on.
struct Graph {
  std::shared_ptr<const std::vector<GraphNode>> nodes;
  std::vector<uint64_t> streamIds;
  uint64_t id = 0;
};

/// Host code attached to an image pointer (cleaveDoubleAttachHostKernels).
struct HostKernelTable {
  std::vector<uint8_t> object;
  std::vector<std::string> names;
  std::vector<std::vector<uint64_t>> argBytes;
  std::vector<std::vector<bool>> argWrites;
};

/// A dlopened host kernel object; closed when the last user releases it.
struct LoadedObject {
  void *handle = nullptr;
  int fd = -1;
  ~LoadedObject();
};

enum class KernelKind {
  Host,
  AttentionForward,
  AttentionRows,
  AttentionDq,
  AttentionDkdv
};

struct Function {
  std::string name;
  KernelKind kind = KernelKind::Host;
  void (*host)(void **) = nullptr;
  std::shared_ptr<LoadedObject> object;
  std::vector<uint64_t> argBytes;
  std::vector<bool> argWrites;
  int maxDynamicShared = 48 * 1024;
};

struct Module {
  uint64_t id = 0;
  std::shared_ptr<LoadedObject> object;
  std::map<std::string, std::unique_ptr<Function>> functions;
};

/// The whole device; one per process, never destroyed (worker threads may
/// outlive static destructors).
struct State {
  std::mutex mu;
  std::condition_variable cv;

  bool initialized = false;
  int deviceCount = 8;
  uint64_t memoryBudget = uint64_t(8) << 30;
  std::vector<std::unique_ptr<Context>> contexts;
  std::vector<uint64_t> deviceUsed;

  std::deque<Agent> agents;

  std::map<CUdeviceptr, Allocation> allocations;
  /// Page-locked host blocks (cuMemHostAlloc) and their sizes.
  std::map<void *, size_t> hostBlocks;
  std::unordered_map<uint64_t, CUdeviceptr> allocationById;
  uint64_t nextAllocationId = 1;
  std::deque<FreedBlock> freed;
  uint64_t quarantineBytes = 0;

  std::set<Stream *> streams;
  uint64_t nextStreamId = 1;
  std::set<Event *> events;
  uint64_t nextEventId = 1;
  std::vector<std::shared_ptr<Capture>> captures; ///< Active ones.
  std::set<Graph *> graphs;
  std::set<Graph *> graphExecs;
  uint64_t nextGraphId = 1;

  std::map<const void *, HostKernelTable> hostKernels;
  std::set<Module *> modules;
  std::set<Function *> functions;
  uint64_t nextModuleId = 1;
};

State &state();

/// Per calling thread: its host agent, current context and plan command.
struct ThreadState {
  uint32_t agent = UINT32_MAX;
  Context *ctx = nullptr;
  std::string command;
};
ThreadState &thread();

/// The calling thread's agent (registered on first use; needs State::mu).
uint32_t hostAgent(State &s);
std::string agentName(State &s, uint32_t agent);
/// A new agent named `name`; needs State::mu.
uint32_t newAgent(State &s, std::string name);

/// The calling thread's current context if it is retained, else null.
Context *currentContext();
/// CUDA_ERROR_INVALID_CONTEXT, printed, naming `call`.
CUresult noContext(const char *call);

/// Prints "cleave cuda double: <message>" (with the calling thread's plan
/// command) and returns `code`: for errors a real driver reports too.
CUresult refuse(CUresult code, const std::string &message);

/// "0x7f..": an address for messages.
std::string hex(uint64_t v);
/// "[0x.., 0x..) (N bytes)".
std::string rangeText(uint64_t begin, uint64_t bytes);

//===----------------------------------------------------------------------===//
// Memory (DriverMemory.cpp); all need State::mu held.
//===----------------------------------------------------------------------===//

/// Checks that every access lies in one live allocation (else fail naming
/// `info`), then against the history with `clock` (the operation's clock),
/// then records them as operation `stamp` of `agent`. Returns the
/// allocation id of each access (0 for empty ones).
std::vector<uint64_t> checkAndRecord(State &s, const std::vector<Access> &acc,
                                     const Clock &clock, uint32_t agent,
                                     uint64_t stamp,
                                     const std::shared_ptr<const OpInfo> &info);
/// Only the bounds part of checkAndRecord (for captured work).
void checkBounds(State &s, const std::vector<Access> &acc, const OpInfo &info);
/// At run time: every access's allocation is still live (else fail: use
/// after free).
void recheckLive(State &s, const Op &op);

CUresult allocate(State &s, int device, uint64_t bytes, CUdeviceptr *out);
/// Frees `ptr` after checking that every recorded access is ordered before
/// the calling thread's clock.
void release(State &s, CUdeviceptr ptr);

//===----------------------------------------------------------------------===//
// Streams (DriverStreams.cpp).
//===----------------------------------------------------------------------===//

/// Null, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: the legacy stream.
inline bool isLegacy(CUstream s) { return reinterpret_cast<uintptr_t>(s) <= 2; }
/// The live stream `h` (not the legacy one), or null; needs State::mu.
Stream *findStream(State &s, CUstream h);
/// Fails naming `call` unless `h` is the legacy stream or a live stream.
Stream *streamOrFail(State &s, CUstream h, const char *call);

/// Queues (or captures) `work` on `h` with the calling thread's command;
/// `lock` holds State::mu and is released while legacy work runs.
CUresult enqueueLocked(State &s, std::unique_lock<std::mutex> &lock, CUstream h,
                       const std::string &what, std::vector<Access> accesses,
                       std::function<void()> work);

/// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED if a capture forbids a
/// synchronous call of this thread now (invalidating it), else success.
CUresult syncCallDuringCapture(State &s, const char *call);

} // namespace cleave::cudadouble::driver

#endif // CLEAVE_TEST_DOUBLES_DRIVERSTATE_H
