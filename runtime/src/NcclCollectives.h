//===- NcclCollectives.h - A plan's collectives through NCCL ----*- C++ -*-===//
//
// How the CUDA backend runs the Collective and Wait commands of a plan:
//  - decomposeCollective (NcclDecompose.cpp): one command -> the NCCL calls
//    and device copies of one rank (a pure function, tested without a
//    device). NCCL's all-gather, reduce-scatter and point-to-point calls
//    move contiguous blocks in rank order; the plan's [outer, G, inner]
//    views are laid out through a staging buffer with plain
//    cuMemcpyDtoDAsync copies. All-to-all and
//    permutations are grouped ncclSend/ncclRecv; all-slice is a local copy;
//    a group of one rank is a local copy.
//  - NcclGroups: one rank's communicators. A world communicator whose id
//    rank 0 hands out over the CPU communicator the backend is created with
//    (or over TCP from torchrun's MASTER_ADDR/MASTER_PORT without one), then
//    one ncclCommSplit per distinct axis list of the plan file (its
//    commands, stages and entries, in sorted order, so every rank makes the
//    same calls in the same order); a list whose groups are the world in
//    rank order uses the world communicator.
//  - Sends and receives (a pipeline's activations and gradients) must not
//    block each other as NCCL's rendezvous would on one stream (stage 0
//    sending its second activation while stage 1 sends its first gradient
//    deadlocks): like the CPU communicators' buffered sends, a send copies
//    its operand into a slot of its own on the compute stream and leaves;
//    messages going up (to a higher group index) run on one stream and
//    communicator, those going down on another, so each direction flows in
//    plan order and neither waits for the other.
//  - CudaCollectives: enqueues the calls on the backend's communication
//    stream with event edges only (capturable in a CUDA graph), and waits
//    for a run by polling the streams and ncclCommGetAsyncError; on an
//    asynchronous error or after the communication timeout it aborts every
//    communicator and names the collective that did not complete.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_NCCLCOLLECTIVES_H
#define CLEAVE_RUNTIME_NCCLCOLLECTIVES_H

#include "Communicator.h"
#include "Launch.h"
#include "Nccl.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt::cuda {

/// One call of a decomposed collective, on the communication stream.
struct NcclStep {
  enum class Kind {
    Copy,          ///< cuMemcpyDtoDAsync(dst, src, bytes)
    Zero,          ///< cuMemsetD8Async(dst, 0, bytes)
    AllReduce,     ///< ncclAllReduce(src, dst, count, type, op)
    AllGather,     ///< ncclAllGather(src, dst, count, type)
    ReduceScatter, ///< ncclReduceScatter(src, dst, count, type, op)
    Broadcast,     ///< ncclBroadcast(src, dst, count, type, peer = root)
    GroupStart,    ///< ncclGroupStart()
    GroupEnd,      ///< ncclGroupEnd()
    Send,          ///< ncclSend(src, count, type, peer)
    Recv,          ///< ncclRecv(dst, count, type, peer)
  };
  Kind kind = Kind::Copy;
  CUdeviceptr src = 0, dst = 0;
  uint64_t bytes = 0; ///< Copy, Zero.
  size_t count = 0;   ///< NCCL calls: elements of `type`.
  ncclDataType_t type = ncclUint8;
  ncclRedOp_t op = ncclSum;
  int peer = 0; ///< Broadcast's root, Send's and Recv's peer.

  /// Whether the step is an NCCL call (not a copy or a fill).
  bool isNccl() const { return kind != Kind::Copy && kind != Kind::Zero; }
};

/// "copy 0x40 <- 0x10 (16 bytes)", "ncclAllGather(0x10 -> 0x40, 4 x
/// ncclFloat32)": one line per step, for tests and messages.
std::string describeStep(const NcclStep &step);

/// The steps of collective `c` for the member `index` of a group of
/// `groupSize` ranks, reading `src` and writing `dst` (device addresses;
/// 0 for the buffer a send or a receive lacks) with `staging` as scratch.
/// Sets *stagingBytes to the scratch it needs (0 when none): call it once
/// with staging 0 to size the scratch. Peers and roots are group indices
/// (the rank in the group's communicator). INVALID_ARGUMENT, naming the
/// collective, for a reduction NCCL has no type for.
cleave_rt_status decomposeCollective(const plan::CollectiveInfo &c,
                                     int64_t groupSize, int64_t index,
                                     CUdeviceptr src, CUdeviceptr dst,
                                     CUdeviceptr staging,
                                     std::vector<NcclStep> *steps,
                                     uint64_t *stagingBytes);

/// Every distinct axis list of the collectives of `file` (commands and init
/// commands of the file, of its stages and of its entries) whose groups
/// have more than one rank, in sorted order.
std::vector<std::vector<uint32_t>> collectiveAxisLists(const plan::Plan &file);

/// The same for the sends and receives of `file` alone.
std::vector<std::vector<uint32_t>>
pointToPointAxisLists(const plan::Plan &file);

