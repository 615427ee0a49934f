//===- GlooCommTest.cpp - The Gloo communicator against the local one -----===//
//
// Ranks are threads of this process, each with its own Gloo context over
// loopback and the rendezvous through rank 0's store on a free port, as
// processes under torchrun would be. Every collective kind on several
// element types, odd sizes and groups of 2, 3 and 6 gives bit for bit the
// local communicator's results; sends never wait for their receivers; a
// rank that is missing, at another collective, aborted or gone is named.
//
//===----------------------------------------------------------------------===//

#include "Communicator.h"
#include "GlooRendezvous.h"
#include "Half.h"
#include "KeyValueStore.h"
#include "Launch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace cleave;
using namespace cleave::plan;

namespace {

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string message(cleave_rt_status s) {
  std::string m = s ? cleave_rt_status_message(s) : "";
  cleave_rt_status_free(s);
  return m;
}

using Body = std::function<void(int rank, rt::Communicator &comm)>;

/// Runs `body` on `n` threads, each one rank of a Gloo world on loopback.
void onGlooRanks(int n, double timeout, const Body &body) {
  int port = freePort();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      rt::LaunchEnv env;
      env.launcher = "torchrun";
      env.rank = r;
      env.worldSize = n;
      env.masterAddr = "127.0.0.1";
      env.masterPort = port;
      std::unique_ptr<rt::Communicator> comm;
      ASSERT_EQ(message(rt::createGlooCommunicator(env, timeout, &comm)), "")
          << "rank " << r;
      EXPECT_STREQ(comm->name(), "gloo");
      EXPECT_EQ(comm->rank(), r);
      EXPECT_EQ(comm->worldSize(), n);
      body(r, *comm);
    });
  for (auto &t : threads)
    t.join();
}

/// The same on the local communicator.
void onLocalRanks(int n, const Body &body) {
  auto world = rt::createLocalWorld(n, 30);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto comm = rt::localCommunicator(world, r);
      body(r, *comm);
    });
  for (auto &t : threads)
    t.join();
}

/// The tests that need the runtime's Gloo communicator.
class Gloo : public ::testing::Test {
protected:
  void SetUp() override {
    if (!CLEAVE_TEST_HAVE_GLOO)
      GTEST_SKIP() << "the runtime is built without Gloo (libgloo-dev)";
  }
};

CollectiveInfo allReduce(uint32_t id, int64_t count) {
  CollectiveInfo c;
  c.op = CollectiveOp::AllReduce;
  c.count = count;
  c.axes = {0};
  c.id = id;
  c.source = "test";
  return c;
}

