//===- PipelineTest.cpp - Pipelined plans: format, runs, markers, MPI -----===//
//
// Hand-built plans over a pp=2 mesh: stage 0 sends to stage 1. They check
// the v5 format (round trip, version 4 still read, refusals naming the
// stage and field), the C API's stage handles, runs on threads and under
// mpirun, the step markers and cleave-run --trace, and training with
// checkpoints, resume and exports of a plan whose stages hold different
// states.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "cleave/Checkpoint.h"
#include "cleave/FileUtil.h"
#include "cleave/Json.h"
#include "cleave/PipelineTrace.h"
#include "cleave/Safetensors.h"
#include "cleave/TensorFile.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <thread>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

Command marker(int64_t index, int64_t phase) {
  return makeCommand(CommandKind::Marker, {index, phase}, {});
}

/// A send (or receive) of `count` floats over the pp axis (axis `ppAxis`),
/// from group index `from` to `to`.
Command pointToPoint(CollectiveOp op, uint64_t buffer, int64_t count,
                     int64_t from, int64_t to, uint32_t id, uint32_t ppAxis = 0,
                     DType dtype = DType::F32) {
  Command c;
  c.kind = CommandKind::Collective;
  c.buffers = {buffer};
  c.collective.op = op;
  c.collective.dtype = dtype;
  c.collective.axes = {ppAxis};
  c.collective.count = count;
  c.collective.root = from;
  c.collective.peer = to;
  c.collective.id = id;
  c.collective.source = "test " + std::string(collectiveOpName(op));
  return c;
}

/// The interface every stage of the small plans shares: input x [4] at 0,
/// output y [4] at 64, split over pp (global [8]: stage c's y is rows
/// 4c..4c+3).
Plan stageSkeleton(const Mesh &mesh) {
  Plan s;
  s.arenaBytes = 256;
  s.mesh = mesh;
  s.inputs.push_back(tensor("x", DType::F32, {4}, 0));
  s.outputs.push_back(tensor("y", DType::F32, {4}, 64));
  s.outputs.back().sharding = {{static_cast<uint32_t>(pipelineAxis(mesh))}};
  return s;
}

/// Stage 0 copies x and sends it to stage 1 (step F0), then fills a buffer
/// (F1); stage 1 receives into its y (F0), then fills (B0). Stage 0's y
/// stays zero.
Plan twoStagePlan() {
  Mesh mesh{{"pp"}, {2}};
  Plan p;
  p.mesh = mesh;
  p.metadata = {{"name", "two-stage"}};
  Plan s0 = stageSkeleton(mesh);
  s0.metadata = {{meta::kPipelineSteps.name, "F0,F1"}};
  s0.commands = {marker(0, 0),
                 makeCommand(CommandKind::Copy, {16}, {0, 128}),
                 pointToPoint(CollectiveOp::Send, 128, 4, 0, 1, 0),
                 marker(0, 1),
                 marker(1, 0),
                 makeCommand(CommandKind::Fill, {16, 7}, {192}),
                 marker(1, 1)};
  Plan s1 = stageSkeleton(mesh);
  s1.metadata = {{meta::kPipelineSteps.name, "F0,B0"}};
  s1.commands = {marker(0, 0),
                 pointToPoint(CollectiveOp::Recv, 128, 4, 0, 1, 0),
                 makeCommand(CommandKind::Copy, {16}, {128, 64}),
                 marker(0, 1),
                 marker(1, 0),
                 makeCommand(CommandKind::Fill, {16, 9}, {192}),
                 marker(1, 1)};
  p.stages = {s0, s1};
  return p;
}

std::string validationError(const Plan &p) {
  std::string err;
  EXPECT_FALSE(validate(p, &err));
  return err;
}

std::string decodeError(const std::vector<uint8_t> &bytes) {
  Plan out;
  std::string error;
  if (deserialize(bytes.data(), bytes.size(), &out, &error))
    return "";
  return error;
}

/// Rewrites the header's payload size and checksum after a payload edit.
void fixHeader(std::vector<uint8_t> &bytes) {
  uint64_t size = bytes.size() - kHeaderSize;
  uint64_t h = fnv1a64(bytes.data() + kHeaderSize, size);
  for (int i = 0; i < 8; ++i) {
    bytes[16 + i] = static_cast<uint8_t>(size >> (8 * i));
    bytes[24 + i] = static_cast<uint8_t>(h >> (8 * i));
  }
}

std::string statusText(cleave_rt_status s) {
  std::string m = cleave_rt_status_message(s);
  cleave_rt_status_free(s);
  return m;
}

} // namespace

//===----------------------------------------------------------------------===//
// Format
//===----------------------------------------------------------------------===//

TEST(PipelineFormat, RoundTrip) {
  Plan p = twoStagePlan();
  std::string err;
  ASSERT_TRUE(validate(p, &err)) << err;
  std::vector<uint8_t> bytes = serialize(p);
  EXPECT_EQ(bytes[8], kFormatVersion);
  Plan q;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &err)) << err;
  ASSERT_EQ(q.stages.size(), 2u);
  EXPECT_TRUE(q.isPipelined());
  EXPECT_FALSE(q.stages[1].isPipelined());
  EXPECT_EQ(q.stages[1].commands.size(), 7u);
  EXPECT_EQ(q.stages[1].commands[1].collective.op, CollectiveOp::Recv);
  EXPECT_EQ(q.stages[0].commands[4].kind, CommandKind::Marker);
  EXPECT_EQ(q.stages[0].commands[4].params, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(pipelineSteps(q.stages[1]), (std::vector<std::string>{"F0", "B0"}));
  EXPECT_EQ(q.metadata, p.metadata);
  EXPECT_EQ(serialize(q), bytes);
  // Which plan each rank runs: its pp coordinate.
  Mesh mesh{{"dp", "pp"}, {2, 2}};
  p.mesh = mesh;
  for (Plan &s : p.stages) {
    s.mesh = mesh;
    s.outputs[0].sharding = {{1}};
  }
  ASSERT_TRUE(validate(p, &err)) << err;
  EXPECT_EQ(stageOfRank(p, 2), 0);
  EXPECT_EQ(stageOfRank(p, 3), 1);
  EXPECT_EQ(&stagePlanFor(p, 1), &p.stages[1]);
  Plan flat = p.stages[0];
  EXPECT_EQ(&stagePlanFor(flat, 3), &flat);
}

