//===- PlanFormatTest.cpp - Plan encoding, decoding and validation --------===//

#include "TestUtil.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <set>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// A plan using every section: y = x @ W (2x3 @ 3x2), then copy, then fill.
Plan samplePlan() {
  Plan p;
  p.arenaBytes = 256;
  p.inputs.push_back(tensor("x", DType::F32, {2, 3}, 0));
  p.outputs.push_back(tensor("y", DType::F32, {2, 2}, 64));
  Constant w;
  w.info = tensor("W", DType::F32, {3, 2}, 128);
  w.data = bytesOf<float>({1, 2, 3, 4, 5, 6});
  p.constants.push_back(w);
  p.commands.push_back(gemm(DType::F32, false, false, 2, 2, 3, 0, 128, 64));
  Command copy;
  copy.kind = CommandKind::Copy;
  copy.params = {16};
  copy.buffers = {64, 192};
  p.commands.push_back(copy);
  Command fill;
  fill.kind = CommandKind::Fill;
  fill.params = {8, 0xab};
  fill.buffers = {240};
  p.commands.push_back(fill);
  p.metadata = {{"producer", "test"}, {"model", "sample"}};
  return p;
}

std::string decodeError(const std::vector<uint8_t> &bytes) {
  Plan out;
  std::string error;
  if (deserialize(bytes.data(), bytes.size(), &out, &error))
    return "";
  return error;
}

std::string validateError(const Plan &p) {
  std::string error;
  return validate(p, &error) ? "" : error;
}

/// Rewrites the header checksum so a payload edit reaches the decoder.
void fixChecksum(std::vector<uint8_t> &bytes) {
  uint64_t h = fnv1a64(bytes.data() + kHeaderSize, bytes.size() - kHeaderSize);
  for (int i = 0; i < 8; ++i)
    bytes[24 + i] = static_cast<uint8_t>(h >> (8 * i));
}

} // namespace

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::Bool), 1u);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_EQ(dtypeSize(static_cast<DType>(8)), 0u);
  EXPECT_STREQ(dtypeName(DType::I64), "int64");
  EXPECT_STREQ(dtypeName(DType::Bool), "bool");
  EXPECT_TRUE(isKnownDType(16));
  EXPECT_FALSE(isKnownDType(8));
  EXPECT_FALSE(isKnownDType(0));
  TensorInfo t = tensor("t", DType::F64, {2, 0, 3}, 0);
  EXPECT_EQ(t.numElements(), 0);
  EXPECT_EQ(tensor("s", DType::F32, {}, 0).byteSize(), 4u);
  EXPECT_EQ(tensor("n", DType::F32, {-1}, 0).numElements(), -1);
}

