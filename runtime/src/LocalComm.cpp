//===- LocalComm.cpp - Ranks as threads of one process --------------------===//
//
// Every collective is a rendezvous of its group in shared memory: each member
// posts its operand's and result's addresses and the collective's static id,
// waits until the whole group has arrived, computes its own result from the
// members' operands (reductions in group-index order, so all members agree
// bit for bit), and waits again until every member is done reading before
// it returns (after which a member may overwrite its operand). An
// all-reduce splits the work: each member reduces 1/g of the elements into
// its result, and after a second rendezvous copies the other parts from the
// other members' results. Sends are buffered in a mailbox; a receive waits
// for its message.
//
// A collective of at most kStagedBytes per member takes one rendezvous
// instead of two or three: each member copies its operand into the round's
// staging buffer as it arrives and, once all have, computes its result from
// the copies and leaves. Members alternate between two staging buffers by
// the round's parity; a member can reach round n + 2, which reuses round
// n's buffer, only after every member has arrived at round n + 1, so
// after every member has finished reading round n's. With more ranks than
// cores each rendezvous costs a reschedule, and small collectives (tensor
// parallelism's activations, norms) are most of a step's.
//
// Every wait ends at the world's deadline or when a rank aborts or exits, so
// a lost rank is reported by name, never waited for forever. Each group's
// rendezvous and each mailbox has its own condition variable: a rank is
// woken by its own group's progress only (with more ranks than cores, waking
// every waiting rank at every step costs each of them a reschedule).
//
//===----------------------------------------------------------------------===//

#include "Communicator.h"

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace cleave::rt {

using namespace plan;
using Clock = std::chrono::steady_clock;

/// Collectives of at most this many operand bytes per member are staged
/// (one rendezvous); larger ones are reduced in place (no copy).
constexpr size_t kStagedBytes = kLocalCommStagedBytes;

class LocalWorld {
public:
  LocalWorld(int64_t size, double timeoutSeconds)
      : size(size), timeout(std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(timeoutSeconds))),
        where(size), exited(size, false) {}

  int64_t worldSize() const { return size; }
  double timeoutSeconds() const {
    return std::chrono::duration<double>(timeout).count();
  }
  cleave_rt_status run(int64_t rank, const CollectiveInfo &c,
                       const Group &group, const void *src, void *dst);
  void abort(int64_t rank, const std::string &reason);
  void exit(int64_t rank);

private:
  struct Slot {
    const void *src = nullptr;
    void *dst = nullptr;
    /// The member's collective, valid until the round's last member has
    /// arrived.
    const CollectiveInfo *info = nullptr;
  };
  struct Round {
    std::vector<Slot> slots;
    std::vector<bool> present;
    int64_t arrived = 0, reduced = 0, departed = 0;
    uint64_t generation = 0;
    std::string error; ///< Set when the members are at different collectives.
    std::condition_variable cv; ///< Signalled at each step of the round.
    /// The members' operands of staged collectives, by the round's parity.
    std::array<std::vector<std::vector<uint8_t>>, 2> staging;
  };
  using Lock = std::unique_lock<std::mutex>;

  /// Waits until `done()`; fails when the world aborted, a rank that
  /// `missing()` names (the ranks not there yet) has exited, or the deadline
  /// passed.
  template <typename Done, typename Missing>
  cleave_rt_status waitFor(Lock &lock, std::condition_variable &cv,
                           int64_t rank, const CollectiveInfo &c, Done done,
                           Missing missing);
  /// Wakes every waiting rank (a rank aborted or exited).
  void wakeAll();
  /// What a missing rank never reached: `c`, or for a recv the send that
  /// matches it.
  static std::string awaited(const CollectiveInfo &c) {
    return c.op == CollectiveOp::Recv ? "the send matching " + describe(c)
                                      : describe(c);
  }
  cleave_rt_status failure(int64_t rank, std::string message);

  const int64_t size;
  const Clock::duration timeout;
  std::mutex mu;
  std::string abortReason; ///< Non-empty once a rank aborted.
  /// The collective each rank waits in (null if none), for messages.
  std::vector<const CollectiveInfo *> where;
  std::vector<bool> exited;
  std::map<std::vector<int64_t>, Round> rounds;
  /// Messages from one rank to another, in the order they were sent, with
  /// the tag of a tagged one (plan::messageTag).
  struct Message {
    std::optional<int64_t> tag;
    std::vector<uint8_t> bytes;
  };
  struct Mailbox {
    std::deque<Message> messages;
    std::condition_variable cv; ///< Signalled when a message arrives.
  };
  std::map<std::pair<int64_t, int64_t>, Mailbox> mail;
};

cleave_rt_status LocalWorld::failure(int64_t rank, std::string message) {
  // The first failure aborts the world, so every other rank stops too.
  if (abortReason.empty())
    abortReason = "rank " + std::to_string(rank) + ": " + message;
  wakeAll();
  return makeStatus(CLEAVE_RT_UNAVAILABLE, message);
}

