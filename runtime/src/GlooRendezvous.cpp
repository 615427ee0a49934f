//===- GlooRendezvous.cpp - Gloo's pairs, connected through rank 0's store ===//
//
// Rank 0 serves Cleave's key-value store (KeyValueStore.h) on
// LaunchEnv::rendezvousPort(); every rank, rank 0 included, connects to it,
// and Gloo's connectFullMesh publishes and reads the address of the pair
// between every two ranks through it (Gloo's keys: "rank_<r>", the host
// name of rank r, and "<r>", its pairs' addresses). Then each rank sets
// "connected/<r>", and rank 0 serves until every rank has, so that no rank
// still needs the store when it goes away.
//
//===----------------------------------------------------------------------===//

#include "GlooRendezvous.h"

#ifdef CLEAVE_HAVE_GLOO
#include "KeyValueStore.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <netdb.h>
#include <stdexcept>
#include <vector>

namespace cleave::rt {

namespace {
/// A rendezvous failure of ours, thrown through Gloo's connectFullMesh.
struct RendezvousError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

/// Takes a status's message and frees it.
std::string messageOf(cleave_rt_status s) {
  std::string m = cleave_rt_status_message(s);
  cleave_rt_status_free(s);
  return m;
}

/// Gloo's store interface over Cleave's (throws, as Gloo expects). Gloo's
/// keys are "rank_<r>" (rank r's host name) and "<r>" (rank r's pair
/// addresses): a key that does not come names the rank that owes it.
class RendezvousStore final : public gloo::rendezvous::Store {
public:
  RendezvousStore(StoreClient &client, double timeoutSeconds)
      : client(client), timeoutSeconds(timeoutSeconds) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    if (cleave_rt_status s = client.set(key, data))
      throw RendezvousError(messageOf(s));
  }
  std::vector<char> get(const std::string &key) override {
    std::vector<char> value;
    bool timedOut = false;
    if (cleave_rt_status s = client.get(key, timeoutSeconds, &value, &timedOut))
      throw RendezvousError(timedOut ? owner(key) : messageOf(s));
    return value;
  }
  void wait(const std::vector<std::string> &keys) override {
    for (const std::string &k : keys)
      get(k);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &) override {
    wait(keys);
  }

private:
  std::string owner(const std::string &key) const {
    std::string rank = key.rfind("rank_", 0) == 0 ? key.substr(5) : key;
    if (size_t slash = rank.rfind('/'); slash != std::string::npos)
      rank = rank.substr(slash + 1);
    bool number = !rank.empty() &&
                  rank.find_first_not_of("0123456789") == std::string::npos;
    return "rendezvous: " +
           (number ? "rank " + rank : "the key '" + key + "'") +
           " never reached rank 0's store at " + client.where() + " within " +
           seconds(timeoutSeconds);
  }
  StoreClient &client;
  double timeoutSeconds;
};
} // namespace

/// The address this rank's pairs listen on (GlooRendezvous.h).
static gloo::transport::tcp::attr deviceAttr(const LaunchEnv &env) {
  gloo::transport::tcp::attr attr;
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    std::string first = iface;
    attr.iface = first.substr(0, first.find(','));
    return attr;
  }
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  if (::getaddrinfo(env.masterAddr.c_str(), nullptr, &hints, &res) == 0) {
    bool loopback = false;
    for (addrinfo *a = res; a; a = a->ai_next)
      loopback |=
          (ntohl(
               reinterpret_cast<sockaddr_in *>(a->ai_addr)->sin_addr.s_addr) >>
           24) == 127;
    ::freeaddrinfo(res);
    if (loopback)
      attr.hostname = "127.0.0.1";
  }
  return attr;
}

cleave_rt_status connectGloo(const LaunchEnv &env, double timeoutSeconds,
                             std::shared_ptr<gloo::Context> *out,
                             double rendezvousFloorSeconds) {
  if (env.masterAddr.empty() || env.rendezvousPort() <= 0)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "the gloo communicator needs MASTER_ADDR and "
                      "MASTER_PORT (torchrun sets them)");
  const double rendezvousSeconds = timeoutSeconds > rendezvousFloorSeconds
                                       ? timeoutSeconds
                                       : rendezvousFloorSeconds;
  std::unique_ptr<StoreServer> server;
  if (env.rank == 0)
    CLEAVE_RT_RETURN_IF_ERROR(
        StoreServer::start(env.rendezvousPort(), env.storePortName, &server));
  std::unique_ptr<StoreClient> client;
  CLEAVE_RT_RETURN_IF_ERROR(StoreClient::connect(
      env.rank == 0 ? "127.0.0.1" : env.masterAddr, env.rendezvousPort(),
      env.storePortName, env.rank, rendezvousSeconds, &client));
  RendezvousStore store(*client, rendezvousSeconds);
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::string where = "rank " + std::to_string(env.rank);
  try {
    context = std::make_shared<gloo::rendezvous::Context>(
        static_cast<int>(env.rank), static_cast<int>(env.worldSize));
    std::shared_ptr<gloo::transport::Device> device;
    try {
      device = gloo::transport::tcp::CreateDevice(deviceAttr(env));
    } catch (const std::exception &e) {
      return makeStatus(CLEAVE_RT_UNAVAILABLE,
                        where +
                            ": gloo finds no address to listen on (set "
                            "GLOO_SOCKET_IFNAME to the network interface "
                            "the ranks share): " +
                            e.what());
    }
    context->setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(rendezvousSeconds)));
    context->connectFullMesh(store, device);
    // Rank 0 serves the store until every rank is connected.
    store.set("connected/" + std::to_string(env.rank), {1});
    if (server)
      for (int64_t r = 1; r < env.worldSize; ++r)
        store.get("connected/" + std::to_string(r));
  } catch (const RendezvousError &e) {
    return makeStatus(CLEAVE_RT_UNAVAILABLE, e.what());
  } catch (const std::exception &e) {
    return makeStatus(
        CLEAVE_RT_UNAVAILABLE,
        "rendezvous: " + where +
            " could not connect to its peers over gloo: " + e.what());
  }
  context->setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(timeoutSeconds)));
  *out = std::move(context);
  return nullptr;
}

} // namespace cleave::rt

#endif // CLEAVE_HAVE_GLOO