TEST(PipelineFormat, ReadsVersion4) {
  // A plan without stages in version 4: version 7's payload without the
  // version-7 trailer (an empty host kernel object and table), the
  // version-6 trailer (a varying-axes count per state, the sync interval,
  // the entry count) and the stage count at its end.
  Plan p = twoStagePlan().stages[0];
  p.mesh = Mesh();
  p.outputs[0].sharding.clear();
  p.commands = {makeCommand(CommandKind::Copy, {16}, {0, 64})};
  p.metadata.clear();
  std::vector<uint8_t> v7 = serialize(p);
  std::vector<uint8_t> v6(v7.begin(), v7.end() - (8 + 4));
  v6[8] = 6;
  fixHeader(v6);
  size_t trailer = 4 * p.states.size() + 8 + 4;
  std::vector<uint8_t> v5(v6.begin(), v6.end() - trailer);
  v5[8] = 5;
  fixHeader(v5);
  std::vector<uint8_t> v4(v5.begin(), v5.end() - 4);
  v4[8] = 4;
  fixHeader(v4);
  Plan q;
  std::string err;
  ASSERT_TRUE(deserialize(v4.data(), v4.size(), &q, &err)) << err;
  EXPECT_EQ(serialize(q), v7);
  ASSERT_TRUE(deserialize(v5.data(), v5.size(), &q, &err)) << err;
  EXPECT_EQ(serialize(q), v7);
  ASSERT_TRUE(deserialize(v6.data(), v6.size(), &q, &err)) << err;
  EXPECT_EQ(serialize(q), v7);
  // A stage count in a version-4 file is bytes it does not have.
  v5[8] = 4;
  EXPECT_EQ(decodeError(v5), "malformed payload: 4 unread bytes at its end");
  // The committed seed was written by the version-4 compiler.
  std::vector<uint8_t> seed;
  ASSERT_TRUE(readWholeFile(std::string(CLEAVE_SOURCE_DIR) +
                                "/test/fuzz/corpus/plan/mlp.cleave",
                            &seed, &err))
      << err;
  EXPECT_EQ(seed[8], 4);
  ASSERT_TRUE(deserialize(seed.data(), seed.size(), &q, &err)) << err;
  EXPECT_FALSE(q.commands.empty());
  v5[8] = 3;
  EXPECT_EQ(decodeError(v5),
            "unsupported version 3 (this runtime reads versions 4 to 7)");
}

