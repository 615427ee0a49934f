//===- NcclComm.cpp - Communicator state of the NCCL double ---------------===//
//
// Joining a communicator's shared segment, the live handles, the
// environment ($CLEAVE_NCCL_DOUBLE_FAULT, $CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT)
// and unique ids.
//
//===----------------------------------------------------------------------===//

#include "NcclComm.h"

#include "DeviceDouble.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>
#include <utility>

namespace cd = cleave::cudadouble;
using namespace cleave::nccldouble;

/// The handle behind ncclComm_t.
struct cleave::rt::cuda::ncclComm {
  StatePtr state;
};

namespace {
constexpr char kIdMagic[] = "cleave-nccl-double";
constexpr size_t kIdHexOffset = 32;
constexpr uint64_t kFnvOffset = 14695981039346656037ull;
thread_local std::string lastError;
} // namespace

namespace cleave::nccldouble {

ncclResult_t error(ncclResult_t r, std::string message) {
  lastError = std::move(message);
  return r;
}

const char *lastErrorMessage() { return lastError.c_str(); }

std::string str(uint64_t v) { return std::to_string(v); }

std::string pointerString(const void *p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

std::string rankList(const std::vector<int> &ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + str(ranks[i]);
  return s;
}

//===----------------------------------------------------------------------===//
// Environment
//===----------------------------------------------------------------------===//

static bool parseDecimal(const std::string &s, uint64_t *out) {
  if (s.empty() || s.size() > 18 ||
      s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  *out = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

[[noreturn]] static void badFault(const std::string &spec,
                                  const std::string &why) {
  cd::fail("CLEAVE_NCCL_DOUBLE_FAULT=\"" + spec + "\": " + why +
           " (expected kind=init,rank=R or kind=async,rank=R,call=N or "
           "kind=count,rank=R,call=N)");
}

Fault readFault() {
  Fault f;
  const char *env = std::getenv("CLEAVE_NCCL_DOUBLE_FAULT");
  if (!env || !*env)
    return f;
  std::string spec(env);
  bool haveKind = false, haveRank = false, haveCall = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = std::min(spec.find(',', pos), spec.size());
    std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      badFault(spec, "'" + item + "' is not key=value");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    uint64_t v = 0;
    if (key == "kind") {
      if (haveKind)
        badFault(spec, "kind is given twice");
      haveKind = true;
      if (value == "init")
        f.kind = Fault::Kind::Init;
      else if (value == "async")
        f.kind = Fault::Kind::Async;
      else if (value == "count")
        f.kind = Fault::Kind::Count;
      else
        badFault(spec, "unknown kind '" + value + "' (init, async, count)");
    } else if (key == "rank") {
      if (haveRank)
        badFault(spec, "rank is given twice");
      if (!parseDecimal(value, &v) || v > 1u << 30)
        badFault(spec, "rank '" + value + "' is not a rank number");
      haveRank = true;
      f.rank = int(v);
    } else if (key == "call") {
      if (haveCall)
        badFault(spec, "call is given twice");
      if (!parseDecimal(value, &v) || v == 0)
        badFault(spec, "call '" + value + "' is not a call number (1, 2, ...)");
      haveCall = true;
      f.call = v;
    } else {
      badFault(spec, "unknown key '" + key + "' (kind, rank, call)");
    }
  }
  if (!haveKind || !haveRank)
    badFault(spec, "kind and rank are required");
  if (f.kind == Fault::Kind::Init && haveCall)
    badFault(spec, "kind=init takes no call");
  if (f.kind != Fault::Kind::Init && !haveCall)
    badFault(spec, "kind=async and kind=count need call=N");
  return f;
}

double readInitTimeout() {
  const char *env = std::getenv("CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT");
  if (!env || !*env)
    return 60;
  char *end = nullptr;
  double v = std::strtod(env, &end);
  if (*end || !(v > 0) || !std::isfinite(v))
    cd::fail(std::string("CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT=\"") + env +
             "\" is not a positive number of seconds");
  return v;
}

//===----------------------------------------------------------------------===//
// Unique ids
//===----------------------------------------------------------------------===//

static std::string toHex(uint64_t a, uint64_t b) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", (unsigned long long)a,
                (unsigned long long)b);
  return buf;
}

void writeId(ncclUniqueId *id, const std::string &hex) {
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic));
  std::memcpy(id->internal + kIdHexOffset, hex.c_str(), hex.size() + 1);
}

std::string readId(const ncclUniqueId &id) {
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0)
    return "";
  std::string hex(id.internal + kIdHexOffset,
                  strnlen(id.internal + kIdHexOffset, 33));
  if (hex.size() != 32 ||
      hex.find_first_not_of("0123456789abcdef") != std::string::npos)
    return "";
  return hex;
}

