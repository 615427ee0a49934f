//===- MpiComm.cpp - One rank per process, through MPI --------------------===//
//
// Under mpirun or srun every process is one rank of the plan's mesh. Each
// collective is built from nonblocking point-to-point messages between the
// members of its group (MPI_COMM_WORLD ranks, so no communicator has to be
// split):
//  1. arrival: every member sends its collective's static id to every other
//     member. A member whose id does not come within --comm-timeout is
//     named in the error ("rank 3 never reached all_gather #12 (...)"), and
//     members at different collectives are reported as such;
//  2. data: every member sends its operand to every other member, and each
//     computes its own result from all operands in group-index order
//     (computeCollective), bit for bit what the local communicator gives.
// Messages between two ranks match in order (MPI's non-overtaking rule),
// and every rank issues its collectives in plan order.
//
// A send never waits for its receiver (two pipeline ranks that both send
// before they receive would otherwise deadlock once a message is larger
// than MPI's eager limit): its data is copied into a buffer the
// communicator owns and MPI_Isend'ed, and the call returns. Later calls
// free the buffers of sends that have completed (MPI_Test), and flush(),
// which executors call at the end of each run, waits for the rest within
// the timeout, naming a receiver that never took its message. The exchange
// moves G times the bytes of a ring algorithm: MPI is the CPU and launch path;
// GPUs communicate through NCCL.
//
// Waits poll MPI_Testall against a deadline, so nothing blocks forever. On
// an error the rank calls MPI_Abort, which ends every rank of the job.
//
//===----------------------------------------------------------------------===//

#include "Communicator.h"

#include "cleave_rt.h"

#ifdef CLEAVE_HAVE_MPI
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <list>
#include <optional>
#include <thread>
#include <vector>

namespace cleave::rt {

using namespace plan;
using Clock = std::chrono::steady_clock;

namespace {
enum Tag : int { kArrive = 1, kData = 2, kPointToPoint = 3 };

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(int rank, int size, bool ownsInit, double timeoutSeconds)
      : myRank(rank), size(size), ownsInit(ownsInit),
        timeout(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(timeoutSeconds))),
        timeoutSecs(timeoutSeconds) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      dropSends();
    if (ownsInit && !finalized)
      MPI_Finalize();
  }
  const char *name() const override { return "mpi"; }
  double timeoutSeconds() const override { return timeoutSecs; }
  int64_t rank() const override { return myRank; }
  int64_t worldSize() const override { return size; }
  cleave_rt_status runCollective(const CollectiveInfo &c, const Group &group,
                                 const void *src, void *dst) override;
  cleave_rt_status flush() override;
  void abort(const std::string &) override {
    // The job ends: mpirun reports the abort and stops every rank (the
    // caller has printed the reason).
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, abortExitCode());
  }

private:
  /// Waits for `requests` until the deadline; on a timeout cancels them and
  /// returns the indices still pending in *pending.
  /// `seconds`: how long to wait (negative: the communication timeout).
  bool waitAll(std::vector<MPI_Request> &requests, std::vector<size_t> *pending,
               double seconds = -1);
  /// `c` says which deadline was missed (withinText); null: the timeout.
  cleave_rt_status timedOut(const std::string &what,
                            const std::vector<int64_t> &ranks,
                            const CollectiveInfo *c = nullptr);
  /// Frees the buffers of the sends that have completed (no waiting).
  void progressSends();
  /// At destruction: waits for the pending sends within the timeout, then
  /// cancels those left (after a failure; the job is ending).
  void dropSends();

  /// A send in flight: MPI reads its data from `data` until it completes.
  struct PendingSend {
    std::vector<uint8_t> data;
    MPI_Request request = MPI_REQUEST_NULL;
    int64_t to = 0;   ///< The receiver's rank.
    std::string what; ///< describe() of the send.
  };
  std::list<PendingSend> sends;
  int myRank, size;
  bool ownsInit;
  Clock::duration timeout;
  double timeoutSecs;
};
} // namespace

bool MpiCommunicator::waitAll(std::vector<MPI_Request> &requests,
                              std::vector<size_t> *pending, double seconds) {
  // Poll (MPI progresses only inside its calls): yield for the first
  // millisecond, which keeps small collectives at MPI's latency, then sleep
  // between polls so that a long wait does not burn a core.
  Clock::time_point start = Clock::now(),
                    deadline =
                        start +
                        (seconds < 0
                             ? timeout
                             : std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(seconds)));
  for (;;) {
    int done = 0;
    MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                MPI_STATUSES_IGNORE);
    if (done)
      return true;
    Clock::time_point now = Clock::now();
    if (now > deadline)
      break;
    if (now - start < std::chrono::milliseconds(1))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    int flag = 0;
    if (requests[i] == MPI_REQUEST_NULL)
      continue;
    MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE);
    if (!flag)
      pending->push_back(i);
  }
  return false;
}

