//===- EntryTest.cpp - Named entries and varying states of a plan ---------===//
//
// Hand-built plans over a dp=2 mesh whose step holds a state that varies
// over dp and whose entry "sync" borrows it (local SGD's averaging). They
// check the version-6 format (round trip, refusals naming the entry and
// field, damaged entries), and the C API's entry handles and replicas.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <gtest/gtest.h>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// A step over dp=2 with parameter w [4] at 0 (varying over dp) and an
/// entry "sync" run every 3 steps that averages it over dp.
Plan planWithSync() {
  Mesh mesh{{"dp"}, {2}};
  Plan p;
  p.mesh = mesh;
  p.arenaBytes = 128;
  StateTensor w{tensor("w", DType::F32, {4}, 0), StateKind::Parameter, "w", ""};
  w.varyingAxes = {0};
  p.states = {w};
  p.constants.push_back({tensor("w", DType::F32, {4}, 0),
                         bytesOf(std::vector<float>{1, 2, 3, 4})});
  p.commands = {makeCommand(CommandKind::Fill, {16, 0}, {64})};
  p.training.syncEvery = 3;
  Plan sync;
  sync.entryName = kSyncEntry;
  sync.mesh = mesh;
  sync.arenaBytes = 64;
  sync.states = {w};
  Command avg;
  avg.kind = CommandKind::Collective;
  avg.buffers = {0, 0};
  avg.collective.op = CollectiveOp::AllReduce;
  avg.collective.reduce = ReduceOp::Avg;
  avg.collective.axes = {0};
  avg.collective.count = 4;
  avg.collective.source = "test average";
  sync.commands = {avg};
  p.entries = {sync};
  return p;
}

std::string validationError(const Plan &p) {
  std::string err;
  EXPECT_FALSE(validate(p, &err));
  return err;
}

} // namespace

TEST(EntryFormat, RoundTrip) {
  Plan p = planWithSync();
  std::string err;
  ASSERT_TRUE(validate(p, &err)) << err;
  std::vector<uint8_t> bytes = serialize(p);
  Plan q;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &err)) << err;
  EXPECT_EQ(q.training.syncEvery, 3);
  ASSERT_EQ(q.entries.size(), 1u);
  EXPECT_EQ(q.entries[0].entryName, "sync");
  EXPECT_EQ(q.states[0].varyingAxes, std::vector<uint32_t>{0});
  EXPECT_EQ(q.entries[0].states[0].varyingAxes, std::vector<uint32_t>{0});
  ASSERT_NE(q.entry("sync"), nullptr);
  EXPECT_EQ(q.entry("other"), nullptr);
  EXPECT_EQ(serialize(q), bytes);
}