void LocalWorld::wakeAll() {
  for (auto &[group, round] : rounds)
    round.cv.notify_all();
  for (auto &[pair, box] : mail)
    box.cv.notify_all();
}

template <typename Done, typename Missing>
cleave_rt_status LocalWorld::waitFor(Lock &lock, std::condition_variable &cv,
                                     int64_t rank, const CollectiveInfo &c,
                                     Done done, Missing missing) {
  double seconds =
      arrivalSeconds(c, std::chrono::duration<double>(timeout).count());
  Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(seconds));
  while (!done()) {
    if (!abortReason.empty())
      return makeStatus(CLEAVE_RT_UNAVAILABLE, "stopped in " + describe(c) +
                                                   " because " + abortReason);
    for (int64_t m : missing())
      if (exited[m])
        return failure(rank, "rank " + std::to_string(m) +
                                 " exited before reaching " + awaited(c));
    if (cv.wait_until(lock, deadline) == std::cv_status::timeout && !done()) {
      std::string msg;
      std::vector<int64_t> late = missing();
      if (late.empty())
        msg = "a peer did not finish " + describe(c);
      for (int64_t m : late) {
        msg += (msg.empty() ? "" : "; ") + std::string("rank ") +
               std::to_string(m) + " never reached " + awaited(c);
        msg += where[m] ? " (it waits in " + describe(*where[m]) + ")"
                        : " (it is not in a collective)";
      }
      return failure(
          rank,
          msg + withinText(c, std::chrono::duration<double>(timeout).count()));
    }
  }
  return nullptr;
}

cleave_rt_status LocalWorld::run(int64_t rank, const CollectiveInfo &c,
                                 const Group &group, const void *src,
                                 void *dst) {
  Lock lock(mu);
  const int64_t g = static_cast<int64_t>(group.ranks.size());
  const int64_t me = group.index;
  where[rank] = &c;
  struct Clear {
    const CollectiveInfo *&w;
    ~Clear() { w = nullptr; }
  } clear{where[rank]};

  if (c.op == CollectiveOp::Send || c.op == CollectiveOp::Recv) {
    // Messages between two ranks are matched in order, as in MPI (a send
    // and its receive are different commands with different ids).
    int64_t from = group.ranks[c.root], to = group.ranks[c.peer];
    Mailbox &box = mail[std::make_pair(from, to)];
    if (c.op == CollectiveOp::Send) {
      if (me == c.root) {
        const uint8_t *p = static_cast<const uint8_t *>(src);
        box.messages.push_back(
            {plan::messageTag(c),
             std::vector<uint8_t>(p, p + c.count * dtypeSize(c.dtype))});
        box.cv.notify_all();
      }
      return nullptr;
    }
    size_t bytes = static_cast<size_t>(c.count) * dtypeSize(c.dtype);
    if (me != c.peer) {
      if (bytes)
        std::memset(dst, 0, bytes);
      return nullptr;
    }
    CLEAVE_RT_RETURN_IF_ERROR(waitFor(
        lock, box.cv, rank, c, [&] { return !box.messages.empty(); },
        [&] { return std::vector<int64_t>{from}; }));
    std::optional<int64_t> tag = std::move(box.messages.front().tag);
    std::vector<uint8_t> message = std::move(box.messages.front().bytes);
    box.messages.pop_front();
    if (tag != plan::messageTag(c))
      return failure(
          rank, describe(c) + ": received message " +
                    (tag ? std::to_string(*tag) : "(untagged)") +
                    " from rank " + std::to_string(from) + " where message " +
                    (plan::messageTag(c) ? std::to_string(*plan::messageTag(c))
                                         : "(untagged)") +
                    " was expected (sends and receives out of "
                    "order)");
    if (message.size() != bytes)
      return failure(rank, describe(c) + ": received " +
                               std::to_string(message.size()) +
                               " bytes, expected " + std::to_string(bytes));
    if (bytes)
      std::memcpy(dst, message.data(), bytes);
    return nullptr;
  }

  Round &round = rounds[group.ranks];
  if (round.slots.empty()) {
    round.slots.resize(g);
    round.present.assign(g, false);
  }
  const size_t bytes = static_cast<size_t>(c.count) * dtypeSize(c.dtype);
  const bool staged = g > 1 && bytes <= kStagedBytes;
  const uint64_t generation = round.generation;
  std::vector<std::vector<uint8_t>> &stage = round.staging[generation & 1];
  if (staged) {
    stage.resize(g);
    const uint8_t *p = static_cast<const uint8_t *>(src);
    stage[me].assign(p, p + bytes);
  }
  round.slots[me] = {src, dst, &c};
  round.present[me] = true;
  if (++round.arrived == g) {
    // The last to arrive checks that every member is at the same collective
    // of the plan, while all of them still wait here (their records stay
    // valid).
    for (int64_t k = 0; k < g && round.error.empty(); ++k)
      if (round.slots[k].info->id != c.id)
        round.error = "ranks disagree on the next collective: rank " +
                      std::to_string(group.ranks[k]) + " is at " +
                      describe(*round.slots[k].info) + ", rank " +
                      std::to_string(rank) + " at " + describe(c);
    if (staged) {
      round.arrived = 0;
      round.present.assign(g, false);
      ++round.generation;
    }
  }
  round.cv.notify_all();
  auto absent = [&] {
    std::vector<int64_t> m;
    for (int64_t k = 0; k < g; ++k)
      if (!round.present[k])
        m.push_back(group.ranks[k]);
    return m;
  };
  if (staged) {
    CLEAVE_RT_RETURN_IF_ERROR(waitFor(
        lock, round.cv, rank, c, [&] { return round.generation != generation; },
        absent));
    if (!round.error.empty())
      return failure(rank, round.error);
    std::vector<const void *> srcs(g);
    for (int64_t k = 0; k < g; ++k)
      srcs[k] = stage[k].data();
    lock.unlock();
    computeCollective(c, me, g, srcs.data(), dst);
    return nullptr;
  }
  CLEAVE_RT_RETURN_IF_ERROR(waitFor(
      lock, round.cv, rank, c, [&] { return round.arrived == g; }, absent));
  if (!round.error.empty())
    return failure(rank, round.error);
  std::vector<const void *> srcs(g);
  for (int64_t k = 0; k < g; ++k)
    srcs[k] = round.slots[k].src;
  if (c.op == CollectiveOp::AllReduce && g > 1) {
    // Reduce-scatter then all-gather, in shared memory: each member folds
    // its 1/g of the elements (in group order, as computeCollective would)
    // into its own result, then copies the others' parts from theirs.
    std::vector<void *> dsts(g);
    for (int64_t k = 0; k < g; ++k)
      dsts[k] = round.slots[k].dst;
    size_t elem = dtypeSize(c.dtype);
    auto part = [&](int64_t k) { return c.count * k / g; };
    lock.unlock();
    std::vector<const void *> pieces(g);
    for (int64_t k = 0; k < g; ++k)
      pieces[k] = static_cast<const uint8_t *>(srcs[k]) + part(me) * elem;
    reduceBuffers(c.reduce, c.dtype, pieces.data(), g,
                  static_cast<uint8_t *>(dst) + part(me) * elem,
                  part(me + 1) - part(me));
    lock.lock();
    ++round.reduced;
    round.cv.notify_all();
    CLEAVE_RT_RETURN_IF_ERROR(waitFor(
        lock, round.cv, rank, c, [&] { return round.reduced == g; },
        [&] { return std::vector<int64_t>{}; }));
    lock.unlock();
    for (int64_t k = 0; k < g; ++k)
      if (k != me && part(k + 1) > part(k))
        std::memcpy(static_cast<uint8_t *>(dst) + part(k) * elem,
                    static_cast<const uint8_t *>(dsts[k]) + part(k) * elem,
                    (part(k + 1) - part(k)) * elem);
  } else {
    lock.unlock();
    computeCollective(c, me, g, srcs.data(), dst);
  }
  lock.lock();
  if (++round.departed == g) {
    round.arrived = round.reduced = round.departed = 0;
    round.present.assign(g, false);
    ++round.generation;
    round.cv.notify_all();
    return nullptr;
  }
  // Stay until every member has read this rank's operand.
  return waitFor(
      lock, round.cv, rank, c, [&] { return round.generation != generation; },
      [&] { return std::vector<int64_t>{}; });
}