TEST(PipelineFormat, ValidatorRefusals) {
  Plan p = twoStagePlan();
  p.stages.push_back(p.stages[1]);
  EXPECT_EQ(validationError(p),
            "the plan has 3 stage plans but its mesh's 'pp' axis has 2 ranks "
            "(one stage plan per pipeline rank)");

  p = twoStagePlan();
  p.mesh.axisNames = {"dp"};
  for (Plan &s : p.stages)
    s.mesh = p.mesh;
  EXPECT_EQ(validationError(p), "the plan has 2 stage plans but its mesh "
                                "(dp=2) has no 'pp' axis to lay them out over");

  p = twoStagePlan();
  p.stages[1].inputs[0].shape = {5};
  p.stages[1].arenaBytes = 256;
  EXPECT_EQ(validationError(p),
            "stage 1: input 0 'x' has shape [5] but stage 0's has [4] (every "
            "stage has the same inputs)");

  p = twoStagePlan();
  p.stages[1].inputs[0].name = "z";
  EXPECT_EQ(validationError(p),
            "stage 1: input 0 is named 'z' but stage 0's input 0 is named "
            "'x' (every stage has the same inputs)");

  p = twoStagePlan();
  p.stages[1].outputs[0].sharding.clear();
  EXPECT_EQ(validationError(p),
            "stage 1: output 0 'y' is sharded replicated but stage 0's is "
            "[{'pp'}] (every stage has the same outputs)");

  p = twoStagePlan();
  p.stages[0].outputs.push_back(tensor("loss", DType::F32, {}, 224));
  EXPECT_EQ(validationError(p),
            "stage 1: has 1 outputs but stage 0 has 2 (every stage has the "
            "same outputs)");

  p = twoStagePlan();
  p.stages[1].stages = {p.stages[0]};
  EXPECT_EQ(validationError(p),
            "stage 1: holds stage plans of its own (stage plans do not nest)");

  p = twoStagePlan();
  p.stages[0].commands[0].params[0] = 2;
  EXPECT_EQ(validationError(p),
            "stage 0: command 0 (marker): step index 2 is out of range (the "
            "plan names 2 steps in metadata 'pipeline_steps')");

  p = twoStagePlan();
  p.stages[1].commands[3].params[1] = 0; // F0 begins twice
  EXPECT_EQ(validationError(p),
            "stage 1: command 3 (marker): step 0 'F0' begins again before the "
            "begin of command 0 has ended");

  p = twoStagePlan();
  p.stages[1].commands.pop_back();
  EXPECT_EQ(validationError(p),
            "stage 1: command 4 (marker): step 1 'B0' begins and never ends");

  p = twoStagePlan();
  p.stages[0].commands[0].params[1] = 1;
  EXPECT_EQ(validationError(p), "stage 0: command 0 (marker): step 0 'F0' "
                                "ends without having begun");

  p = twoStagePlan();
  p.stages[0].initCommands = {marker(0, 0)};
  EXPECT_EQ(validationError(p),
            "stage 0: init command 0 (marker): markers belong to the step's "
            "commands, not to the init commands");

  p = twoStagePlan();
  p.stages[0].metadata = {{meta::kPipelineSteps.name, "F0,,F1"}};
  EXPECT_EQ(validationError(p),
            "stage 0: metadata 'pipeline_steps': step 1 has an empty name");

  p = twoStagePlan();
  p.commands = {makeCommand(CommandKind::Copy, {0}, {0, 0})};
  EXPECT_EQ(validationError(p),
            "a pipelined plan keeps its programs in its stages, but the top "
            "level has 1 commands (expected none)");

  p = twoStagePlan();
  p.stages[1].mesh.shape = {3};
  EXPECT_EQ(validationError(p), "stage 1: its mesh 'pp=3' differs from the "
                                "plan's 'pp=2' (every stage runs on the "
                                "plan's mesh)");

  p = twoStagePlan();
  p.stages[1].target = "cpu-aarch64";
  EXPECT_EQ(validationError(p), "stage 1: targets 'cpu-aarch64' but the plan "
                                "targets 'cpu-x86_64'");

  p = twoStagePlan();
  p.stages[0].training.enabled = true;
  p.stages[0].training.lrInput = 0;
  p.stages[0].inputs[0].shape = {1};
  for (Plan &s : p.stages)
    s.inputs[0].shape = {1};
  p.stages[1].training = p.stages[0].training;
  p.stages[0].outputs.push_back(tensor("loss", DType::F32, {}, 224));
  p.stages[1].outputs.push_back(tensor("loss", DType::F32, {}, 224));
  p.stages[0].training.lossOutput = 1;
  p.stages[1].training.lossOutput = 1;
  p.stages[1].training.baseLR = 0.5;
  EXPECT_EQ(validationError(p),
            "stage 1: training field 'base_lr' is 0.5 but stage 0's is "
            "0.001 (every stage has the same training record)");

  // A state held by two stages is one tensor.
  p = twoStagePlan();
  p.stages[0].states = {
      {tensor("w0", DType::F32, {4}, 224), StateKind::Parameter, "tied", ""}};
  p.stages[1].states = {
      {tensor("w1", DType::F32, {2}, 224), StateKind::Parameter, "tied", ""}};
  EXPECT_EQ(validationError(p),
            "stage 1: state 0 'tied' is a parameter float32 [2] but stage 0 "
            "holds it as a parameter float32 [4] (a state held by several "
            "stages, such as a tied parameter, is the same tensor in each)");
  // Split over pp in stage 1, it has the same global shape: accepted.
  p.stages[1].states[0].info.sharding = {{0}};
  std::string err;
  EXPECT_TRUE(validate(p, &err)) << err;
}

TEST(PipelineFormat, DamagedStagesAreRefusedNamingTheStage) {
  Plan p = twoStagePlan();
  std::vector<uint8_t> good = serialize(p);
  // The last stage's blob is followed only by the version-6 trailer of a
  // top level without states (the sync interval and the entry count) and
  // the version-7 one (an empty host kernel object and table):
  // [u64 length][stage 1 payload][i64][u32][u64][u32].
  const size_t trailer = 12 + 12;
  size_t stage1 = serialize(p.stages[1]).size() - kHeaderSize;
  size_t lengthAt = good.size() - trailer - stage1 - 8;
  auto withLength = [&](uint64_t n) {
    std::vector<uint8_t> b = good;
    for (int i = 0; i < 8; ++i)
      b[lengthAt + i] = static_cast<uint8_t>(n >> (8 * i));
    fixHeader(b);
    return b;
  };
  EXPECT_EQ(decodeError(withLength(stage1 + trailer + 1)),
            "truncated: stage 1 length needs " +
                std::to_string(stage1 + trailer + 1) + " bytes but only " +
                std::to_string(stage1 + trailer) + " remain");
  std::string err = decodeError(withLength(stage1 - 4));
  EXPECT_EQ(err.rfind("stage 1: truncated: ", 0), 0u) << err;
  // A nested stage (written by hand: serialize nests what it is given).
  Plan nested = twoStagePlan();
  nested.stages[1].stages = {nested.stages[0]};
  EXPECT_EQ(decodeError(serialize(nested)),
            "stage 1: holds stage plans of its own (stage plans do not nest)");
  // A stage count the payload cannot hold.
  std::vector<uint8_t> bytes = serialize(Plan());
  for (int i = 0; i < 4; ++i)
    bytes[bytes.size() - trailer - 4 + i] = 0xff;
  fixHeader(bytes);
  EXPECT_EQ(
      decodeError(bytes).rfind("truncated: stage list says 4294967295", 0), 0u);
  // Every prefix and every flipped byte fails cleanly or decodes a valid
  // plan.
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(decodeError({good.begin(), good.begin() + n}).empty());
  for (size_t i = kHeaderSize; i < good.size(); ++i)
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> b = good;
      b[i] ^= mask;
      fixHeader(b);
      Plan out;
      std::string e;
      if (!deserialize(b.data(), b.size(), &out, &e))
        EXPECT_FALSE(e.empty());
      else
        EXPECT_TRUE(validate(out, &e)) << e;
    }
}

