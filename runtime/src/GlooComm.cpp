//===- GlooComm.cpp - One rank per process, over Gloo's TCP transport -----===//
//
// For processes that a launcher without MPI started (torchrun, a Kubernetes
// job; or CLEAVE_COMM=gloo under mpirun/srun): every process is one rank of
// the plan's mesh, and the ranks talk over Gloo's TCP pairs (libgloo).
//
// Rendezvous (GlooRendezvous.cpp): rank 0 serves Cleave's key-value store
// on MASTER_PORT, or MASTER_PORT+1 where torchrun's agent serves its own
// store on MASTER_PORT, or CLEAVE_STORE_PORT, and Gloo connects a pair
// between every two ranks through it.
//
// Collectives are built like MpiComm.cpp's, from point-to-point messages
// (Gloo's unbound buffers, matched in order per pair and slot):
//  1. arrival: every member sends its collective's static id and operand
//     size to every other member; a member that does not arrive within
//     --comm-timeout is named, members at different collectives are
//     reported as such;
//  2. data: every member sends its operand to every other member, and each
//     computes its result from all operands in group-index order
//     (computeCollective), bit for bit what the other communicators give.
// A send is a header (tag, size) and the data: the receiver checks the
// header before it takes the data, so ranks that disagree get an error, not
// an overrun. A send never waits for its receiver: its data is copied into a
// buffer the communicator owns until flush(), which waits for every send of
// the run (Gloo cannot test a send without waiting on it).
//
// Gloo reports failures by throwing (::gloo::IoException on a timeout or a
// lost connection); they are caught here and become statuses naming the
// rank and the collective. After a timeout Gloo closes every pair of the
// rank, so the communicator refuses later collectives with the first error.
// abort() closes the pairs at once: the peers' waits on this rank fail
// right away instead of at their timeout.
//
//===----------------------------------------------------------------------===//

#include "Communicator.h"
#include "GlooRendezvous.h"
#include "Launch.h"

#include "cleave_rt.h"

#include <cstdlib>
#include <cstring>

#ifdef CLEAVE_HAVE_GLOO
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdio>
#include <list>
#include <optional>
#include <vector>

namespace cleave::rt {

using namespace plan;
using Clock = std::chrono::steady_clock;
using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

namespace {
enum Slot : uint64_t { kArrive = 1, kData = 2, kHeader = 3, kPointToPoint = 4 };

/// What a member announces when it reaches a collective.
struct Arrival {
  uint32_t id = 0;
  uint32_t unused = 0;
  uint64_t bytes = 0;
};

/// What precedes the data of a send.
struct Header {
  int64_t tag = 0;
  uint64_t bytes = 0;
  uint32_t hasTag = 0;
  uint32_t unused = 0;
};

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

class GlooCommunicator final : public Communicator {
public:
  GlooCommunicator(std::shared_ptr<gloo::Context> context,
                   double timeoutSeconds)
      : ctx(std::move(context)), myRank(ctx->rank), size(ctx->size),
        timeout(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(timeoutSeconds))),
        timeoutSecs(timeoutSeconds) {}
  const char *name() const override { return "gloo"; }
  double timeoutSeconds() const override { return timeoutSecs; }
  int64_t rank() const override { return myRank; }
  int64_t worldSize() const override { return size; }
  cleave_rt_status runCollective(const CollectiveInfo &c, const Group &group,
                                 const void *src, void *dst) override;
  cleave_rt_status flush() override;
  void abort(const std::string &reason) override;

private:
  cleave_rt_status exchange(const CollectiveInfo &c, const Group &group,
                            const void *src, void *dst);
  cleave_rt_status pointToPoint(const CollectiveInfo &c, const Group &group,
                                const void *src, void *dst);
  Buffer buffer(const void *data, size_t bytes) {
    return ctx->createUnboundBuffer(const_cast<void *>(data), bytes);
  }
  /// Waits for `b`'s receive (or send) until the deadline. False when it
  /// did not complete: *error then holds Gloo's reason.
  bool wait(gloo::transport::UnboundBuffer &b, bool recv,
            Clock::time_point deadline, std::string *error);
  /// Whether `b`'s operation has completed, without waiting (after a
  /// failure, when Gloo has closed the pairs).
  bool completed(gloo::transport::UnboundBuffer &b, bool recv) {
    std::string ignored;
    return wait(b, recv, Clock::now(), &ignored);
  }
  /// "rank 1 never reached X; rank 2 never reached X within ...": the
  /// MPI communicator's message.
  cleave_rt_status timedOut(const std::string &what,
                            const std::vector<int64_t> &ranks,
                            const CollectiveInfo *c = nullptr);
  /// Records the first error: later collectives fail with it.
  cleave_rt_status fail(cleave_rt_status s) {
    if (s && failure.empty())
      failure = cleave_rt_status_message(s);
    return s;
  }

