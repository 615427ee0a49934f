//===- KeyValueStore.h - Rank 0's rendezvous store over TCP -----*- C++ -*-===//
//
// A small key-value store for the rendezvous of ranks that a launcher
// without MPI started (torchrun, a Kubernetes job): rank 0 serves it on
// LaunchEnv::rendezvousPort() and every rank, rank 0 included, is a client.
// A get waits until some rank has set the key, so ranks publish their
// addresses and read their peers' in any order. The Gloo communicator
// connects its pairs through it (GlooRendezvous.cpp).
//
// Protocol, on one connection per client: the client sends "CLVS" and its
// rank (u32), then requests: 'S', key length (u32), key, value length
// (u64), value; or 'G', key length, key, answered with the value's length
// (u64) and bytes once the key is set. Numbers are in host byte order
// (every rank of a job runs the same binary on the same architecture).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_KEYVALUESTORE_H
#define CLEAVE_RUNTIME_KEYVALUESTORE_H

#include "Status.h"
#include "Tcp.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt {

/// Rank 0's server: a thread answering every client until destruction.
class StoreServer {
public:
  /// Listens on `port` of every address; the error names the port and
  /// `portName`, the variable it comes from.
  static cleave_rt_status start(int port, const std::string &portName,
                                std::unique_ptr<StoreServer> *out);
  ~StoreServer();

  struct State; ///< The served keys and connections (KeyValueStore.cpp).

private:
  explicit StoreServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state;
};

/// One rank's connection to the store.
class StoreClient {
public:
  /// Connects to host:port, retrying until `timeoutSeconds` have passed
  /// (rank 0 may not be listening yet). `portName` is for messages.
  static cleave_rt_status connect(const std::string &host, int port,
                                  const std::string &portName, int64_t rank,
                                  double timeoutSeconds,
                                  std::unique_ptr<StoreClient> *out);

  cleave_rt_status set(const std::string &key, const std::vector<char> &value);
  /// Waits at most `timeoutSeconds` for `key` to be set and returns its
  /// value. On a timeout *timedOut is set (the caller knows which rank owes
  /// the key and says so); the connection is then unusable.
  cleave_rt_status get(const std::string &key, double timeoutSeconds,
                       std::vector<char> *value, bool *timedOut);
  /// "host:port (MASTER_ADDR:MASTER_PORT)", for messages.
  const std::string &where() const { return endpoint; }

private:
  StoreClient(tcp::Fd fd, std::string endpoint)
      : conn(std::move(fd)), endpoint(std::move(endpoint)) {}
  tcp::Fd conn;
  std::string endpoint;
  bool broken = false;
};

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_KEYVALUESTORE_H
