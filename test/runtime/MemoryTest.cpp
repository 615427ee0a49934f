//===- MemoryTest.cpp - cleave_rt_executor_measure_memory and its report --===//
//
// Hand-built plans whose commands write known byte ranges: the measured
// run's bytes written and high-water mark are exactly those ranges', the
// constants, states, inputs and init values survive the poison, and
// cleave-run --measure-memory prints one line per rank of a pipeline.
//
//===----------------------------------------------------------------------===//

#include "MemoryMeasure.h"
#include "TestUtil.h"
#include "cleave/MemoryReport.h"
#include "cleave/TensorFile.h"

#include <gtest/gtest.h>

#include <set>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

std::string statusText(cleave_rt_status s) {
  std::string text = cleave_rt_status_message(s);
  cleave_rt_status_free(s);
  return text;
}

/// A 512-byte arena: input x [4] f32 at 0, constant c [4] f32 at 64, state w
/// [4] f32 at 128 (its initial value a constant there), an init value of 8
/// bytes of 5 at 448 (no state holds it). The commands write [256, 288)
/// (x then c), 8 bytes of 0xFF at 320, the init value's copy at 336, 8 zero
/// bytes at 400, and copy x into the state w.
Plan knownRangesPlan() {
  Plan p;
  p.arenaBytes = 512;
  p.inputs = {tensor("x", DType::F32, {4}, 0)};
  Constant c, w;
  c.info = tensor("c", DType::F32, {4}, 64);
  c.data = bytesOf<float>({10.5f, -20.25f, 30.125f, 7.75f});
  w.info = tensor("w", DType::F32, {4}, 128);
  w.data = bytesOf<float>({0.5f, 0.25f, -0.5f, 2.5f});
  p.constants = {c, w};
  p.states = {StateTensor{tensor("w", DType::F32, {4}, 128),
                          StateKind::Parameter, "w", ""}};
  p.initCommands = {makeCommand(CommandKind::Fill, {8, 5}, {448})};
  p.commands = {makeCommand(CommandKind::Copy, {16}, {0, 256}),
                makeCommand(CommandKind::Copy, {16}, {64, 272}),
                makeCommand(CommandKind::Fill, {8, 0xFF}, {320}),
                makeCommand(CommandKind::Copy, {8}, {448, 336}),
                makeCommand(CommandKind::Fill, {8, 0}, {400}),
                makeCommand(CommandKind::Copy, {16}, {0, 128})};
  p.outputs = {tensor("y", DType::F32, {8}, 256),
               tensor("ones", DType::U8, {8}, 320),
               tensor("fives", DType::U8, {8}, 336),
               tensor("w_out", DType::F32, {4}, 128)};
  return p;
}

cleave_rt_memory_usage_t usageOf(Loaded &l) {
  cleave_rt_memory_usage_t u = {};
  EXPECT_TRUE(l.take(cleave_rt_executor_memory_usage(l.executor, &u)))
      << l.error;
  return u;
}

} // namespace

TEST(MeasureMemory, HeldAndPoisonedRanges) {
  Plan p = knownRangesPlan();
  // A constant overlapping the state's bytes merges with them.
  Constant extra;
  extra.info = tensor("extra", DType::F32, {4}, 136);
  extra.data = bytesOf<float>({0, 0, 0, 0});
  p.constants.push_back(extra);
  std::vector<rt::ByteRange> held = rt::heldRanges(p);
  ASSERT_EQ(held.size(), 4u);
  EXPECT_EQ(held[0].begin, 0u);
  EXPECT_EQ(held[0].end, 16u);
  EXPECT_EQ(held[1].begin, 64u);
  EXPECT_EQ(held[1].end, 80u);
  EXPECT_EQ(held[2].begin, 128u);
  EXPECT_EQ(held[2].end, 152u);
  EXPECT_EQ(held[3].begin, 448u);
  EXPECT_EQ(held[3].end, 456u);
  std::vector<rt::ByteRange> poisoned = rt::poisonRanges(p);
  ASSERT_EQ(poisoned.size(), 4u);
  EXPECT_EQ(poisoned[0].begin, 16u);
  EXPECT_EQ(poisoned[0].end, 64u);
  EXPECT_EQ(poisoned[3].begin, 456u);
  EXPECT_EQ(poisoned[3].end, 512u);
}