cleave_rt_status MpiCommunicator::timedOut(const std::string &what,
                                           const std::vector<int64_t> &ranks,
                                           const CollectiveInfo *c) {
  return makeStatus(CLEAVE_RT_UNAVAILABLE,
                    neverReachedText(what, ranks, c, timeoutSecs));
}

cleave_rt_status MpiCommunicator::runCollective(const CollectiveInfo &c,
                                                const Group &group,
                                                const void *src, void *dst) {
  const int64_t g = static_cast<int64_t>(group.ranks.size());
  const int64_t me = group.index;
  const uint64_t bytes64 = static_cast<uint64_t>(c.count) * dtypeSize(c.dtype);
  if (bytes64 > static_cast<uint64_t>(INT_MAX))
    return makeStatus(CLEAVE_RT_UNIMPLEMENTED,
                      describe(c) + ": " + std::to_string(bytes64) +
                          " bytes per rank; the MPI communicator moves at "
                          "most 2^31-1 bytes per message");
  const int bytes = static_cast<int>(bytes64);

  progressSends();
  if (c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv) {
    int from = static_cast<int>(group.ranks[c.root]);
    int to = static_cast<int>(group.ranks[c.peer]);
    if (c.op == CollectiveOp::Send) {
      if (me != c.root)
        return nullptr;
      // Buffered: the caller may overwrite `src` as soon as this returns.
      // A tagged message (plan::messageTag) carries its tag first.
      PendingSend &s = sends.emplace_back();
      const uint8_t *p = static_cast<const uint8_t *>(src);
      std::optional<int64_t> tag = plan::messageTag(c);
      if (tag) {
        const uint8_t *t = reinterpret_cast<const uint8_t *>(&*tag);
        s.data.assign(t, t + sizeof(int64_t));
      }
      s.data.insert(s.data.end(), p, p + bytes);
      s.to = to;
      s.what = describe(c);
      MPI_Isend(s.data.data(), static_cast<int>(s.data.size()), MPI_BYTE, to,
                kPointToPoint, MPI_COMM_WORLD, &s.request);
      return nullptr;
    }
    if (me != c.peer) {
      if (bytes)
        std::memset(dst, 0, bytes);
      return nullptr;
    }
    std::optional<int64_t> tag = plan::messageTag(c);
    std::vector<uint8_t> framed(tag ? sizeof(int64_t) + bytes : 0);
    std::vector<MPI_Request> req(1, MPI_REQUEST_NULL);
    MPI_Irecv(tag ? framed.data() : dst,
              static_cast<int>(tag ? framed.size() : bytes), MPI_BYTE, from,
              kPointToPoint, MPI_COMM_WORLD, &req[0]);
    std::vector<size_t> pending;
    if (!waitAll(req, &pending))
      return timedOut("the send matching " + describe(c), {from});
    if (tag) {
      int64_t got = 0;
      std::memcpy(&got, framed.data(), sizeof got);
      if (got != *tag)
        return makeStatus(CLEAVE_RT_INTERNAL,
                          describe(c) + ": received message " +
                              std::to_string(got) + " from rank " +
                              std::to_string(from) + " where message " +
                              std::to_string(*tag) +
                              " was expected (sends and receives out of "
                              "order)");
      if (bytes)
        std::memcpy(dst, framed.data() + sizeof(int64_t), bytes);
    }
    return nullptr;
  }

  // 1. Arrival: the static ids.
  std::vector<uint32_t> ids(g, 0);
  uint32_t myId = c.id;
  std::vector<MPI_Request> req;
  std::vector<int64_t> peerOf;
  for (int64_t k = 0; k < g; ++k) {
    if (k == me)
      continue;
    req.emplace_back();
    MPI_Irecv(&ids[k], 1, MPI_UINT32_T, static_cast<int>(group.ranks[k]),
              kArrive, MPI_COMM_WORLD, &req.back());
    peerOf.push_back(group.ranks[k]);
  }
  size_t receives = req.size();
  for (int64_t k = 0; k < g; ++k) {
    if (k == me)
      continue;
    req.emplace_back();
    MPI_Isend(&myId, 1, MPI_UINT32_T, static_cast<int>(group.ranks[k]), kArrive,
              MPI_COMM_WORLD, &req.back());
  }
  std::vector<size_t> pending;
  if (!waitAll(req, &pending, arrivalSeconds(c, timeoutSecs))) {
    std::vector<int64_t> missing;
    for (size_t i : pending)
      if (i < receives)
        missing.push_back(peerOf[i]);
    if (missing.empty())
      return makeStatus(CLEAVE_RT_UNAVAILABLE,
                        "a peer stopped answering in " + describe(c));
    return timedOut(describe(c), missing, &c);
  }
  for (int64_t k = 0; k < g; ++k)
    if (k != me && ids[k] != c.id)
      return makeStatus(CLEAVE_RT_UNAVAILABLE,
                        "ranks disagree on the next collective: rank " +
                            std::to_string(group.ranks[k]) +
                            " is at collective #" + std::to_string(ids[k]) +
                            ", rank " + std::to_string(myRank) + " at " +
                            describe(c));

  // 2. Data: every operand to every member.
  std::vector<std::vector<uint8_t>> operands(g);
  std::vector<const void *> srcs(g);
  req.clear();
  for (int64_t k = 0; k < g; ++k) {
    if (k == me) {
      srcs[k] = src;
      continue;
    }
    operands[k].resize(bytes);
    srcs[k] = operands[k].data();
    req.emplace_back();
    MPI_Irecv(operands[k].data(), bytes, MPI_BYTE,
              static_cast<int>(group.ranks[k]), kData, MPI_COMM_WORLD,
              &req.back());
  }
  for (int64_t k = 0; k < g; ++k) {
    if (k == me)
      continue;
    req.emplace_back();
    MPI_Isend(src, bytes, MPI_BYTE, static_cast<int>(group.ranks[k]), kData,
              MPI_COMM_WORLD, &req.back());
  }
  pending.clear();
  if (!waitAll(req, &pending))
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "a peer stopped answering in " + describe(c) +
                          " after every rank of the group had reached it");
  computeCollective(c, me, g, srcs.data(), dst);
  return nullptr;
}