//===----------------------------------------------------------------------===//
// The C API
//===----------------------------------------------------------------------===//

TEST(PipelineApi, StageHandles) {
  std::vector<uint8_t> bytes = serialize(twoStagePlan());
  cleave_rt_program program = nullptr;
  ASSERT_EQ(cleave_rt_program_load_memory(bytes.data(), bytes.size(), &program),
            nullptr);
  EXPECT_EQ(cleave_rt_program_stage_count(program), 2u);
  EXPECT_EQ(cleave_rt_program_world_size(program), 2u);
  // The shared interface, the summed commands, the largest arena.
  EXPECT_EQ(cleave_rt_program_input_count(program), 1u);
  EXPECT_EQ(cleave_rt_program_command_count(program), 14u);
  EXPECT_EQ(cleave_rt_program_marker_count(program), 8u);
  EXPECT_EQ(cleave_rt_program_collective_count(program), 2u);
  EXPECT_EQ(cleave_rt_program_peak_bytes(program), 256u);
  EXPECT_EQ(cleave_rt_program_state_count(program), 0u);
  cleave_rt_state_desc_t desc;
  cleave_rt_status s = cleave_rt_program_state_desc(program, 0, &desc);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(statusText(s), "the plan is pipelined over pp=2 (mesh pp=2, 2 "
                           "ranks): its states are per stage "
                           "(cleave_rt_program_stage)");
  // One rank cannot run it.
  cleave_rt_executor e = nullptr;
  s = cleave_rt_executor_create(program, "cpu", &e);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_FAILED_PRECONDITION);
  EXPECT_EQ(statusText(s),
            "the plan is pipelined over pp=2 (mesh pp=2, 2 ranks): run it on "
            "2 ranks (cleave-run --ranks 2, or mpirun -np 2), each rank "
            "running its stage");

  size_t stage = 9;
  ASSERT_EQ(cleave_rt_program_stage_of_rank(program, 1, &stage), nullptr);
  EXPECT_EQ(stage, 1u);
  cleave_rt_program s1 = nullptr;
  ASSERT_EQ(cleave_rt_program_stage(program, 1, &s1), nullptr);
  EXPECT_EQ(cleave_rt_program_stage_index(s1), 1u);
  EXPECT_EQ(cleave_rt_program_stage_count(s1), 0u);
  EXPECT_EQ(cleave_rt_program_command_count(s1), 7u);
  // Its own metadata, then the file's.
  EXPECT_STREQ(cleave_rt_program_metadata(s1, "pipeline_steps"), "F0,B0");
  EXPECT_STREQ(cleave_rt_program_metadata(s1, "name"), "two-stage");
  EXPECT_EQ(cleave_rt_program_metadata(program, "pipeline_steps"), nullptr);
  // A stage handle runs only its ranks.
  cleave_rt_program other = nullptr;
  s = cleave_rt_program_stage(s1, 0, &other);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(statusText(s), "rank 0 runs stage 0 of the pipeline (its pp "
                           "coordinate), not stage 1");
  s = cleave_rt_program_stage_at(program, 2, &other);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(statusText(s), "stage 2 is out of range (the plan has 2 stages)");
  cleave_rt_program_destroy(s1);
  cleave_rt_program_destroy(program);
}

TEST(PipelineApi, TwoStagesRunOnLocalRanks) {
  std::vector<uint8_t> bytes = serialize(twoStagePlan());
  cleave_rt_program program = nullptr;
  ASSERT_EQ(cleave_rt_program_load_memory(bytes.data(), bytes.size(), &program),
            nullptr);
  cleave_rt_local_world world = nullptr;
  ASSERT_EQ(cleave_rt_local_world_create(2, 20, &world), nullptr);
  std::vector<std::vector<float>> y(2);
  std::vector<std::string> errors(2);
  std::vector<size_t> markers(2);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      cleave_rt_communicator comm = nullptr;
      cleave_rt_executor e = nullptr;
      auto check = [&](cleave_rt_status s) {
        if (s && errors[r].empty())
          errors[r] = statusText(s);
        else if (s)
          cleave_rt_status_free(s);
        return !s;
      };
      std::vector<float> x = {1.5f, -2.0f, 3.25f, 4.0f};
      const void *data = nullptr;
      size_t n = 0;
      const cleave_rt_marker_record_t *records = nullptr;
      int64_t start = 0;
      if (check(cleave_rt_communicator_create_local(world, r, &comm)) &&
          check(cleave_rt_executor_create_ranked(program, "cpu", comm, &e)) &&
          check(cleave_rt_executor_set_input(e, 0, x.data(), 16)) &&
          check(cleave_rt_executor_run(e)) &&
          check(cleave_rt_executor_set_tracing(e, 1)) &&
          check(cleave_rt_executor_run(e)) &&
          check(cleave_rt_executor_output(e, 0, &data, &n)) &&
          check(cleave_rt_executor_markers(e, &records, &markers[r], &start))) {
        const float *f = static_cast<const float *>(data);
        y[r].assign(f, f + n / 4);
      }
      cleave_rt_executor_destroy(e);
      cleave_rt_communicator_destroy(comm);
    });
  for (std::thread &t : threads)
    t.join();
  cleave_rt_local_world_destroy(world);
  cleave_rt_program_destroy(program);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(y[1], (std::vector<float>{1.5f, -2.0f, 3.25f, 4.0f}));
  EXPECT_EQ(y[0], (std::vector<float>{0, 0, 0, 0}));
  // The traced run recorded its 4 markers on each rank.
  EXPECT_EQ(markers, (std::vector<size_t>{4, 4}));
}