TEST(PlanFormat, RoundTrip) {
  Plan p = samplePlan();
  std::vector<uint8_t> bytes = serialize(p);
  ASSERT_GE(bytes.size(), kHeaderSize);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "CLEAVEPL");
  Plan q;
  std::string error;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &error)) << error;
  EXPECT_EQ(q.target, p.target);
  EXPECT_EQ(q.arenaBytes, 256u);
  ASSERT_EQ(q.inputs.size(), 1u);
  EXPECT_EQ(q.inputs[0].name, "x");
  EXPECT_EQ(q.inputs[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(q.outputs[0].offset, 64u);
  ASSERT_EQ(q.constants.size(), 1u);
  EXPECT_EQ(q.constants[0].data, p.constants[0].data);
  ASSERT_EQ(q.commands.size(), 3u);
  EXPECT_EQ(q.commands[0].params, p.commands[0].params);
  EXPECT_EQ(q.commands[2].buffers, p.commands[2].buffers);
  EXPECT_EQ(q.metadata, p.metadata);
  // Encoding is deterministic.
  EXPECT_EQ(serialize(q), bytes);
}

TEST(PlanFormat, FileRoundTripIsAtomic) {
  TempDir dir;
  std::string path = dir.file("m.cleave");
  std::string error;
  ASSERT_TRUE(writeFile(path, samplePlan(), &error)) << error;
  Plan q;
  ASSERT_TRUE(readFile(path, &q, &error)) << error;
  EXPECT_EQ(q.commands.size(), 3u);
  // Only the final file is left: no temporary next to it.
  DIR *d = ::opendir(dir.path.c_str());
  ASSERT_NE(d, nullptr);
  std::vector<std::string> names;
  while (dirent *e = ::readdir(d))
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
      names.push_back(e->d_name);
  ::closedir(d);
  EXPECT_EQ(names, std::vector<std::string>{"m.cleave"});
  EXPECT_FALSE(readFile(dir.file("missing.cleave"), &q, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
}

TEST(PlanFormat, WriteFileRejectsInvalidPlan) {
  TempDir dir;
  Plan p = samplePlan();
  p.outputs[0].offset = 250;
  std::string error;
  EXPECT_FALSE(writeFile(dir.file("bad.cleave"), p, &error));
  EXPECT_FALSE(fileExists(dir.file("bad.cleave")));
}

TEST(PlanFormat, Truncated) {
  std::vector<uint8_t> bytes = serialize(samplePlan());
  EXPECT_NE(decodeError({bytes.begin(), bytes.begin() + 10}).find("truncated"),
            std::string::npos);
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 5);
  EXPECT_NE(decodeError(cut).find("truncated"), std::string::npos)
      << decodeError(cut);
  // Every prefix fails cleanly.
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decodeError({bytes.begin(), bytes.begin() + n}).empty());
  EXPECT_NE(decodeError({}).find("truncated"), std::string::npos);
}

TEST(PlanFormat, TrailingBytes) {
  std::vector<uint8_t> bytes = serialize(samplePlan());
  bytes.push_back(0);
  EXPECT_NE(decodeError(bytes).find("trailing"), std::string::npos);
}

TEST(PlanFormat, FlippedByteFailsChecksum) {
  std::vector<uint8_t> bytes = serialize(samplePlan());
  bytes[bytes.size() / 2] ^= 0x10;
  EXPECT_EQ(decodeError(bytes), "checksum mismatch: file is corrupted");
}

TEST(PlanFormat, WrongVersion) {
  std::vector<uint8_t> bytes = serialize(samplePlan());
  bytes[8] = 8;
  EXPECT_EQ(decodeError(bytes),
            "unsupported version 8 (this runtime reads versions 4 to 7)");
}

TEST(PlanFormat, BadMagic) {
  std::vector<uint8_t> bytes = serialize(samplePlan());
  bytes[0] = 'X';
  EXPECT_NE(decodeError(bytes).find("bad magic"), std::string::npos);
}

TEST(PlanFormat, HostileCountsAreCapped) {
  // An input list claiming 2^32-1 entries in a tiny payload: rejected
  // before any allocation.
  Plan p;
  p.arenaBytes = 64;
  std::vector<uint8_t> bytes = serialize(p);
  size_t countAt = kHeaderSize + 4 + p.target.size() + 16;
  for (int i = 0; i < 4; ++i)
    bytes[countAt + i] = 0xff;
  fixChecksum(bytes);
  std::string error = decodeError(bytes);
  EXPECT_NE(error.find("truncated: input list says 4294967295"),
            std::string::npos)
      << error;
}

TEST(PlanFormat, CorruptedPayloadsNeverCrash) {
  // Flip every byte of the payload in turn (checksum fixed up so the decoder
  // sees it): each result is either a valid plan or a clean error.
  std::vector<uint8_t> good = serialize(samplePlan());
  for (size_t i = kHeaderSize; i < good.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bytes = good;
      bytes[i] ^= mask;
      fixChecksum(bytes);
      Plan out;
      std::string error;
      if (!deserialize(bytes.data(), bytes.size(), &out, &error))
        EXPECT_FALSE(error.empty());
    }
  }
}

TEST(PlanValidate, OffsetsOutsideArena) {
  Plan p = samplePlan();
  p.inputs[0].offset = 240; // 24 bytes at 240 > 256.
  EXPECT_NE(validateError(p).find("input 0 'x': buffer offset 240 + 24 bytes "
                                  "lies outside the arena of 256 bytes"),
            std::string::npos)
      << validateError(p);
  p = samplePlan();
  p.commands[1].buffers[1] = UINT64_MAX - 4; // Overflowing offset + size.
  EXPECT_NE(validateError(p).find("command 1 (copy) destination"),
            std::string::npos)
      << validateError(p);
  p = samplePlan();
  p.commands[2].params[0] = 17;
  EXPECT_NE(validateError(p).find("command 2 (fill)"), std::string::npos);
}

TEST(PlanValidate, GemmExtents) {
  Plan p = samplePlan();
  p.commands[0].buffers[2] = 208; // C (2x2 f32, 16 bytes) fits...
  EXPECT_EQ(validateError(p), "");
  p.commands[0].buffers[2] = 244; // ...but not here.
  EXPECT_NE(validateError(p).find("command 0 (gemm) operand C"),
            std::string::npos)
      << validateError(p);
  p = samplePlan();
  p.commands[0].params[kGemmBatch] = 2;
  p.commands[0].params[kGemmStrideB] = 1000; // Second batch of B is outside.
  EXPECT_NE(validateError(p).find("operand B"), std::string::npos);
  p = samplePlan();
  p.commands[0].params[kGemmLda] = 2; // Smaller than K = 3.
  EXPECT_NE(validateError(p).find("leading dimension"), std::string::npos);
  p = samplePlan();
  p.commands[0].params[kGemmDType] = static_cast<int64_t>(DType::I32);
  EXPECT_NE(validateError(p).find("unsupported dtype int32"), std::string::npos)
      << validateError(p);
  p = samplePlan();
  p.commands[0].params.pop_back();
  EXPECT_NE(validateError(p).find("has 14 parameters, expected 15"),
            std::string::npos);
  p = samplePlan();
  p.commands[0].params[kGemmM] = -1;
  EXPECT_NE(validateError(p).find("M = -1"), std::string::npos);
}