  struct PendingSend {
    Header header;
    std::vector<uint8_t> data;
    Buffer headerBuffer, dataBuffer;
    int64_t to = 0;   ///< The receiver's rank.
    std::string what; ///< describe() of the send.
  };
  std::shared_ptr<gloo::Context> ctx;
  std::list<PendingSend> sends; // destroyed before ctx
  int myRank, size;
  Clock::duration timeout;
  double timeoutSecs;
  std::string failure;
};
} // namespace

bool GlooCommunicator::wait(gloo::transport::UnboundBuffer &b, bool recv,
                            Clock::time_point deadline, std::string *error) {
  // Rounded up: Gloo waits whole milliseconds, and a wait that gives up
  // before `deadline` would read as a lost connection to the callers, which
  // tell a timeout from a closed pair by whether the deadline has passed.
  auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() < 0)
    left = std::chrono::milliseconds(0); // negative means "unset" to Gloo
  try {
    if (recv ? b.waitRecv(nullptr, left) : b.waitSend(nullptr, left))
      return true;
    *error = "aborted";
  } catch (const std::exception &e) {
    *error = e.what();
  }
  return false;
}

cleave_rt_status GlooCommunicator::timedOut(const std::string &what,
                                            const std::vector<int64_t> &ranks,
                                            const CollectiveInfo *c) {
  return fail(makeStatus(CLEAVE_RT_UNAVAILABLE,
                         neverReachedText(what, ranks, c, timeoutSecs)));
}

cleave_rt_status GlooCommunicator::runCollective(const CollectiveInfo &c,
                                                 const Group &group,
                                                 const void *src, void *dst) {
  if (!failure.empty())
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      describe(c) + ": the gloo communicator of rank " +
                          std::to_string(myRank) +
                          " stopped at an earlier error: " + failure);
  try {
    if (c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv)
      return pointToPoint(c, group, src, dst);
    return exchange(c, group, src, dst);
  } catch (const std::exception &e) {
    // Gloo throws from a send or receive it cannot start (a pair already
    // closed by an earlier failure).
    return fail(
        makeStatus(CLEAVE_RT_UNAVAILABLE, describe(c) + ": gloo: " + e.what()));
  }
}