//===----------------------------------------------------------------------===//
// cleave-run
//===----------------------------------------------------------------------===//

/// The events of a Chrome trace file: (tid, name) each.
static std::multiset<std::pair<int64_t, std::string>>
traceEvents(const std::string &path, std::string *error) {
  std::multiset<std::pair<int64_t, std::string>> out;
  json::Value doc;
  if (!json::parse(slurp(path), &doc, error))
    return out;
  const json::Value *events = json::get(doc, "traceEvents");
  if (!events || !events->is_array()) {
    *error = "no traceEvents array";
    return out;
  }
  for (const json::Value &e : *events) {
    int64_t tid = -1;
    const json::Value *t = json::get(e, "tid"), *ts = json::get(e, "ts"),
                      *dur = json::get(e, "dur");
    const std::string *ph = json::asString(json::get(e, "ph")),
                      *name = json::asString(json::get(e, "name"));
    if (!ph || *ph != "X" || !name || !t || !json::asInt64(*t, &tid) || !ts ||
        !ts->is_number() || ts->get<double>() < 0 || !dur ||
        !dur->is_number() || dur->get<double>() < 0 || !json::get(e, "pid")) {
      *error = "a malformed event";
      return out;
    }
    out.insert({tid, *name});
  }
  return out;
}

TEST(PipelineRun, ThreadsWithTrace) {
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFile(dir.file("p.cleave"), twoStagePlan(), &err)) << err;
  std::vector<float> x = {1, 2, 3, 4};
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("x.npy"), DType::F32, {4},
                                       x.data(), 16, &err));
  std::string plan = "'" + dir.file("p.cleave") + "' '" + dir.file("x.npy") +
                     "' --output-dir '" + dir.file("out") + "'";
  Result r =
      runTool(dir, plan + " --ranks 2 --repeat 3 --print-stats --trace '" +
                       dir.file("t.json") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("pipeline: measured bubble "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" over 2 ranks (busy "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pipeline stage 1: 7 commands, arena 256 bytes, "
                       "states 0 bytes, 4 markers"),
            std::string::npos)
      << r.out;
  auto events = traceEvents(dir.file("t.json"), &err);
  EXPECT_EQ(err, "");
  std::multiset<std::pair<int64_t, std::string>> want = {
      {0, "F0"}, {0, "F1"}, {1, "F0"}, {1, "B0"}};
  EXPECT_EQ(events, want);
  // y is split over pp: stage 0's part zero, stage 1's the received x.
  tensorfile::HostTensor y;
  ASSERT_TRUE(tensorfile::readTensorFile(dir.file("out/y.npy"), &y, &err))
      << err;
  std::vector<float> values(8);
  ASSERT_EQ(y.data.size(), 32u);
  std::memcpy(values.data(), y.data.data(), 32);
  EXPECT_EQ(values, (std::vector<float>{0, 0, 0, 0, 1, 2, 3, 4}));

  // One rank cannot run it.
  r = runTool(dir, plan);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: the plan is pipelined over pp=2 (mesh pp=2, "
                       "2 ranks, each running its stage): run it with "
                       "--ranks 2 (threads of one process) or under mpirun "
                       "-np 2"),
            std::string::npos)
      << r.err;
  // --trace needs something to measure.
  Plan flat = twoStagePlan().stages[1];
  flat.mesh = Mesh();
  flat.outputs[0].sharding.clear();
  flat.commands = {makeCommand(CommandKind::Copy, {16}, {0, 64})};
  ASSERT_TRUE(writeFile(dir.file("flat.cleave"), flat, &err)) << err;
  r = runTool(dir, "'" + dir.file("flat.cleave") + "' '" + dir.file("x.npy") +
                       "' --no-output --trace '" + dir.file("t2.json") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: --trace needs a pipelined plan or a plan with "
                       "step markers, and this plan has neither"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fileExists(dir.file("t2.json")));
}

/// A 1.5 MiB message each way, both ranks sending before they receive:
/// blocking sends would deadlock once messages pass MPI's eager limit.
Plan exchangePlan() {
  const int64_t n = 3 << 19; // bytes
  Mesh mesh{{"pp"}, {2}};
  Plan p;
  p.mesh = mesh;
  for (int c = 0; c < 2; ++c) {
    Plan s;
    s.mesh = mesh;
    s.arenaBytes = 3 * n;
    s.outputs.push_back(tensor("y", DType::U8, {n}, 0));
    s.outputs.back().sharding = {{0}};
    s.metadata = {{meta::kPipelineSteps.name, c == 0 ? "F0" : "B0"}};
    s.commands = {
        marker(0, 0),
        makeCommand(CommandKind::Fill, {n, c == 0 ? 0x11 : 0x22}, {n}),
        pointToPoint(CollectiveOp::Send, n, n, c, 1 - c, 0, 0, DType::U8),
        pointToPoint(CollectiveOp::Recv, 2 * n, n, 1 - c, c, 1, 0, DType::U8),
        makeCommand(CommandKind::Copy, {n}, {2 * n, 0}),
        marker(0, 1)};
    p.stages.push_back(s);
  }
  return p;
}

