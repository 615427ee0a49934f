//===- CollectiveTest.cpp - Meshes, collective records, local world -------===//

#include "Communicator.h"
#include "Half.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <thread>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// A plan over mesh dp=2: y = all_reduce(x) started asynchronously, a fill
/// beside it, then the wait.
Plan collectivePlan() {
  Plan p;
  p.arenaBytes = 256;
  p.mesh = {{"dp", "tp"}, {2, 1}};
  p.inputs.push_back(tensor("x", DType::F32, {4}, 0));
  p.inputs.back().sharding = {{0}};
  p.outputs.push_back(tensor("y", DType::F32, {4}, 64));
  Command c;
  c.kind = CommandKind::Collective;
  c.buffers = {0, 64};
  c.stream = kCommStream;
  c.event = 0;
  c.collective.op = CollectiveOp::AllReduce;
  c.collective.reduce = ReduceOp::Avg;
  c.collective.axes = {0};
  c.collective.count = 4;
  c.collective.id = 0;
  c.collective.source = "node /grad, backward";
  p.commands.push_back(c);
  p.commands.push_back(makeCommand(CommandKind::Fill, {16, 0}, {128}));
  Command wait;
  wait.kind = CommandKind::Wait;
  wait.event = 0;
  p.commands.push_back(wait);
  p.numEvents = 1;
  return p;
}

std::string validationError(const Plan &p) {
  std::string err;
  EXPECT_FALSE(validate(p, &err));
  return err;
}

TEST(Collective, PlanRoundTrip) {
  Plan p = collectivePlan();
  p.commands[0].collective.pairs = {0, 1};
  p.commands[0].collective.op = CollectiveOp::Permute;
  std::vector<uint8_t> bytes = serialize(p);
  Plan q;
  std::string err;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &err)) << err;
  EXPECT_EQ(serialize(q), bytes);
  EXPECT_EQ(q.mesh.str(), "dp=2,tp=1");
  EXPECT_EQ(q.inputs[0].sharding, std::vector<std::vector<uint32_t>>{{0}});
  EXPECT_EQ(q.commands[0].stream, kCommStream);
  EXPECT_EQ(q.commands[0].collective.source, "node /grad, backward");
  EXPECT_EQ(q.commands[0].collective.pairs, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(q.commands[2].event, 0);
}

TEST(Collective, ValidatorRefusesBrokenEventsAndRecords) {
  std::string ok;
  ASSERT_TRUE(validate(collectivePlan(), &ok)) << ok;

  Plan p = collectivePlan();
  p.commands.pop_back(); // the wait
  EXPECT_EQ(validationError(p), "event 0 of command 0 is never waited for");

  p = collectivePlan();
  p.commands.push_back(p.commands.back());
  EXPECT_EQ(validationError(p),
            "command 3 (wait): event 0 is already waited for by command 2");

  p = collectivePlan();
  std::swap(p.commands[0], p.commands[2]);
  EXPECT_EQ(validationError(p), "command 0 (wait): waits for event 0, which "
                                "no earlier command completes");

  p = collectivePlan();
  p.commands[1].stream = kCommStream;
  EXPECT_EQ(validationError(p),
            "command 1 (fill): only asynchronous collectives run on the "
            "communication stream or complete an event");

  p = collectivePlan();
  p.mesh = Mesh();
  p.inputs[0].sharding.clear();
  EXPECT_EQ(validationError(p),
            "command 0 (collective) all_reduce #0: the plan has no mesh");

  p = collectivePlan();
  p.commands[0].collective.axes = {2};
  EXPECT_EQ(validationError(p), "command 0 (collective) all_reduce #0: mesh "
                                "axis 2 is out of range or named twice");

  p = collectivePlan();
  p.commands[0].collective.op = CollectiveOp::AllGather;
  p.commands[0].collective.splitOuter = 1;
  p.commands[0].collective.splitInner = 3;
  EXPECT_EQ(validationError(p), "command 0 (collective) all_gather #0: gather "
                                "view [1, 2, 3] does not cover 8 elements");

  p = collectivePlan();
  p.commands[0].collective.dtype = DType::I32;
  EXPECT_EQ(validationError(p), "command 0 (collective) all_reduce #0: avg "
                                "needs a float dtype, got int32");

  p = collectivePlan();
  p.commands[0].collective.count = 64; // 256 bytes from offset 0: fits;
  p.commands[0].buffers[1] = 128;      // the result does not
  EXPECT_EQ(validationError(p),
            "command 0 (collective) all_reduce #0 destination: buffer offset "
            "128 + 256 bytes lies outside the arena of 256 bytes");

  // A damaged offset that is not a multiple of the element size (found by
  // damaged-partitioned-plan.test under UBSan: the reduction read
  // misaligned floats).
  p = collectivePlan();
  p.commands[0].buffers[1] = 2;
  EXPECT_EQ(validationError(p),
            "command 0 (collective) all_reduce #0 destination: buffer offset "
            "2 is not a multiple of its element size 4");

  // Source and destination that overlap without being the same buffer
  // (damaged-partitioned-plan.test under ASan: memcpy of overlapping ranges).
  p = collectivePlan();
  p.commands[0].buffers[1] = 8;
  EXPECT_EQ(validationError(p),
            "command 0 (collective) all_reduce #0: source at 0 and destination "
            "at 8 overlap");

  p = collectivePlan();
  p.initCommands.push_back(p.commands[0]);
  EXPECT_EQ(validationError(p),
            "init command 0 (collective): init commands run on one rank's "
            "compute stream and cannot communicate");

  p = collectivePlan();
  p.inputs[0].sharding = {{0}, {1}};
  EXPECT_EQ(validationError(p),
            "input 0 'x': sharding lists 2 dimensions for rank 1");

  p = collectivePlan();
  Constant w;
  w.info = tensor("w", DType::F32, {4}, 192);
  w.info.sharding = {{0}};
  w.data = bytesOf<float>({1, 2, 3, 4}); // the global tensor has 8
  p.constants.push_back(w);
  EXPECT_EQ(validationError(p),
            "constant 0 'w': holds 16 bytes of data but its global shape [8] "
            "float32 needs 32");
}