/// Hands rank 0's NCCL id to every rank of a world of `worldSize`: over
/// `comm` when there is one, else over TCP from `env` (torchrun). A rank 0
/// that cannot make an id tells the others so.
cleave_rt_status shareNcclId(const NcclLibrary &library, int64_t rank,
                             int64_t worldSize, Communicator *comm,
                             const LaunchEnv &env, double timeoutSeconds,
                             ncclUniqueId *id);

/// One rank's NCCL communicators: the world and one per axis list.
class NcclGroups {
public:
  /// Makes the world communicator of `mesh` for `rank` (id from
  /// shareNcclId) and splits it once per list of `axisLists`, then twice
  /// per list of `p2pLists` (the two directions of its sends and receives).
  /// Errors name the rank and NCCL's text.
  cleave_rt_status init(const NcclLibrary &library, const plan::Mesh &mesh,
                        int64_t rank,
                        const std::vector<std::vector<uint32_t>> &axisLists,
                        const std::vector<std::vector<uint32_t>> &p2pLists,
                        Communicator *comm, const LaunchEnv &env,
                        double timeoutSeconds);
  /// The communicator of the messages over `axes` that go up (to a higher
  /// group index) or down, or null.
  NcclCommunicator *pointToPoint(const std::vector<uint32_t> &axes, bool up);
  /// The communicator of the groups over `axes`, or null (a group of one
  /// rank, or axes no collective of the file uses).
  NcclCommunicator *forAxes(const std::vector<uint32_t> &axes);
  /// The first asynchronous error of any communicator, or null; *which is
  /// set to the communicator that has it.
  cleave_rt_status asyncError(NcclCommunicator **which);
  /// ncclCommAbort on every communicator (idempotent).
  void abortAll();
  /// ncclCommDestroy on every communicator (waits for their work).
  void destroyAll();
  bool empty() const { return !world.initialized(); }

private:
  NcclCommunicator world;
  /// Per axis list its communicator; null for a list whose groups are the
  /// world in rank order (the world communicator serves it).
  std::vector<
      std::pair<std::vector<uint32_t>, std::unique_ptr<NcclCommunicator>>>
      groups;
  /// Per axis list of sends and receives: its down and up communicators.
  std::vector<std::pair<std::vector<uint32_t>,
                        std::array<std::unique_ptr<NcclCommunicator>, 2>>>
      p2p;
};

/// Testing only: the mutation $CLEAVE_CUDA_MUTATION asks the CUDA backend
/// to make, so that tests can show the host doubles catch it (the
/// mutation tests of test/e2e/cuda-doubles-mutations.test): "" (none),
/// "drop-event-wait" (the compute stream's first wait for a collective is
/// left out), "free-workspace-early" (the cuBLASLt workspace is freed
/// after set-up) or "swap-collectives" (rank 1 issues its first two NCCL
/// collectives of a list in the other order). INVALID_ARGUMENT for any
/// other value.
cleave_rt_status cudaMutation(std::string *out);

/// The collective commands of one CUDA backend.
class CudaCollectives {
public:
  explicit CudaCollectives(const DriverApi &cu) : cu(cu) {}
  CudaCollectives(const CudaCollectives &) = delete;
  CudaCollectives &operator=(const CudaCollectives &) = delete;
  /// Frees the events and the staging buffer (the CUDA context must be
  /// current); call closeCommunicators() first.
  ~CudaCollectives();

  /// Sets up rank `rank`'s collectives of `plan` (its commands and init
  /// commands; `file` is the whole plan file, whose axis lists make the
  /// communicators): NCCL communicators when a group has more than one
  /// rank, the staging buffer, the events. `compute` and `comm` are the
  /// backend's streams, `arena` its memory. `nccl`: the library to use
  /// (null: the process-wide NcclLibrary::load, opened only when needed).
  cleave_rt_status init(const plan::Plan &plan, const plan::Plan &file,
                        int64_t rank, Communicator *comm, double timeoutSeconds,
                        CUstream compute, CUstream commStream,
                        CUdeviceptr arena, const NcclLibrary *nccl = nullptr);

  /// Enqueues Collective or Wait command `index` of `commands` (the plan's
  /// commands or its init commands). `capturing`: the compute stream is
  /// being captured into a CUDA graph.
  cleave_rt_status enqueue(const std::vector<plan::Command> &commands,
                           size_t index, bool capturing);
  /// After the last command of a list: joins the communication streams
  /// back into the compute stream (a capture must end joined).
  cleave_rt_status finishList();
  /// Before the first command of a list is enqueued (eagerly or into a
  /// graph): forgets the collectives of the last list.
  void beginList();
  /// Waits until every stream is idle: polls them and, with NCCL
  /// communicators, their asynchronous errors and the timeout (counted
  /// from the last collective that completed). `what` names the work in
  /// errors.
  cleave_rt_status wait(const char *what);
  /// Ends the communicators: destroyed after clean runs, aborted else.
  void closeCommunicators();
  /// FAILED_PRECONDITION once the communicators were aborted (a failed
  /// run leaves them unusable), naming the first failure; else null.
  cleave_rt_status usable() const;