TEST(EntryFormat, ValidatorRefusals) {
  Plan p = planWithSync();
  p.entries[0].states[0].info.shape = {2};
  EXPECT_EQ(validationError(p),
            "entry 'sync': state 0 'w' is a parameter float32 of local shape "
            "1-d varying over {'dp'} that differs from the plan's state of "
            "that name (kind, dtype, shape, sharding and varying axes must "
            "agree)");
  p = planWithSync();
  p.entries[0].states[0].parameter = "v";
  EXPECT_EQ(validationError(p),
            "entry 'sync': state 0 'v' is not a state of the plan (an entry "
            "borrows the plan's states)");
  p = planWithSync();
  p.entries[0].constants.push_back(
      {tensor("w", DType::F32, {4}, 0), std::vector<uint8_t>(16, 0)});
  EXPECT_EQ(validationError(p),
            "entry 'sync': state 0 'w' has an initial value (an entry's "
            "states are copied in from the plan's)");
  p = planWithSync();
  p.entries[0].inputs.push_back(tensor("x", DType::F32, {4}, 16));
  EXPECT_EQ(validationError(p),
            "entry 'sync': has 1 inputs (an entry runs on states alone)");
  p = planWithSync();
  p.entries.push_back(p.entries[0]);
  EXPECT_EQ(validationError(p),
            "entry 'sync': the name is given to two entries");
  p = planWithSync();
  p.entries[0].mesh = Mesh{{"dp"}, {4}};
  EXPECT_EQ(validationError(p),
            "entry 'sync': its mesh 'dp=4' differs from the plan's 'dp=2'");
  p = planWithSync();
  p.entries[0].entryName = "average";
  EXPECT_EQ(validationError(p),
            "training field 'sync_every' is 3 but the plan has no entry "
            "'sync' to run");
  p = planWithSync();
  p.training.syncEvery = -1;
  EXPECT_EQ(validationError(p),
            "training field 'sync_every' is -1 (expected 0, or the steps "
            "between runs of entry 'sync')");
  p = planWithSync();
  p.states[0].varyingAxes = {3};
  EXPECT_EQ(validationError(p),
            "state 0 'w' varies over mesh axis 3, but the mesh (dp=2) has 1 "
            "axes");
  p = planWithSync();
  p.states[0].info.sharding = {{0}};
  p.entries.clear();
  p.training.syncEvery = 0;
  EXPECT_EQ(validationError(p),
            "state 0 'w' varies over mesh axis 0 ('dp'), which also splits "
            "it: a state varies only over axes that do not shard it");
  // An entry is checked as a plan of its own.
  p = planWithSync();
  p.entries[0].commands[0].buffers = {4096, 0};
  EXPECT_EQ(validationError(p).rfind("entry 'sync': ", 0), 0u)
      << validationError(p);
}

TEST(EntryFormat, DamagedEntriesAreRefused) {
  Plan p = planWithSync();
  std::vector<uint8_t> good = serialize(p);
  // Every prefix and every flipped byte fails cleanly or decodes a valid
  // plan.
  for (size_t n = 0; n < good.size(); ++n) {
    Plan out;
    std::string err;
    EXPECT_FALSE(deserialize(good.data(), n, &out, &err));
  }
  // An entry holding entries of its own (serialize nests what it is given).
  Plan nested = planWithSync();
  nested.entries[0].entries = {nested.entries[0]};
  std::vector<uint8_t> bytes = serialize(nested);
  Plan out;
  std::string err;
  EXPECT_FALSE(deserialize(bytes.data(), bytes.size(), &out, &err));
  EXPECT_EQ(err, "entry 'sync': holds entries of its own (entries do not "
                 "nest)");
}

TEST(EntryApi, HandlesAndReplicas) {
  TempDir dir;
  std::string path = dir.file("sync.cleave");
  std::string err;
  ASSERT_TRUE(writeFile(path, planWithSync(), &err)) << err;
  cleave_rt_program program = nullptr;
  ASSERT_EQ(cleave_rt_program_load_file(path.c_str(), &program), nullptr);
  EXPECT_EQ(cleave_rt_program_entry_count(program), 1u);
  cleave_rt_training_info_t info;
  ASSERT_EQ(cleave_rt_program_training_info(program, &info), nullptr);
  EXPECT_EQ(info.sync_every, 3);
  int64_t replicas = 0, replica = -1;
  ASSERT_EQ(cleave_rt_program_state_replica(program, 0, 1, &replicas, &replica),
            nullptr);
  EXPECT_EQ(replicas, 2);
  EXPECT_EQ(replica, 1);
  cleave_rt_program entry = nullptr;
  ASSERT_EQ(cleave_rt_program_entry(program, "sync", &entry), nullptr);
  EXPECT_EQ(cleave_rt_program_entry_count(entry), 0u);
  EXPECT_EQ(cleave_rt_program_state_count(entry), 1u);
  EXPECT_EQ(cleave_rt_program_command_count(entry), 1u);
  cleave_rt_program none = nullptr;
  cleave_rt_status s = cleave_rt_program_entry(program, "other", &none);
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(cleave_rt_status_message(s), "the plan has no entry 'other'");
  cleave_rt_status_free(s);
  cleave_rt_program_destroy(entry);
  cleave_rt_program_destroy(program);
}