cleave_rt_status GlooCommunicator::exchange(const CollectiveInfo &c,
                                            const Group &group, const void *src,
                                            void *dst) {
  const int64_t g = static_cast<int64_t>(group.ranks.size());
  const int64_t me = group.index;
  const uint64_t bytes = static_cast<uint64_t>(c.count) * dtypeSize(c.dtype);
  auto peer = [&](int64_t k) { return static_cast<int>(group.ranks[k]); };

  // A peer whose pair is closed already (it aborted or exited) makes Gloo
  // throw when a message to or from it is posted.
  auto gone = [&](int64_t k, const std::string &why) {
    return fail(makeStatus(
        CLEAVE_RT_UNAVAILABLE,
        "rank " + std::to_string(peer(k)) + " never reached " + describe(c) +
            ": the connection to it was lost (gloo: " + why + ")"));
  };

  // 1. Arrival: the static ids and sizes.
  std::vector<Arrival> arrived(g);
  Arrival mine;
  mine.id = c.id;
  mine.bytes = bytes;
  std::vector<Buffer> recvs(g), sent(g);
  for (int64_t k = 0; k < g; ++k) {
    if (k == me)
      continue;
    try {
      recvs[k] = buffer(&arrived[k], sizeof(Arrival));
      recvs[k]->recv(peer(k), kArrive);
      sent[k] = buffer(&mine, sizeof(Arrival));
      sent[k]->send(peer(k), kArrive);
    } catch (const std::exception &e) {
      return gone(k, e.what());
    }
  }
  Clock::time_point deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(arrivalSeconds(c, timeoutSecs)));
  for (int64_t k = 0; k < g; ++k) {
    std::string why;
    if (k == me || wait(*recvs[k], true, deadline, &why))
      continue;
    if (Clock::now() < deadline)
      return gone(k, why);
    // Members before k have arrived; k has not; the others are checked.
    std::vector<int64_t> missing = {peer(k)};
    for (int64_t j = k + 1; j < g; ++j)
      if (j != me && !completed(*recvs[j], true))
        missing.push_back(peer(j));
    return timedOut(describe(c), missing, &c);
  }
  for (int64_t k = 0; k < g; ++k) {
    if (k == me)
      continue;
    if (arrived[k].id != c.id)
      return fail(
          makeStatus(CLEAVE_RT_UNAVAILABLE,
                     "ranks disagree on the next collective: rank " +
                         std::to_string(peer(k)) + " is at collective #" +
                         std::to_string(arrived[k].id) + ", rank " +
                         std::to_string(myRank) + " at " + describe(c)));
    if (arrived[k].bytes != bytes)
      return fail(makeStatus(
          CLEAVE_RT_INTERNAL,
          describe(c) + ": rank " + std::to_string(peer(k)) + " has " +
              std::to_string(arrived[k].bytes) + " bytes per rank, rank " +
              std::to_string(myRank) + " " + std::to_string(bytes) +
              " (the ranks run different plans)"));
  }
  deadline = Clock::now() + timeout;
  auto lost = [&](int64_t k, const std::string &why) {
    return fail(makeStatus(CLEAVE_RT_UNAVAILABLE,
                           "rank " + std::to_string(peer(k)) +
                               " stopped answering in " + describe(c) +
                               " after every rank of the group had reached "
                               "it (gloo: " +
                               why + ")"));
  };
  for (int64_t k = 0; k < g; ++k) {
    std::string why;
    if (k != me && !wait(*sent[k], false, deadline, &why))
      return lost(k, why);
  }

  // 2. Data: every operand to every member.
  std::vector<std::vector<uint8_t>> operands(g);
  std::vector<const void *> srcs(g);
  for (int64_t k = 0; k < g; ++k) {
    srcs[k] = src;
    if (k == me || bytes == 0)
      continue;
    operands[k].resize(bytes);
    srcs[k] = operands[k].data();
    try {
      recvs[k] = buffer(operands[k].data(), bytes);
      recvs[k]->recv(peer(k), kData);
      sent[k] = buffer(src, bytes);
      sent[k]->send(peer(k), kData);
    } catch (const std::exception &e) {
      return lost(k, e.what());
    }
  }
  for (int64_t k = 0; k < g && bytes > 0; ++k) {
    std::string why;
    if (k != me && (!wait(*recvs[k], true, deadline, &why) ||
                    !wait(*sent[k], false, deadline, &why)))
      return lost(k, why);
  }
  computeCollective(c, me, g, srcs.data(), dst);
  return nullptr;
}

