//===- KeyValueStore.cpp - Rank 0's rendezvous store over TCP -------------===//

#include "KeyValueStore.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace cleave::rt {

namespace {
constexpr char kHello[4] = {'C', 'L', 'V', 'S'};
constexpr char kSet = 'S', kGet = 'G';
/// Limits that keep a confused or hostile client from making rank 0
/// allocate without bound (addresses and ids are far smaller).
constexpr uint32_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = 64u << 20;
/// How long the server gives a client to finish a request it has started,
/// or to take a reply (both are small and sent at once).
constexpr double kRequestSeconds = 10;
} // namespace

//===----------------------------------------------------------------------===//
// Server
//===----------------------------------------------------------------------===//

struct StoreServer::State {
  tcp::Fd listener;
  int wake[2] = {-1, -1}; ///< A pipe: the destructor stops the loop.
  std::thread thread;
  std::map<std::string, std::vector<char>> values;
  std::vector<tcp::Fd> clients;
  /// Gets not answered yet: key -> the clients' descriptors.
  std::multimap<std::string, int> waiting;

  void loop();
  /// Reads and handles one request of client `fd`; false drops it.
  bool handle(int fd);
  bool reply(int fd, const std::vector<char> &value);
  void drop(int fd);
};

cleave_rt_status StoreServer::start(int port, const std::string &portName,
                                    std::unique_ptr<StoreServer> *out) {
  auto state = std::make_unique<State>();
  std::string why;
  if (!tcp::listenOn(port, &state->listener, &why))
    return makeStatus(
        CLEAVE_RT_UNAVAILABLE,
        "rank 0 cannot serve the rendezvous store on port " +
            std::to_string(port) + " (" + portName + "): " + why +
            (portName == "CLEAVE_STORE_PORT"
                 ? ""
                 : "; choose a free port with CLEAVE_STORE_PORT"));
  if (::pipe(state->wake))
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      std::string("rendezvous store: pipe: ") +
                          std::strerror(errno));
  State *s = state.get();
  state->thread = std::thread([s] { s->loop(); });
  out->reset(new StoreServer(std::move(state)));
  return nullptr;
}

StoreServer::StoreServer(std::unique_ptr<State> state)
    : state(std::move(state)) {}

StoreServer::~StoreServer() {
  char stop = 0;
  if (::write(state->wake[1], &stop, 1) != 1)
    std::fprintf(stderr, "cleave: rendezvous store: cannot stop its thread\n");
  state->thread.join();
  ::close(state->wake[0]);
  ::close(state->wake[1]);
}

void StoreServer::State::loop() {
  for (;;) {
    std::vector<pollfd> fds = {{wake[0], POLLIN, 0}, {listener.fd, POLLIN, 0}};
    for (const tcp::Fd &c : clients)
      fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[0].revents)
      return;
    if (fds[1].revents & POLLIN) {
      tcp::Fd conn;
      conn.fd = ::accept(listener.fd, nullptr, nullptr);
      char hello[4];
      uint32_t rank = 0;
      auto deadline = tcp::deadlineIn(kRequestSeconds);
      // Not one of ours (a port scanner, a stale client): closed.
      if (conn.fd >= 0 && tcp::transfer(conn.fd, hello, 4, false, deadline) &&
          std::memcmp(hello, kHello, 4) == 0 &&
          tcp::transfer(conn.fd, &rank, 4, false, deadline)) {
        int one = 1;
        ::setsockopt(conn.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        clients.push_back(std::move(conn));
      }
    }
    for (size_t i = 2; i < fds.size(); ++i)
      if (fds[i].revents && !handle(fds[i].fd))
        drop(fds[i].fd);
  }
}

bool StoreServer::State::handle(int fd) {
  auto deadline = tcp::deadlineIn(kRequestSeconds);
  char op = 0;
  uint32_t keyBytes = 0;
  if (!tcp::transfer(fd, &op, 1, false, deadline) ||
      (op != kSet && op != kGet) ||
      !tcp::transfer(fd, &keyBytes, 4, false, deadline) || keyBytes > kMaxKey)
    return false;
  std::string key(keyBytes, '\0');
  if (!tcp::transfer(fd, key.data(), keyBytes, false, deadline))
    return false;
  if (op == kGet) {
    auto it = values.find(key);
    if (it != values.end())
      return reply(fd, it->second);
    waiting.emplace(key, fd);
    return true;
  }
  uint64_t valueBytes = 0;
  if (!tcp::transfer(fd, &valueBytes, 8, false, deadline) ||
      valueBytes > kMaxValue)
    return false;
  std::vector<char> value(valueBytes);
  if (!tcp::transfer(fd, value.data(), valueBytes, false, deadline))
    return false;
  values[key] = std::move(value);
  auto [first, last] = waiting.equal_range(key);
  std::vector<int> waiters;
  for (auto it = first; it != last; ++it)
    waiters.push_back(it->second);
  waiting.erase(first, last);
  for (int w : waiters)
    if (!reply(w, values[key]) && w != fd)
      drop(w);
  return true;
}

