//===- DriverStreams.cpp - Streams, events and graphs of the driver double ===//
//
// Each stream is a worker thread running its FIFO queue of operations
// (work, event markers, event waits); the legacy stream runs its work on
// the calling thread. The happens-before clocks are computed when an
// operation is enqueued, so the checker's verdict does not depend on
// thread timing: enqueueing on stream s joins the calling thread's clock
// into s's and ticks s's own entry; cuEventRecord snapshots s's clock;
// cuStreamWaitEvent joins the snapshot of the recording made last before
// the call; cuStreamSynchronize, cuEventSynchronize, a successful query
// and cuStreamDestroy join the stream's (event's) clock into the thread's.
//
// Capture records the operations of the origin stream and of every stream
// that waits on an event recorded in the capture (fork/join); cuGraphLaunch
// replays them on the streams they were captured on, after a fork edge
// from the launch stream and followed by a join edge back into it, through
// the same enqueue path (so every replay is checked again).
//
//===----------------------------------------------------------------------===//

#include "DriverState.h"

#include <algorithm>

namespace cleave::cudadouble::driver {

using cleave::rt::cuda::CU_STREAM_NON_BLOCKING;

Stream *findStream(State &s, CUstream h) {
  auto *t = reinterpret_cast<Stream *>(h);
  return s.streams.count(t) ? t : nullptr;
}

Stream *streamOrFail(State &s, CUstream h, const char *call) {
  if (isLegacy(h))
    return nullptr;
  Stream *t = findStream(s, h);
  if (!t)
    fail(std::string(call) + ": " + hex(reinterpret_cast<uintptr_t>(h)) +
         " is not a live stream (never created, or destroyed)");
  return t;
}

static std::string streamName(const Stream *t) {
  return "stream #" + std::to_string(t->id);
}

static Event *eventOrFail(State &s, CUevent h, const char *call) {
  auto *e = reinterpret_cast<Event *>(h);
  if (!s.events.count(e))
    fail(std::string(call) + ": " + hex(reinterpret_cast<uintptr_t>(h)) +
         " is not a live event (never created, or destroyed)");
  return e;
}

static void workerMain(Stream *t) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    s.cv.wait(lock, [&] { return t->stop || !t->queue.empty(); });
    if (t->queue.empty())
      return;
    Op op = std::move(t->queue.front());
    t->queue.pop_front();
    switch (op.kind) {
    case OpKind::Record:
      op.event->markDone(op.generation);
      break;
    case OpKind::Wait:
      s.cv.wait(lock, [&] { return op.event->isDone(op.generation); });
      break;
    case OpKind::Work:
      thread().command = op.info->command;
      recheckLive(s, op);
      lock.unlock();
      op.work();
      thread().command.clear();
      op.work = nullptr;
      lock.lock();
      break;
    }
    ++t->completed;
    s.cv.notify_all();
  }
}

//===----------------------------------------------------------------------===//
// Operations on live streams (State::mu held)
//===----------------------------------------------------------------------===//

/// Queues work on live, non-capturing stream `t` after checking it.
static void pushWork(State &s, Stream *t, const std::string &what,
                     const std::string &command, std::vector<Access> accesses,
                     std::function<void()> work) {
  Clock &clock = s.agents[t->agent].clock;
  joinInto(clock, s.agents[hostAgent(s)].clock);
  uint64_t stamp = tick(clock, t->agent);
  auto info = std::make_shared<OpInfo>(OpInfo{what, command, streamName(t)});
  Op op;
  op.allocationIds = checkAndRecord(s, accesses, clock, t->agent, stamp, info);
  op.kind = OpKind::Work;
  op.work = std::move(work);
  op.accesses = std::move(accesses);
  op.info = std::move(info);
  t->queue.push_back(std::move(op));
  ++t->enqueued;
  s.cv.notify_all();
}

