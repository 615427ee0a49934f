//===- ExecutorTest.cpp - Running plans through the C API -----------------===//

#include "RandomInit.h"
#include "TestUtil.h"
#include "cleave_rt.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// Reference: C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b], row-major.
template <typename T>
void referenceGemm(bool tA, bool tB, int M, int N, int K, const T *A,
                   const T *B, T *C, double alpha, double beta) {
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k)
        acc += double(tA ? A[k * M + m] : A[m * K + k]) *
               double(tB ? B[n * K + k] : B[k * N + n]);
      C[m * N + n] = static_cast<T>(alpha * acc + beta * C[m * N + n]);
    }
}

} // namespace

TEST(Executor, CopyAndFill) {
  Plan p;
  p.arenaBytes = 64;
  p.inputs.push_back(tensor("x", DType::I32, {4}, 0));
  p.outputs.push_back(tensor("y", DType::I32, {4}, 16));
  p.outputs.push_back(tensor("z", DType::U8, {8}, 32));
  Command copy = makeCommand(CommandKind::Copy, {16}, {0, 16});
  Command fill = makeCommand(CommandKind::Fill, {8, 7}, {32});
  p.commands = {copy, fill};
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set<int32_t>(0, {1, -2, 3, 4})) << l.error;
  ASSERT_TRUE(l.run()) << l.error;
  EXPECT_EQ(l.out<int32_t>(0), (std::vector<int32_t>{1, -2, 3, 4}));
  EXPECT_EQ(l.out<uint8_t>(1), std::vector<uint8_t>(8, 7));
}

TEST(Executor, ProfileTimesEveryCommandOfTheProfiledRuns) {
  Plan p;
  p.arenaBytes = 64;
  p.inputs.push_back(tensor("x", DType::I32, {4}, 0));
  p.outputs.push_back(tensor("y", DType::I32, {4}, 16));
  p.commands = {makeCommand(CommandKind::Copy, {16}, {0, 16}),
                makeCommand(CommandKind::Fill, {8, 7}, {32})};
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set<int32_t>(0, {1, 2, 3, 4})) << l.error;
  const cleave_rt_command_profile_t *records = nullptr;
  size_t count = 99;
  int64_t runs = 99;
  // Not profiling: no records.
  ASSERT_TRUE(l.run()) << l.error;
  ASSERT_EQ(cleave_rt_executor_profile(l.executor, &records, &count, &runs),
            nullptr);
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(runs, 0);
  ASSERT_EQ(cleave_rt_executor_set_profiling(l.executor, 1), nullptr);
  ASSERT_TRUE(l.run() && l.run()) << l.error;
  ASSERT_EQ(cleave_rt_executor_profile(l.executor, &records, &count, &runs),
            nullptr);
  ASSERT_EQ(count, 2u);
  EXPECT_EQ(runs, 2);
  EXPECT_STREQ(records[0].kind, "copy");
  EXPECT_STREQ(records[0].label, "16 bytes");
  EXPECT_STREQ(records[1].kind, "fill");
  EXPECT_STREQ(records[1].label, "8 bytes");
  for (size_t i = 0; i < count; ++i)
    EXPECT_GE(records[i].seconds, 0.0);
  EXPECT_EQ(l.out<int32_t>(0), (std::vector<int32_t>{1, 2, 3, 4}));
  // Turning it on again starts from zero.
  ASSERT_EQ(cleave_rt_executor_set_profiling(l.executor, 1), nullptr);
  ASSERT_EQ(cleave_rt_executor_profile(l.executor, &records, &count, &runs),
            nullptr);
  EXPECT_EQ(runs, 0);
  cleave_rt_status s = cleave_rt_executor_set_profiling(nullptr, 1);
  EXPECT_NE(s, nullptr);
  cleave_rt_status_free(s);
}

