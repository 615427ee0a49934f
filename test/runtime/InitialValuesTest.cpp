//===- InitialValuesTest.cpp - Initial values read from files per shard --===//

#include "Backend.h"
#include "TestUtil.h"

#include "cleave/Checkpoint.h"
#include "cleave/FileUtil.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// A file of 16 bytes of padding, then a 4x6 float matrix holding 0..23.
std::string writeMatrixFile(const TempDir &dir) {
  std::vector<float> m(24);
  for (int i = 0; i < 24; ++i)
    m[i] = static_cast<float>(i);
  std::vector<uint8_t> bytes(16, 0xee);
  std::vector<uint8_t> data = bytesOf<float>(m);
  bytes.insert(bytes.end(), data.begin(), data.end());
  std::string path = dir.file("weights.bin");
  EXPECT_TRUE(writeBytes(path, bytes));
  return path;
}

/// A plan over mesh tp=2 whose one constant is the file's matrix, split on
/// dimension `dim` over tp.
Plan referencingPlan(const std::string &file, int dim) {
  Plan p;
  p.arenaBytes = 256;
  p.mesh = {{"tp"}, {2}};
  Constant w;
  w.info = tensor(
      "w", DType::F32,
      dim == 0 ? std::vector<int64_t>{2, 6} : std::vector<int64_t>{4, 3}, 0);
  w.info.sharding = dim == 0 ? std::vector<std::vector<uint32_t>>{{0}, {}}
                             : std::vector<std::vector<uint32_t>>{{}, {0}};
  w.file = file;
  w.fileOffset = 16;
  w.fileSize = 16 + 24 * 4;
  p.constants.push_back(w);
  return p;
}

/// Rank `rank`'s value of the plan's constants, as floats.
std::vector<float> valueOn(const Plan &p, int64_t rank, uint64_t *bytesRead,
                           std::string *error = nullptr) {
  std::vector<float> out;
  cleave_rt_status s = rt::forEachConstantValue(
      p, rank,
      [&](const Constant &c, const uint8_t *bytes) -> cleave_rt_status {
        const float *f = reinterpret_cast<const float *>(bytes);
        out.assign(f, f + c.info.numElements());
        return nullptr;
      },
      bytesRead);
  if (s) {
    if (error)
      *error = cleave_rt_status_message(s);
    cleave_rt_status_free(s);
  }
  return out;
}

TEST(InitialValues, FileReferencesRoundTripAndValidate) {
  Plan p = referencingPlan("/data/weights.bin", 1);
  std::vector<uint8_t> bytes = serialize(p);
  Plan q;
  std::string err;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &err)) << err;
  EXPECT_EQ(q.constants[0].file, "/data/weights.bin");
  EXPECT_EQ(q.constants[0].fileOffset, 16u);
  EXPECT_EQ(q.constants[0].fileSize, 112u);
  EXPECT_TRUE(q.constants[0].data.empty());

  p.constants[0].fileSize = 100; // 96 bytes at 16 do not fit
  EXPECT_FALSE(validate(p, &err));
  EXPECT_EQ(err, "constant 0 'w': its 96 bytes at offset 16 lie beyond the "
                 "end of '/data/weights.bin' (100 bytes)");
  p = referencingPlan("/data/weights.bin", 1);
  p.constants[0].data = {1, 2, 3, 4};
  EXPECT_FALSE(validate(p, &err));
  EXPECT_EQ(err, "constant 0 'w': has both data and a file reference");
}

TEST(InitialValues, EachRankReadsOnlyItsShard) {
  TempDir dir;
  std::string file = writeMatrixFile(dir);
  // Columns split: rank 1 holds columns 3..5 of every row; four reads of 12
  // bytes each.
  Plan cols = referencingPlan(file, 1);
  uint64_t read = 0;
  EXPECT_EQ(valueOn(cols, 1, &read),
            (std::vector<float>{3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23}));
  EXPECT_EQ(read, 48u);
  read = 0;
  EXPECT_EQ(valueOn(cols, 0, &read),
            (std::vector<float>{0, 1, 2, 6, 7, 8, 12, 13, 14, 18, 19, 20}));
  EXPECT_EQ(read, 48u);
  // Rows split: rank 1 holds rows 2..3, one contiguous read.
  Plan rows = referencingPlan(file, 0);
  read = 0;
  std::vector<float> expect(12);
  for (int i = 0; i < 12; ++i)
    expect[i] = static_cast<float>(12 + i);
  EXPECT_EQ(valueOn(rows, 1, &read), expect);
  EXPECT_EQ(read, 48u);
}

TEST(InitialValues, AnotherFileIsRefusedByName) {
  TempDir dir;
  std::string file = writeMatrixFile(dir);
  Plan p = referencingPlan(file, 1);
  p.constants[0].fileSize = 200;
  p.constants[0].info.sharding.clear();
  p.constants[0].info.shape = {4, 6};
  uint64_t read = 0;
  std::string err;
  valueOn(p, 0, &read, &err);
  EXPECT_EQ(err, "the initial value of 'w' is in '" + file +
                     "', which has 112 bytes, but the plan was compiled from "
                     "a file of 200 bytes: not the same weights");
  p.constants[0].file = dir.file("missing.bin");
  valueOn(p, 0, &read, &err);
  EXPECT_NE(err.find("which cannot be opened: No such file or directory "
                     "(cleave-run --weights-dir names the folder holding "
                     "the model's external data)"),
            std::string::npos)
      << err;
  EXPECT_EQ(read, 0u);
}