  /// Whether this rank holds NCCL communicators.
  bool usesNccl() const { return !groups.empty(); }

private:
  struct Prepared {
    NcclCommunicator *comm = nullptr; ///< Null: local steps only.
    std::vector<NcclStep> steps;
    /// A send or a receive over more than one rank: on the stream of its
    /// direction; a send from its slot (an offset into sendSlots).
    bool p2p = false, up = false;
    uint64_t slot = 0;
  };
  /// Per list (init commands, commands) and command index.
  std::vector<Prepared> &preparedFor(const std::vector<plan::Command> &list) {
    return &list == initList ? initPrepared : runPrepared;
  }
  cleave_rt_status prepare(const std::vector<plan::Command> &list,
                           std::vector<Prepared> *out, bool sizeOnly,
                           uint64_t *staging);
  cleave_rt_status runSteps(const Prepared &p, CUstream stream);
  cleave_rt_status enqueuePointToPoint(const plan::Command &c,
                                       const Prepared &p, bool capturing);
  /// The streams work may be pending on (compute, comm, directions).
  std::vector<CUstream> streams() const;
  cleave_rt_status check(CUresult r, const char *what) {
    return checkDriver(cu, r, what);
  }
  /// Aborts every communicator and returns UNAVAILABLE "rank R: <what>";
  /// with `checkPeers`, <what> is followed by what lostRanks() finds.
  cleave_rt_status fail(const std::string &what, bool checkPeers = false);
  /// After a collective timed out: which ranks are lost, found by a check
  /// over the CPU communicator (every live rank's collective times out too
  /// and makes it; the ranks that never reach it are named by the CPU
  /// communicator, as in CPU runs). "; <what it found>", or "" without a
  /// CPU communicator. NCCL cannot say which peer it waits for.
  std::string lostRanks();
  /// "1.5 s (the 2 s communication timeout less the 0.5 s of the liveness
  /// check)", or "the 2 s communication timeout" without the check.
  std::string timeoutText() const;
  /// --flight-recorder (the recorder of this rank's CPU communicator): the
  /// run's collectives start being recorded when wait() begins (enqueued
  /// when they were enqueued eagerly, or at the graph's launch); end each
  /// record in inFlight[from, to).
  FlightRecorder *recorder() const {
    return rankComm ? rankComm->flightRecorder() : nullptr;
  }
  void recordStart();
  void recordEnd(size_t from, size_t to, bool ok);

  const DriverApi &cu;
  const NcclLibrary *library = nullptr;
  Communicator *rankComm = nullptr; ///< This rank's CPU communicator.
  const plan::Plan *file = nullptr;
  CUdeviceptr arena = 0;
  NcclGroups groups;
  const std::vector<plan::Command> *initList = nullptr;
  std::vector<Prepared> initPrepared, runPrepared;
  int64_t myRank = 0;
  double timeout = 300;
  /// How long wait() lets a collective go without progress: the timeout,
  /// less the liveness check's part (livenessCheckSeconds) when there is a
  /// CPU communicator to make it over.
  double ncclWait = 300;
  CUstream compute = nullptr, comm = nullptr;
  CUdeviceptr staging = 0;
  /// Sends and receives: the streams of messages going down and up, and
  /// the sends' slots (one per send of a list).
  CUstream directions[2] = {nullptr, nullptr};
  /// The events that join them back (an event is only ever recorded on one
  /// stream: each record's waiters then wait for that record alone, in any
  /// model of event reuse).
  CUevent directionJoined[2] = {nullptr, nullptr};
  bool directionPending[2] = {false, false};
  CUdeviceptr sendSlots = 0;
  uint64_t sendSlotBytes = 0;
  CUevent computeReady = nullptr, commJoined = nullptr;
  /// One per plan event (asynchronous collectives and their waits).
  std::vector<CUevent> planEvents;
  /// The collectives enqueued on the communication stream since the run
  /// began, each with the event recorded after it: the first that is not
  /// complete is the one a failure names.
  struct InFlight {
    const plan::Command *command;
    NcclCommunicator *comm;
    CUevent done;
    /// `done` is recorded when the work runs (not in a graph replay, which
    /// re-records nothing the host can tell apart from the last run).
    bool tracked;
    /// --flight-recorder: when it was enqueued (eager runs), and its open
    /// record (0: none).
    int64_t enqueuedNs = 0;
    uint64_t record = 0;
  };
  std::vector<InFlight> inFlight;
  /// Events for inFlight, reused across runs.
  std::vector<CUevent> doneEvents;
  bool commPending = false; ///< Work on comm since the last join.
  /// Testing only ($CLEAVE_CUDA_MUTATION, cudaMutation()): drop the compute
  /// stream's first wait for a collective; swap two collectives on rank 1.
  bool dropFirstWait = false, waitDropped = false, swapOnRank1 = false;
  std::string failure; ///< Set once the communicators were aborted.
  bool clean = true;
};

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_NCCLCOLLECTIVES_H