TEST(Executor, DeviceInfo) {
  Plan p;
  p.arenaBytes = 16;
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  // The CPU backend names its kernels' threads and the libraries its GEMMs
  // go to.
  std::string info = cleave_rt_executor_device_info(l.executor);
  EXPECT_EQ(info.rfind("cpu (kernels: ", 0), 0u) << info;
  EXPECT_NE(info.find(" OpenMP thread"), std::string::npos) << info;
  EXPECT_NE(info.find(", GEMMs: "), std::string::npos) << info;
  EXPECT_STREQ(cleave_rt_executor_device_info(nullptr), "");
}

TEST(Executor, ConstantsAndMetadata) {
  Plan p;
  p.arenaBytes = 128;
  Constant c;
  c.info = tensor("c", DType::F64, {2}, 64);
  c.data = bytesOf<double>({1.5, -2.5});
  p.constants.push_back(c);
  p.outputs.push_back(tensor("c_out", DType::F64, {2}, 64));
  p.metadata = {{"producer", "cleave-test"}};
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  EXPECT_EQ(cleave_rt_program_peak_bytes(l.program), 128u);
  EXPECT_EQ(cleave_rt_program_constant_bytes(l.program), 16u);
  EXPECT_STREQ(cleave_rt_program_metadata(l.program, "producer"),
               "cleave-test");
  EXPECT_EQ(cleave_rt_program_metadata(l.program, "absent"), nullptr);
  cleave_rt_tensor_desc_t desc;
  ASSERT_TRUE(l.take(cleave_rt_program_output_desc(l.program, 0, &desc)));
  EXPECT_STREQ(desc.name, "c_out");
  EXPECT_EQ(desc.dtype, 11u);
  EXPECT_EQ(desc.rank, 1u);
  EXPECT_EQ(desc.dims[0], 2);
  EXPECT_EQ(desc.byte_size, 16u);
  ASSERT_TRUE(l.run()) << l.error;
  EXPECT_EQ(l.out<double>(0), (std::vector<double>{1.5, -2.5}));
}

TEST(Executor, GemmF32AllTransposes) {
  const int M = 3, N = 4, K = 5;
  std::vector<float> A(M * K), B(K * N);
  for (size_t i = 0; i < A.size(); ++i)
    A[i] = float(i % 7) - 3.0f;
  for (size_t i = 0; i < B.size(); ++i)
    B[i] = float(i % 5) * 0.5f;
  for (bool tA : {false, true})
    for (bool tB : {false, true}) {
      Plan p;
      p.arenaBytes = 1024;
      std::vector<int64_t> aShape =
          tA ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K};
      std::vector<int64_t> bShape =
          tB ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
      p.inputs.push_back(tensor("a", DType::F32, aShape, 0));
      p.inputs.push_back(tensor("b", DType::F32, bShape, 128));
      p.outputs.push_back(tensor("c", DType::F32, {M, N}, 256));
      p.commands.push_back(
          gemm(DType::F32, tA, tB, M, N, K, 0, 128, 256, 1, 0, 0, 0, 2.0, 0));
      Loaded l(p);
      ASSERT_EQ(l.error, "");
      ASSERT_TRUE(l.set(0, A) && l.set(1, B)) << l.error;
      ASSERT_TRUE(l.run()) << l.error;
      std::vector<float> want(M * N, 0.0f);
      referenceGemm<float>(tA, tB, M, N, K, A.data(), B.data(), want.data(),
                           2.0, 0.0);
      std::vector<float> got = l.out<float>(0);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-4) << "tA=" << tA << " tB=" << tB;
    }
}