void LocalWorld::abort(int64_t rank, const std::string &reason) {
  Lock lock(mu);
  if (abortReason.empty())
    abortReason = "rank " + std::to_string(rank) + " failed: " + reason;
  wakeAll();
}

void LocalWorld::exit(int64_t rank) {
  Lock lock(mu);
  exited[rank] = true;
  wakeAll();
}

namespace {
class LocalCommunicator final : public Communicator {
public:
  LocalCommunicator(std::shared_ptr<LocalWorld> world, int64_t rank,
                    int64_t size)
      : world(std::move(world)), myRank(rank), size(size) {}
  ~LocalCommunicator() override { world->exit(myRank); }
  const char *name() const override { return "local"; }
  int64_t rank() const override { return myRank; }
  int64_t worldSize() const override { return size; }
  double timeoutSeconds() const override { return world->timeoutSeconds(); }
  void abort(const std::string &reason) override {
    world->abort(myRank, reason);
  }

protected:
  cleave_rt_status runCollective(const CollectiveInfo &c, const Group &group,
                                 const void *src, void *dst) override {
    return world->run(myRank, c, group, src, dst);
  }

private:
  std::shared_ptr<LocalWorld> world;
  int64_t myRank, size;
};
} // namespace

std::shared_ptr<LocalWorld> createLocalWorld(int64_t size,
                                             double timeoutSeconds) {
  return std::make_shared<LocalWorld>(size, timeoutSeconds);
}

std::unique_ptr<Communicator>
localCommunicator(std::shared_ptr<LocalWorld> world, int64_t rank) {
  int64_t size = world->worldSize();
  return std::make_unique<LocalCommunicator>(std::move(world), rank, size);
}

} // namespace cleave::rt
