//===- NcclWork.cpp - Collectives and send/recv of the NCCL double --------===//
//
// The work of the calls, on the stream's thread: the sequence check, the
// collectives in chunks through the ranks' staging areas, and send/recv
// through one mailbox per ordered pair of ranks.
//
//===----------------------------------------------------------------------===//

#include "NcclWork.h"

#include "NcclReduce.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace cd = cleave::cudadouble;
using namespace cleave::nccldouble;

namespace {

bool sameCall(const CallDesc &a, const CallDesc &b) {
  return a.kind == b.kind && a.count == b.count && a.dtype == b.dtype &&
         a.op == b.op && a.root == b.root;
}

/// One call as it runs: its number and what this rank says it is.
struct Exec {
  Op *op = nullptr;
  CallDesc mine;
  /// Collectives: index among the communicator's collectives; send/recv:
  /// index among the messages on the channel to (from) the peer.
  uint64_t index = 0;
  bool injectAsync = false;
  // Send/recv progress.
  int state = 0;
  size_t done = 0;
  bool finished = false;
};

void reportMismatch(CommState &c, const Exec &e, const std::string &text,
                    bool print) {
  std::string full = c.label + " (" + str(c.nranks) + " ranks): " + text;
  c.setError(ncclInvalidUsage, full);
  if (!print)
    return;
  std::string line = "cleave nccl double: " + full;
  if (!e.op->command.empty())
    line += " [" + e.op->command + "]";
  std::fprintf(stderr, "%s\n", line.c_str());
}

/// Runs `nsteps` steps through the staging areas: `fill(i, mine)` writes
/// this rank's data of step i, then, once every rank has, `use(i)` reads
/// them. False when the communicator failed meanwhile.
template <typename Fill, typename Use>
bool staged(CommState &c, size_t nsteps, Fill fill, Use use) {
  RankSlot &me = c.slot(c.rank);
  for (size_t i = 0; i < nsteps; ++i) {
    uint64_t s = ++c.steps;
    if (!c.waitUntil([&] { return c.allAtLeast(&RankSlot::consumed, s - 1); }))
      return false;
    fill(i, c.staging(c.rank));
    me.posted.store(s, std::memory_order_release);
    if (!c.waitUntil([&] { return c.allAtLeast(&RankSlot::posted, s); }))
      return false;
    use(i);
    me.consumed.store(s, std::memory_order_release);
  }
  return true;
}

void runCollective(Exec &e) {
  Op &op = *e.op;
  CommState &c = *op.comm;
  if (!c.usable())
    return;
  if (e.injectAsync) {
    c.setError(ncclSystemError, "injected fault: rank " + str(c.rank) +
                                    "'s call #" + str(c.fault.call) + " on " +
                                    c.label + " ($CLEAVE_NCCL_DOUBLE_FAULT)");
    return;
  }
  const int n = c.nranks, r = c.rank;
  const uint64_t k = e.index;
  RankSlot &me = c.slot(r);
  me.desc[k % kRing] = e.mine;
  me.described.store(k + 1, std::memory_order_release);
  if (!c.waitUntil([&] { return c.allAtLeast(&RankSlot::described, k + 1); }))
    return;
  CallDesc first = c.slot(0).desc[k % kRing];
  for (int q = 1; q < n; ++q) {
    CallDesc d = c.slot(q).desc[k % kRing];
    if (sameCall(first, d))
      continue;
    reportMismatch(c, e,
                   "rank " + str(q) + " called " + describe(d) + " as call #" +
                       str(k + 1) + " where rank 0 called " + describe(first),
                   r == 0 || r == q);
    return;
  }

  const CallDesc &d = op.desc;
  const size_t es = dtypeSize(d.dtype), count = d.count;
  const char *send = static_cast<const char *>(cd::hostPointer(op.send));
  char *recv = static_cast<char *>(cd::hostPointer(op.recv));
  std::vector<const void *> inputs(n);
  size_t per = kStagingBytes / es;
  if (d.kind == CallKind::ReduceScatter)
    per = kStagingBytes / (size_t(n) * es);
  size_t nsteps = (count + per - 1) / per;
  auto len = [&](size_t i) { return std::min(per, count - i * per); };

  switch (d.kind) {
  case CallKind::AllReduce:
    staged(
        c, nsteps,
        [&](size_t i, char *mine) {
          std::memcpy(mine, send + i * per * es, len(i) * es);
        },
        [&](size_t i) {
          for (int q = 0; q < n; ++q)
            inputs[q] = c.staging(q);
          reduce(d.dtype, d.op, inputs.data(), n, recv + i * per * es, len(i));
        });
    break;
  case CallKind::AllGather:
    staged(
        c, nsteps,
        [&](size_t i, char *mine) {
          std::memcpy(mine, send + i * per * es, len(i) * es);
        },
        [&](size_t i) {
          for (int q = 0; q < n; ++q)
            std::memcpy(recv + (q * count + i * per) * es, c.staging(q),
                        len(i) * es);
        });
    break;
  case CallKind::ReduceScatter:
    staged(
        c, nsteps,
        [&](size_t i, char *mine) {
          for (int q = 0; q < n; ++q)
            std::memcpy(mine + q * len(i) * es,
                        send + (q * count + i * per) * es, len(i) * es);
        },
        [&](size_t i) {
          for (int q = 0; q < n; ++q)
            inputs[q] = c.staging(q) + r * len(i) * es;
          reduce(d.dtype, d.op, inputs.data(), n, recv + i * per * es, len(i));
        });
    break;
  case CallKind::Broadcast:
    staged(
        c, nsteps,
        [&](size_t i, char *mine) {
          if (r == d.root)
            std::memcpy(mine, send + i * per * es, len(i) * es);
        },
        [&](size_t i) {
          std::memcpy(recv + i * per * es, c.staging(d.root), len(i) * es);
        });
    break;
  default:
    break;
  }
}

/// Advances one send or recv as far as it goes without waiting; returns
/// whether it moved.
bool stepP2p(Exec &e) {
  Op &op = *e.op;
  CommState &c = *op.comm;
  const bool isSend = op.desc.kind == CallKind::Send;
  const int peer = op.desc.root, me = c.rank;
  const uint64_t m = e.index;
  auto finish = [&] {
    e.finished = true;
    ++(isSend ? c.sendsDone : c.recvsDone)[peer];
    return true;
  };
  // Messages on one channel go one at a time, in order.
  if ((isSend ? c.sendsDone : c.recvsDone)[peer] != m)
    return false;
  if (!c.usable())
    return finish();
  Channel &ch = isSend ? c.channel(me, peer) : c.channel(peer, me);
  switch (e.state) {
  case 0:
    if (e.injectAsync) {
      c.setError(ncclSystemError, "injected fault: rank " + str(me) +
                                      "'s call #" + str(c.fault.call) + " on " +
                                      c.label + " ($CLEAVE_NCCL_DOUBLE_FAULT)");
      return finish();
    }
    if (isSend) {
      ch.sendDesc[m % kRing] = e.mine;
      ch.sendsPosted.store(m + 1, std::memory_order_release);
    } else {
      ch.recvDesc[m % kRing] = e.mine;
      ch.recvsPosted.store(m + 1, std::memory_order_release);
    }
    e.state = 1;
    return true;
  case 1: {
    auto &posted = isSend ? ch.recvsPosted : ch.sendsPosted;
    if (posted.load(std::memory_order_acquire) < m + 1)
      return false;
    CallDesc s = isSend ? e.mine : ch.sendDesc[m % kRing];
    CallDesc rv = isSend ? ch.recvDesc[m % kRing] : e.mine;
    if (s.count != rv.count || s.dtype != rv.dtype) {
      int from = isSend ? me : peer, to = isSend ? peer : me;
      reportMismatch(c, e,
                     "rank " + str(from) + " called " + describe(s) +
                         " as send #" + str(m + 1) + " to rank " + str(to) +
                         " where rank " + str(to) + " called " + describe(rv) +
                         " as recv #" + str(m + 1) + " from rank " + str(from),
                     true);
      return finish();
    }
    e.state = 2;
    return true;
  }
  default:
    break;
  }
  const size_t bytes = op.desc.count * dtypeSize(op.desc.dtype);
  const size_t box = c.layout.mailbox;
  if (isSend) {
    uint64_t produced = ch.produced.load(std::memory_order_relaxed);
    if (ch.consumed.load(std::memory_order_acquire) != produced)
      return false; // the peer has not taken the last chunk yet
    if (e.done == bytes)
      return finish();
    size_t len = std::min(box, bytes - e.done);
    std::memcpy(c.mailbox(me, peer),
                static_cast<const char *>(cd::hostPointer(op.send)) + e.done,
                len);
    e.done += len;
    ch.produced.store(produced + 1, std::memory_order_release);
    return true;
  }
  if (e.done == bytes)
    return finish();
  uint64_t consumed = ch.consumed.load(std::memory_order_relaxed);
  if (ch.produced.load(std::memory_order_acquire) == consumed)
    return false;
  size_t len = std::min(box, bytes - e.done);
  std::memcpy(static_cast<char *>(cd::hostPointer(op.recv)) + e.done,
              c.mailbox(peer, me), len);
  e.done += len;
  ch.consumed.store(consumed + 1, std::memory_order_release);
  return true;
}

/// Runs the sends and recvs of one piece of work together, so a rank's
/// send and recv to each other in one group do not deadlock.
void runP2p(std::vector<Exec> &execs) {
  std::vector<Exec *> open;
  for (Exec &e : execs)
    if (isP2p(e.op->desc.kind))
      open.push_back(&e);
  Backoff backoff;
  while (!open.empty()) {
    bool moved = false;
    for (Exec *e : open)
      moved |= stepP2p(*e);
    open.erase(std::remove_if(open.begin(), open.end(),
                              [](Exec *e) { return e->finished; }),
               open.end());
    if (moved) {
      backoff.reset();
      continue;
    }
    for (Exec *e : open) {
      CommState &c = *e->op->comm;
      if (!c.usable()) {
        // Unblocks this and the later messages on the channel.
        e->finished = true;
        ++(e->op->desc.kind == CallKind::Send ? c.sendsDone
                                              : c.recvsDone)[e->op->desc.root];
      }
    }
    open.erase(std::remove_if(open.begin(), open.end(),
                              [](Exec *e) { return e->finished; }),
               open.end());
    backoff.pause();
  }
}

} // namespace