TEST(Executor, GemmF64BatchedWithBroadcastAndBeta) {
  // C[b] = A[b] @ B + 0.5 * C[b] for b in 0..2, B broadcast (stride 0),
  // C initialised by a constant.
  const int M = 2, N = 2, K = 3, batch = 3;
  std::vector<double> A(batch * M * K), B = {1, 2, 3, 4, 5, 6},
                                        C0(batch * M * N);
  for (size_t i = 0; i < A.size(); ++i)
    A[i] = double(i) - 4;
  for (size_t i = 0; i < C0.size(); ++i)
    C0[i] = double(i);
  Plan p;
  p.arenaBytes = 4096;
  p.inputs.push_back(tensor("a", DType::F64, {batch, M, K}, 0));
  Constant b;
  b.info = tensor("b", DType::F64, {K, N}, 1024);
  b.data = bytesOf(B);
  Constant c;
  c.info = tensor("c", DType::F64, {batch, M, N}, 2048);
  c.data = bytesOf(C0);
  p.constants = {b, c};
  p.outputs.push_back(tensor("c", DType::F64, {batch, M, N}, 2048));
  p.commands.push_back(gemm(DType::F64, false, false, M, N, K, 0, 1024, 2048,
                            batch, M * K, 0, M * N, 1.0, 0.5));
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set(0, A)) << l.error;
  ASSERT_TRUE(l.run()) << l.error;
  std::vector<double> want = C0;
  for (int i = 0; i < batch; ++i)
    referenceGemm<double>(false, false, M, N, K, A.data() + i * M * K, B.data(),
                          want.data() + i * M * N, 1.0, 0.5);
  std::vector<double> got = l.out<double>(0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_DOUBLE_EQ(got[i], want[i]) << i;
}

TEST(Executor, GemmWithEmptyK) {
  // K = 0: C = beta * C, and nothing is read from A or B.
  Plan p;
  p.arenaBytes = 64;
  Constant c;
  c.info = tensor("c", DType::F32, {2, 2}, 0);
  c.data = bytesOf<float>({1, 2, 3, 4});
  p.constants.push_back(c);
  p.outputs.push_back(tensor("c", DType::F32, {2, 2}, 0));
  p.commands.push_back(
      gemm(DType::F32, false, false, 2, 2, 0, 32, 32, 0, 1, 0, 0, 0, 1.0, 0.5));
  p.commands[0].params[kGemmLda] = 1;
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.run()) << l.error;
  EXPECT_EQ(l.out<float>(0), (std::vector<float>{0.5, 1, 1.5, 2}));
}

TEST(Executor, InputErrors) {
  Plan p;
  p.arenaBytes = 64;
  p.inputs.push_back(tensor("x", DType::F32, {2, 3}, 0));
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  EXPECT_FALSE(l.run());
  EXPECT_EQ(l.error, "input 0 'x' was not set before run");
  EXPECT_FALSE(l.set<float>(0, {1, 2, 3}));
  EXPECT_EQ(l.error, "input 0 'x' expects 24 bytes ([2,3] float32), got 12");
  EXPECT_FALSE(l.set<float>(1, {1}));
  EXPECT_NE(l.error.find("out of range"), std::string::npos);
  size_t index = 9;
  EXPECT_FALSE(l.take(cleave_rt_program_find_input(l.program, "nope", &index)));
  EXPECT_NE(l.error.find("no input named 'nope' (its inputs: 'x')"),
            std::string::npos)
      << l.error;
  EXPECT_TRUE(l.take(cleave_rt_program_find_input(l.program, "x", &index)));
  EXPECT_EQ(index, 0u);
}

TEST(Executor, Backends) {
  Plan p;
  p.arenaBytes = 0; // An empty arena still gives a valid executor.
  Loaded cuda(p, "cuda");
  // A CPU plan cannot run on the CUDA backend (see CudaTest.cpp for CUDA
  // plans, and the no-GPU error).
  EXPECT_NE(cuda.error.find("cannot run on the cuda backend"),
            std::string::npos)
      << cuda.error;
  cleave_rt_executor e = nullptr;
  cleave_rt_status s = cleave_rt_executor_create(cuda.program, "cuda", &e);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_INVALID_ARGUMENT);
  EXPECT_EQ(e, nullptr);
  cleave_rt_status_free(s);
  Loaded tpu(p, "tpu");
  EXPECT_NE(tpu.error.find("unknown backend 'tpu'"), std::string::npos);
  Loaded cpu(p);
  EXPECT_EQ(cpu.error, "");
  EXPECT_TRUE(cpu.run());
}