TEST(MeasureMemory, PoisonIsNeverZeroOrAllOnesAndVaries) {
  std::set<int> seen;
  for (uint64_t at = 0; at < 4096; ++at) {
    uint8_t b = rt::poisonByte(at);
    EXPECT_NE(b, 0x00);
    EXPECT_NE(b, 0xFF);
    seen.insert(b);
  }
  EXPECT_GT(seen.size(), 200u);
}

TEST(MeasureMemory, KnownRanges) {
  Loaded l(knownRangesPlan());
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set<float>(0, {1.5f, -2.5f, 3.5f, 4.5f})) << l.error;
  ASSERT_TRUE(l.take(cleave_rt_executor_measure_memory(l.executor, 1)));
  ASSERT_TRUE(l.run()) << l.error;
  cleave_rt_memory_usage_t u = usageOf(l);
  EXPECT_EQ(u.arena_bytes, 512u);
  // x, c, w and the init value.
  EXPECT_EQ(u.held_bytes, 16u + 16u + 16u + 8u);
  // [256, 288), [320, 328), [336, 344), [400, 408); the state's update is
  // held, not counted.
  EXPECT_EQ(u.written_bytes, 32u + 8u + 8u + 8u);
  EXPECT_EQ(u.high_water_mark, 408u);
  // The poison spared what the run reads.
  EXPECT_EQ(l.out<float>(0), (std::vector<float>{1.5f, -2.5f, 3.5f, 4.5f, 10.5f,
                                                 -20.25f, 30.125f, 7.75f}));
  EXPECT_EQ(l.out<uint8_t>(1), std::vector<uint8_t>(8, 0xFF));
  EXPECT_EQ(l.out<uint8_t>(2), std::vector<uint8_t>(8, 5));
  EXPECT_EQ(l.out<float>(3), (std::vector<float>{1.5f, -2.5f, 3.5f, 4.5f}));

  // A second measured run finds the same (the state keeps its new value).
  ASSERT_TRUE(l.run()) << l.error;
  u = usageOf(l);
  EXPECT_EQ(u.written_bytes, 56u);
  EXPECT_EQ(u.high_water_mark, 408u);
  EXPECT_EQ(l.out<float>(3), (std::vector<float>{1.5f, -2.5f, 3.5f, 4.5f}));
}

TEST(MeasureMemory, CopiedPoisonCountsAsWritten) {
  // Bytes never written copied elsewhere: each byte's poison depends on its
  // offset, so the copy no longer matches the poison of its new place.
  Plan p;
  p.arenaBytes = 512;
  p.commands = {makeCommand(CommandKind::Copy, {64}, {256, 128})};
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.take(cleave_rt_executor_measure_memory(l.executor, 1)));
  ASSERT_TRUE(l.run()) << l.error;
  cleave_rt_memory_usage_t u = usageOf(l);
  EXPECT_EQ(u.held_bytes, 0u);
  EXPECT_EQ(u.written_bytes, 64u);
  EXPECT_EQ(u.high_water_mark, 192u);
}

TEST(MeasureMemory, NothingWritten) {
  Plan p;
  p.arenaBytes = 128;
  p.inputs = {tensor("x", DType::F32, {4}, 0)};
  p.outputs = {tensor("y", DType::F32, {4}, 0)};
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set<float>(0, {1, 2, 3, 4})) << l.error;
  ASSERT_TRUE(l.take(cleave_rt_executor_measure_memory(l.executor, 1)));
  ASSERT_TRUE(l.run()) << l.error;
  cleave_rt_memory_usage_t u = usageOf(l);
  EXPECT_EQ(u.held_bytes, 16u);
  EXPECT_EQ(u.written_bytes, 0u);
  EXPECT_EQ(u.high_water_mark, 0u);
}

