//===- Launch.cpp - Launcher environment and the TCP bootstrap ------------===//

#include "Launch.h"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace cleave::rt {

using Clock = std::chrono::steady_clock;

//===----------------------------------------------------------------------===//
// Environment
//===----------------------------------------------------------------------===//

/// Parses a whole decimal integer in [lo, hi].
static bool parseInt(const char *text, int64_t lo, int64_t hi, int64_t *out) {
  if (!text || !*text)
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || *end || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

bool readLaunchEnv(const std::function<const char *(const char *)> &getenv,
                   LaunchEnv *out, std::string *error) {
  LaunchEnv env;
  struct Names {
    const char *launcher, *rank, *size, *local;
  };
  // torchrun first: it is the only one that also needs a rendezvous.
  const Names launchers[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  for (const Names &n : launchers) {
    const char *rank = getenv(n.rank), *size = getenv(n.size);
    if (!rank && !size)
      continue;
    // salloc sets SLURM_NTASKS without a task of its own: only srun's tasks
    // (with SLURM_PROCID) are ranks.
    if (std::string(n.launcher) == "srun" && !rank)
      continue;
    env.launcher = n.launcher;
    auto need = [&](const char *var, const char *value, int64_t lo, int64_t hi,
                    int64_t *v) {
      if (!value) {
        *error = std::string(n.launcher) + " launch: " + var + " is not set";
        return false;
      }
      if (!parseInt(value, lo, hi, v)) {
        *error = std::string(var) + "='" + value + "' is not an integer in [" +
                 std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return false;
      }
      return true;
    };
    if (!need(n.size, size, 1, 1 << 24, &env.worldSize) ||
        !need(n.rank, rank, 0, 1 << 24, &env.rank))
      return false;
    if (env.rank >= env.worldSize) {
      *error = std::string(n.rank) + "=" + std::to_string(env.rank) +
               " is not below " + n.size + "=" + std::to_string(env.worldSize);
      return false;
    }
    if (!need(n.local, getenv(n.local), 0, env.worldSize - 1, &env.localRank))
      return false;
    if (env.launcher == "torchrun") {
      const char *addr = getenv("MASTER_ADDR");
      if (!addr || !*addr) {
        *error = "torchrun launch: MASTER_ADDR is not set";
        return false;
      }
      env.masterAddr = addr;
      int64_t port = 0;
      if (!need("MASTER_PORT", getenv("MASTER_PORT"), 1, 65535, &port))
        return false;
      env.masterPort = static_cast<int>(port);
    }
    *out = env;
    return true;
  }
  *out = env; // no launcher: one rank
  return true;
}

bool cudaDeviceOf(const LaunchEnv &env, const char *value, int deviceCount,
                  int *device, std::string *error) {
  int64_t d = env.localRank;
  if (value && !parseInt(value, 0, INT_MAX, &d)) {
    *error = std::string("CLEAVE_CUDA_DEVICE='") + value +
             "' is not a device ordinal";
    return false;
  }
  if (d >= deviceCount) {
    *error = (value ? "CLEAVE_CUDA_DEVICE=" + std::string(value)
                    : "local rank " + std::to_string(env.localRank)) +
             " (rank " + std::to_string(env.rank) + ") needs GPU " +
             std::to_string(d) + " but this node has " +
             std::to_string(deviceCount);
    return false;
  }
  *device = static_cast<int>(d);
  return true;
}

//===----------------------------------------------------------------------===//
// TCP bootstrap
//===----------------------------------------------------------------------===//

namespace {
constexpr char kHello[4] = {'C', 'L', 'V', 'B'};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, INT_MAX));
}

/// Reads or writes exactly n bytes before the deadline.
bool transfer(int fd, void *buf, size_t n, bool write,
              Clock::time_point deadline) {
  auto *p = static_cast<uint8_t *>(buf);
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    int r = ::poll(&pfd, 1, msLeft(deadline));
    if (r <= 0)
      return false;
    ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

std::string endpoint(const LaunchEnv &env) {
  return env.masterAddr + ":" + std::to_string(env.masterPort);
}
} // namespace