bool StoreServer::State::reply(int fd, const std::vector<char> &value) {
  auto deadline = tcp::deadlineIn(kRequestSeconds);
  uint64_t bytes = value.size();
  return tcp::transfer(fd, &bytes, 8, true, deadline) &&
         tcp::transfer(fd, const_cast<char *>(value.data()), value.size(), true,
                       deadline);
}

void StoreServer::State::drop(int fd) {
  for (auto it = waiting.begin(); it != waiting.end();)
    it = it->second == fd ? waiting.erase(it) : std::next(it);
  for (auto it = clients.begin(); it != clients.end(); ++it)
    if (it->fd == fd) {
      clients.erase(it);
      return;
    }
}

//===----------------------------------------------------------------------===//
// Client
//===----------------------------------------------------------------------===//

cleave_rt_status StoreClient::connect(const std::string &host, int port,
                                      const std::string &portName, int64_t rank,
                                      double timeoutSeconds,
                                      std::unique_ptr<StoreClient> *out) {
  std::string endpoint =
      host + ":" + std::to_string(port) + " (MASTER_ADDR:" + portName + ")";
  auto deadline = tcp::deadlineIn(timeoutSeconds);
  tcp::Fd fd;
  std::string why;
  bool unresolved = false;
  if (!tcp::connectTo(host, port, deadline, &fd, &why, &unresolved)) {
    if (unresolved)
      return makeStatus(CLEAVE_RT_UNAVAILABLE,
                        "rendezvous: cannot resolve MASTER_ADDR '" + host +
                            "': " + why);
    char buf[64];
    std::snprintf(buf, sizeof buf, " within %g s", timeoutSeconds);
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "rendezvous: rank " + std::to_string(rank) +
                          " could not reach rank 0's store at " + endpoint +
                          buf + ": " + why);
  }
  int one = 1;
  ::setsockopt(fd.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  uint32_t r = static_cast<uint32_t>(rank);
  if (!tcp::transfer(fd.fd, const_cast<char *>(kHello), 4, true, deadline) ||
      !tcp::transfer(fd.fd, &r, 4, true, deadline))
    return makeStatus(CLEAVE_RT_UNAVAILABLE, "rendezvous: rank 0's store at " +
                                                 endpoint +
                                                 " closed the connection");
  out->reset(new StoreClient(std::move(fd), std::move(endpoint)));
  return nullptr;
}

cleave_rt_status StoreClient::set(const std::string &key,
                                  const std::vector<char> &value) {
  auto deadline = tcp::deadlineIn(kRequestSeconds);
  uint32_t keyBytes = static_cast<uint32_t>(key.size());
  uint64_t valueBytes = value.size();
  char op = kSet;
  if (broken || key.size() > kMaxKey || value.size() > kMaxValue ||
      !tcp::transfer(conn.fd, &op, 1, true, deadline) ||
      !tcp::transfer(conn.fd, &keyBytes, 4, true, deadline) ||
      !tcp::transfer(conn.fd, const_cast<char *>(key.data()), key.size(), true,
                     deadline) ||
      !tcp::transfer(conn.fd, &valueBytes, 8, true, deadline) ||
      !tcp::transfer(conn.fd, const_cast<char *>(value.data()), value.size(),
                     true, deadline)) {
    broken = true;
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "rendezvous: could not store '" + key +
                          "' in rank 0's store at " + endpoint +
                          " (the connection is lost)");
  }
  return nullptr;
}

cleave_rt_status StoreClient::get(const std::string &key, double timeoutSeconds,
                                  std::vector<char> *value, bool *timedOut) {
  *timedOut = false;
  auto deadline = tcp::deadlineIn(timeoutSeconds);
  uint32_t keyBytes = static_cast<uint32_t>(key.size());
  char op = kGet;
  uint64_t bytes = 0;
  bool asked = !broken && key.size() <= kMaxKey &&
               tcp::transfer(conn.fd, &op, 1, true, deadline) &&
               tcp::transfer(conn.fd, &keyBytes, 4, true, deadline) &&
               tcp::transfer(conn.fd, const_cast<char *>(key.data()),
                             key.size(), true, deadline);
  if (asked) {
    // The reply comes when some rank sets the key.
    pollfd pfd{conn.fd, POLLIN, 0};
    int ready;
    do
      ready = ::poll(&pfd, 1, tcp::msLeft(deadline));
    while (ready < 0 && errno == EINTR);
    if (ready == 0) {
      broken = true;
      *timedOut = true;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g s", timeoutSeconds);
      return makeStatus(CLEAVE_RT_UNAVAILABLE, "rendezvous: '" + key +
                                                   "' was not set in rank 0's "
                                                   "store at " +
                                                   endpoint + " within " + buf);
    }
    if (ready > 0 && tcp::transfer(conn.fd, &bytes, 8, false, deadline) &&
        bytes <= kMaxValue) {
      value->resize(bytes);
      if (tcp::transfer(conn.fd, value->data(), bytes, false, deadline))
        return nullptr;
    }
  }
  broken = true;
  return makeStatus(CLEAVE_RT_UNAVAILABLE,
                    "rendezvous: lost the connection to rank 0's store at " +
                        endpoint + " while waiting for '" + key + "'");
}

} // namespace cleave::rt
