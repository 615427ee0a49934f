//===- LaunchTest.cpp - Launcher env, device choice, TCP bootstrap, splits ===//
//
// What the NCCL communicator starts from, tested on CPU ranks: the torchrun,
// OpenMPI and Slurm variables, the GPU of each rank, the TCP bootstrap that
// hands rank 0's id to every rank (threads of this process on localhost),
// the same over a communicator, and the colors/keys that split the world
// into the groups of each set of mesh axes.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include <gtest/gtest.h>

#include <map>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace cleave;
using namespace cleave::rt;

namespace {

using Env = std::map<std::string, std::string>;

bool read(const Env &env, LaunchEnv *out, std::string *error) {
  return readLaunchEnv(
      [&](const char *name) -> const char * {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      out, error);
}

std::string readError(const Env &env) {
  LaunchEnv l;
  std::string error;
  EXPECT_FALSE(read(env, &l, &error));
  return error;
}

TEST(Launch, TorchrunMpirunSlurmAndNone) {
  LaunchEnv l;
  std::string error;
  ASSERT_TRUE(read({{"RANK", "3"},
                    {"WORLD_SIZE", "4"},
                    {"LOCAL_RANK", "1"},
                    {"MASTER_ADDR", "node0"},
                    {"MASTER_PORT", "29500"}},
                   &l, &error))
      << error;
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.worldSize, 4);
  EXPECT_EQ(l.localRank, 1);
  EXPECT_EQ(l.masterAddr, "node0");
  EXPECT_EQ(l.masterPort, 29500);

  ASSERT_TRUE(read({{"OMPI_COMM_WORLD_RANK", "5"},
                    {"OMPI_COMM_WORLD_SIZE", "8"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}},
                   &l, &error));
  EXPECT_EQ(l.launcher, "mpirun");
  EXPECT_EQ(l.rank, 5);
  ASSERT_TRUE(read(
      {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}},
      &l, &error));
  EXPECT_EQ(l.launcher, "srun");
  ASSERT_TRUE(read({{"SLURM_NTASKS", "4"}}, &l, &error)); // salloc, no srun
  EXPECT_EQ(l.launcher, "");
  ASSERT_TRUE(read({}, &l, &error));
  EXPECT_EQ(l.launcher, "");
  EXPECT_EQ(l.worldSize, 1);
}

TEST(Launch, BadEnvironmentsNameTheVariable) {
  Env torchrun = {{"RANK", "1"},
                  {"WORLD_SIZE", "2"},
                  {"LOCAL_RANK", "1"},
                  {"MASTER_ADDR", "h"},
                  {"MASTER_PORT", "29500"}};
  Env e = torchrun;
  e.erase("MASTER_ADDR");
  EXPECT_EQ(readError(e), "torchrun launch: MASTER_ADDR is not set");
  e = torchrun;
  e["MASTER_PORT"] = "http";
  EXPECT_EQ(readError(e), "MASTER_PORT='http' is not an integer in [1, 65535]");
  e = torchrun;
  e["RANK"] = "2";
  EXPECT_EQ(readError(e), "RANK=2 is not below WORLD_SIZE=2");
  e = torchrun;
  e["RANK"] = "1x";
  EXPECT_EQ(readError(e), "RANK='1x' is not an integer in [0, 16777216]");
  e = torchrun;
  e.erase("LOCAL_RANK");
  EXPECT_EQ(readError(e), "torchrun launch: LOCAL_RANK is not set");
  EXPECT_EQ(readError({{"OMPI_COMM_WORLD_RANK", "0"}}),
            "mpirun launch: OMPI_COMM_WORLD_SIZE is not set");
}