namespace cleave::nccldouble {

const char *kindName(CallKind k) {
  switch (k) {
  case CallKind::AllReduce:
    return "ncclAllReduce";
  case CallKind::AllGather:
    return "ncclAllGather";
  case CallKind::ReduceScatter:
    return "ncclReduceScatter";
  case CallKind::Broadcast:
    return "ncclBroadcast";
  case CallKind::Send:
    return "ncclSend";
  case CallKind::Recv:
    return "ncclRecv";
  }
  return "?";
}

/// "ncclAllReduce(count=10, float32, sum)".
std::string describe(const CallDesc &d) {
  std::string s = std::string(kindName(d.kind)) + "(count=" + str(d.count) +
                  ", " + dtypeName(d.dtype);
  if (d.kind == CallKind::AllReduce || d.kind == CallKind::ReduceScatter)
    s += std::string(", ") + opName(d.op);
  else if (d.kind == CallKind::Broadcast)
    s += ", root=" + str(d.root);
  else if (isP2p(d.kind))
    s += ", peer=" + str(d.root);
  return s + ")";
}

std::string describeOp(const Op &op) {
  return describe(op.desc) + " on rank " + str(op.comm->rank) + " of " +
         op.comm->label;
}

/// Adds the byte ranges `op` reads and writes: the write range, and the
/// read range less the bytes it shares with the write range (in place).
void addAccesses(const Op &op, std::vector<cd::Access> &out) {
  uint64_t bytes = op.desc.count * dtypeSize(op.desc.dtype);
  uint64_t n = uint64_t(op.comm->nranks);
  uint64_t sendBytes = 0, recvBytes = 0;
  switch (op.desc.kind) {
  case CallKind::AllReduce:
  case CallKind::Send:
  case CallKind::Recv:
    sendBytes = recvBytes = bytes;
    break;
  case CallKind::AllGather:
    sendBytes = bytes;
    recvBytes = n * bytes;
    break;
  case CallKind::ReduceScatter:
    sendBytes = n * bytes;
    recvBytes = bytes;
    break;
  case CallKind::Broadcast:
    sendBytes = op.comm->rank == op.desc.root ? bytes : 0;
    recvBytes = bytes;
    break;
  }
  if (op.desc.kind == CallKind::Send)
    recvBytes = 0;
  if (op.desc.kind == CallKind::Recv)
    sendBytes = 0;
  std::string fn = kindName(op.desc.kind);
  CUdeviceptr w0 = op.recv, w1 = op.recv + recvBytes;
  if (recvBytes)
    out.push_back({w0, recvBytes, true, fn + " recv buffer"});
  if (!sendBytes)
    return;
  CUdeviceptr r0 = op.send, r1 = op.send + sendBytes;
  if (!recvBytes || r1 <= w0 || w1 <= r0) {
    out.push_back({r0, sendBytes, false, fn + " send buffer"});
    return;
  }
  if (r0 < w0)
    out.push_back({r0, w0 - r0, false, fn + " send buffer"});
  if (w1 < r1)
    out.push_back({w1, r1 - w1, false, fn + " send buffer"});
}

WorkItem::WorkItem(std::vector<Op> ops, std::string what)
    : ops(std::move(ops)), what(std::move(what)) {
  for (Op &op : this->ops)
    comms.push_back(op.comm);
  std::sort(comms.begin(), comms.end());
  comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
  for (StatePtr &c : comms)
    c->addPending();
}

WorkItem::~WorkItem() {
  if (!ran.load())
    for (StatePtr &c : comms)
      c->finishPending();
}

void WorkItem::run() {
  std::vector<std::unique_lock<std::mutex>> locks;
  for (StatePtr &c : comms) {
    if (c->destroyed.load())
      cd::fail(what + " ran after ncclCommDestroy of its " + c->label +
               " (rank " + str(c->rank) +
               "): a graph that captured it "
               "was launched after the communicator was destroyed");
    locks.emplace_back(c->execMutex);
  }
  std::vector<Exec> execs;
  for (Op &op : ops) {
    CommState &c = *op.comm;
    if (!c.usable())
      continue;
    Exec e;
    e.op = &op;
    e.mine = op.desc;
    uint64_t call = ++c.calls;
    if (c.fault.call == call && c.fault.rank == c.rank) {
      if (c.fault.kind == Fault::Kind::Async)
        e.injectAsync = true;
      else if (c.fault.kind == Fault::Kind::Count)
        e.mine.count += 1;
    }
    int peer = op.desc.root;
    if (op.desc.kind == CallKind::Send)
      e.index = c.sends[peer]++;
    else if (op.desc.kind == CallKind::Recv)
      e.index = c.recvs[peer]++;
    else
      e.index = c.collectives++;
    execs.push_back(e);
  }
  for (Exec &e : execs)
    if (!isP2p(e.op->desc.kind))
      runCollective(e);
  runP2p(execs);
  locks.clear();
  if (!ran.exchange(true))
    for (StatePtr &c : comms)
      c->finishPending();
}

} // namespace cleave::nccldouble