TEST(PlanValidate, KernelsDTypesDims) {
  Plan p = samplePlan();
  Command k;
  k.kind = CommandKind::Kernel;
  k.params = {0};
  p.commands.push_back(k);
  EXPECT_NE(validateError(p).find("kernel index 0 is out of range"),
            std::string::npos);
  p.kernelNames = {"k"};
  EXPECT_NE(validateError(p).find("not an ELF file"), std::string::npos);
  p = samplePlan();
  p.inputs[0].dtype = static_cast<DType>(99);
  EXPECT_NE(validateError(p).find("unknown dtype code 99"), std::string::npos);
  p = samplePlan();
  p.inputs[0].shape = {2, -3};
  EXPECT_NE(validateError(p).find("negative dimension"), std::string::npos);
  p = samplePlan();
  p.constants[0].data.pop_back();
  EXPECT_NE(validateError(p).find("holds 23 bytes"), std::string::npos);
  p = samplePlan();
  p.commands[1].kind = static_cast<CommandKind>(42);
  EXPECT_NE(validateError(p).find("unknown command kind 42"),
            std::string::npos);
  p = samplePlan();
  p.outputs.push_back(p.outputs[0]);
  EXPECT_NE(validateError(p).find("used twice"), std::string::npos);
}

TEST(PlanValidate, RandomNormal) {
  Plan p;
  p.arenaBytes = 64;
  Command init =
      makeCommand(CommandKind::RandomNormal,
                  {16, 1, doubleToBits(0.0), doubleToBits(0.02)}, {0});
  p.initCommands.push_back(init);
  EXPECT_EQ(validateError(p), "");
  p.initCommands[0].params[0] = 17; // 68 bytes
  EXPECT_NE(validateError(p).find("init command 0 (random_normal) destination"),
            std::string::npos)
      << validateError(p);
  p.initCommands[0].params = {16, 1, doubleToBits(0.0), doubleToBits(-1.0)};
  EXPECT_NE(validateError(p).find("non-negative"), std::string::npos);
  p.initCommands.clear();
  p.commands.push_back(init);
  EXPECT_NE(validateError(p).find("random_normal may only be an init command"),
            std::string::npos)
      << validateError(p);
}

TEST(PlanMetadata, TypedEntriesReadBack) {
  Plan p = samplePlan();
  addMetadata(p, meta::kFlops, int64_t{1234});
  addMetadata(p, meta::kPipelineSteps, {"F0", "F1", "B0"});
  addMetadata(p, meta::kRecomputePolicy, "selective");
  p.metadata.push_back(validRangeEntry("ids", {-50, 50}));
  EXPECT_EQ(*findMetadata(p, "flops"), "1234");
  EXPECT_EQ(*findMetadata(p, "pipeline_steps"), "F0,F1,B0");
  EXPECT_EQ(*findMetadata(p, "valid_range.ids"), "-50,50");
  EXPECT_EQ(getMetadata(p, meta::kFlops), 1234);
  EXPECT_EQ(getMetadata(p, meta::kPipelineSteps),
            (std::vector<std::string>{"F0", "F1", "B0"}));
  EXPECT_EQ(getMetadata(p, meta::kRecomputePolicy), "selective");
  EXPECT_EQ(getMetadata(p, meta::kGemms), std::nullopt);
  EXPECT_TRUE(getMetadata(p, meta::kKernelCosts).empty());
  EXPECT_EQ(validateError(p), "");
}

TEST(PlanMetadata, ValidateRejectsValuesOfTheWrongKind) {
  Plan p = samplePlan();
  p.metadata.push_back({"flops", "many"});
  EXPECT_NE(validateError(p).find(
                "metadata 'flops' is 'many', not a decimal integer"),
            std::string::npos)
      << validateError(p);
  // An integer read of a malformed value is no value, never a partial one.
  EXPECT_EQ(getMetadata(p, meta::kFlops), std::nullopt);

  p = samplePlan();
  p.metadata.push_back({"valid_range.ids", "0"});
  EXPECT_NE(validateError(p).find("metadata 'valid_range.ids' is '0', not "
                                  "'lo,hi' or 'lo,hi,extra'"),
            std::string::npos)
      << validateError(p);
  p.metadata.back().second = "0,10,x";
  EXPECT_NE(validateError(p), "");
  p.metadata.back().second = "0,10,-100";
  EXPECT_EQ(validateError(p), "");

  // Keys Cleave does not declare are carried along unchecked.
  p.metadata.push_back({"user_note", "anything, at all"});
  EXPECT_EQ(validateError(p), "");
}

TEST(PlanMetadata, EveryDeclaredKeyIsNamedOnce) {
  std::set<std::string> names;
  for (const MetadataKeyInfo &info : metadataKeys())
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
  EXPECT_TRUE(names.count(meta::kFlops.name));
  EXPECT_TRUE(names.count(meta::kValidRangePrefix));
}