/// `count` elements of `dtype` that differ per rank and per element: small
/// values with fractions (floats), or small integers.
std::vector<uint8_t> operand(DType dtype, int64_t count, int rank,
                             uint32_t salt) {
  std::vector<uint8_t> out(count * dtypeSize(dtype));
  for (int64_t i = 0; i < count; ++i) {
    uint32_t h = (static_cast<uint32_t>(i) * 2654435761u) ^
                 (static_cast<uint32_t>(rank + 1) * 40503u) ^ (salt * 97u);
    float f = static_cast<float>(h % 2001) / 256.0f - 3.9f;
    int32_t k = static_cast<int32_t>(h % 23) - 11;
    uint8_t *p = out.data() + i * dtypeSize(dtype);
    switch (dtype) {
    case DType::F32:
      std::memcpy(p, &f, 4);
      break;
    case DType::F64: {
      double d = static_cast<double>(f) / 3.0;
      std::memcpy(p, &d, 8);
      break;
    }
    case DType::BF16: {
      uint16_t b = rt::floatToBf16(f);
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::F16: {
      uint16_t b = rt::floatToHalf(f);
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::I32:
      std::memcpy(p, &k, 4);
      break;
    default: // I8
      *reinterpret_cast<int8_t *>(p) = static_cast<int8_t>(k);
      break;
    }
  }
  return out;
}

/// The collectives of the conformance run, over the mesh a=3, b=2: each
/// kind, on groups of 3 (a), 2 (b) and 6 (b, a), with odd sizes.
std::vector<CollectiveInfo> conformanceCollectives(DType dtype) {
  bool isFloat = dtype == DType::F32 || dtype == DType::F64 ||
                 dtype == DType::BF16 || dtype == DType::F16;
  std::vector<CollectiveInfo> all;
  uint32_t id = 0;
  for (std::vector<uint32_t> axes : {std::vector<uint32_t>{0}, {1}, {1, 0}}) {
    int64_t g = axes.size() == 2 ? 6 : axes[0] == 0 ? 3 : 2;
    auto add = [&](CollectiveInfo c) {
      c.dtype = dtype;
      c.axes = axes;
      c.id = id++;
      c.source = "conformance";
      all.push_back(c);
    };
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max,
                        ReduceOp::Min, ReduceOp::Prod}) {
      if (op == ReduceOp::Avg && !isFloat)
        continue;
      CollectiveInfo c = allReduce(0, 7);
      c.reduce = op;
      add(c);
    }
    CollectiveInfo gather;
    gather.op = CollectiveOp::AllGather;
    gather.count = 10; // [2, 5] gathered on its inner dim
    gather.splitOuter = 2;
    gather.splitInner = 5;
    add(gather);
    CollectiveInfo scatter;
    scatter.op = CollectiveOp::ReduceScatter;
    scatter.count = 3 * g; // [1, g * 3] scattered
    scatter.splitOuter = 1;
    scatter.splitInner = 3;
    add(scatter);
    CollectiveInfo a2a;
    a2a.op = CollectiveOp::AllToAll;
    a2a.count = 2 * g; // [g, 2] split on dim 0, concatenated on dim 1
    a2a.splitOuter = 1;
    a2a.splitInner = 2;
    a2a.concatOuter = 1;
    a2a.concatInner = 2;
    add(a2a);
    CollectiveInfo bcast;
    bcast.op = CollectiveOp::Broadcast;
    bcast.count = 9;
    bcast.root = g - 1;
    add(bcast);
    CollectiveInfo perm;
    perm.op = CollectiveOp::Permute;
    perm.count = 11;
    for (int64_t k = 0; k + 1 < g; ++k) // the last member receives nothing
      perm.pairs.insert(perm.pairs.end(), {k, k + 1});
    add(perm);
    CollectiveInfo big = allReduce(0, (1 << 18) + 3); // > 512 KiB per rank
    add(big);
    CollectiveInfo empty = allReduce(0, 0);
    add(empty);
  }
  return all;
}

/// Runs the conformance collectives on a communicator and returns each
/// rank's results, concatenated.
Body conformanceBody(std::vector<std::vector<uint8_t>> *results) {
  return [results](int r, rt::Communicator &comm) {
    Mesh m{{"a", "b"}, {3, 2}};
    for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::F64,
                        DType::I32, DType::I8})
      for (const CollectiveInfo &c : conformanceCollectives(dtype)) {
        Group group = groupOf(m, c.axes, r);
        std::vector<uint8_t> src = operand(dtype, c.count, r, c.id);
        std::vector<uint8_t> dst(
            rt::collectiveResultBytes(c,
                                      static_cast<int64_t>(group.ranks.size())),
            0xee);
        std::string error = message(comm.run(c, group, src.data(), dst.data()));
        ASSERT_EQ(error, "") << "rank " << r;
        (*results)[r].insert((*results)[r].end(), dst.begin(), dst.end());
      }
  };
}

TEST_F(Gloo, EveryCollectiveIsBitwiseTheLocalCommunicators) {
  std::vector<std::vector<uint8_t>> local(6), gloo(6);
  onLocalRanks(6, conformanceBody(&local));
  onGlooRanks(6, 60, conformanceBody(&gloo));
  for (int r = 0; r < 6; ++r) {
    ASSERT_EQ(gloo[r].size(), local[r].size()) << "rank " << r;
    EXPECT_TRUE(gloo[r] == local[r]) << "rank " << r << " differs";
  }
}

