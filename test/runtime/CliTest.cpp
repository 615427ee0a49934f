//===- CliTest.cpp - cleave-run end to end --------------------------------===//

#include "TestUtil.h"
#include "cleave/TensorFile.h"
#include "cleave/TrainingLoop.h"

#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// y = x @ W with x: [2,3] input, W: [3,2] constant, plus a bool output.
Plan matmulPlan() {
  Plan p;
  p.arenaBytes = 256;
  p.inputs.push_back(tensor("x", DType::F32, {2, 3}, 0));
  p.outputs.push_back(tensor("model/y:0", DType::F32, {2, 2}, 64));
  p.outputs.push_back(tensor("flag", DType::Bool, {3}, 224));
  Constant w;
  w.info = tensor("W", DType::F32, {3, 2}, 128);
  w.data = bytesOf<float>({1, 0, 0, 1, 1, 1});
  p.constants.push_back(w);
  p.commands.push_back(gemm(DType::F32, false, false, 2, 2, 3, 0, 128, 64));
  p.commands.push_back(makeCommand(CommandKind::Fill, {3, 1}, {224}));
  return p;
}

} // namespace

TEST(CleaveRun, RunsAndWritesOutputs) {
  TempDir dir;
  std::string error;
  ASSERT_TRUE(writeFile(dir.file("m.cleave"), matmulPlan(), &error)) << error;
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("x.npy"), DType::F32, {2, 3},
                                       x.data(), 24, &error));
  Result r =
      runTool(dir, "'" + dir.file("m.cleave") + "' '" + dir.file("x.npy") +
                       "' --output-dir '" + dir.path +
                       "' --print-outputs --print-stats "
                       "--repeat 3 --warmup 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("model/y:0: shape [2,2] float32 [4, 5, 10, 11]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("flag: shape [3] bool [true, true, true]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("device: cpu (kernels: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" OpenMP thread"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", GEMMs: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak memory: 256 bytes (arena), of which 24 bytes"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("over 3 runs (1 warmup)"), std::string::npos) << r.out;
  tensorfile::HostTensor y;
  ASSERT_TRUE(tensorfile::readTensorFile(dir.file("model_y_0.npy"), &y, &error))
      << error;
  EXPECT_EQ(y.data, bytesOf<float>({4, 5, 10, 11}));
  tensorfile::HostTensor flag;
  ASSERT_TRUE(tensorfile::readTensorFile(dir.file("flag.npy"), &flag, &error));
  EXPECT_EQ(flag.dtype, DType::Bool);

  // The same input by name, and --no-output writes nothing.
  TempDir out;
  r = runTool(dir, "'" + dir.file("m.cleave") + "' --input x='" +
                       dir.file("x.npy") + "' --no-output --output-dir '" +
                       out.path + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fileExists(out.file("flag.npy")));
}

TEST(CleaveRun, TruncatedPlanFailsWithoutOutput) {
  TempDir dir;
  std::vector<uint8_t> bytes = serialize(matmulPlan());
  bytes.resize(bytes.size() - 7);
  ASSERT_TRUE(writeBytes(dir.file("m.cleave"), bytes));
  std::vector<float> x(6, 1.0f);
  std::string error;
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("x.npy"), DType::F32, {2, 3},
                                       x.data(), 24, &error));
  Result r =
      runTool(dir, "'" + dir.file("m.cleave") + "' '" + dir.file("x.npy") +
                       "' --output-dir '" + dir.path + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cleave-run: error: invalid plan '"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_FALSE(fileExists(dir.file("model_y_0.npy")));
  EXPECT_FALSE(fileExists(dir.file("flag.npy")));
}

TEST(CleaveRun, InputErrors) {
  TempDir dir;
  std::string error;
  ASSERT_TRUE(writeFile(dir.file("m.cleave"), matmulPlan(), &error));
  std::vector<float> x(6, 1.0f);
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("x.npy"), DType::F32, {3, 2},
                                       x.data(), 24, &error));
  ASSERT_TRUE(tensorfile::writeNpyFile(dir.file("x23.npy"), DType::F32, {2, 3},
                                       x.data(), 24, &error));
  std::string model = "'" + dir.file("m.cleave") + "' ";
  Result r = runTool(dir, model + "'" + dir.file("x.npy") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("input 'x' from '" + dir.file("x.npy") +
                       "': expected shape [2,3] float32, got shape [3,2] "
                       "float32"),
            std::string::npos)
      << r.err;
  r = runTool(dir, model);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("input 0 'x' is not given"), std::string::npos) << r.err;
  r = runTool(dir, model + "--input y=" + dir.file("x.npy"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no input named 'y'"), std::string::npos) << r.err;
  // A missing output directory is created; one under a file cannot be.
  std::string underFile = dir.file("x23.npy") + "/out";
  r = runTool(dir, model + "'" + dir.file("x23.npy") + "' --output-dir '" +
                       underFile + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot create directory '" + underFile + "'"),
            std::string::npos)
      << r.err;
  std::string created = dir.file("new/out");
  r = runTool(dir, model + "'" + dir.file("x23.npy") + "' --output-dir '" +
                       created + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  struct stat st;
  EXPECT_EQ(::stat(created.c_str(), &st), 0);
  r = runTool(dir, model + "--frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown option '--frobnicate'"), std::string::npos);
  EXPECT_NE(r.err.find("usage: cleave-run"), std::string::npos);
  r = runTool(dir, "--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--output-dir DIR"), std::string::npos);
  // Every training option of the runtime's table is listed with its help.
  for (const std::string &name : training::trainOptionNames())
    EXPECT_NE(r.out.find("  --" + name + " "), std::string::npos) << name;
  r = runTool(dir, model + "--backend cuda '" + dir.file("x23.npy") + "'");
  EXPECT_EQ(r.code, 1);
  // A CPU plan on the CUDA backend (the no-GPU error: CudaTest.cpp).
  EXPECT_NE(r.err.find("cleave-run: error: the plan targets 'cpu-x86_64' and "
                       "cannot run on the cuda backend"),
            std::string::npos)
      << r.err;
}