TEST(PipelineRun, SendsNeverBlockUnderMpi) {
#if !CLEAVE_TEST_HAVE_MPI
  GTEST_SKIP() << "the runtime was built without MPI";
#else
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no mpirun";
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFile(dir.file("x.cleave"), exchangePlan(), &err)) << err;
  const std::string mpirun =
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun --oversubscribe -np 2 ";
  std::string cmd = mpirun + "'" + std::string(CLEAVE_RUN_PATH) + "' '" +
                    dir.file("x.cleave") +
                    "' --comm-timeout 30 --repeat 2 "
                    "--output-dir '" +
                    dir.file("out") + "' --trace '" + dir.file("t.json") +
                    "' >'" + dir.file("stdout") + "' 2>'" + dir.file("stderr") +
                    "'";
  int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << slurp(dir.file("stderr"));
  EXPECT_NE(slurp(dir.file("stdout")).find("pipeline: measured bubble "),
            std::string::npos);
  tensorfile::HostTensor y;
  ASSERT_TRUE(tensorfile::readTensorFile(dir.file("out/y.npy"), &y, &err))
      << err;
  const size_t n = 3 << 19;
  ASSERT_EQ(y.data.size(), 2 * n);
  // Rank 0 received rank 1's bytes and the other way round.
  EXPECT_EQ(std::count(y.data.begin(), y.data.begin() + n, 0x22),
            static_cast<long>(n));
  EXPECT_EQ(std::count(y.data.begin() + n, y.data.end(), 0x11),
            static_cast<long>(n));
  auto events = traceEvents(dir.file("t.json"), &err);
  EXPECT_EQ(err, "");
  std::multiset<std::pair<int64_t, std::string>> want = {{0, "F0"}, {1, "B0"}};
  EXPECT_EQ(events, want);
#endif
}

TEST(PipelineRun, AReceiverThatNeverComesIsNamedUnderMpi) {
#if !CLEAVE_TEST_HAVE_MPI
  GTEST_SKIP() << "the runtime was built without MPI";
#else
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no mpirun";
  // Stage 1 never receives stage 0's 1.5 MiB: the send does not block, but
  // the end of the run waits for its delivery and names the receiver.
  Plan p = exchangePlan();
  p.stages[0].commands.erase(p.stages[0].commands.begin() + 3,
                             p.stages[0].commands.begin() + 5);
  p.stages[1].commands = {marker(0, 0), marker(0, 1)};
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFile(dir.file("x.cleave"), p, &err)) << err;
  std::string cmd =
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun --oversubscribe -np 2 '" +
      std::string(CLEAVE_RUN_PATH) + "' '" + dir.file("x.cleave") +
      "' --comm-timeout 2 --no-output >'" + dir.file("stdout") + "' 2>'" +
      dir.file("stderr") + "'";
  int status = std::system(cmd.c_str());
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string errText = slurp(dir.file("stderr"));
  EXPECT_NE(errText.find("rank 0: error: rank 1 never reached the recv "
                         "matching send #0 (test send) within the 2 s "
                         "communication timeout"),
            std::string::npos)
      << errText;
#endif
}

TEST(PipelineRun, LocalExchangeBothSendFirst) {
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFile(dir.file("x.cleave"), exchangePlan(), &err)) << err;
  Result r = runTool(dir, "'" + dir.file("x.cleave") +
                              "' --ranks 2 "
                              "--comm-timeout 30 --output-dir '" +
                              dir.file("out") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  tensorfile::HostTensor y;
  ASSERT_TRUE(tensorfile::readTensorFile(dir.file("out/y.npy"), &y, &err))
      << err;
  const size_t n = 3 << 19;
  ASSERT_EQ(y.data.size(), 2 * n);
  EXPECT_EQ(std::count(y.data.begin(), y.data.begin() + n, 0x22),
            static_cast<long>(n));
  EXPECT_EQ(std::count(y.data.begin() + n, y.data.end(), 0x11),
            static_cast<long>(n));
}

//===----------------------------------------------------------------------===//
// Training: checkpoints, resume and exports across stages
//===----------------------------------------------------------------------===//