TEST(InitialValues, WeightsDirReplacesTheFolder) {
  TempDir dir;
  std::string file = writeMatrixFile(dir);
  // One rank: y = copy of the whole referenced matrix.
  Plan p;
  p.arenaBytes = 192;
  Constant w;
  w.info = tensor("w", DType::F32, {4, 6}, 0);
  w.file = "/compiled/elsewhere/weights.bin";
  w.fileOffset = 16;
  w.fileSize = 112;
  p.constants.push_back(w);
  p.outputs.push_back(tensor("y", DType::F32, {4, 6}, 96));
  p.commands.push_back(makeCommand(CommandKind::Copy, {96}, {0, 96}));
  std::vector<uint8_t> bytes = serialize(p);
  cleave_rt_program program = nullptr;
  ASSERT_EQ(cleave_rt_program_load_memory(bytes.data(), bytes.size(), &program),
            nullptr);
  EXPECT_EQ(cleave_rt_program_referenced_bytes(program), 96u);
  EXPECT_EQ(cleave_rt_program_referenced_files(program), 1u);
  EXPECT_EQ(cleave_rt_program_constant_bytes(program), 0u);
  ASSERT_EQ(
      cleave_rt_program_set_weights_dir(program, (dir.path + "/").c_str()),
      nullptr);
  cleave_rt_executor e = nullptr;
  ASSERT_EQ(cleave_rt_executor_create(program, "cpu", &e), nullptr);
  EXPECT_EQ(cleave_rt_executor_initial_bytes_read(e), 96u);
  ASSERT_EQ(cleave_rt_executor_run(e), nullptr);
  const void *data = nullptr;
  size_t size = 0;
  ASSERT_EQ(cleave_rt_executor_output(e, 0, &data, &size), nullptr);
  ASSERT_EQ(size, 96u);
  EXPECT_EQ(static_cast<const float *>(data)[23], 23.0f);
  cleave_rt_executor_destroy(e);
  // Skipped: the executor reads nothing and the arena stays zero.
  ASSERT_EQ(cleave_rt_program_skip_referenced_values(program), nullptr);
  ASSERT_EQ(cleave_rt_executor_create(program, "cpu", &e), nullptr);
  EXPECT_EQ(cleave_rt_executor_initial_bytes_read(e), 0u);
  ASSERT_EQ(cleave_rt_executor_run(e), nullptr);
  ASSERT_EQ(cleave_rt_executor_output(e, 0, &data, &size), nullptr);
  EXPECT_EQ(static_cast<const float *>(data)[23], 0.0f);
  cleave_rt_executor_destroy(e);
  cleave_rt_program_destroy(program);
}

TEST(InitialValues, CheckpointShardsAreReadAlone) {
  TempDir dir;
  std::vector<float> m(24);
  for (int i = 0; i < 24; ++i)
    m[i] = static_cast<float>(i);
  checkpoint::Checkpoint c;
  c.step = 3;
  checkpoint::StateRecord r;
  r.name = r.parameter = "w";
  r.shape = {4, 6};
  r.data = bytesOf<float>(m);
  c.states.push_back(r);
  std::string path, err;
  ASSERT_TRUE(checkpoint::save(dir.path, c, &path, &err)) << err;

  checkpoint::Checkpoint meta;
  checkpoint::LoadOptions options;
  options.readData = false;
  options.verifyHashes = false;
  ASSERT_TRUE(checkpoint::load(path, &meta, &err, options)) << err;
  ASSERT_EQ(meta.states.size(), 1u);
  EXPECT_TRUE(meta.states[0].data.empty());
  EXPECT_EQ(meta.states[0].shape, (std::vector<int64_t>{4, 6}));
  int fd = ::open(meta.tensorFile.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<float> shard(6);
  uint64_t read = 0;
  ASSERT_TRUE(checkpoint::readShard(fd, meta, meta.states[0], {2, 3}, {2, 3},
                                    reinterpret_cast<uint8_t *>(shard.data()),
                                    &read, &err))
      << err;
  ::close(fd);
  EXPECT_EQ(shard, (std::vector<float>{15, 16, 17, 21, 22, 23}));
  EXPECT_EQ(read, 24u);
}

TEST(InitialValues, AHugeCheckpointHeaderIsRefusedBeforeReading) {
  TempDir dir;
  checkpoint::Checkpoint c;
  checkpoint::StateRecord r;
  r.name = r.parameter = "w";
  r.shape = {2};
  r.data = bytesOf<float>({1, 2});
  c.states.push_back(r);
  std::string path, err;
  ASSERT_TRUE(checkpoint::save(dir.path, c, &path, &err)) << err;
  // The header length field says 2^40 bytes.
  std::string file = path + "/model.safetensors";
  FILE *f = std::fopen(file.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  uint8_t length[8] = {0, 0, 0, 0, 0, 1, 0, 0};
  ASSERT_EQ(std::fwrite(length, 1, 8, f), 8u);
  std::fclose(f);
  checkpoint::Checkpoint meta;
  checkpoint::LoadOptions options;
  options.readData = false;
  options.verifyHashes = false;
  EXPECT_FALSE(checkpoint::load(path, &meta, &err, options));
  EXPECT_NE(err.find("announces a safetensors header of 1099511627776 bytes"),
            std::string::npos)
      << err;
}

} // namespace