TEST(Collective, GroupsFollowTheMeshAxesInTheOrderGiven) {
  Mesh m{{"x", "y", "z"}, {2, 2, 2}};
  // Rank 5 = (1, 0, 1). Over [z, x]: z slower, x faster.
  Group g = groupOf(m, {2, 0}, 5);
  EXPECT_EQ(g.ranks, (std::vector<int64_t>{0, 4, 1, 5}));
  EXPECT_EQ(g.index, 3);
  g = groupOf(m, {1}, 5);
  EXPECT_EQ(g.ranks, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(g.index, 0);
}

TEST(Collective, ShardsOfAGlobalTensor) {
  Mesh m{{"dp", "tp"}, {2, 3}};
  TensorInfo t = tensor("w", DType::I32, {2, 1}, 0);
  t.sharding = {{0}, {1}};
  EXPECT_EQ(globalShape(t, m), (std::vector<int64_t>{4, 3}));
  // Rank 5 = (1, 2): rows 2..3, column 2.
  EXPECT_EQ(shardOffsets(t, m, 5), (std::vector<int64_t>{2, 2}));
  std::vector<int32_t> global(12);
  for (int i = 0; i < 12; ++i)
    global[i] = i;
  std::vector<int32_t> local(2);
  copyShard({4, 3}, {2, 1}, {2, 2}, 4,
            reinterpret_cast<uint8_t *>(global.data()),
            reinterpret_cast<uint8_t *>(local.data()), false);
  EXPECT_EQ(local, (std::vector<int32_t>{8, 11}));
}

TEST(Collective, ReductionsRoundOnceAndWrap) {
  // bf16 (spacing 2^-7 at 1): 1 + 2^-8 + 2^-8 accumulates in float and
  // rounds once to 1 + 2^-7; rounding after each add (a tie, to even) would
  // stay at 1.
  uint16_t one = rt::floatToBf16(1.0f), tiny = rt::floatToBf16(1.0f / 256);
  uint16_t a[1] = {one}, b[1] = {tiny}, c[1] = {tiny}, out[1];
  const void *srcs[3] = {a, b, c};
  rt::reduceBuffers(ReduceOp::Sum, DType::BF16, srcs, 3, out, 1);
  EXPECT_EQ(rt::bf16ToFloat(out[0]), 1.0f + 1.0f / 128);
  EXPECT_EQ(rt::bf16ToFloat(rt::floatToBf16(1.0f + 1.0f / 256)), 1.0f);
  // f16 round-trips through float exactly, and 65520 overflows to inf.
  EXPECT_EQ(rt::halfToFloat(rt::floatToHalf(0.333251953125f)), 0.333251953125f);
  EXPECT_TRUE(std::isinf(rt::halfToFloat(rt::floatToHalf(65520.0f))));
  EXPECT_EQ(rt::halfToFloat(rt::floatToHalf(65519.0f)), 65504.0f);
  // int8 sums wrap.
  int8_t x[1] = {100}, y[1] = {100}, z[1];
  const void *ints[2] = {x, y};
  rt::reduceBuffers(ReduceOp::Sum, DType::I8, ints, 2, z, 1);
  EXPECT_EQ(z[0], static_cast<int8_t>(-56));
}

/// Runs `body(rank, comm)` on `n` threads of one local world.
template <typename Body> void onLocalRanks(int n, double timeout, Body body) {
  auto world = rt::createLocalWorld(n, timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto comm = rt::localCommunicator(world, r);
      body(r, *comm);
    });
  for (auto &t : threads)
    t.join();
}

CollectiveInfo allReduce(uint32_t id, int64_t count) {
  CollectiveInfo c;
  c.op = CollectiveOp::AllReduce;
  c.count = count;
  c.axes = {0};
  c.id = id;
  c.source = "test";
  return c;
}