/// Runs work on the legacy stream: synchronously, as the calling thread.
static void runLegacy(State &s, std::unique_lock<std::mutex> &lock,
                      const std::string &what, std::vector<Access> accesses,
                      const std::function<void()> &work) {
  uint32_t host = hostAgent(s);
  Clock &clock = s.agents[host].clock;
  uint64_t stamp = tick(clock, host);
  auto info = std::make_shared<OpInfo>(
      OpInfo{what, thread().command,
             "the legacy stream (" + agentName(s, host) + ")"});
  checkAndRecord(s, accesses, clock, host, stamp, info);
  lock.unlock();
  work();
  lock.lock();
}

/// Records `ev` on `t` (null: the legacy stream, complete at once).
static void recordOn(State &s, Stream *t,
                     const std::shared_ptr<EventState> &ev) {
  uint32_t host = hostAgent(s);
  ev->capture.reset();
  if (!t) {
    ev->clock = s.agents[host].clock;
    ev->markDone(++ev->recorded);
    ev->recordedOn = agentName(s, host);
    s.cv.notify_all();
    return;
  }
  Clock &clock = s.agents[t->agent].clock;
  joinInto(clock, s.agents[host].clock);
  ev->clock = clock;
  ev->recordedOn = streamName(t);
  Op op;
  op.kind = OpKind::Record;
  op.event = ev;
  op.generation = ++ev->recorded;
  t->queue.push_back(std::move(op));
  ++t->enqueued;
  s.cv.notify_all();
}

/// Makes `t` (null: the calling thread) wait for the last recording of
/// `ev`; nothing if it was never recorded.
static void waitOn(State &s, std::unique_lock<std::mutex> &lock, Stream *t,
                   const std::shared_ptr<EventState> &ev) {
  if (!ev->recorded)
    return;
  uint64_t generation = ev->recorded;
  Clock snapshot = ev->clock;
  uint32_t host = hostAgent(s);
  if (!t) {
    s.cv.wait(lock, [&] { return ev->isDone(generation); });
    joinInto(s.agents[host].clock, snapshot);
    return;
  }
  Clock &clock = s.agents[t->agent].clock;
  joinInto(clock, s.agents[host].clock);
  joinInto(clock, snapshot);
  Op op;
  op.kind = OpKind::Wait;
  op.event = ev;
  op.generation = generation;
  t->queue.push_back(std::move(op));
  ++t->enqueued;
  s.cv.notify_all();
}

/// Waits until `t` has run everything queued so far, then joins its clock
/// into the calling thread's.
static void drain(State &s, std::unique_lock<std::mutex> &lock, Stream *t) {
  Clock snapshot = s.agents[t->agent].clock;
  uint64_t target = t->enqueued;
  s.cv.wait(lock, [&] { return t->completed >= target; });
  joinInto(s.agents[hostAgent(s)].clock, snapshot);
}

static size_t captureIndex(Capture &c, Stream *t) {
  auto it = std::find(c.streams.begin(), c.streams.end(), t);
  if (it != c.streams.end())
    return static_cast<size_t>(it - c.streams.begin());
  c.streams.push_back(t);
  return c.streams.size() - 1;
}

static void invalidate(Capture &c, const std::string &why) {
  if (!c.invalidated)
    c.invalidatedBy = why;
  c.invalidated = true;
}

static CUresult refuseInvalidated(const Capture &c, const std::string &call) {
  return refuse(kCaptureInvalidated,
                call + ": the capture begun on " + streamName(c.origin) +
                    " was invalidated by " + c.invalidatedBy);
}

CUresult enqueueLocked(State &s, std::unique_lock<std::mutex> &lock, CUstream h,
                       const std::string &what, std::vector<Access> accesses,
                       std::function<void()> work) {
  if (isLegacy(h)) {
    runLegacy(s, lock, what, std::move(accesses), work);
    return kSuccess;
  }
  Stream *t = findStream(s, h);
  if (!t)
    return kInvalidHandle;
  if (t->capture) {
    Capture &c = *t->capture;
    if (c.invalidated)
      return refuseInvalidated(c, what);
    OpInfo info{what, thread().command, streamName(t) + " (capturing)"};
    checkBounds(s, accesses, info);
    GraphNode node;
    node.kind = OpKind::Work;
    node.stream = captureIndex(c, t);
    node.what = what;
    node.command = thread().command;
    node.accesses = std::move(accesses);
    node.work = std::move(work);
    c.nodes.push_back(std::move(node));
    return kSuccess;
  }
  pushWork(s, t, what, thread().command, std::move(accesses), std::move(work));
  return kSuccess;
}