TEST(MeasureMemory, OnlyWhenAsked) {
  Loaded l(knownRangesPlan());
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set<float>(0, {1, 2, 3, 4})) << l.error;
  cleave_rt_memory_usage_t u;
  cleave_rt_status s = cleave_rt_executor_memory_usage(l.executor, &u);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_FAILED_PRECONDITION);
  EXPECT_EQ(statusText(s), "no run of this executor was measured (call "
                           "cleave_rt_executor_measure_memory before a run)");
  // Switched on and off again: the run is not measured.
  ASSERT_TRUE(l.take(cleave_rt_executor_measure_memory(l.executor, 1)));
  ASSERT_TRUE(l.take(cleave_rt_executor_measure_memory(l.executor, 0)));
  ASSERT_TRUE(l.run()) << l.error;
  s = cleave_rt_executor_memory_usage(l.executor, &u);
  ASSERT_NE(s, nullptr);
  cleave_rt_status_free(s);
  s = cleave_rt_executor_measure_memory(nullptr, 1);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_INVALID_ARGUMENT);
  cleave_rt_status_free(s);
}

TEST(MeasureMemory, Line) {
  cleave_rt_memory_usage_t u = {929792, 65536, 850000, 912384};
  EXPECT_EQ(training::memoryLine(1, 1, u, "step"),
            "memory: rank 1 (stage 1): step wrote up to 912384 of 929792 "
            "arena bytes (98.1%); 850000 bytes written, 65536 held by "
            "constants, states and inputs");
  EXPECT_EQ(training::memoryLine(0, -1, u, "run"),
            "memory: rank 0: run wrote up to 912384 of 929792 arena bytes "
            "(98.1%); 850000 bytes written, 65536 held by constants, states "
            "and inputs");
}

//===----------------------------------------------------------------------===//
// cleave-run --measure-memory
//===----------------------------------------------------------------------===//

namespace {

/// A pp=2 plan: stage 0 copies x (at 0) to 128 and sends it; stage 1
/// receives it at 128 and copies it to its y (at 64). Arenas of 256 bytes.
Plan twoStageCopyPlan() {
  Mesh mesh{{"pp"}, {2}};
  auto skeleton = [&] {
    Plan s;
    s.arenaBytes = 256;
    s.mesh = mesh;
    s.inputs.push_back(tensor("x", DType::F32, {4}, 0));
    s.outputs.push_back(tensor("y", DType::F32, {4}, 64));
    s.outputs.back().sharding = {{0}};
    return s;
  };
  auto pointToPoint = [](CollectiveOp op) {
    Command c;
    c.kind = CommandKind::Collective;
    c.buffers = {128};
    c.collective.op = op;
    c.collective.axes = {0};
    c.collective.count = 4;
    c.collective.root = 0;
    c.collective.peer = 1;
    c.collective.source = "test";
    return c;
  };
  Plan p;
  p.mesh = mesh;
  Plan s0 = skeleton(), s1 = skeleton();
  s0.commands = {makeCommand(CommandKind::Copy, {16}, {0, 128}),
                 pointToPoint(CollectiveOp::Send)};
  s1.commands = {pointToPoint(CollectiveOp::Recv),
                 makeCommand(CommandKind::Copy, {16}, {128, 64})};
  p.stages = {s0, s1};
  return p;
}

} // namespace

TEST(MeasureMemory, CleaveRunPrintsEveryRank) {
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFile(dir.file("p.cleave"), twoStageCopyPlan(), &err)) << err;
  std::vector<float> x = {1.5f, 2.5f, 3.5f, 4.5f};
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("x.npy"), DType::F32, {4},
                                       x.data(), 16, &err));
  std::string plan = "'" + dir.file("p.cleave") + "' '" + dir.file("x.npy") +
                     "' --no-output --ranks 2";
  Result r = runTool(dir, plan + " --repeat 2 --measure-memory");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "memory: rank 0 (stage 0): run wrote up to 144 of 256 arena bytes "
            "(56.2%); 16 bytes written, 16 held by constants, states and "
            "inputs\n"
            "memory: rank 1 (stage 1): run wrote up to 144 of 256 arena bytes "
            "(56.2%); 32 bytes written, 16 held by constants, states and "
            "inputs\n");

  // The cuda backend's arena is in device memory.
  r = runTool(dir, plan + " --measure-memory --backend cuda");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --measure-memory fills and reads back the "
                       "arena in host memory, so it runs on the cpu backend "
                       "only, not on --backend cuda"),
            std::string::npos)
      << r.err;
}