TEST(Executor, ProgramMayDieBeforeExecutor) {
  Plan p;
  p.arenaBytes = 64;
  p.outputs.push_back(tensor("y", DType::U8, {4}, 0));
  p.commands.push_back(makeCommand(CommandKind::Fill, {4, 9}, {0}));
  std::vector<uint8_t> bytes = serialize(p);
  cleave_rt_program program = nullptr;
  cleave_rt_executor exec = nullptr;
  ASSERT_EQ(cleave_rt_program_load_memory(bytes.data(), bytes.size(), &program),
            nullptr);
  ASSERT_EQ(cleave_rt_executor_create(program, "cpu", &exec), nullptr);
  cleave_rt_program_destroy(program);
  ASSERT_EQ(cleave_rt_executor_run(exec), nullptr);
  const void *data;
  size_t n;
  ASSERT_EQ(cleave_rt_executor_output(exec, 0, &data, &n), nullptr);
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(static_cast<const uint8_t *>(data)[3], 9);
  cleave_rt_executor_destroy(exec);
}

TEST(Executor, LoadErrorsCarryCodes) {
  std::vector<uint8_t> bytes = serialize(Plan());
  bytes.resize(bytes.size() - 1);
  cleave_rt_program program = nullptr;
  cleave_rt_status s =
      cleave_rt_program_load_memory(bytes.data(), bytes.size(), &program);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_DATA_LOSS);
  EXPECT_NE(std::string(cleave_rt_status_message(s)).find("truncated"),
            std::string::npos);
  EXPECT_EQ(program, nullptr);
  cleave_rt_status_free(s);
  s = cleave_rt_program_load_file("/nonexistent/m.cleave", &program);
  EXPECT_EQ(cleave_rt_status_code(s), CLEAVE_RT_NOT_FOUND);
  cleave_rt_status_free(s);
  EXPECT_EQ(cleave_rt_status_code(nullptr), CLEAVE_RT_OK);
  EXPECT_STREQ(cleave_rt_status_message(nullptr), "");
}

TEST(Executor, KernelFromSharedObject) {
  std::string clang = CLEAVE_TEST_CLANG;
  if (clang.empty())
    GTEST_SKIP() << "no clang found at configure time to build a test kernel";
  TempDir dir;
  std::string src = dir.file("k.c"), so = dir.file("k.so");
  const char *code =
      "void add_f32(void **args) {\n"
      "  const float *a = args[0], *b = args[1]; float *c = args[2];\n"
      "  for (int i = 0; i < 4; ++i) c[i] = a[i] + b[i];\n"
      "}\n"
      "void scale_f32(void **args) {\n"
      "  float *c = args[0];\n"
      "  for (int i = 0; i < 4; ++i) c[i] *= 10.0f;\n"
      "}\n";
  ASSERT_TRUE(writeBytes(src, std::vector<uint8_t>(code, code + strlen(code))));
  std::string cmd = clang + " -shared -fPIC -O1 -o '" + so + "' '" + src +
                    "' 2>'" + dir.file("log") + "'";
  if (std::system(cmd.c_str()) != 0)
    GTEST_SKIP() << "clang could not build a shared object: " << cmd;
  FILE *f = std::fopen(so.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<uint8_t> object;
  uint8_t buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;)
    object.insert(object.end(), buf, buf + n);
  std::fclose(f);

  Plan p;
  p.arenaBytes = 64;
  p.inputs.push_back(tensor("a", DType::F32, {4}, 0));
  p.inputs.push_back(tensor("b", DType::F32, {4}, 16));
  p.outputs.push_back(tensor("c", DType::F32, {4}, 32));
  p.kernelNames = {"scale_f32", "add_f32"};
  p.kernelObject = object;
  p.commands.push_back(makeCommand(CommandKind::Kernel, {1}, {0, 16, 32}));
  p.commands.push_back(makeCommand(CommandKind::Kernel, {0}, {32}));
  {
    Loaded l(p);
    ASSERT_EQ(l.error, "");
    ASSERT_TRUE(l.set<float>(0, {1, 2, 3, 4}) &&
                l.set<float>(1, {.5, .5, .5, .5}))
        << l.error;
    ASSERT_TRUE(l.run()) << l.error;
    EXPECT_EQ(l.out<float>(0), (std::vector<float>{15, 25, 35, 45}));
  }
  // A name the object does not export is a clear load-time error.
  p.kernelNames[0] = "missing_kernel";
  Loaded bad(p);
  EXPECT_NE(bad.error.find("kernel 0 'missing_kernel' is not exported"),
            std::string::npos)
      << bad.error;
  // An ELF header followed by garbage fails in dlopen, with its message.
  p.kernelObject.resize(64);
  Loaded garbage(p);
  EXPECT_NE(garbage.error.find("cannot load the plan's kernel object"),
            std::string::npos)
      << garbage.error;
}

