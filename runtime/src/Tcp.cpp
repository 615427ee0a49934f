//===- Tcp.cpp - Sockets with deadlines for the launch bootstraps ---------===//

#include "Tcp.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace cleave::rt::tcp {

Fd &Fd::operator=(Fd &&other) noexcept {
  if (this != &other) {
    reset();
    fd = other.fd;
    other.fd = -1;
  }
  return *this;
}

void Fd::reset() {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

Clock::time_point deadlineIn(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, INT_MAX));
}

bool transfer(int fd, void *buf, size_t n, bool write,
              Clock::time_point deadline) {
  auto *p = static_cast<uint8_t *>(buf);
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    int r = ::poll(&pfd, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (k <= 0)
      return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool listenOn(int port, Fd *out, std::string *error) {
  Fd listener;
  listener.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (listener.fd < 0 ||
      ::setsockopt(listener.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
      ::bind(listener.fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) ||
      ::listen(listener.fd, 128)) {
    *error = std::strerror(errno);
    return false;
  }
  *out = std::move(listener);
  return true;
}

bool connectTo(const std::string &host, int port, Clock::time_point deadline,
               Fd *out, std::string *error, bool *unresolved) {
  *unresolved = false;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res)) {
    *error = gai_strerror(rc);
    *unresolved = true;
    return false;
  }
  struct Freer {
    addrinfo *a;
    ~Freer() { ::freeaddrinfo(a); }
  } freer{res};
  *error = "timed out";
  for (;;) {
    Fd conn;
    conn.fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (conn.fd >= 0 &&
        ::connect(conn.fd, res->ai_addr, res->ai_addrlen) == 0) {
      *out = std::move(conn);
      return true;
    }
    *error = std::strerror(errno);
    if (msLeft(deadline) == 0)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

} // namespace cleave::rt::tcp