TEST(LocalWorld, AllReduceIsTheSameOnEveryRank) {
  Mesh m{{"dp"}, {3}};
  std::vector<std::vector<float>> results(3);
  onLocalRanks(3, 10, [&](int r, rt::Communicator &comm) {
    // Values whose float sum depends on the order of the additions.
    const float first[3] = {1e8f, -1e8f, 1.0f}, second[3] = {1.0f, 1e8f, -1e8f};
    std::vector<float> x = {first[r], second[r], 0.5f};
    results[r].resize(3);
    cleave_rt_status s = comm.run(allReduce(0, 3), groupOf(m, {0}, r), x.data(),
                                  results[r].data());
    EXPECT_EQ(s, nullptr);
  });
  // Group order on every rank: (1e8 - 1e8) + 1 = 1 and (1 + 1e8) - 1e8 = 0
  // in float (another order would give 0 and 1).
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(results[r], (std::vector<float>{1.0f, 0.0f, 1.5f}));
}

// Small collectives are staged (one rendezvous, two buffers used in turn),
// large ones reduced in place: interleaved on one group, with ranks that
// overwrite their operand as soon as a call returns and run at different
// speeds, every result is still the sum of that round's operands.
TEST(LocalWorld, StagedAndInPlaceCollectivesInterleave) {
  Mesh m{{"dp"}, {3}};
  constexpr int kRounds = 200;
  constexpr int64_t kSmall = 5, kLarge = 40000; // 20 B and 160 kB
  std::vector<int> wrong(3, 0);
  onLocalRanks(3, 30, [&](int r, rt::Communicator &comm) {
    std::vector<float> x, y;
    for (int i = 0; i < kRounds; ++i) {
      int64_t n = i % 3 == 2 ? kLarge : kSmall;
      x.assign(n, float(r + 1) * float(i % 7 + 1));
      y.assign(n, -1.0f);
      if ((i + r) % 5 == 0)
        std::this_thread::yield();
      cleave_rt_status s = comm.run(allReduce(uint32_t(i), n),
                                    groupOf(m, {0}, r), x.data(), y.data());
      ASSERT_EQ(s, nullptr) << cleave_rt_status_message(s);
      std::fill(x.begin(), x.end(), 1e9f); // the peers must not read it now
      float expected = 6.0f * float(i % 7 + 1);
      for (float v : y)
        wrong[r] += v != expected;
    }
  });
  EXPECT_EQ(wrong, (std::vector<int>{0, 0, 0}));
}

TEST(LocalWorld, RanksAtDifferentCollectivesAreNamed) {
  Mesh m{{"dp"}, {2}};
  std::vector<std::string> errors(2);
  onLocalRanks(2, 10, [&](int r, rt::Communicator &comm) {
    float x = 1, y = 0;
    cleave_rt_status s =
        comm.run(allReduce(r == 0 ? 3 : 4, 1), groupOf(m, {0}, r), &x, &y);
    ASSERT_NE(s, nullptr);
    errors[r] = cleave_rt_status_message(s);
    cleave_rt_status_free(s);
  });
  bool named = false;
  for (const std::string &e : errors)
    named |=
        e.find("ranks disagree on the next collective") != std::string::npos &&
        e.find("all_reduce #3 (test)") != std::string::npos &&
        e.find("all_reduce #4 (test)") != std::string::npos;
  EXPECT_TRUE(named) << errors[0] << "\n" << errors[1];
}

TEST(LocalWorld, AMissingRankIsNamedAfterTheTimeout) {
  Mesh m{{"dp"}, {3}};
  std::string error;
  auto world = rt::createLocalWorld(3, 0.2);
  auto comm0 = rt::localCommunicator(world, 0);
  auto comm1 = rt::localCommunicator(world, 1);
  auto comm2 = rt::localCommunicator(world, 2); // never calls
  std::thread other([&] {
    float x = 1, y;
    cleave_rt_status s =
        comm1->run(allReduce(0, 1), groupOf(m, {0}, 1), &x, &y);
    cleave_rt_status_free(s);
  });
  float x = 1, y;
  cleave_rt_status s = comm0->run(allReduce(0, 1), groupOf(m, {0}, 0), &x, &y);
  other.join();
  ASSERT_NE(s, nullptr);
  error = cleave_rt_status_message(s);
  cleave_rt_status_free(s);
  // Either rank may time out first; the other reports the first's reason.
  EXPECT_NE(error.find("rank 2 never reached all_reduce #0 (test) (it is "
                       "not in a collective) within the 0.2 s communication "
                       "timeout"),
            std::string::npos)
      << error;
}

TEST(LocalWorld, AnAbortStopsThePeers) {
  Mesh m{{"dp"}, {2}};
  auto world = rt::createLocalWorld(2, 30);
  auto comm0 = rt::localCommunicator(world, 0);
  auto comm1 = rt::localCommunicator(world, 1);
  std::thread aborter([&] { comm1->abort("out of memory"); });
  float x = 1, y;
  cleave_rt_status s = comm0->run(allReduce(7, 1), groupOf(m, {0}, 0), &x, &y);
  aborter.join();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::string(cleave_rt_status_message(s)),
            "stopped in all_reduce #7 (test) because rank 1 failed: out of "
            "memory");
  cleave_rt_status_free(s);
}

} // namespace