void MpiCommunicator::progressSends() {
  for (auto it = sends.begin(); it != sends.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? sends.erase(it) : std::next(it);
  }
}

cleave_rt_status MpiCommunicator::flush() {
  if (sends.empty())
    return nullptr;
  std::vector<MPI_Request> req;
  for (const PendingSend &s : sends)
    req.push_back(s.request);
  std::vector<size_t> pending;
  bool done = waitAll(req, &pending);
  // Completed requests are MPI_REQUEST_NULL now.
  size_t i = 0;
  std::string msg;
  for (PendingSend &s : sends) {
    s.request = req[i++];
    if (s.request != MPI_REQUEST_NULL)
      msg += (msg.empty() ? "" : "; ") + std::string("rank ") +
             std::to_string(s.to) + " never reached the recv matching " +
             s.what;
  }
  progressSends();
  if (done || msg.empty())
    return nullptr;
  char buf[64];
  std::snprintf(buf, sizeof buf, " within the %g s communication timeout",
                timeoutSecs);
  return makeStatus(CLEAVE_RT_UNAVAILABLE, msg + buf);
}

void MpiCommunicator::dropSends() {
  if (sends.empty())
    return;
  std::vector<MPI_Request> req;
  for (const PendingSend &s : sends)
    req.push_back(s.request);
  std::vector<size_t> pending;
  if (!waitAll(req, &pending))
    for (size_t i : pending) {
      MPI_Cancel(&req[i]);
      MPI_Request_free(&req[i]);
    }
  sends.clear();
}

cleave_rt_status createMpiCommunicator(double timeoutSeconds,
                                       std::unique_ptr<Communicator> *out) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  bool owns = false;
  if (!initialized) {
    int provided = 0;
    // Collectives run on one thread at a time (the communication thread, or
    // the compute thread of a plan without asynchronous collectives).
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS)
      return makeStatus(CLEAVE_RT_UNAVAILABLE, "MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED)
      return makeStatus(CLEAVE_RT_UNAVAILABLE,
                        "the MPI library does not support calls from "
                        "more than one thread (MPI_THREAD_SERIALIZED)");
    owns = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  *out = std::make_unique<MpiCommunicator>(rank, size, owns, timeoutSeconds);
  return nullptr;
}

} // namespace cleave::rt

#else // !CLEAVE_HAVE_MPI

namespace cleave::rt {
cleave_rt_status createMpiCommunicator(double,
                                       std::unique_ptr<Communicator> *) {
  return makeStatus(CLEAVE_RT_UNAVAILABLE,
                    "this runtime was built without MPI (install OpenMPI's "
                    "libopenmpi-dev and rebuild)");
}
} // namespace cleave::rt

#endif // CLEAVE_HAVE_MPI