static uint64_t fnv1a(const std::string &s, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string newIdHex() {
  uint64_t words[2];
  if (getrandom(words, sizeof(words), 0) != ssize_t(sizeof(words))) {
    static std::atomic<uint64_t> counter{0};
    uint64_t t = uint64_t(Clock::now().time_since_epoch().count());
    words[0] = fnv1a(str(t) + "/" + str(uint64_t(getpid())), kFnvOffset);
    words[1] = fnv1a(str(counter++), words[0]);
  }
  return toHex(words[0], words[1]);
}

std::string splitIdHex(const std::string &parentHex, uint64_t k, int color) {
  std::string seed =
      parentHex + "/split" + str(k) + "/color" + std::to_string(color);
  return toHex(fnv1a(seed, kFnvOffset), fnv1a(seed, 0x9e3779b97f4a7c15ull));
}

//===----------------------------------------------------------------------===//
// CommState
//===----------------------------------------------------------------------===//

CommState::~CommState() {
  if (!base)
    return;
  if (header().attachedCount.fetch_sub(1) == 1)
    shm_unlink(shmName.c_str());
  munmap(base, layout.total);
}

//===----------------------------------------------------------------------===//
// Live handles
//===----------------------------------------------------------------------===//

namespace {
struct Registry {
  std::mutex mutex;
  std::unordered_set<ncclComm_t> live;
};

Registry &registry() {
  static Registry *r = new Registry; // never destroyed: used at exit
  return *r;
}
} // namespace

ncclComm_t registerComm(StatePtr state) {
  ncclComm_t c = new ncclComm{std::move(state)};
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().live.insert(c);
  return c;
}

StatePtr lookup(ncclComm_t c) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().live.count(c) ? c->state : nullptr;
}

StatePtr unregister(ncclComm_t c) {
  StatePtr s;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    if (!registry().live.erase(c))
      return nullptr;
    s = std::move(c->state);
  }
  delete c;
  return s;
}

ncclResult_t notLive(const char *fn, ncclComm_t c) {
  return error(ncclInvalidArgument,
               std::string(fn) + ": " + pointerString(c) +
                   " is not a live communicator of the NCCL double "
                   "(never made, destroyed or aborted)");
}

//===----------------------------------------------------------------------===//
// Joining a communicator
//===----------------------------------------------------------------------===//

ncclResult_t joinComm(const std::string &fn, const std::string &hex, int nranks,
                      int rank, const Fault &fault, StatePtr *out) {
  double timeout = readInitTimeout();
  auto c = std::make_shared<CommState>(hex, nranks, rank);
  c->fault = fault;
  int fd = shm_open(c->shmName.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0)
    return error(ncclSystemError, fn + ": shm_open(" + c->shmName +
                                      ") failed: " + std::strerror(errno));
  struct stat st;
  size_t total = c->layout.total;
  if (fstat(fd, &st) != 0 ||
      (size_t(st.st_size) < total && ftruncate(fd, off_t(total)) != 0)) {
    int e = errno;
    close(fd);
    return error(ncclSystemError, fn + ": sizing shared memory " + c->shmName +
                                      " to " + str(total) +
                                      " bytes failed: " + std::strerror(e));
  }
  void *p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED)
    return error(ncclSystemError, fn + ": mmap of " + c->shmName +
                                      " failed: " + std::strerror(e));
  c->base = static_cast<char *>(p);
  SegmentHeader &h = c->header();
  h.attachedCount.fetch_add(1);

  uint32_t expected = 0;
  if (!h.nranks.compare_exchange_strong(expected, uint32_t(nranks)) &&
      expected != uint32_t(nranks))
    return error(ncclInvalidArgument,
                 fn + ": rank " + str(rank) + " joined " + c->label +
                     " with nranks=" + str(nranks) +
                     " but a peer joined it with nranks=" + str(expected));
  uint32_t was = 0;
  if (!c->slot(rank).joined.compare_exchange_strong(was, 1))
    return error(ncclInvalidUsage,
                 fn + ": rank " + str(rank) + " joined " + c->label + " twice");
  h.joinedCount.fetch_add(1, std::memory_order_acq_rel);

  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout));
  Backoff backoff;
  while (h.joinedCount.load(std::memory_order_acquire) < uint32_t(nranks)) {
    if (Clock::now() > deadline)
      h.initFailed.store(1);
    if (h.initFailed.load()) {
      // Joined flags stay set, so every rank names the same missing ranks.
      std::vector<int> missing;
      for (int q = 0; q < nranks; ++q)
        if (!c->slot(q).joined.load())
          missing.push_back(q);
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%g", timeout);
      return error(ncclSystemError, fn + ": " + rankList(missing) + " of " +
                                        str(nranks) + " never joined " +
                                        c->label +
                                        " within the init "
                                        "timeout (" +
                                        secs + " s at rank " + str(rank) +
                                        ", $CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT)");
    }
    backoff.pause();
  }
  if (rank == 0) // every rank has it mapped: the name is no longer needed
    shm_unlink(c->shmName.c_str());
  *out = std::move(c);
  return ncclSuccess;
}

} // namespace cleave::nccldouble