namespace {
/// y = lr * x (1x1 @ 1x4) added into C at `c`: the Gemm of the updates.
Command addScaled(uint64_t lr, uint64_t x, uint64_t c) {
  return gemm(DType::F32, false, false, 1, 4, 1, lr, x, c, 1, 0, 0, 0, 1.0,
              1.0);
}

Constant constant(const std::string &name, uint64_t offset,
                  std::vector<float> values) {
  Constant c;
  c.info =
      tensor(name, DType::F32, {static_cast<int64_t>(values.size())}, offset);
  c.data = bytesOf(values);
  return c;
}

/// A two-stage SGD-like plan: stage 0 holds a and tied, adds lr * x to both
/// and sends a; stage 1 receives a, computes loss = sum(a) and sends it
/// back, and holds b, its momentum and tied, adding lr * a (b and the
/// momentum) and lr * x (tied). Every step's loss: sum(a0) + k lr sum(x).
Plan pipelinedTrainingPlan(Mesh mesh = {{"pp"}, {2}}) {
  uint32_t pp = static_cast<uint32_t>(pipelineAxis(mesh));
  Plan p;
  p.mesh = mesh;
  p.metadata = {{"name", "pipelined-sgd"}};
  TrainingInfo t;
  t.enabled = true;
  t.optimizer = "sgd";
  t.lrInput = 1;
  t.lossOutput = 0;
  t.baseLR = 0.5;
  t.batchSize = 1;
  t.dataInputs = {0};
  for (int c = 0; c < 2; ++c) {
    Plan s;
    s.mesh = mesh;
    s.training = t;
    s.inputs = {tensor("x", DType::F32, {1, 4}, 0),
                tensor("lr", DType::F32, {}, 64)};
    s.outputs = {tensor("loss", DType::F32, {}, 128)};
    s.metadata = {{meta::kPipelineSteps.name, "F0,B0"}};
    StateTensor tied{tensor("tied", DType::F32, {4}, 256), StateKind::Parameter,
                     "tied", ""};
    s.constants.push_back(constant("tied", 256, {1, 1, 1, 1}));
    if (c == 0) {
      s.arenaBytes = 320;
      s.states = {
          {tensor("a", DType::F32, {4}, 192), StateKind::Parameter, "a", ""},
          tied};
      s.constants.push_back(constant("a", 192, {0, 1, 2, 3}));
      s.commands = {marker(0, 0),
                    addScaled(64, 0, 192),
                    addScaled(64, 0, 256),
                    pointToPoint(CollectiveOp::Send, 192, 4, 0, 1, 0, pp),
                    marker(0, 1),
                    marker(1, 0),
                    pointToPoint(CollectiveOp::Recv, 128, 1, 1, 0, 1, pp),
                    marker(1, 1)};
    } else {
      s.arenaBytes = 512;
      s.states = {
          {tensor("b", DType::F32, {4}, 192), StateKind::Parameter, "b", ""},
          tied,
          {tensor("b_m", DType::F32, {4}, 320), StateKind::OptimizerState, "b",
           "momentum"}};
      Constant ones = constant("ones", 384, {1, 1, 1, 1});
      ones.info.shape = {4, 1};
      s.constants.push_back(ones);
      s.initCommands = {makeCommand(CommandKind::Fill, {16, 0}, {320})};
      s.commands = {marker(0, 0),
                    pointToPoint(CollectiveOp::Recv, 448, 4, 0, 1, 0, pp),
                    gemm(DType::F32, false, false, 1, 1, 4, 448, 384, 128),
                    marker(0, 1),
                    marker(1, 0),
                    pointToPoint(CollectiveOp::Send, 128, 1, 1, 0, 1, pp),
                    addScaled(64, 448, 192),
                    addScaled(64, 448, 320),
                    addScaled(64, 0, 256),
                    marker(1, 1)};
    }
    p.stages.push_back(s);
  }
  return p;
}

/// The same step as pipelinedTrainingPlan() in one plan for one rank.
Plan unpipelinedTrainingPlan() {
  Plan one = pipelinedTrainingPlan().stages[1];
  one.mesh = Mesh();
  one.arenaBytes = 512;
  one.states = {
      {tensor("a", DType::F32, {4}, 448), StateKind::Parameter, "a", ""},
      one.states[1],
      one.states[0],
      one.states[2]};
  one.constants.push_back(constant("a", 448, {0, 1, 2, 3}));
  one.commands = {addScaled(64, 0, 448), addScaled(64, 0, 256),
                  gemm(DType::F32, false, false, 1, 1, 4, 448, 384, 128),
                  addScaled(64, 448, 192), addScaled(64, 448, 320)};
  one.metadata.clear();
  return one;
}

/// The tensor `name` of a safetensors file image as floats.
std::vector<float> safetensor(const std::string &file,
                              const std::string &name) {
  safetensors::Header h;
  std::string err;
  const uint8_t *p = reinterpret_cast<const uint8_t *>(file.data());
  if (!safetensors::decodeHeader(p, file.size(), file.size(), &h, &err))
    return {};
  for (const safetensors::TensorEntry &t : h.tensors)
    if (t.name == name) {
      std::vector<float> v((t.end - t.begin) / 4);
      std::memcpy(v.data(), p + h.dataStart + t.begin, t.end - t.begin);
      return v;
    }
  return {};
}

/// A protobuf length-delimited field.
void protoField(std::string &out, int field, const std::string &bytes) {
  out += static_cast<char>(field << 3 | 2);
  for (uint64_t n = bytes.size();; n >>= 7) {
    out += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    if (n < 0x80)
      break;
  }
  out += bytes;
}

/// An ONNX model holding only float initializers of 4 elements.
std::string onnxModel(const std::vector<std::string> &names) {
  std::string graph;
  for (const std::string &name : names) {
    std::string tensor;
    tensor += '\x08'; // dims: 4
    tensor += '\x04';
    tensor += '\x10'; // data_type: FLOAT
    tensor += '\x01';
    protoField(tensor, 8, name);
    protoField(tensor, 9, std::string(16, '\0'));
    protoField(graph, 5, tensor);
  }
  std::string model;
  protoField(model, 7, graph);
  return model;
}

/// The (step, loss) of each --log-json line that has both.
std::vector<std::pair<int64_t, double>> logLosses(const std::string &log) {
  std::vector<std::pair<int64_t, double>> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    json::Value record;
    std::string err;
    const json::Value *step, *loss;
    int64_t n;
    if (json::parse(line, &record, &err) &&
        (step = json::get(record, "step")) && json::asInt64(*step, &n) &&
        (loss = json::get(record, "loss")) && loss->is_number())
      out.push_back({n, loss->get<double>()});
  }
  return out;
}
} // namespace

