//===- Launch.cpp - Launcher environment and the TCP bootstrap ------------===//

#include "Launch.h"
#include "Tcp.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <set>
#include <sys/socket.h>

namespace cleave::rt {

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
    if (env.launcher == "torchrun" && !readRendezvous(getenv, &env, error))
      return false;
    *out = env;
    return true;
  }
  *out = env; // no launcher: one rank
  return true;
}

bool readRendezvous(const std::function<const char *(const char *)> &getenv,
                    LaunchEnv *env, std::string *error) {
  const char *addr = getenv("MASTER_ADDR");
  if (!addr || !*addr) {
    *error = env->launcher + " launch: MASTER_ADDR is not set";
    return false;
  }
  int64_t port = 0;
  const char *portText = getenv("MASTER_PORT");
  if (!portText) {
    *error = env->launcher + " launch: MASTER_PORT is not set";
    return false;
  }
  if (!parseInt(portText, 1, 65535, &port)) {
    *error = std::string("MASTER_PORT='") + portText +
             "' is not an integer in [1, 65535]";
    return false;
  }
  env->masterAddr = addr;
  env->masterPort = static_cast<int>(port);
  env->storePort = 0;
  env->storePortName = "MASTER_PORT";
  if (const char *text = getenv("CLEAVE_STORE_PORT")) {
    int64_t store = 0;
    if (!parseInt(text, 1, 65535, &store)) {
      *error = std::string("CLEAVE_STORE_PORT='") + text +
               "' is not an integer in [1, 65535]";
      return false;
    }
    env->storePort = static_cast<int>(store);
    env->storePortName = "CLEAVE_STORE_PORT";
  } else if (const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
             agent && std::string(agent) == "True") {
    // torchrun's agent serves its own store (c10d's TCPStore) on
    // MASTER_PORT: rank 0 takes the next port.
    if (port == 65535) {
      *error = "torchrun's agent serves its store on MASTER_PORT=65535 and "
               "rank 0's store takes the next port, which does not exist: "
               "set CLEAVE_STORE_PORT";
      return false;
    }
    env->storePort = static_cast<int>(port + 1);
    env->storePortName = "MASTER_PORT+1";
  }
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

std::string endpoint(const LaunchEnv &env) {
  return env.masterAddr + ":" + std::to_string(env.rendezvousPort());
}
} // namespace

static cleave_rt_status serve(const LaunchEnv &env,
                              const std::vector<uint8_t> &blob,
                              double timeoutSeconds) {
  const int port = env.rendezvousPort();
  tcp::Fd listener;
  std::string why;
  if (!tcp::listenOn(port, &listener, &why))
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "rank 0 cannot listen on port " + std::to_string(port) +
                          " (" + env.storePortName + "): " + why);
  auto deadline = tcp::deadlineIn(timeoutSeconds);
  std::set<int64_t> served;
  uint64_t size = blob.size();
  while (static_cast<int64_t>(served.size()) < env.worldSize - 1) {
    pollfd pfd{listener.fd, POLLIN, 0};
    if (::poll(&pfd, 1, tcp::msLeft(deadline)) <= 0) {
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
                            std::to_string(port) + buf);
    }
    tcp::Fd conn;
    conn.fd = ::accept(listener.fd, nullptr, nullptr);
    if (conn.fd < 0)
      continue;
    char hello[4];
    uint32_t rank = 0;
    if (!tcp::transfer(conn.fd, hello, 4, false, deadline) ||
        std::memcmp(hello, kHello, 4) != 0 ||
        !tcp::transfer(conn.fd, &rank, 4, false, deadline))
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
    if (!tcp::transfer(conn.fd, &size, 8, true, deadline) ||
        !tcp::transfer(conn.fd, const_cast<uint8_t *>(blob.data()), blob.size(),
                       true, deadline))
      return makeStatus(CLEAVE_RT_UNAVAILABLE, "bootstrap: lost rank " +
                                                   std::to_string(rank) +
                                                   " while sending it the id");
  }
  return nullptr;
}

static cleave_rt_status fetch(const LaunchEnv &env, std::vector<uint8_t> *blob,
                              double timeoutSeconds) {
  auto deadline = tcp::deadlineIn(timeoutSeconds);
  tcp::Fd conn;
  std::string why;
  bool unresolved = false;
  if (!tcp::connectTo(env.masterAddr, env.rendezvousPort(), deadline, &conn,
                      &why, &unresolved)) {
    if (unresolved)
      return makeStatus(CLEAVE_RT_UNAVAILABLE,
                        "bootstrap: cannot resolve MASTER_ADDR '" +
                            env.masterAddr + "': " + why);
    char buf[64];
    std::snprintf(buf, sizeof buf, " within %g s", timeoutSeconds);
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "bootstrap: rank " + std::to_string(env.rank) +
                          " could not reach rank 0 at " + endpoint(env) +
                          " (MASTER_ADDR:" + env.storePortName + ")" + buf +
                          ": " + why);
  }
  uint32_t rank = static_cast<uint32_t>(env.rank);
  uint64_t size = 0;
  if (!tcp::transfer(conn.fd, const_cast<char *>(kHello), 4, true, deadline) ||
      !tcp::transfer(conn.fd, &rank, 4, true, deadline) ||
      !tcp::transfer(conn.fd, &size, 8, false, deadline) || size > (1u << 20))
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "bootstrap: rank " + std::to_string(env.rank) +
                          " reached rank 0 at " + endpoint(env) +
                          " but received no id");
  blob->resize(size);
  if (!tcp::transfer(conn.fd, blob->data(), size, false, deadline))
    return makeStatus(CLEAVE_RT_UNAVAILABLE, "bootstrap: rank 0 at " +
                                                 endpoint(env) +
                                                 " stopped sending the id");
  return nullptr;
}

cleave_rt_status tcpBroadcast(const LaunchEnv &env, std::vector<uint8_t> *blob,
                              double timeoutSeconds) {
  if (env.rendezvousPort() <= 0 || env.masterAddr.empty())
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
