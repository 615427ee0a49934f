//===- FlightRecorder.cpp - A rank's last collectives, and their dumps ----===//

#include "FlightRecorder.h"
#include "Communicator.h"

#include "cleave/FileUtil.h"
#include "cleave/Json.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <thread>
#include <unistd.h>

namespace cleave::rt {

using namespace plan;

namespace {

/// The process's recorders, for dumpAll and the signal handlers (which read
/// the table without a lock: its entries are atomic).
constexpr int kMaxRecorders = 4096;
std::atomic<FlightRecorder *> gRecorders[kMaxRecorders];
std::mutex gTableMu; ///< Guards registering and dumpAll.
int gSignalPipe[2] = {-1, -1};
std::once_flag gHandlersOnce;
/// The crash signals and the actions they had before (restored before the
/// signal is raised again, so a sanitizer's or the default action follows).
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGABRT};
struct sigaction gPrevious[3];

const char *stateName(uint8_t state) {
  return state == 0 ? "started" : state == 1 ? "completed" : "failed";
}

void onSignal(int sig);

/// SIGUSR1 writes its number to a pipe; this thread dumps outside the
/// handler, where allocating and locking are allowed.
void signalThread() {
  for (;;) {
    unsigned char sig = 0;
    ssize_t n = ::read(gSignalPipe[0], &sig, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    FlightRecorder::dumpAll("signal SIGUSR1");
  }
}

void installHandlers() {
  if (::pipe2(gSignalPipe, O_CLOEXEC) == 0) {
    // The handler never blocks: a full pipe already has a dump coming.
    ::fcntl(gSignalPipe[1], F_SETFL, O_NONBLOCK);
    std::thread(signalThread).detach();
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &sa, nullptr);
  // A crash signal runs the handler, then the action it had before.
  sa.sa_flags = SA_NODEFER;
  for (int i = 0; i < 3; ++i)
    ::sigaction(kCrashSignals[i], &sa, &gPrevious[i]);
}

} // namespace

//===----------------------------------------------------------------------===//
// Recording
//===----------------------------------------------------------------------===//

int64_t FlightRecorder::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

FlightRecorder::FlightRecorder(const std::string &dirIn, int64_t rankIn,
                               int64_t worldIn, size_t capacity)
    : dir(dirIn), rank(rankIn), world(worldIn),
      ring(std::max<size_t>(capacity, 1)) {
  file = dir + "/rank-" + std::to_string(rank) + ".json";
  std::snprintf(crashPath, sizeof crashPath, "%s", file.c_str());
  std::snprintf(crashTmp, sizeof crashTmp, "%s.crash", file.c_str());
  steadyOriginNs = nowNs();
  wallOriginNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  std::string err;
  makeDirectories(dir, &err); // a failure shows when a dump is written
  std::call_once(gHandlersOnce, installHandlers);
  std::lock_guard<std::mutex> lock(gTableMu);
  for (int i = 0; i < kMaxRecorders && slot < 0; ++i) {
    FlightRecorder *empty = nullptr;
    if (gRecorders[i].compare_exchange_strong(empty, this))
      slot = i;
  }
}

FlightRecorder::~FlightRecorder() {
  std::lock_guard<std::mutex> lock(gTableMu);
  if (slot >= 0)
    gRecorders[slot] = nullptr;
}

uint64_t FlightRecorder::begin(const CollectiveInfo &c, const Group &group,
                               uint64_t bytes, int64_t enqueuedNs) {
  int64_t now = nowNs();
  std::lock_guard<std::mutex> lock(mu);
  uint64_t seq = ++next;
  Record &r = ring[(seq - 1) % ring.size()];
  r.seq = 0; // torn while written, for a crash dump
  r.groupSeq = ++groupCounts[group.ranks];
  r.id = c.id;
  r.op = c.op;
  r.bytes = bytes;
  r.groupSize = static_cast<int32_t>(group.ranks.size());
  for (int32_t i = 0; i < std::min(r.groupSize, kMaxRanks); ++i)
    r.ranks[i] = static_cast<int32_t>(group.ranks[i]);
  r.nAxes = static_cast<int32_t>(std::min<size_t>(c.axes.size(), kMaxAxes));
  for (int32_t i = 0; i < r.nAxes; ++i)
    r.axes[i] = c.axes[i];
  r.enqueueNs = enqueuedNs ? enqueuedNs : now;
  r.startNs = now;
  r.endNs = 0;
  r.state = Record::Started;
  std::snprintf(r.source, sizeof r.source, "%s", c.source.c_str());
  r.seq = seq;
  return seq;
}

void FlightRecorder::end(uint64_t seq, bool ok) {
  int64_t now = nowNs();
  std::lock_guard<std::mutex> lock(mu);
  Record &r = ring[(seq - 1) % ring.size()];
  if (r.seq != seq)
    return; // overwritten: more than the ring's size since
  r.endNs = now;
  r.state = ok ? Record::Completed : Record::Failed;
}

cleave_rt_status Communicator::run(const CollectiveInfo &c, const Group &group,
                                   const void *src, void *dst,
                                   int64_t enqueuedNs) {
  if (!recorder)
    return runCollective(c, group, src, dst);
  uint64_t seq = recorder->begin(
      c, group, static_cast<uint64_t>(c.count) * dtypeSize(c.dtype),
      enqueuedNs);
  cleave_rt_status s = runCollective(c, group, src, dst);
  recorder->end(seq, !s);
  // A timeout or a peer's failure: every rank of the process dumps, the
  // ones still waiting and one that hangs elsewhere too.
  if (s)
    FlightRecorder::dumpAll("rank " + std::to_string(rank()) + ": " +
                            cleave_rt_status_message(s));
  return s;
}

//===----------------------------------------------------------------------===//
// Dumps
//===----------------------------------------------------------------------===//

bool FlightRecorder::dump(const std::string &reason, std::string *error) {
  json::Value entries = json::Value::array();
  {
    std::lock_guard<std::mutex> lock(mu);
    uint64_t last = next, count = std::min<uint64_t>(last, ring.size());
    for (uint64_t seq = last - count + 1; seq <= last; ++seq) {
      const Record &r = ring[(seq - 1) % ring.size()];
      if (r.seq != seq)
        continue;
      json::Value ranks = json::Value::array(), axes = json::Value::array();
      for (int32_t i = 0; i < std::min(r.groupSize, kMaxRanks); ++i)
        ranks.push_back(r.ranks[i]);
      for (int32_t i = 0; i < r.nAxes; ++i)
        axes.push_back(r.axes[i]);
      json::Value e = {{"seq", r.seq},
                       {"group_seq", r.groupSeq},
                       {"id", r.id},
                       {"kind", collectiveOpName(r.op)},
                       {"source", r.source},
                       {"group", std::move(ranks)},
                       {"group_size", r.groupSize},
                       {"axes", std::move(axes)},
                       {"bytes", r.bytes},
                       {"state", stateName(r.state)},
                       {"enqueue_ns", r.enqueueNs},
                       {"start_ns", r.startNs}};
      e["end_ns"] = r.endNs ? json::Value(r.endNs) : json::Value();
      entries.push_back(std::move(e));
    }
  }
  json::Value doc = {{"format", "cleave-flight-recorder"},
                     {"version", 1},
                     {"rank", rank},
                     {"world_size", world},
                     {"reason", reason},
                     {"steady_origin_ns", steadyOriginNs},
                     {"wall_origin_ns", wallOriginNs},
                     {"dumped_ns", nowNs()},
                     {"capacity", ring.size()},
                     {"recorded", next.load()},
                     {"entries", std::move(entries)}};
  std::string text = json::dump(doc, 1) + "\n";
  if (!makeDirectories(dir, error))
    return false;
  return writeFileAtomically(file, text.data(), text.size(), error);
}

void FlightRecorder::dumpAll(const std::string &reason) {
  std::lock_guard<std::mutex> lock(gTableMu);
  for (std::atomic<FlightRecorder *> &entry : gRecorders)
    if (FlightRecorder *r = entry.load()) {
      std::string err;
      if (!r->dump(reason, &err))
        std::fprintf(stderr, "cleave: flight recorder: %s\n", err.c_str());
    }
}

/// The crash dump's writer: a fixed buffer flushed with write(2), numbers
/// formatted by hand; no allocation, no lock, no stdio.
struct SignalWriter {
  explicit SignalWriter(int fd) : fd(fd) {}
  int fd;
  char buf[8192];
  size_t used = 0;
  void flush() {
    size_t done = 0;
    while (done < used) {
      ssize_t n = ::write(fd, buf + done, used - done);
      if (n <= 0 && errno != EINTR)
        break;
      if (n > 0)
        done += static_cast<size_t>(n);
    }
    used = 0;
  }
  void put(char c) {
    if (used == sizeof buf)
      flush();
    buf[used++] = c;
  }
  void str(const char *s) {
    while (*s)
      put(*s++);
  }
  /// A JSON string: quotes, backslashes and control characters escaped.
  void quoted(const char *s) {
    put('"');
    for (; *s; ++s) {
      unsigned char c = static_cast<unsigned char>(*s);
      if (c == '"' || c == '\\') {
        put('\\');
        put(static_cast<char>(c));
      } else if (c < 0x20) {
        const char *hex = "0123456789abcdef";
        str("\\u00");
        put(hex[c >> 4]);
        put(hex[c & 15]);
      } else {
        put(static_cast<char>(c));
      }
    }
    put('"');
  }
  void num(int64_t v) {
    char digits[24];
    int n = 0;
    uint64_t u =
        v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    do {
      digits[n++] = static_cast<char>('0' + u % 10);
      u /= 10;
    } while (u);
    if (v < 0)
      put('-');
    while (n)
      put(digits[--n]);
  }
  void field(const char *name, int64_t v) {
    quoted(name);
    put(':');
    num(v);
    put(',');
  }
};

void FlightRecorder::writeFromSignal(const char *reason) {
  int fd = ::open(crashTmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return;
  SignalWriter w(fd);
  w.str("{\"format\":\"cleave-flight-recorder\",\"version\":1,");
  w.field("rank", rank);
  w.field("world_size", world);
  w.str("\"reason\":");
  w.quoted(reason);
  w.put(',');
  w.field("steady_origin_ns", steadyOriginNs);
  w.field("wall_origin_ns", wallOriginNs);
  w.field("dumped_ns", nowNs());
  w.field("capacity", static_cast<int64_t>(ring.size()));
  uint64_t last = next.load();
  w.field("recorded", static_cast<int64_t>(last));
  w.str("\"entries\":[");
  uint64_t count = std::min<uint64_t>(last, ring.size());
  bool first = true;
  for (uint64_t seq = last - count + 1; seq <= last; ++seq) {
    const Record &r = ring[(seq - 1) % ring.size()];
    if (r.seq != seq)
      continue; // being written when the signal came
    w.str(first ? "{" : ",{");
    first = false;
    w.field("seq", static_cast<int64_t>(r.seq));
    w.field("group_seq", static_cast<int64_t>(r.groupSeq));
    w.field("id", r.id);
    w.str("\"kind\":");
    w.quoted(collectiveOpName(r.op));
    w.str(",\"source\":");
    w.quoted(r.source);
    w.str(",\"group\":[");
    for (int32_t i = 0; i < std::min(r.groupSize, kMaxRanks); ++i) {
      if (i)
        w.put(',');
      w.num(r.ranks[i]);
    }
    w.str("],");
    w.field("group_size", r.groupSize);
    w.str("\"axes\":[");
    for (int32_t i = 0; i < r.nAxes; ++i) {
      if (i)
        w.put(',');
      w.num(r.axes[i]);
    }
    w.str("],");
    w.field("bytes", static_cast<int64_t>(r.bytes));
    w.str("\"state\":");
    w.quoted(stateName(r.state));
    w.put(',');
    w.field("enqueue_ns", r.enqueueNs);
    w.field("start_ns", r.startNs);
    w.str("\"end_ns\":");
    if (r.endNs)
      w.num(r.endNs);
    else
      w.str("null");
    w.put('}');
  }
  w.str("]}\n");
  w.flush();
  ::fsync(fd);
  ::close(fd);
  ::rename(crashTmp, crashPath);
}

namespace {
void onSignal(int sig) {
  int saved = errno;
  if (sig == SIGUSR1) {
    unsigned char b = static_cast<unsigned char>(sig);
    if (gSignalPipe[1] >= 0)
      (void)!::write(gSignalPipe[1], &b, 1);
    errno = saved;
    return;
  }
  const char *reason = sig == SIGSEGV  ? "signal SIGSEGV"
                       : sig == SIGBUS ? "signal SIGBUS"
                                       : "signal SIGABRT";
  for (std::atomic<FlightRecorder *> &entry : gRecorders)
    if (FlightRecorder *r = entry.load())
      r->writeFromSignal(reason);
  // The previous action (the default: die of the same signal).
  for (int i = 0; i < 3; ++i)
    if (kCrashSignals[i] == sig)
      ::sigaction(sig, &gPrevious[i], nullptr);
  ::raise(sig);
  errno = saved;
}
} // namespace

} // namespace cleave::rt