TEST(PipelineTrain, CheckpointsResumeAndExportAcrossStages) {
  TempDir dir;
  std::string err;
  ASSERT_TRUE(writeFile(dir.file("p.cleave"), pipelinedTrainingPlan(), &err))
      << err;
  std::vector<float> x = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4};
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("x.npy"), DType::F32, {3, 4},
                                       x.data(), x.size() * 4, &err));
  std::string onnx = onnxModel({"a", "b", "tied"});
  ASSERT_TRUE(writeBytes(dir.file("m.onnx"),
                         std::vector<uint8_t>(onnx.begin(), onnx.end())));
  std::string run = "'" + dir.file("p.cleave") + "' --ranks 2 --data x='" +
                    dir.file("x.npy") + "' --steps 4 ";
  std::string ck = dir.file("ck");
  Result full = runTool(
      dir, run + "--save-every 2 --checkpoint-dir '" + ck + "' --log-json '" +
               dir.file("full.jsonl") + "' --export-safetensors '" +
               dir.file("w.safetensors") + "' --export-onnx '" +
               dir.file("out.onnx") + "' --onnx-model '" + dir.file("m.onnx") +
               "' --trace '" + dir.file("t.json") + "'");
  ASSERT_EQ(full.code, 0) << full.err;
  EXPECT_NE(full.err.find("pipeline stage 1: 10 commands, arena 512 bytes, "
                          "states 48 bytes, 4 markers"),
            std::string::npos)
      << full.err;
  // loss_k = sum(a0) + k * lr * sum(x) = 6 + 5k.
  std::vector<std::pair<int64_t, double>> losses =
      logLosses(slurp(dir.file("full.jsonl")));
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_EQ(losses[0], (std::pair<int64_t, double>{1, 11}));
  EXPECT_EQ(losses[3], (std::pair<int64_t, double>{4, 26}));
  auto events = traceEvents(dir.file("t.json"), &err);
  EXPECT_EQ(err, "");
  EXPECT_EQ(events.size(), 4u);

  // The checkpoint holds every stage's states once.
  checkpoint::Checkpoint c;
  ASSERT_TRUE(checkpoint::load(ck + "/step-4", &c, &err)) << err;
  std::vector<std::string> names;
  for (const checkpoint::StateRecord &r : c.states)
    names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "tied", "b", "b.momentum"}));
  // a = a0 + 4 lr x; tied = 1 + 4 lr x; b = lr * (a1 + a2 + a3 + a4).
  std::string weights = slurp(dir.file("w.safetensors"));
  EXPECT_EQ(safetensor(weights, "a"), (std::vector<float>{2, 5, 8, 11}));
  EXPECT_EQ(safetensor(weights, "tied"), (std::vector<float>{3, 5, 7, 9}));
  EXPECT_EQ(safetensor(weights, "b"), (std::vector<float>{2.5f, 7, 11.5f, 16}));
  EXPECT_TRUE(safetensor(weights, "b.momentum").empty());
  // The ONNX export holds the trained values.
  std::string exported = slurp(dir.file("out.onnx"));
  std::vector<uint8_t> a = bytesOf<float>({2, 5, 8, 11}),
                       b = bytesOf<float>({2.5f, 7, 11.5f, 16});
  EXPECT_NE(exported.find(std::string(a.begin(), a.end())), std::string::npos);
  EXPECT_NE(exported.find(std::string(b.begin(), b.end())), std::string::npos);

  // Resuming at step 2 continues bitwise, to the same weights.
  Result resumed =
      runTool(dir, run + "--resume '" + ck +
                       "/step-2' "
                       "--log-json '" +
                       dir.file("resumed.jsonl") + "' --export-safetensors '" +
                       dir.file("w2.safetensors") + "'");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("warning"), std::string::npos) << resumed.err;
  EXPECT_EQ(logLosses(slurp(dir.file("resumed.jsonl"))),
            (std::vector<std::pair<int64_t, double>>(losses.begin() + 2,
                                                     losses.end())));
  EXPECT_EQ(slurp(dir.file("w2.safetensors")), weights);

  // The checkpoint holds global tensors by name: one rank running the same
  // step without a pipeline resumes it too.
  ASSERT_TRUE(
      writeFile(dir.file("one.cleave"), unpipelinedTrainingPlan(), &err))
      << err;
  Result one = runTool(
      dir, "'" + dir.file("one.cleave") + "' --data x='" + dir.file("x.npy") +
               "' --steps 4 --resume '" + ck + "/step-2' --log-json '" +
               dir.file("one.jsonl") + "' --export-safetensors '" +
               dir.file("w3.safetensors") + "'");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(logLosses(slurp(dir.file("one.jsonl"))),
            (std::vector<std::pair<int64_t, double>>(losses.begin() + 2,
                                                     losses.end())));
  std::string w3 = slurp(dir.file("w3.safetensors"));
  for (const char *name : {"a", "tied", "b"})
    EXPECT_EQ(safetensor(w3, name), safetensor(weights, name)) << name;

  // With dp=2 beside pp=2 (rank = 2 dp + pp): each state saved once, by
  // the lowest rank of its stage; the same losses and weights.
  ASSERT_TRUE(writeFile(dir.file("dp.cleave"),
                        pipelinedTrainingPlan({{"dp", "pp"}, {2, 2}}), &err))
      << err;
  std::string ck4 = dir.file("ck4");
  Result dp = runTool(dir, "'" + dir.file("dp.cleave") +
                               "' --ranks 4 --data x='" + dir.file("x.npy") +
                               "' --steps 4 --save-every 4 --checkpoint-dir '" +
                               ck4 + "' --log-json '" + dir.file("dp.jsonl") +
                               "' --export-safetensors '" +
                               dir.file("w4.safetensors") + "'");
  ASSERT_EQ(dp.code, 0) << dp.err;
  EXPECT_EQ(logLosses(slurp(dir.file("dp.jsonl"))), losses);
  EXPECT_EQ(slurp(dir.file("w4.safetensors")), weights);
  EXPECT_EQ(slurp(ck4 + "/step-4/model.safetensors"),
            slurp(ck + "/step-4/model.safetensors"));
}
