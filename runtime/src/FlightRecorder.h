//===- FlightRecorder.h - A rank's last collectives ------------*- C++ -*-===//
//
// --flight-recorder=DIR: every communicator of the process keeps a ring of
// its rank's last N collectives, sends and receives (Communicator::run
// records them, so the local, MPI and NCCL-bootstrap communicators all do):
// a sequence number per rank and one per group, the plan's collective id,
// kind, group (ranks and mesh axes), bytes, source node, and the steady-
// clock times it was enqueued, started and ended, with a wall-clock origin
// that aligns the ranks' clocks.
//
// Dumped as DIR/rank-<r>.json when a collective of the rank fails (a
// communication timeout or a peer's abort: then every recorder of the
// process dumps, so a rank thread that hangs outside any collective is
// recorded too), when the rank aborts, on SIGUSR1 (a thread of the
// process dumps, outside the handler), and on SIGSEGV, SIGBUS or SIGABRT.
// A crash signal may come while the process is broken, so its handler
// allocates nothing and takes no lock: it writes each recorder's ring
// with write(2) through a fixed buffer (the same JSON fields), to a path
// formatted when the recorder was made, renames it into place, restores
// the signal's previous action and raises it again. tools/cleave-flight
// merges the dumps.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_FLIGHTRECORDER_H
#define CLEAVE_RUNTIME_FLIGHTRECORDER_H

#include "cleave/PlanFormat.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace cleave::rt {

class FlightRecorder {
public:
  /// The most group ranks and source characters a record keeps.
  static constexpr int kMaxRanks = 64, kMaxAxes = 8, kMaxSource = 160;
  static constexpr size_t kDefaultCapacity = 2048;

  /// A recorder for `rank` of `world` writing into `dir` (created now),
  /// registered for the process's dumps and signals.
  FlightRecorder(const std::string &dir, int64_t rank, int64_t world,
                 size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder &) = delete;
  FlightRecorder &operator=(const FlightRecorder &) = delete;

  /// The steady clock, in nanoseconds: the records' times.
  static int64_t nowNs();
  /// Records that collective `c` over `group` starts now, enqueued at
  /// `enqueuedNs` (0: now); returns its sequence number for end().
  uint64_t begin(const plan::CollectiveInfo &c, const plan::Group &group,
                 uint64_t bytes, int64_t enqueuedNs = 0);
  /// Records that collective `seq` ended now, completed or failed.
  void end(uint64_t seq, bool ok);

  /// Writes DIR/rank-<r>.json (atomically); `reason` says why.
  bool dump(const std::string &reason, std::string *error);
  /// dump() of every recorder of the process.
  static void dumpAll(const std::string &reason);

  const std::string &path() const { return file; }

  /// The crash signals' dump: async-signal-safe (see the file comment).
  void writeFromSignal(const char *reason);

private:
  struct Record {
    uint64_t seq = 0, groupSeq = 0; ///< 0: an empty slot.
    uint32_t id = 0;
    plan::CollectiveOp op = plan::CollectiveOp::AllReduce;
    uint64_t bytes = 0;
    int32_t groupSize = 0, nAxes = 0;
    int32_t ranks[kMaxRanks];
    uint32_t axes[kMaxAxes];
    int64_t enqueueNs = 0, startNs = 0, endNs = 0;
    enum State : uint8_t { Started, Completed, Failed } state = Started;
    char source[kMaxSource];
  };
  std::string dir, file;
  char crashPath[4096], crashTmp[4096];
  int64_t rank, world;
  int64_t steadyOriginNs, wallOriginNs;
  std::mutex mu;
  std::vector<Record> ring;
  std::atomic<uint64_t> next{0}; ///< Records made so far.
  std::map<std::vector<int64_t>, uint64_t> groupCounts;
  int slot = -1; ///< In the process's table of recorders.
};

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_FLIGHTRECORDER_H
