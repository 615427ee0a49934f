//===- Tcp.h - Sockets with deadlines for the launch bootstraps -*- C++ -*-===//
//
// The few socket operations the runtime's rendezvous code needs (the NCCL id
// broadcast of Launch.cpp and the key-value store of KeyValueStore.cpp): a
// listening socket, a connection retried until a deadline, and exact reads
// and writes that give up at a deadline. IPv4 only, like MASTER_ADDR.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_TCP_H
#define CLEAVE_RUNTIME_TCP_H

#include <chrono>
#include <cstddef>
#include <string>

namespace cleave::rt::tcp {

using Clock = std::chrono::steady_clock;

/// A socket closed on destruction.
struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(Fd &&other) noexcept : fd(other.fd) { other.fd = -1; }
  Fd &operator=(Fd &&other) noexcept;
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() { reset(); }
  void reset();
};

/// `seconds` from now.
Clock::time_point deadlineIn(double seconds);

/// Milliseconds left until `deadline` (0 once it has passed), for poll().
int msLeft(Clock::time_point deadline);

/// Reads (write = false) or writes exactly `n` bytes before the deadline;
/// false on a timeout, an error or a closed connection.
bool transfer(int fd, void *buf, size_t n, bool write,
              Clock::time_point deadline);

/// A socket listening on `port` of every IPv4 address (SO_REUSEADDR); false
/// with strerror's text in *error.
bool listenOn(int port, Fd *out, std::string *error);

/// Connects to host:port (resolved once), retrying every 50 ms until the
/// deadline while nobody listens yet. False with the reason in *error:
/// gai_strerror's text when the name does not resolve (*unresolved is then
/// true), else the last connect's strerror.
bool connectTo(const std::string &host, int port, Clock::time_point deadline,
               Fd *out, std::string *error, bool *unresolved);

} // namespace cleave::rt::tcp

#endif // CLEAVE_RUNTIME_TCP_H