TEST(Executor, RandomNormalInitCommands) {
  // Two init commands fill two buffers once, when the executor is made; the
  // values depend only on (count, seed, mean, std): a second executor gets
  // the same ones, another seed other ones.
  auto makePlan = [](int64_t seed) {
    Plan p;
    const int64_t n = 20000;
    p.arenaBytes = 2 * n * 4;
    p.outputs.push_back(tensor("a", DType::F32, {n}, 0));
    p.outputs.push_back(tensor("b", DType::F32, {n}, n * 4));
    p.initCommands.push_back(
        makeCommand(CommandKind::RandomNormal,
                    {n, seed, doubleToBits(0.0), doubleToBits(1.0)}, {0}));
    p.initCommands.push_back(
        makeCommand(CommandKind::RandomNormal,
                    {n - 1, seed, doubleToBits(3.0), doubleToBits(0.5)},
                    {uint64_t(n * 4)}));
    return p;
  };
  Loaded l(makePlan(11)), same(makePlan(11)), other(makePlan(12));
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.run() && same.run() && other.run()) << l.error;
  std::vector<float> a = l.out<float>(0), b = l.out<float>(1);
  EXPECT_EQ(a, same.out<float>(0));
  EXPECT_NE(a, other.out<float>(0));
  auto moments = [](const std::vector<float> &v, size_t n) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) {
      sum += v[i];
      sq += double(v[i]) * v[i];
    }
    double mean = sum / n;
    return std::make_pair(mean, std::sqrt(sq / n - mean * mean));
  };
  auto [meanA, stdA] = moments(a, a.size());
  EXPECT_NEAR(meanA, 0.0, 0.03);
  EXPECT_NEAR(stdA, 1.0, 0.03);
  auto [meanB, stdB] = moments(b, b.size() - 1);
  EXPECT_NEAR(meanB, 3.0, 0.02);
  EXPECT_NEAR(stdB, 0.5, 0.02);
  EXPECT_EQ(b.back(), 0.0f); // one past the count: untouched
}

TEST(RandomInit, PiecesEqualTheWhole) {
  // The CUDA backend generates RandomNormal values a piece at a time; any
  // cut (odd ones split a Box-Muller pair) gives the same elements.
  std::vector<float> whole(1001), pieces(1001);
  rt::fillNormal(whole.data(), 0, 1001, 42, 0.5, 2.0);
  for (int64_t begin = 0; begin < 1001;) {
    int64_t end = std::min<int64_t>(1001, begin + 1 + begin % 7);
    rt::fillNormal(pieces.data() + begin, begin, end, 42, 0.5, 2.0);
    begin = end;
  }
  EXPECT_EQ(whole, pieces);
}