TEST_F(Gloo, AllReduceAddsInGroupOrder) {
  Mesh m{{"dp"}, {3}};
  std::vector<std::vector<float>> results(3);
  onGlooRanks(3, 30, [&](int r, rt::Communicator &comm) {
    // (1e8 - 1e8) + 1 = 1 and (1 + 1e8) - 1e8 = 0 in float.
    const float first[3] = {1e8f, -1e8f, 1.0f}, second[3] = {1.0f, 1e8f, -1e8f};
    std::vector<float> x = {first[r], second[r], 0.5f};
    results[r].resize(3);
    EXPECT_EQ(message(comm.run(allReduce(0, 3), groupOf(m, {0}, r), x.data(),
                               results[r].data())),
              "");
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(results[r], (std::vector<float>{1.0f, 0.0f, 1.5f}));
}

// Both ranks send (1 MiB, tagged) before they receive: the sends return at
// once, the receives check the tags, flush waits for delivery.
TEST_F(Gloo, CrossedSendsNeverWaitForTheirReceivers) {
  Mesh m{{"pp"}, {2}};
  constexpr int64_t kCount = 1 << 18;
  std::vector<std::string> errors(2);
  onGlooRanks(2, 30, [&](int r, rt::Communicator &comm) {
    Group group = groupOf(m, {0}, r);
    std::string &error = errors[r];
    for (int round = 0; round < 3; ++round) {
      CollectiveInfo send;
      send.op = CollectiveOp::Send;
      send.count = kCount;
      send.axes = {0};
      send.root = r;
      send.peer = 1 - r;
      send.pairs = {round * 10 + r};
      send.id = static_cast<uint32_t>(2 * round + r);
      send.source = "crossed";
      std::vector<float> x(kCount, float(r * 100 + round));
      error += message(comm.run(send, group, x.data(), nullptr));
      std::fill(x.begin(), x.end(), -1.0f); // the copy was taken
      CollectiveInfo recv = send;
      recv.op = CollectiveOp::Recv;
      recv.root = 1 - r;
      recv.peer = r;
      recv.pairs = {round * 10 + (1 - r)};
      std::vector<float> y(kCount, 0.0f);
      error += message(comm.run(recv, group, nullptr, y.data()));
      if (y != std::vector<float>(kCount, float((1 - r) * 100 + round)))
        error += "wrong data in round " + std::to_string(round);
    }
    error += message(comm.flush());
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
}

TEST_F(Gloo, OutOfOrderMessagesAreNamed) {
  Mesh m{{"pp"}, {2}};
  std::string error;
  onGlooRanks(2, 30, [&](int r, rt::Communicator &comm) {
    Group group = groupOf(m, {0}, r);
    CollectiveInfo c;
    c.op = r == 0 ? CollectiveOp::Send : CollectiveOp::Recv;
    c.count = 4;
    c.axes = {0};
    c.root = 0;
    c.peer = 1;
    c.pairs = {r == 0 ? 5 : 6};
    c.id = 3;
    c.source = "stage 0 to 1";
    float x[4] = {1, 2, 3, 4}, y[4];
    std::string e = message(comm.run(c, group, x, y));
    if (r == 1) {
      error = e;
      return; // the message is never taken
    }
    EXPECT_EQ(e, "");
    e = message(comm.flush());
    EXPECT_EQ(e.rfind("rank 1 never reached the recv matching send #3 (stage "
                      "0 to 1)",
                      0),
              0)
        << e;
  });
  EXPECT_EQ(error, "recv #3 (stage 0 to 1): received message 5 from rank 0 "
                   "where message 6 was expected (sends and receives out of "
                   "order)");
}

TEST_F(Gloo, RanksAtDifferentCollectivesAreNamed) {
  Mesh m{{"dp"}, {2}};
  std::vector<std::string> errors(2);
  onGlooRanks(2, 30, [&](int r, rt::Communicator &comm) {
    float x = 1, y = 0;
    errors[r] = message(
        comm.run(allReduce(r == 0 ? 3 : 4, 1), groupOf(m, {0}, r), &x, &y));
  });
  EXPECT_EQ(errors[0], "ranks disagree on the next collective: rank 1 is at "
                       "collective #4, rank 0 at all_reduce #3 (test)");
  EXPECT_EQ(errors[1], "ranks disagree on the next collective: rank 0 is at "
                       "collective #3, rank 1 at all_reduce #4 (test)");
}

TEST_F(Gloo, AMissingRankIsNamedAfterTheTimeout) {
  Mesh m{{"dp"}, {3}};
  std::vector<std::string> errors(3);
  onGlooRanks(3, 0.5, [&](int r, rt::Communicator &comm) {
    float x = 1, y;
    if (r != 2) // rank 2 never reaches the collective
      errors[r] =
          message(comm.run(allReduce(0, 1), groupOf(m, {0}, r), &x, &y));
    else
      std::this_thread::sleep_for(std::chrono::seconds(1));
  });
  EXPECT_EQ(errors[0], "rank 2 never reached all_reduce #0 (test) within the "
                       "0.5 s communication timeout");
  // Rank 1 times out the same way, or first learns that rank 0 gave up.
  EXPECT_NE(errors[1].find("never reached all_reduce #0 (test)"),
            std::string::npos)
      << errors[1];
  // A communicator that failed refuses what comes next.
}

TEST_F(Gloo, AnAbortedOrExitedRankIsNamedAtOnce) {
  Mesh m{{"dp"}, {2}};
  for (bool exits : {false, true}) {
    std::string error;
    double seconds = 0;
    onGlooRanks(2, 30, [&](int r, rt::Communicator &comm) {
      if (r == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (!exits)
          comm.abort("out of memory");
        return; // exits: the communicator is destroyed
      }
      auto t0 = std::chrono::steady_clock::now();
      float x = 1, y;
      error = message(comm.run(allReduce(7, 1), groupOf(m, {0}, 0), &x, &y));
      seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      std::string next =
          message(comm.run(allReduce(8, 1), groupOf(m, {0}, 0), &x, &y));
      EXPECT_NE(next.find("all_reduce #8 (test): the gloo communicator of "
                          "rank 0 stopped at an earlier error: rank 1 never "
                          "reached all_reduce #7 (test)"),
                std::string::npos)
          << next;
    });
    EXPECT_NE(error.find("rank 1 never reached all_reduce #7 (test): the "
                         "connection to it was lost (gloo: "),
              std::string::npos)
        << error;
    EXPECT_LT(seconds, 10) << "not named before the 30 s timeout";
  }
}

TEST_F(Gloo, ARankThatNeverJoinsIsNamed) {
  rt::LaunchEnv env;
  env.launcher = "torchrun";
  env.worldSize = 3;
  env.masterAddr = "127.0.0.1";
  env.masterPort = freePort();
  std::shared_ptr<gloo::Context> context;
  std::string error;
  std::thread one([&] { // rank 1 joins; rank 2 never comes
    rt::LaunchEnv e = env;
    e.rank = 1;
    std::shared_ptr<gloo::Context> c;
    message(rt::connectGloo(e, 0.5, &c, 0.5));
  });
  error = message(rt::connectGloo(env, 0.5, &context, 0.5));
  one.join();
  EXPECT_EQ(error, "rendezvous: rank 2 never reached rank 0's store at "
                   "127.0.0.1:" +
                       std::to_string(env.masterPort) +
                       " (MASTER_ADDR:MASTER_PORT) within 0.5 s");
}

TEST(RendezvousStore, GetsWaitForTheirKeys) {
  int port = freePort();
  std::unique_ptr<rt::StoreServer> server;
  ASSERT_EQ(message(rt::StoreServer::start(port, "MASTER_PORT", &server)), "");
  std::unique_ptr<rt::StoreClient> a, b;
  ASSERT_EQ(message(rt::StoreClient::connect("127.0.0.1", port, "MASTER_PORT",
                                             0, 5, &a)),
            "");
  ASSERT_EQ(message(rt::StoreClient::connect("localhost", port, "MASTER_PORT",
                                             1, 5, &b)),
            "");
  std::vector<char> got;
  bool timedOut = false;
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(message(a->set("k", {'x', 'y'})), "");
  });
  EXPECT_EQ(message(b->get("k", 5, &got, &timedOut)), ""); // waits for it
  later.join();
  EXPECT_EQ(got, (std::vector<char>{'x', 'y'}));
  EXPECT_EQ(message(a->get("k", 5, &got, &timedOut)), "");
  EXPECT_EQ(got, (std::vector<char>{'x', 'y'}));
  EXPECT_EQ(message(a->get("never", 0.2, &got, &timedOut)),
            "rendezvous: 'never' was not set in rank 0's store at "
            "127.0.0.1:" +
                std::to_string(port) +
                " (MASTER_ADDR:MASTER_PORT) within 0.2 s");
  EXPECT_TRUE(timedOut);

  // The port is taken: rank 0 says which and how to choose another.
  std::unique_ptr<rt::StoreServer> second;
  EXPECT_NE(message(rt::StoreServer::start(port, "MASTER_PORT+1", &second))
                .find("rank 0 cannot serve the rendezvous store on port " +
                      std::to_string(port) +
                      " (MASTER_PORT+1): Address already in use; choose a "
                      "free port with CLEAVE_STORE_PORT"),
            std::string::npos);
  // Nobody serves the port: the rank names the address it tried.
  int nobody = freePort();
  std::unique_ptr<rt::StoreClient> c;
  EXPECT_NE(message(rt::StoreClient::connect("127.0.0.1", nobody,
                                             "CLEAVE_STORE_PORT", 3, 0.3, &c))
                .find("rendezvous: rank 3 could not reach rank 0's store at "
                      "127.0.0.1:" +
                      std::to_string(nobody) +
                      " (MASTER_ADDR:CLEAVE_STORE_PORT) within 0.3 s"),
            std::string::npos);
}

} // namespace