CUresult syncCallDuringCapture(State &s, const char *call) {
  std::thread::id self = std::this_thread::get_id();
  std::string blocked;
  for (const auto &c : s.captures) {
    if (!c->active)
      continue;
    if (c->mode == 0 || (c->mode == 1 && c->thread == self)) {
      invalidate(*c, call);
      blocked = streamName(c->origin);
    }
  }
  if (blocked.empty())
    return kSuccess;
  return refuse(kCaptureUnsupported,
                std::string(call) + ": not permitted while " + blocked +
                    " is being captured (the capture is now invalidated)");
}

//===----------------------------------------------------------------------===//
// Capture helpers
//===----------------------------------------------------------------------===//

/// "" if every stream forked into `c` was joined back into its origin,
/// else the first one that was not: its clock over the capture's nodes
/// (1 + index of the latest node of each stream known to come before).
static std::string unjoinedStream(const Capture &c) {
  size_t k = c.streams.size();
  std::vector<std::vector<size_t>> known(k, std::vector<size_t>(k, 0));
  std::vector<std::vector<size_t>> snapshots(c.nodes.size());
  std::vector<size_t> last(k, 0);
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const GraphNode &n = c.nodes[i];
    std::vector<size_t> &mine = known[n.stream];
    if (n.kind == OpKind::Wait)
      for (size_t j = 0; j < k; ++j)
        mine[j] = std::max(mine[j], snapshots[n.recordNode][j]);
    mine[n.stream] = last[n.stream] = i + 1;
    if (n.kind == OpKind::Record)
      snapshots[i] = mine;
  }
  for (size_t j = 1; j < k; ++j)
    if (known[0][j] < last[j])
      return streamName(c.streams[j]) + " (its last captured operation, '" +
             c.nodes[last[j] - 1].what +
             "', is not followed by an event record that " +
             streamName(c.streams[0]) + " waits on)";
  return "";
}

/// Ends capture `c` on every stream it holds.
static void finishCapture(State &s, const std::shared_ptr<Capture> &c) {
  c->active = false;
  for (Stream *t : c->streams)
    if (s.streams.count(t) && t->capture == c)
      t->capture.reset();
  s.captures.erase(std::remove(s.captures.begin(), s.captures.end(), c),
                   s.captures.end());
}

} // namespace cleave::cudadouble::driver

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

using namespace cleave::cudadouble;
using namespace cleave::cudadouble::driver;

namespace cleave::cudadouble {
CLEAVE_DOUBLE_EXPORT CUresult enqueue(CUstream stream, const std::string &what,
                                      std::vector<Access> accesses,
                                      std::function<void()> work) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  return enqueueLocked(s, lock, stream, what, std::move(accesses),
                       std::move(work));
}
} // namespace cleave::cudadouble