cleave_rt_status GlooCommunicator::pointToPoint(const CollectiveInfo &c,
                                                const Group &group,
                                                const void *src, void *dst) {
  const int64_t me = group.index;
  const uint64_t bytes = static_cast<uint64_t>(c.count) * dtypeSize(c.dtype);
  const int from = static_cast<int>(group.ranks[c.root]);
  const int to = static_cast<int>(group.ranks[c.peer]);
  std::optional<int64_t> tag = plan::messageTag(c);
  if (c.op == CollectiveOp::Send) {
    if (me != c.root)
      return nullptr;
    // Buffered: the caller may overwrite `src` as soon as this returns.
    PendingSend &s = sends.emplace_back();
    s.header.tag = tag.value_or(0);
    s.header.hasTag = tag.has_value();
    s.header.bytes = bytes;
    const uint8_t *p = static_cast<const uint8_t *>(src);
    s.data.assign(p, p + bytes);
    s.to = to;
    s.what = describe(c);
    try {
      s.headerBuffer = buffer(&s.header, sizeof(Header));
      s.headerBuffer->send(to, kHeader);
      if (bytes > 0) {
        s.dataBuffer = buffer(s.data.data(), bytes);
        s.dataBuffer->send(to, kPointToPoint);
      }
    } catch (const std::exception &e) {
      std::string what = s.what;
      sends.pop_back();
      return fail(makeStatus(
          CLEAVE_RT_UNAVAILABLE,
          "rank " + std::to_string(to) + " never reached the recv matching " +
              what + ": the connection to it was lost (gloo: " + e.what() +
              ")"));
    }
    return nullptr;
  }
  if (me != c.peer) {
    if (bytes)
      std::memset(dst, 0, bytes);
    return nullptr;
  }
  Clock::time_point deadline = Clock::now() + timeout;
  auto missed = [&](const std::string &why) {
    if (Clock::now() < deadline)
      return fail(makeStatus(
          CLEAVE_RT_UNAVAILABLE,
          "rank " + std::to_string(from) + " never reached the send matching " +
              describe(c) + ": the connection to it was lost (gloo: " + why +
              ")"));
    return timedOut("the send matching " + describe(c), {from});
  };
  Header header;
  Buffer h, d;
  std::string why;
  try {
    h = buffer(&header, sizeof(Header));
    h->recv(from, kHeader);
  } catch (const std::exception &e) {
    return missed(e.what());
  }
  if (!wait(*h, true, deadline, &why))
    return missed(why);
  if (header.bytes != bytes)
    return fail(makeStatus(
        CLEAVE_RT_INTERNAL,
        describe(c) + ": received a message of " +
            std::to_string(header.bytes) + " bytes from rank " +
            std::to_string(from) + " where " + std::to_string(bytes) +
            " were expected (sends and receives out of order)"));
  if (tag && (!header.hasTag || header.tag != *tag))
    return fail(makeStatus(
        CLEAVE_RT_INTERNAL,
        describe(c) + ": received message " +
            (header.hasTag ? std::to_string(header.tag) : "(untagged)") +
            " from rank " + std::to_string(from) + " where message " +
            std::to_string(*tag) +
            " was expected (sends and receives out of order)"));
  if (bytes > 0) {
    try {
      d = buffer(dst, bytes);
      d->recv(from, kPointToPoint);
    } catch (const std::exception &e) {
      return missed(e.what());
    }
    if (!wait(*d, true, deadline, &why))
      return missed(why);
  }
  return nullptr;
}

cleave_rt_status GlooCommunicator::flush() {
  if (sends.empty())
    return nullptr;
  Clock::time_point deadline = Clock::now() + timeout;
  std::string msg, why;
  bool expired = false;
  for (PendingSend &s : sends) {
    // After one wait has failed, Gloo has closed the pairs: the others are
    // only checked.
    bool done =
        msg.empty()
            ? wait(*s.headerBuffer, false, deadline, &why) &&
                  (!s.dataBuffer || wait(*s.dataBuffer, false, deadline, &why))
            : completed(*s.headerBuffer, false) &&
                  (!s.dataBuffer || completed(*s.dataBuffer, false));
    if (done)
      continue;
    if (msg.empty())
      expired = Clock::now() >= deadline;
    msg += (msg.empty() ? "" : "; ") + std::string("rank ") +
           std::to_string(s.to) + " never reached the recv matching " + s.what;
  }
  sends.clear();
  if (msg.empty())
    return nullptr;
  return fail(makeStatus(
      CLEAVE_RT_UNAVAILABLE,
      msg + (expired ? " within the " + seconds(timeoutSecs) +
                           " communication timeout"
                     : ": the connection was lost (gloo: " + why + ")")));
}

void GlooCommunicator::abort(const std::string &reason) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (failure.empty())
    failure = "rank " + std::to_string(myRank) + " aborted: " + reason;
  sends.clear();
  try {
    ctx->closeConnections();
  } catch (const std::exception &) {
    // Closing is all that is left to do; a pair that cannot be closed is
    // closed when the process ends.
  }
}

cleave_rt_status createGlooCommunicator(const LaunchEnv &env,
                                        double timeoutSeconds,
                                        std::unique_ptr<Communicator> *out) {
  std::shared_ptr<gloo::Context> context;
  CLEAVE_RT_RETURN_IF_ERROR(connectGloo(env, timeoutSeconds, &context));
  *out = std::make_unique<GlooCommunicator>(std::move(context), timeoutSeconds);
  return nullptr;
}

} // namespace cleave::rt

#else // !CLEAVE_HAVE_GLOO

namespace cleave::rt {
cleave_rt_status createGlooCommunicator(const LaunchEnv &, double,
                                        std::unique_ptr<Communicator> *) {
  return makeStatus(CLEAVE_RT_UNAVAILABLE,
                    "this runtime was built without Gloo (install "
                    "libgloo-dev and rebuild)");
}
} // namespace cleave::rt

#endif // CLEAVE_HAVE_GLOO
