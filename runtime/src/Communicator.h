//===- Communicator.h - How the ranks of a plan talk ------------*- C++ -*-===//
//
// A Communicator runs the Collective commands of one rank. Implementations:
//  - local (LocalComm.cpp): N ranks as threads of one process, through
//    shared memory;
//  - MPI (MpiComm.cpp): one rank per process under mpirun or srun.
//
// Every implementation reduces in group-index order, so a collective gives
// bitwise the same result on every rank and in every run of a mesh, and
// every one checks that the ranks of a group reach the same collective (the
// plan's static id), and gives up with a message naming the missing rank
// and the collective when a peer fails or stops answering.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMMUNICATOR_H
#define CLEAVE_RUNTIME_COMMUNICATOR_H

#include "FlightRecorder.h"
#include "Status.h"
#include "cleave/PlanFormat.h"

#include <memory>
#include <string>
#include <vector>

namespace cleave::rt {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual const char *name() const = 0;
  virtual int64_t rank() const = 0;
  virtual int64_t worldSize() const = 0;
  /// How long a collective waits for a peer (--comm-timeout); the CUDA
  /// backend gives its NCCL collectives the same time.
  virtual double timeoutSeconds() const = 0;
  /// Runs `c` for this rank over the group `group` (plan::groupOf): reads
  /// `src` (c.count elements; null for recv) and writes `dst` (null for
  /// send). Blocks until this rank's part is done, except a send, which
  /// never waits for its receiver: the communicator keeps a copy of the
  /// data until it is delivered (flush). Buffers are host memory.
  /// With a flight recorder, the collective is recorded around
  /// runCollective, and a failure dumps every recorder of the process;
  /// `enqueuedNs` (FlightRecorder::nowNs) is when the caller queued it, if
  /// earlier than this call (0: now).
  cleave_rt_status run(const plan::CollectiveInfo &c, const plan::Group &group,
                       const void *src, void *dst, int64_t enqueuedNs = 0);
  /// Waits until every message this rank has sent has been delivered, at
  /// most the communication timeout; the error names a receiver that never
  /// took its message. Executors call it at the end of each run, so the
  /// copies a communicator holds are at most one run's sends.
  virtual cleave_rt_status flush() { return nullptr; }
  /// Makes every rank's pending and later collectives fail with a message
  /// naming this rank and `reason` (a rank that hit an error calls it so
  /// that its peers stop waiting for it).
  virtual void abort(const std::string &reason) = 0;
  /// The exit status a communicator whose abort ends the process (MPI's)
  /// ends it with (ExitCodes.h); 1 unless the caller says otherwise.
  void setAbortExitCode(int code) { abortCode = code; }
  int abortExitCode() const { return abortCode; }

  /// --flight-recorder: this rank's recorder (FlightRecorder.h), or null.
  void setFlightRecorder(std::unique_ptr<FlightRecorder> r) {
    recorder = std::move(r);
  }
  FlightRecorder *flightRecorder() const { return recorder.get(); }

protected:
  /// The implementation's run(), unrecorded.
  virtual cleave_rt_status runCollective(const plan::CollectiveInfo &c,
                                         const plan::Group &group,
                                         const void *src, void *dst) = 0;

private:
  std::unique_ptr<FlightRecorder> recorder;
  int abortCode = 1;
};

/// The local world: `size` ranks as threads of this process. Collectives
/// wait at most `timeoutSeconds` for a peer.
class LocalWorld;
std::shared_ptr<LocalWorld> createLocalWorld(int64_t size,
                                             double timeoutSeconds);
/// Rank `rank`'s communicator of `world` (0 <= rank < size).
std::unique_ptr<Communicator>
localCommunicator(std::shared_ptr<LocalWorld> world, int64_t rank);

/// The MPI communicator of this process (MpiComm.cpp): initializes MPI if
/// nobody has; UNAVAILABLE in a runtime built without MPI.
cleave_rt_status createMpiCommunicator(double timeoutSeconds,
                                       std::unique_ptr<Communicator> *out);

/// Static ids of the drivers' own collectives (not commands of a plan):
/// gathering outputs and checkpoints, and bootstrap broadcasts.
constexpr uint32_t kDriverGatherId = 0xffffffffu;
constexpr uint32_t kBootstrapId = 0xfffffffeu;
/// The check a CUDA backend makes over its CPU communicator after an NCCL
/// collective timed out: the ranks that never reach it are the lost ones.
constexpr uint32_t kLivenessCheckId = 0xfffffffdu;

/// The part of a communication timeout of `timeoutSeconds` that the
/// liveness check after an NCCL failure waits: a tenth, at least half a
/// second (the live ranks arrive within moments of each other, each right
/// after its own NCCL failure or timeout), at most half. The CUDA backend
/// gives its NCCL collectives the rest, so that a lost rank is named within
/// the timeout.
inline double livenessCheckSeconds(double timeoutSeconds) {
  double check = timeoutSeconds / 10 > 0.5 ? timeoutSeconds / 10 : 0.5;
  return check < timeoutSeconds / 2 ? check : timeoutSeconds / 2;
}

/// How long a rank waits for its peers to reach collective `c` under a
/// communication timeout of `timeoutSeconds`: the timeout, except for the
/// liveness check (kLivenessCheckId): livenessCheckSeconds.
inline double arrivalSeconds(const plan::CollectiveInfo &c,
                             double timeoutSeconds) {
  return c.id == kLivenessCheckId ? livenessCheckSeconds(timeoutSeconds)
                                  : timeoutSeconds;
}

/// " within the 2 s communication timeout", or for the liveness check
/// " within the 0.5 s the liveness check waits".
std::string withinText(const plan::CollectiveInfo &c, double timeoutSeconds);

/// "rank 1 never reached all_reduce #3 (source); rank 2 never reached ..."
/// for the ranks missing from `what`, then withinText (`c` null: the plain
/// communication timeout).
std::string neverReachedText(const std::string &what,
                             const std::vector<int64_t> &ranks,
                             const plan::CollectiveInfo *c,
                             double timeoutSeconds);

/// "all_reduce #3 (source)" for messages ("all_gather (output gather)" for
/// the drivers' own).
std::string describe(const plan::CollectiveInfo &c);

/// Reduction helpers shared by the communicators: dst[i] = op over the
/// `n` buffers srcs[0..n), in that order, for `count` elements of `dtype`
/// (bf16/f16 accumulate in float and round once; avg divides the sum by n).
void reduceBuffers(plan::ReduceOp op, plan::DType dtype,
                   const void *const *srcs, int64_t n, void *dst,
                   int64_t count);

/// The result of collective `c` (any op but send and recv) for the group
/// member with index `index`, given every member's operand: srcs[g] is
/// member g's (c.count elements; entries of members whose data the op does
/// not read may be null). Writes dst.
void computeCollective(const plan::CollectiveInfo &c, int64_t index,
                       int64_t groupSize, const void *const *srcs, void *dst);

/// AllSlice: the block of `src` (every member holds the same) that group
/// member `index` of `g` keeps. Nothing is sent.
void sliceShard(const plan::CollectiveInfo &c, int64_t index, int64_t g,
                const void *src, void *dst);

/// Bytes of collective `c`'s result (its dst buffer) for a group of `g`.
uint64_t collectiveResultBytes(const plan::CollectiveInfo &c, int64_t g);

} // namespace cleave::rt

/// The object behind the C API's cleave_rt_communicator.
struct cleave_rt_communicator_t {
  std::unique_ptr<cleave::rt::Communicator> impl;
};

#endif // CLEAVE_RUNTIME_COMMUNICATOR_H
