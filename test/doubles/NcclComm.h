//===- NcclComm.h - A rank's view of an NCCL double comm --------*- C++ -*-===//
//
// One rank's state of one communicator (its mapping of the shared segment,
// counters of the calls it ran, its async error), the live handles, and
// joining a communicator; plus the environment and unique ids.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_DOUBLES_NCCLCOMM_H
#define CLEAVE_TEST_DOUBLES_NCCLCOMM_H

#include "CudaApi.h"
#include "NcclSegment.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cleave::nccldouble {

using namespace cleave::rt::cuda;
using Clock = std::chrono::steady_clock;

/// Records `message` as the calling thread's last error and returns `r`.
ncclResult_t error(ncclResult_t r, std::string message);
/// The calling thread's last error text ("" when none).
const char *lastErrorMessage();

std::string str(uint64_t v);
std::string pointerString(const void *p);
/// "rank 2" or "ranks 0, 3".
std::string rankList(const std::vector<int> &ranks);

//===----------------------------------------------------------------------===//
// Environment and unique ids
//===----------------------------------------------------------------------===//

/// A fault injected by $CLEAVE_NCCL_DOUBLE_FAULT.
struct Fault {
  enum class Kind { None, Init, Async, Count };
  Kind kind = Kind::None;
  int rank = -1;
  /// 1-based index of the call on the communicator (collectives, sends and
  /// recvs together, in the order this rank runs them).
  uint64_t call = 0;
};

/// Parses $CLEAVE_NCCL_DOUBLE_FAULT strictly; fail()s on a bad value.
Fault readFault();

/// $CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT in seconds (default 60); fail()s on a
/// bad value.
double readInitTimeout();

/// A fresh random communicator name: 32 hex digits.
std::string newIdHex();
/// The name of the communicator of `color` made by split number `k` (from
/// 0) of the communicator named `parentHex`: the same on every rank.
std::string splitIdHex(const std::string &parentHex, uint64_t k, int color);
/// Writes the name into an id.
void writeId(ncclUniqueId *id, const std::string &hex);
/// The name in `id`, or "" when ncclGetUniqueId of this double did not
/// make it.
std::string readId(const ncclUniqueId &id);

//===----------------------------------------------------------------------===//
// CommState
//===----------------------------------------------------------------------===//

/// One rank's view of a communicator.
class CommState {
public:
  CommState(std::string hex, int nranks, int rank)
      : hex(std::move(hex)), nranks(nranks), rank(rank), layout(nranks),
        sends(nranks), recvs(nranks), sendsDone(nranks), recvsDone(nranks) {
    shmName = "/cleave-nccl-" + this->hex;
    label = "communicator " + this->hex.substr(0, 8);
  }

  ~CommState();

  /// The communicator's name (32 hex digits) and its segment's name.
  const std::string hex;
  std::string shmName;
  /// "communicator 3fa2b1c4", for messages.
  std::string label;
  const int nranks, rank;
  const SegmentLayout layout;
  /// This rank's mapping of the segment (null until mapped).
  char *base = nullptr;
  /// The fault this rank injects (None unless the comm was made by
  /// ncclCommInitRank with the fault's rank).
  Fault fault;

  // The parts of the segment (NcclSegment.h).
  SegmentHeader &header() { return *reinterpret_cast<SegmentHeader *>(base); }
  RankSlot &slot(int r) {
    return reinterpret_cast<RankSlot *>(base + layout.slots)[r];
  }
  Channel &channel(int from, int to) {
    return reinterpret_cast<Channel *>(base +
                                       layout.channels)[from * nranks + to];
  }
  char *staging(int r) { return base + layout.staging + r * kStagingBytes; }
  char *mailbox(int from, int to) {
    return base + layout.mailboxes +
           size_t(from * nranks + to) * layout.mailbox;
  }

  /// Held by the work running on the communicator, which alone uses the
  /// counters below: calls run (for faults), collectives run, staging
  /// steps taken, and per peer the sends and recvs numbered and finished.
  std::mutex execMutex;
  uint64_t calls = 0, collectives = 0, steps = 0;
  std::vector<uint64_t> sends, recvs, sendsDone, recvsDone;

  /// Set by this rank's ncclCommAbort / ncclCommDestroy.
  std::atomic<bool> aborted{false}, destroyed{false};

  ncclResult_t asyncError() const {
    return errorCode.load(std::memory_order_acquire);
  }
  /// Records the async error (the first one wins).
  void setError(ncclResult_t r, const std::string &text) {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (errorCode.load(std::memory_order_relaxed) != ncclSuccess)
      return;
    errorText = text;
    errorCode.store(r, std::memory_order_release);
  }
  /// The async error's text; stable once asyncError() is set.
  const char *errorMessage() {
    std::lock_guard<std::mutex> lock(errorMutex);
    return errorText.c_str();
  }

  /// False when this rank can run no more work on the communicator: it
  /// aborted, has an async error, or a peer aborted (which becomes the
  /// async error ncclRemoteError).
  bool usable() {
    if (aborted.load(std::memory_order_acquire) || asyncError() != ncclSuccess)
      return false;
    int by = header().abortedBy.load(std::memory_order_acquire);
    if (by == 0)
      return true;
    if (by != rank + 1)
      setError(ncclRemoteError,
               "rank " + str(by - 1) + " aborted the " + label);
    return false;
  }

  /// Polls `ready` until it holds (true) or the communicator becomes
  /// unusable (false).
  template <typename Ready> bool waitUntil(Ready ready) {
    Backoff backoff;
    while (!ready()) {
      if (!usable())
        return false;
      backoff.pause();
    }
    return true;
  }

  /// Whether every rank's counter `member` has reached `v`.
  bool allAtLeast(std::atomic<uint64_t> RankSlot::*member, uint64_t v) {
    for (int q = 0; q < nranks; ++q)
      if ((slot(q).*member).load(std::memory_order_acquire) < v)
        return false;
    return true;
  }

  // Work queued and not yet run, for ncclCommDestroy.
  void addPending() {
    std::lock_guard<std::mutex> lock(pendingMutex);
    ++pending;
  }
  void finishPending() {
    std::lock_guard<std::mutex> lock(pendingMutex);
    if (--pending == 0)
      pendingCv.notify_all();
  }
  void waitPending() {
    std::unique_lock<std::mutex> lock(pendingMutex);
    pendingCv.wait(lock, [&] { return pending == 0; });
  }

  std::mutex splitMutex;
  uint64_t splitCount = 0;

private:
  std::atomic<int> errorCode{ncclSuccess};
  std::mutex errorMutex;
  std::string errorText;
  std::mutex pendingMutex;
  std::condition_variable pendingCv;
  int pending = 0;
};

using StatePtr = std::shared_ptr<CommState>;

/// A new live handle for `state`.
ncclComm_t registerComm(StatePtr state);
/// The state of a live handle, or null.
StatePtr lookup(ncclComm_t c);
/// Forgets and frees the handle; returns its state (null if not live).
StatePtr unregister(ncclComm_t c);
/// ncclInvalidArgument, naming `fn` and the handle that is not live.
ncclResult_t notLive(const char *fn, ncclComm_t c);

/// Maps the segment of communicator `hex` as `rank` of `nranks` and waits
/// until every rank has joined ($CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT).
ncclResult_t joinComm(const std::string &fn, const std::string &hex, int nranks,
                      int rank, const Fault &fault, StatePtr *out);

} // namespace cleave::nccldouble

#endif // CLEAVE_TEST_DOUBLES_NCCLCOMM_H