static cleave_rt_status serve(const LaunchEnv &env,
                              const std::vector<uint8_t> &blob,
                              double timeoutSeconds) {
  Fd listener;
  listener.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(env.masterPort));
  if (listener.fd < 0 ||
      ::bind(listener.fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) ||
      ::listen(listener.fd, 128))
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "rank 0 cannot listen on port " +
                          std::to_string(env.masterPort) +
                          " (MASTER_PORT): " + std::strerror(errno));
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeoutSeconds));
  std::set<int64_t> served;
  uint64_t size = blob.size();
  while (static_cast<int64_t>(served.size()) < env.worldSize - 1) {
    pollfd pfd{listener.fd, POLLIN, 0};
    if (::poll(&pfd, 1, msLeft(deadline)) <= 0) {
      std::string missing;
      int shown = 0;
      for (int64_t r = 1; r < env.worldSize; ++r)
        if (!served.count(r) && shown++ < 8)
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      if (env.worldSize - 1 - static_cast<int64_t>(served.size()) > 8)
        missing += ", ...";
      char buf[64];
      std::snprintf(buf, sizeof buf, " within %g s", timeoutSeconds);
      return makeStatus(CLEAVE_RT_UNAVAILABLE,
                        "bootstrap: rank(s) " + missing +
                            " never connected to rank 0 on port " +
                            std::to_string(env.masterPort) + buf);
    }
    Fd conn;
    conn.fd = ::accept(listener.fd, nullptr, nullptr);
    if (conn.fd < 0)
      continue;
    char hello[4];
    uint32_t rank = 0;
    if (!transfer(conn.fd, hello, 4, false, deadline) ||
        std::memcmp(hello, kHello, 4) != 0 ||
        !transfer(conn.fd, &rank, 4, false, deadline))
      continue; // not one of ours (a port scanner, a stale client)
    if (rank < 1 || rank >= env.worldSize)
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                        "bootstrap: a process claiming rank " +
                            std::to_string(rank) +
                            " connected, but the world "
                            "has ranks 0 to " +
                            std::to_string(env.worldSize - 1));
    if (!served.insert(rank).second)
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                        "bootstrap: two processes claim rank " +
                            std::to_string(rank) +
                            " (RANK is set twice the same)");
    if (!transfer(conn.fd, &size, 8, true, deadline) ||
        !transfer(conn.fd, const_cast<uint8_t *>(blob.data()), blob.size(),
                  true, deadline))
      return makeStatus(CLEAVE_RT_UNAVAILABLE, "bootstrap: lost rank " +
                                                   std::to_string(rank) +
                                                   " while sending it the id");
  }
  return nullptr;
}

static cleave_rt_status fetch(const LaunchEnv &env, std::vector<uint8_t> *blob,
                              double timeoutSeconds) {
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeoutSeconds));
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  std::string port = std::to_string(env.masterPort);
  if (int rc =
          ::getaddrinfo(env.masterAddr.c_str(), port.c_str(), &hints, &res))
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "bootstrap: cannot resolve MASTER_ADDR '" +
                          env.masterAddr + "': " + gai_strerror(rc));
  struct Freer {
    addrinfo *a;
    ~Freer() { ::freeaddrinfo(a); }
  } freer{res};
  std::string lastError = "timed out";
  for (;;) {
    Fd conn;
    conn.fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (conn.fd >= 0 &&
        ::connect(conn.fd, res->ai_addr, res->ai_addrlen) == 0) {
      uint32_t rank = static_cast<uint32_t>(env.rank);
      uint64_t size = 0;
      if (!transfer(conn.fd, const_cast<char *>(kHello), 4, true, deadline) ||
          !transfer(conn.fd, &rank, 4, true, deadline) ||
          !transfer(conn.fd, &size, 8, false, deadline) || size > (1u << 20))
        return makeStatus(CLEAVE_RT_UNAVAILABLE,
                          "bootstrap: rank " + std::to_string(env.rank) +
                              " reached rank 0 at " + endpoint(env) +
                              " but received no id");
      blob->resize(size);
      if (!transfer(conn.fd, blob->data(), size, false, deadline))
        return makeStatus(CLEAVE_RT_UNAVAILABLE, "bootstrap: rank 0 at " +
                                                     endpoint(env) +
                                                     " stopped sending the id");
      return nullptr;
    }
    lastError = std::strerror(errno);
    if (msLeft(deadline) == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, " within %g s", timeoutSeconds);
  return makeStatus(CLEAVE_RT_UNAVAILABLE,
                    "bootstrap: rank " + std::to_string(env.rank) +
                        " could not reach rank 0 at " + endpoint(env) +
                        " (MASTER_ADDR:MASTER_PORT)" + buf + ": " + lastError);
}

cleave_rt_status tcpBroadcast(const LaunchEnv &env, std::vector<uint8_t> *blob,
                              double timeoutSeconds) {
  if (env.masterPort <= 0 || env.masterAddr.empty())
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "the TCP bootstrap needs MASTER_ADDR and MASTER_PORT");
  if (env.worldSize == 1)
    return nullptr;
  return env.rank == 0 ? serve(env, *blob, timeoutSeconds)
                       : fetch(env, blob, timeoutSeconds);
}

cleave_rt_status communicatorBroadcast(Communicator &comm,
                                       std::vector<uint8_t> *blob) {
  plan::CollectiveInfo c;
  c.op = plan::CollectiveOp::Broadcast;
  c.dtype = plan::DType::U8;
  c.count = static_cast<int64_t>(blob->size());
  c.root = 0;
  c.id = kBootstrapId;
  c.source = "bootstrap";
  plan::Group group;
  for (int64_t r = 0; r < comm.worldSize(); ++r)
    group.ranks.push_back(r);
  group.index = comm.rank();
  std::vector<uint8_t> out(blob->size());
  CLEAVE_RT_RETURN_IF_ERROR(comm.run(c, group, blob->data(), out.data()));
  *blob = std::move(out);
  return nullptr;
}

} // namespace cleave::rt