extern "C" {

CLEAVE_DOUBLE_EXPORT CUresult cuStreamCreate(CUstream *out, unsigned flags) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.initialized)
    return refuse(kNotInitialized, "cuStreamCreate before cuInit");
  if (!out)
    return refuse(kInvalidValue, "cuStreamCreate: null stream pointer");
  if (flags & ~CU_STREAM_NON_BLOCKING)
    return refuse(kInvalidValue,
                  "cuStreamCreate: unknown flags " + std::to_string(flags));
  Context *ctx = currentContext();
  if (!ctx)
    return refuse(kInvalidContext, "cuStreamCreate: no current context "
                                   "(cuCtxSetCurrent with a retained "
                                   "primary context first)");
  auto *t = new Stream();
  t->id = s.nextStreamId++;
  t->agent = newAgent(s, streamName(t));
  t->ctx = ctx;
  s.streams.insert(t);
  t->worker = std::thread(workerMain, t);
  *out = reinterpret_cast<CUstream>(t);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuStreamDestroy_v2(CUstream h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (isLegacy(h))
    fail("cuStreamDestroy: the legacy stream cannot be destroyed");
  Stream *t = streamOrFail(s, h, "cuStreamDestroy");
  if (t->capture)
    fail("cuStreamDestroy: " + streamName(t) +
         " is being captured (end the capture first)");
  // Pending work finishes first; the calling thread then knows it ran.
  drain(s, lock, t);
  s.streams.erase(t);
  t->stop = true;
  s.cv.notify_all();
  lock.unlock();
  t->worker.join();
  delete t;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuStreamSynchronize(CUstream h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Stream *t = streamOrFail(s, h, "cuStreamSynchronize");
  if (!t)
    return syncCallDuringCapture(s, "cuStreamSynchronize(legacy stream)");
  if (t->capture) {
    invalidate(*t->capture, "cuStreamSynchronize");
    return refuse(kCaptureUnsupported,
                  "cuStreamSynchronize: " + streamName(t) +
                      " is being captured (the capture is now invalidated)");
  }
  drain(s, lock, t);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuStreamQuery(CUstream h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Stream *t = streamOrFail(s, h, "cuStreamQuery");
  if (!t)
    return kSuccess;
  if (t->capture) {
    invalidate(*t->capture, "cuStreamQuery");
    return refuse(kCaptureUnsupported,
                  "cuStreamQuery: " + streamName(t) +
                      " is being captured (the capture is now invalidated)");
  }
  if (t->completed < t->enqueued)
    return kNotReady;
  joinInto(s.agents[hostAgent(s)].clock, s.agents[t->agent].clock);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuEventCreate(CUevent *out, unsigned flags) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (!s.initialized)
    return refuse(kNotInitialized, "cuEventCreate before cuInit");
  if (!out)
    return refuse(kInvalidValue, "cuEventCreate: null event pointer");
  if (flags & ~0x7u)
    return refuse(kInvalidValue,
                  "cuEventCreate: unknown flags " + std::to_string(flags));
  if (!currentContext())
    return refuse(kInvalidContext, "cuEventCreate: no current context");
  auto *e = new Event();
  e->state = std::make_shared<EventState>();
  e->id = s.nextEventId++;
  s.events.insert(e);
  *out = reinterpret_cast<CUevent>(e);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuEventDestroy_v2(CUevent h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Event *e = eventOrFail(s, h, "cuEventDestroy");
  s.events.erase(e);
  delete e; // Pending markers and waits keep its state.
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuEventRecord(CUevent he, CUstream h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Event *e = eventOrFail(s, he, "cuEventRecord");
  Stream *t = streamOrFail(s, h, "cuEventRecord");
  if (t && t->capture) {
    Capture &c = *t->capture;
    if (c.invalidated)
      return refuseInvalidated(c, "cuEventRecord");
    GraphNode node;
    node.kind = OpKind::Record;
    node.stream = captureIndex(c, t);
    node.what = "cuEventRecord(event #" + std::to_string(e->id) + ")";
    node.command = thread().command;
    c.nodes.push_back(std::move(node));
    e->state->capture = t->capture;
    e->state->captureNode = c.nodes.size() - 1;
    return kSuccess;
  }
  recordOn(s, t, e->state);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuStreamWaitEvent(CUstream h, CUevent he,
                                                unsigned flags) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Stream *t = streamOrFail(s, h, "cuStreamWaitEvent");
  Event *e = eventOrFail(s, he, "cuStreamWaitEvent");
  if (flags)
    return refuse(kNotSupported, "cuStreamWaitEvent: flags " +
                                     std::to_string(flags) +
                                     " are not supported by the double");
  std::shared_ptr<EventState> ev = e->state;
  std::string name = "event #" + std::to_string(e->id);
  if (ev->capture) {
    std::shared_ptr<Capture> c = ev->capture;
    if (!c->active)
      return refuse(kCapturedEvent,
                    "cuStreamWaitEvent: " + name +
                        " was last recorded in a capture that has ended");
    if (!t)
      return refuse(kCaptureImplicit,
                    "cuStreamWaitEvent: the legacy stream cannot wait on " +
                        name + ", recorded in a capture");
    if (t->capture && t->capture != c) {
      invalidate(*c, "cuStreamWaitEvent (merge)");
      return refuse(kCaptureMerge, "cuStreamWaitEvent: " + streamName(t) +
                                       " is in another capture than " + name);
    }
    if (c->invalidated)
      return refuseInvalidated(*c, "cuStreamWaitEvent");
    t->capture = c; // Joins the capture (fork) if it was not in it.
    GraphNode node;
    node.kind = OpKind::Wait;
    node.stream = captureIndex(*c, t);
    node.what = "cuStreamWaitEvent(" + name + ")";
    node.command = thread().command;
    node.recordNode = ev->captureNode;
    c->nodes.push_back(std::move(node));
    return kSuccess;
  }
  if (t && t->capture && ev->recorded) {
    invalidate(*t->capture, "cuStreamWaitEvent (isolation)");
    return refuse(kCaptureIsolation, "cuStreamWaitEvent: capturing " +
                                         streamName(t) + " waits on " + name +
                                         ", recorded outside the capture "
                                         "on " +
                                         ev->recordedOn);
  }
  waitOn(s, lock, t, ev);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuEventQuery(CUevent he) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Event *e = eventOrFail(s, he, "cuEventQuery");
  std::shared_ptr<EventState> ev = e->state;
  if (ev->capture)
    return refuse(kCapturedEvent, "cuEventQuery: event #" +
                                      std::to_string(e->id) +
                                      " was last recorded in a capture");
  if (!ev->isDone(ev->recorded))
    return kNotReady;
  joinInto(s.agents[hostAgent(s)].clock, ev->clock);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuEventSynchronize(CUevent he) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Event *e = eventOrFail(s, he, "cuEventSynchronize");
  std::shared_ptr<EventState> ev = e->state;
  if (ev->capture)
    return refuse(kCapturedEvent, "cuEventSynchronize: event #" +
                                      std::to_string(e->id) +
                                      " was last recorded in a capture");
  waitOn(s, lock, nullptr, ev);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuLaunchHostFunc(CUstream h, void (*fn)(void *),
                                               void *data) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  streamOrFail(s, h, "cuLaunchHostFunc");
  if (!fn)
    return refuse(kInvalidValue, "cuLaunchHostFunc: null function");
  return enqueueLocked(s, lock, h, "cuLaunchHostFunc", {},
                       [fn, data] { fn(data); });
}

CLEAVE_DOUBLE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, int mode) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Stream *t = streamOrFail(s, h, "cuStreamBeginCapture");
  if (!t)
    return refuse(kCaptureUnsupported,
                  "cuStreamBeginCapture: the legacy stream cannot be captured");
  if (mode < 0 || mode > 2)
    return refuse(kInvalidValue,
                  "cuStreamBeginCapture: unknown mode " + std::to_string(mode));
  if (t->capture)
    return refuse(kIllegalState, "cuStreamBeginCapture: " + streamName(t) +
                                     " is already being captured");
  auto c = std::make_shared<Capture>();
  c->origin = t;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->streams.push_back(t);
  t->capture = c;
  s.captures.push_back(c);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph *out) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  Stream *t = streamOrFail(s, h, "cuStreamEndCapture");
  if (out)
    *out = nullptr;
  if (!t || !t->capture)
    return refuse(kIllegalState, "cuStreamEndCapture: the stream is not "
                                 "being captured");
  std::shared_ptr<Capture> c = t->capture;
  if (c->origin != t)
    return refuse(kCaptureUnmatched,
                  "cuStreamEndCapture: the capture holding " + streamName(t) +
                      " was begun on " + streamName(c->origin));
  if (c->mode != 2 && c->thread != std::this_thread::get_id())
    return refuse(kCaptureWrongThread, "cuStreamEndCapture: the capture of " +
                                           streamName(t) +
                                           " was begun on another thread");
  if (!out)
    return refuse(kInvalidValue, "cuStreamEndCapture: null graph pointer");
  finishCapture(s, c);
  if (c->invalidated)
    return refuseInvalidated(*c, "cuStreamEndCapture");
  std::string unjoined = unjoinedStream(*c);
  if (!unjoined.empty())
    return refuse(kCaptureUnjoined, "cuStreamEndCapture: the capture on " +
                                        streamName(t) + " forked into " +
                                        unjoined + " and never joined it back");
  auto *g = new Graph();
  g->id = s.nextGraphId++;
  for (Stream *u : c->streams)
    g->streamIds.push_back(u->id);
  g->nodes =
      std::make_shared<const std::vector<GraphNode>>(std::move(c->nodes));
  s.graphs.insert(g);
  *out = reinterpret_cast<CUgraph>(g);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuGraphInstantiateWithFlags(
    CUgraphExec *out, CUgraph hg, unsigned long long flags) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  auto *g = reinterpret_cast<Graph *>(hg);
  if (!s.graphs.count(g))
    fail("cuGraphInstantiate: " + hex(reinterpret_cast<uintptr_t>(hg)) +
         " is not a live graph");
  if (!out)
    return refuse(kInvalidValue, "cuGraphInstantiate: null exec pointer");
  if (flags)
    return refuse(kNotSupported, "cuGraphInstantiate: flags " +
                                     std::to_string(flags) +
                                     " are not supported by the double");
  auto *exec = new Graph(*g);
  s.graphExecs.insert(exec);
  *out = reinterpret_cast<CUgraphExec>(exec);
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuGraphLaunch(CUgraphExec he, CUstream h) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  auto *g = reinterpret_cast<Graph *>(he);
  if (!s.graphExecs.count(g))
    fail("cuGraphLaunch: " + hex(reinterpret_cast<uintptr_t>(he)) +
         " is not a live graph exec");
  Stream *launch = streamOrFail(s, h, "cuGraphLaunch");
  std::string graphName = "graph #" + std::to_string(g->id);
  if (launch && launch->capture)
    return refuse(kNotSupported, "cuGraphLaunch: launching " + graphName +
                                     " into capturing " + streamName(launch) +
                                     " is not supported by the double");
  std::vector<Stream *> streams;
  for (uint64_t id : g->streamIds) {
    Stream *found = nullptr;
    for (Stream *u : s.streams)
      if (u->id == id)
        found = u;
    if (!found)
      fail("cuGraphLaunch: " + graphName + " was captured on stream #" +
           std::to_string(id) +
           ", which was destroyed (the double replays a graph on the "
           "streams it was captured on)");
    if (found->capture)
      return refuse(kNotSupported, "cuGraphLaunch: " + graphName +
                                       " replays on " + streamName(found) +
                                       ", which is being captured");
    streams.push_back(found);
  }
  auto fork = std::make_shared<EventState>();
  recordOn(s, launch, fork);
  for (Stream *u : streams)
    if (u != launch)
      waitOn(s, lock, u, fork);
  const std::vector<GraphNode> &nodes = *g->nodes;
  std::vector<std::shared_ptr<EventState>> local(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode &n = nodes[i];
    Stream *u = streams[n.stream];
    switch (n.kind) {
    case OpKind::Work:
      pushWork(s, u, n.what + " (" + graphName + ")", n.command, n.accesses,
               n.work);
      break;
    case OpKind::Record:
      local[i] = std::make_shared<EventState>();
      recordOn(s, u, local[i]);
      break;
    case OpKind::Wait:
      waitOn(s, lock, u, local[n.recordNode]);
      break;
    }
  }
  for (Stream *u : streams) {
    if (u == launch)
      continue;
    auto join = std::make_shared<EventState>();
    recordOn(s, u, join);
    waitOn(s, lock, launch, join);
  }
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec he) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  auto *g = reinterpret_cast<Graph *>(he);
  if (!s.graphExecs.erase(g))
    fail("cuGraphExecDestroy: " + hex(reinterpret_cast<uintptr_t>(he)) +
         " is not a live graph exec");
  delete g;
  return kSuccess;
}

CLEAVE_DOUBLE_EXPORT CUresult cuGraphDestroy(CUgraph hg) {
  State &s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  auto *g = reinterpret_cast<Graph *>(hg);
  if (!s.graphs.erase(g))
    fail("cuGraphDestroy: " + hex(reinterpret_cast<uintptr_t>(hg)) +
         " is not a live graph");
  delete g;
  return kSuccess;
}

} // extern "C"