// Rank 0's own server (the NCCL id, the Gloo store) listens on MASTER_PORT,
// except where torchrun's agent serves its store there.
TEST(Launch, RankZerosPortStepsAsideForTorchrunsAgent) {
  Env torchrun = {{"RANK", "0"},
                  {"WORLD_SIZE", "2"},
                  {"LOCAL_RANK", "0"},
                  {"MASTER_ADDR", "h"},
                  {"MASTER_PORT", "29500"}};
  LaunchEnv l;
  std::string error;
  ASSERT_TRUE(read(torchrun, &l, &error)) << error;
  EXPECT_EQ(l.rendezvousPort(), 29500);
  EXPECT_EQ(l.storePortName, "MASTER_PORT");
  Env e = torchrun;
  e["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  ASSERT_TRUE(read(e, &l, &error)) << error;
  EXPECT_EQ(l.masterPort, 29500);
  EXPECT_EQ(l.rendezvousPort(), 29501);
  EXPECT_EQ(l.storePortName, "MASTER_PORT+1");
  e["CLEAVE_STORE_PORT"] = "31000"; // wins
  ASSERT_TRUE(read(e, &l, &error)) << error;
  EXPECT_EQ(l.rendezvousPort(), 31000);
  EXPECT_EQ(l.storePortName, "CLEAVE_STORE_PORT");
  e["CLEAVE_STORE_PORT"] = "0";
  EXPECT_EQ(readError(e), "CLEAVE_STORE_PORT='0' is not an integer in "
                          "[1, 65535]");
  e = torchrun;
  e["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  e["MASTER_PORT"] = "65535";
  EXPECT_NE(readError(e).find("set CLEAVE_STORE_PORT"), std::string::npos);

  // An MPI launch reads the rendezvous only when asked to (CLEAVE_COMM=gloo).
  Env mpi = {{"OMPI_COMM_WORLD_RANK", "1"},
             {"OMPI_COMM_WORLD_SIZE", "2"},
             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}};
  ASSERT_TRUE(read(mpi, &l, &error)) << error;
  EXPECT_EQ(l.masterAddr, "");
  auto lookup = [&](const char *name) -> const char * {
    auto it = mpi.find(name);
    return it == mpi.end() ? nullptr : it->second.c_str();
  };
  EXPECT_FALSE(readRendezvous(lookup, &l, &error));
  EXPECT_EQ(error, "mpirun launch: MASTER_ADDR is not set");
  mpi["MASTER_ADDR"] = "node0";
  mpi["MASTER_PORT"] = "29400";
  ASSERT_TRUE(readRendezvous(lookup, &l, &error)) << error;
  EXPECT_EQ(l.masterAddr, "node0");
  EXPECT_EQ(l.rendezvousPort(), 29400);
}

TEST(Launch, OneGpuPerLocalRank) {
  LaunchEnv l;
  l.rank = 5;
  l.localRank = 1;
  int device = -1;
  std::string error;
  ASSERT_TRUE(cudaDeviceOf(l, nullptr, 8, &device, &error));
  EXPECT_EQ(device, 1);
  ASSERT_TRUE(cudaDeviceOf(l, "3", 8, &device, &error));
  EXPECT_EQ(device, 3);
  EXPECT_FALSE(cudaDeviceOf(l, "1a", 8, &device, &error));
  EXPECT_EQ(error, "CLEAVE_CUDA_DEVICE='1a' is not a device ordinal");
  EXPECT_FALSE(cudaDeviceOf(l, nullptr, 1, &device, &error));
  EXPECT_EQ(error, "local rank 1 (rank 5) needs GPU 1 but this node has 1");
}

/// A TCP port nobody listens on right now.
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

TEST(Launch, TcpBootstrapHandsRankZerosBytesToEveryRank) {
  const int world = 4;
  int port = freePort();
  std::vector<std::vector<uint8_t>> got(world);
  std::vector<std::string> errors(world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      LaunchEnv l;
      l.launcher = "torchrun";
      l.rank = r;
      l.worldSize = world;
      l.masterAddr = "127.0.0.1";
      l.masterPort = port;
      // An NCCL unique id is 128 bytes.
      got[r] = r == 0 ? std::vector<uint8_t>(128, 0) : std::vector<uint8_t>{};
      for (int i = 0; r == 0 && i < 128; ++i)
        got[r][i] = static_cast<uint8_t>(i * 7);
      errors[r] = message(tcpBroadcast(l, &got[r], 20));
    });
  for (auto &t : ranks)
    t.join();
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(got[r], got[0]) << "rank " << r;
  }
}

TEST(Launch, TcpBootstrapNamesWhoNeverCame) {
  int port = freePort();
  LaunchEnv l;
  l.worldSize = 3;
  l.masterAddr = "127.0.0.1";
  l.masterPort = port;
  std::vector<uint8_t> id(16, 1), got;
  std::string peer;
  std::thread one([&] {
    LaunchEnv p = l;
    p.rank = 1;
    peer = message(tcpBroadcast(p, &got, 5));
  });
  std::string error = message(tcpBroadcast(l, &id, 0.5)); // rank 2 never runs
  one.join();
  EXPECT_EQ(error, "bootstrap: rank(s) 2 never connected to rank 0 on port " +
                       std::to_string(port) + " within 0.5 s");
  EXPECT_EQ(peer, "");
  EXPECT_EQ(got, id);

  // Nobody serves the port: the rank names the address it tried.
  LaunchEnv lonely = l;
  lonely.rank = 1;
  lonely.masterPort = freePort();
  error = message(tcpBroadcast(lonely, &got, 0.3));
  EXPECT_NE(error.find("bootstrap: rank 1 could not reach rank 0 at "
                       "127.0.0.1:" +
                       std::to_string(lonely.masterPort) +
                       " (MASTER_ADDR:MASTER_PORT) within 0.3 s"),
            std::string::npos)
      << error;
}

TEST(Launch, BroadcastOverACommunicator) {
  auto world = createLocalWorld(3, 10);
  std::vector<std::vector<uint8_t>> blobs(3, std::vector<uint8_t>(128, 0));
  blobs[0].assign(128, 42);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      auto comm = localCommunicator(world, r);
      EXPECT_EQ(message(communicatorBroadcast(*comm, &blobs[r])), "");
    });
  for (auto &t : ranks)
    t.join();
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(blobs[r], std::vector<uint8_t>(128, 42));
}

TEST(Launch, SplitColorsAndKeysMakeTheGroups) {
  plan::Mesh m{{"dp", "tp", "pp"}, {2, 2, 2}};
  for (std::vector<uint32_t> axes :
       {std::vector<uint32_t>{0}, {1}, {2}, {2, 0}, {0, 1, 2}}) {
    // Ranks that share a color, ordered by key, are each one's group.
    std::map<int64_t, std::map<int64_t, int64_t>> byColor;
    for (int64_t r = 0; r < 8; ++r) {
      auto [color, key] = plan::splitColorKey(m, axes, r);
      EXPECT_TRUE(byColor[color].emplace(key, r).second);
    }
    for (int64_t r = 0; r < 8; ++r) {
      plan::Group g = plan::groupOf(m, axes, r);
      auto [color, key] = plan::splitColorKey(m, axes, r);
      std::vector<int64_t> members;
      for (auto [k, rank] : byColor[color])
        members.push_back(rank);
      EXPECT_EQ(members, g.ranks);
      EXPECT_EQ(key, g.index);
    }
  }
}

} // namespace
