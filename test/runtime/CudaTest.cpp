//===- CudaTest.cpp - The CUDA backend and CUDA plans ---------------------===//
//
// Everything here runs on every machine. The tests that need a GPU make a
// CUDA executor first; where that is UNAVAILABLE (no libcuda.so.1, no device)
// they call GTEST_SKIP() with the reason, so ctest reports them as skipped,
// never as passed. The no-GPU test is skipped, the other way round, where a
// device exists.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "cleave_rt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// A CUDA plan: out = in copied, then 4 bytes of out filled with 0.
Plan copyPlan() {
  Plan p;
  p.target = "cuda-sm_90a";
  p.arenaBytes = 512;
  p.inputs.push_back(tensor("x", DType::F32, {4}, 0));
  p.outputs.push_back(tensor("y", DType::F32, {4}, 256));
  p.commands.push_back(makeCommand(CommandKind::Copy, {16}, {0, 256}));
  p.commands.push_back(makeCommand(CommandKind::Fill, {4, 0}, {268}));
  return p;
}

Command launch(int64_t kernel, std::vector<uint64_t> args,
               std::vector<int64_t> dims = {1, 1, 1, 32, 1, 1}) {
  Command c;
  c.kind = CommandKind::GpuLaunch;
  c.params = {kernel};
  c.params.insert(c.params.end(), dims.begin(), dims.end());
  c.params.push_back(0);
  c.buffers = std::move(args);
  return c;
}

/// A CUDA plan with one (fake) kernel; the validator only needs an ELF magic.
Plan launchPlan() {
  Plan p;
  p.target = "cuda-sm_90a";
  p.arenaBytes = 256;
  p.kernelNames = {"k0"};
  p.kernelObject = {0x7f, 'E', 'L', 'F', 0, 0, 0, 0};
  p.commands.push_back(launch(0, {0, 128}));
  return p;
}

bool validates(const Plan &p, std::string *error) { return validate(p, error); }

/// Skips the test unless a CUDA executor can be made here.
#define REQUIRE_CUDA_DEVICE()                                                  \
  do {                                                                         \
    Loaded probe_(copyPlan(), "cuda");                                         \
    if (probe_.code == CLEAVE_RT_UNAVAILABLE)                                  \
      GTEST_SKIP() << "no usable CUDA device: " << probe_.error;               \
    ASSERT_EQ(probe_.code, CLEAVE_RT_OK) << probe_.error;                      \
  } while (0)

uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

} // namespace

//===--- Plan format ------------------------------------------------------===//

TEST(CudaPlan, GpuLaunchValidatesAndRoundTrips) {
  Plan p = launchPlan();
  std::string error;
  ASSERT_TRUE(validates(p, &error)) << error;
  std::vector<uint8_t> bytes = serialize(p);
  Plan q;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &error)) << error;
  ASSERT_EQ(q.commands.size(), 1u);
  EXPECT_EQ(q.commands[0].kind, CommandKind::GpuLaunch);
  EXPECT_EQ(q.commands[0].params, p.commands[0].params);
  EXPECT_EQ(q.commands[0].buffers, p.commands[0].buffers);
  EXPECT_STREQ(commandKindName(CommandKind::GpuLaunch), "gpu_launch");
  EXPECT_TRUE(isCudaTarget("cuda-sm_80"));
  EXPECT_FALSE(isCudaTarget("cpu-x86_64"));
}

TEST(CudaPlan, GpuLaunchChecks) {
  std::string error;
  Plan p = launchPlan();
  p.commands[0].params.pop_back();
  EXPECT_FALSE(validates(p, &error));
  EXPECT_NE(error.find("expected 8"), std::string::npos) << error;

  p = launchPlan();
  p.commands[0].params[kGpuBlockY] = 0;
  EXPECT_FALSE(validates(p, &error));
  EXPECT_NE(error.find("block y = 0"), std::string::npos) << error;

  p = launchPlan();
  p.commands[0].params[kGpuGridX] = -3;
  EXPECT_FALSE(validates(p, &error));
  EXPECT_NE(error.find("grid x"), std::string::npos) << error;

  p = launchPlan();
  p.commands[0].params[kGpuKernelIndex] = 1;
  EXPECT_FALSE(validates(p, &error));
  EXPECT_NE(error.find("kernel index 1 is out of range"), std::string::npos)
      << error;

  p = launchPlan();
  p.commands[0].params[kGpuSharedBytes] = -1;
  EXPECT_FALSE(validates(p, &error));

  p = launchPlan();
  p.commands[0].buffers[1] = 4096;
  EXPECT_FALSE(validates(p, &error));
  EXPECT_NE(error.find("outside the arena"), std::string::npos) << error;
}

TEST(CudaPlan, HostKernelsRoundTripAndValidate) {
  // --cuda-host-kernels: the kernels compiled for the host and, per kernel,
  // the bytes of each argument and whether the kernel writes it.
  Plan p = launchPlan();
  p.hostKernelObject = {0x7f, 'E', 'L', 'F', 1, 2, 3};
  p.hostKernelArgs = {{{128, false}, {128, true}}};
  std::string error;
  ASSERT_TRUE(validates(p, &error)) << error;
  std::vector<uint8_t> bytes = serialize(p);
  Plan q;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &error)) << error;
  EXPECT_EQ(q.hostKernelObject, p.hostKernelObject);
  EXPECT_EQ(q.hostKernelArgs, p.hostKernelArgs);

  Plan bad = p;
  bad.hostKernelArgs[0][1].bytes = 129; // 128 + 129 > the 256-byte arena
  EXPECT_FALSE(validates(bad, &error));
  EXPECT_NE(error.find("argument 1: buffer offset 128 + 129 bytes lies "
                       "outside the arena"),
            std::string::npos)
      << error;
  bad = p;
  bad.hostKernelArgs[0].pop_back();
  EXPECT_FALSE(validates(bad, &error));
  EXPECT_NE(error.find("launches kernel 'k0' with 2 arguments, its host "
                       "kernel takes 1"),
            std::string::npos)
      << error;
  bad = p;
  bad.hostKernelArgs.push_back({});
  EXPECT_FALSE(validates(bad, &error));
  EXPECT_NE(error.find("the host kernel table describes 2 kernels, the plan "
                       "names 1"),
            std::string::npos)
      << error;
  bad = p;
  bad.hostKernelObject = {1, 2, 3, 4};
  EXPECT_FALSE(validates(bad, &error));
  EXPECT_NE(error.find("the host kernel object is not an ELF file"),
            std::string::npos)
      << error;
  bad = p;
  bad.target = "cpu-x86_64";
  bad.commands.clear();
  EXPECT_FALSE(validates(bad, &error));
  EXPECT_NE(error.find("host kernels belong to CUDA plans"), std::string::npos)
      << error;
}

TEST(CudaPlan, KernelKindsMatchTheTarget) {
  std::string error;
  Plan p = launchPlan();
  p.initCommands.push_back(makeCommand(CommandKind::Kernel, {0}, {0}));
  EXPECT_FALSE(validates(p, &error));
  EXPECT_NE(error.find("cannot appear in a CUDA plan"), std::string::npos)
      << error;

  p = launchPlan();
  p.target = "cpu-x86_64";
  EXPECT_FALSE(validates(p, &error));
  EXPECT_NE(error.find("need a CUDA plan"), std::string::npos) << error;
}

//===--- Without a GPU ----------------------------------------------------===//

TEST(CudaBackend, UnavailableWithoutDriverOrDevice) {
  Loaded l(copyPlan(), "cuda");
  if (l.code == CLEAVE_RT_OK)
    GTEST_SKIP() << "a CUDA device is present: the no-GPU error cannot be "
                    "observed here";
  EXPECT_EQ(l.code, CLEAVE_RT_UNAVAILABLE) << l.error;
  bool named = l.error.find("CUDA driver library libcuda.so.1 not found") !=
                   std::string::npos ||
               l.error.find("no CUDA device") != std::string::npos;
  EXPECT_TRUE(named) << l.error;
  EXPECT_EQ(l.executor, nullptr);
  // A second attempt reports the same, without crashing.
  Loaded again(copyPlan(), "cuda");
  EXPECT_EQ(again.code, CLEAVE_RT_UNAVAILABLE);
  EXPECT_EQ(again.error, l.error);
}

TEST(CudaBackend, RejectsCpuPlansAndCpuRejectsCudaPlans) {
  Plan cpu = copyPlan();
  cpu.target = "cpu-x86_64";
  Loaded a(cpu, "cuda");
  EXPECT_EQ(a.code, CLEAVE_RT_INVALID_ARGUMENT) << a.error;
  EXPECT_NE(a.error.find("--target=cuda"), std::string::npos) << a.error;
  Loaded b(copyPlan(), "cpu");
  EXPECT_EQ(b.code, CLEAVE_RT_INVALID_ARGUMENT) << b.error;
  EXPECT_NE(b.error.find("cuda-sm_90a"), std::string::npos) << b.error;
}

TEST(CudaBackend, CleaveRunReportsUnavailable) {
  {
    Loaded probe(copyPlan(), "cuda");
    if (probe.code == CLEAVE_RT_OK)
      GTEST_SKIP() << "a CUDA device is present";
  }
  TempDir dir;
  Plan p = copyPlan();
  p.inputs.clear(); // Nothing to feed: the executor is made at once.
  p.commands = {makeCommand(CommandKind::Fill, {16, 1}, {256})};
  std::string error;
  ASSERT_TRUE(writeFile(dir.file("m.cleave"), p, &error)) << error;
  std::string cmd = std::string("'") + CLEAVE_RUN_PATH + "' '" +
                    dir.file("m.cleave") + "' --backend cuda --no-output >'" +
                    dir.file("out") + "' 2>'" + dir.file("err") + "'";
  int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream f(dir.file("err"));
  std::stringstream s;
  s << f.rdbuf();
  bool named = s.str().find("libcuda.so.1") != std::string::npos ||
               s.str().find("no CUDA device") != std::string::npos;
  EXPECT_TRUE(named) << s.str();
}

//===--- On a GPU (skipped elsewhere) -------------------------------------===//

TEST(CudaGpu, CopyFillAndGraphReplay) {
  REQUIRE_CUDA_DEVICE();
  Loaded l(copyPlan(), "cuda");
  ASSERT_EQ(l.code, CLEAVE_RT_OK) << l.error;
  for (float base : {1.f, 10.f, -5.f}) { // Replays read the new inputs.
    std::vector<float> x = {base, base + 1, base + 2, base + 3};
    ASSERT_TRUE(l.set(0, x)) << l.error;
    ASSERT_TRUE(l.run()) << l.error;
    std::vector<float> y = l.out<float>(0);
    EXPECT_EQ(y, (std::vector<float>{base, base + 1, base + 2, 0.f}));
  }
}

/// Runs `p` on cpu and cuda with the same inputs; returns both outputs.
/// Output 0 of `l` as floats (read as bf16 when `bf16`).
static std::vector<float> outputFloats(Loaded &l, bool bf16) {
  if (!bf16)
    return l.out<float>(0);
  std::vector<float> f;
  for (uint16_t h : l.out<uint16_t>(0))
    f.push_back(bf16ToFloat(h));
  return f;
}

static void compareGemm(Plan p, const std::vector<std::vector<uint8_t>> &ins,
                        double tol, bool bf16Result = false) {
  p.target = "cpu-x86_64";
  Loaded cpu(p, "cpu");
  ASSERT_EQ(cpu.code, CLEAVE_RT_OK) << cpu.error;
  p.target = "cuda-sm_90a";
  Loaded gpu(p, "cuda");
  ASSERT_EQ(gpu.code, CLEAVE_RT_OK) << gpu.error;
  for (size_t i = 0; i < ins.size(); ++i) {
    ASSERT_TRUE(cpu.set(i, ins[i])) << cpu.error;
    ASSERT_TRUE(gpu.set(i, ins[i])) << gpu.error;
  }
  for (int rep = 0; rep < 2; ++rep) { // Eager capture, then graph replay.
    ASSERT_TRUE(cpu.run()) << cpu.error;
    ASSERT_TRUE(gpu.run()) << gpu.error;
    std::vector<float> a = outputFloats(cpu, bf16Result),
                       b = outputFloats(gpu, bf16Result);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], tol * (1 + std::fabs(a[i]))) << "element " << i;
  }
}

TEST(CudaGpu, GemmF32MatchesCpuAllTransposesBatched) {
  REQUIRE_CUDA_DEVICE();
  const int64_t M = 37, N = 29, K = 53, batch = 3;
  for (bool tA : {false, true})
    for (bool tB : {false, true}) {
      Plan p;
      uint64_t aBytes = batch * M * K * 4, bBytes = K * N * 4;
      p.arenaBytes = aBytes + bBytes + batch * M * N * 4;
      p.inputs.push_back(tensor("a", DType::F32, {batch, M * K}, 0));
      p.inputs.push_back(tensor("b", DType::F32, {K * N}, aBytes));
      p.outputs.push_back(
          tensor("c", DType::F32, {batch, M * N}, aBytes + bBytes));
      // B broadcast over the batch (stride 0), alpha 0.5.
      p.commands.push_back(gemm(DType::F32, tA, tB, M, N, K, 0, aBytes,
                                aBytes + bBytes, batch, M * K, 0, M * N, 0.5));
      std::vector<float> a(batch * M * K), b(K * N);
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = std::sin(0.37f * i);
      for (size_t i = 0; i < b.size(); ++i)
        b[i] = std::cos(0.11f * i);
      SCOPED_TRACE(std::string("tA=") + (tA ? "1" : "0") +
                   " tB=" + (tB ? "1" : "0"));
      compareGemm(p, {bytesOf(a), bytesOf(b)}, 1e-4);
    }
}

TEST(CudaGpu, GemmBf16WithF32Accumulation) {
  REQUIRE_CUDA_DEVICE();
  const int64_t M = 64, N = 48, K = 96;
  Plan p;
  uint64_t aBytes = M * K * 2, bBytes = K * N * 2;
  p.arenaBytes = aBytes + bBytes + M * N * 4;
  p.inputs.push_back(tensor("a", DType::BF16, {M, K}, 0));
  p.inputs.push_back(tensor("b", DType::BF16, {K, N}, aBytes));
  p.outputs.push_back(tensor("c", DType::F32, {M, N}, aBytes + bBytes));
  Command c =
      gemm(DType::BF16, false, false, M, N, K, 0, aBytes, aBytes + bBytes);
  c.params.push_back(static_cast<int64_t>(DType::F32));
  p.commands.push_back(c);
  std::vector<uint16_t> a(M * K), b(K * N);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = floatToBf16(std::sin(0.3f * i));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = floatToBf16(std::cos(0.7f * i));
  // Both sides multiply the same bf16 values exactly and sum in f32.
  compareGemm(p, {bytesOf(a), bytesOf(b)}, 1e-3);
}

TEST(CudaGpu, GemmBf16ResultMatchesCpu) {
  REQUIRE_CUDA_DEVICE();
  // bf16 operands and a bf16 result (cuBLASLt's bf16 D from an f32
  // accumulator) against the CPU's f32 product rounded once: the same
  // rounding of sums that differ only in their order, so within one bf16
  // ulp.
  const int64_t M = 64, N = 48, K = 96, batch = 2;
  Plan p;
  uint64_t aBytes = batch * M * K * 2, bBytes = K * N * 2;
  p.arenaBytes = aBytes + bBytes + batch * M * N * 2;
  p.inputs.push_back(tensor("a", DType::BF16, {batch, M * K}, 0));
  p.inputs.push_back(tensor("b", DType::BF16, {K * N}, aBytes));
  p.outputs.push_back(
      tensor("c", DType::BF16, {batch, M * N}, aBytes + bBytes));
  Command c = gemm(DType::BF16, false, true, M, N, K, 0, aBytes,
                   aBytes + bBytes, batch, M * K, 0, M * N);
  c.params.push_back(static_cast<int64_t>(DType::BF16));
  p.commands.push_back(c);
  std::vector<uint16_t> a(batch * M * K), b(K * N);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = floatToBf16(std::sin(0.3f * i));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = floatToBf16(std::cos(0.7f * i));
  compareGemm(p, {bytesOf(a), bytesOf(b)}, 1.0 / 128, /*bf16Result=*/true);
}

TEST(CudaGpu, GemmEpiloguesMatchCpu) {
  REQUIRE_CUDA_DEVICE();
  // cuBLASLt's BIAS / GELU_BIAS / GELU epilogues against the CPU's, with
  // the row-major N (cuBLASLt's rows of D) as the bias length, batched,
  // transposed, and bf16 operands with an f32 bias and result.
  const int64_t M = 33, N = 24, K = 40, batch = 2;
  for (GemmEpilogue epilogue :
       {GemmEpilogue::Bias, GemmEpilogue::GeluBias, GemmEpilogue::Gelu})
    for (bool bf16 : {false, true})
      for (bool tB : {false, true}) {
        uint64_t e = bf16 ? 2 : 4, aBytes = batch * M * K * e,
                 bBytes = K * N * e, biasOff = 4096 * 4, cOff = 8192 * 4;
        Plan p;
        p.arenaBytes = cOff + batch * M * N * 4;
        DType in = bf16 ? DType::BF16 : DType::F32;
        p.inputs.push_back(tensor("a", in, {batch, M * K}, 0));
        p.inputs.push_back(tensor("b", in, {K * N}, aBytes));
        p.inputs.push_back(tensor("bias", DType::F32, {N}, biasOff));
        p.outputs.push_back(tensor("c", DType::F32, {batch, M * N}, cOff));
        Command c = gemm(in, false, tB, M, N, K, 0, aBytes, cOff, batch, M * K,
                         0, M * N);
        c.params.push_back(static_cast<int64_t>(DType::F32));
        c.params.push_back(static_cast<int64_t>(epilogue));
        bool hasBias = gemmEpilogueHasBias(epilogue);
        c.params.push_back(hasBias ? static_cast<int64_t>(DType::F32) : 0);
        if (hasBias)
          c.buffers.push_back(biasOff);
        p.commands.push_back(c);
        ASSERT_LE(aBytes + bBytes, biasOff);
        std::vector<float> a(batch * M * K), b(K * N), bias(N);
        for (size_t i = 0; i < a.size(); ++i)
          a[i] = std::sin(0.37f * i);
        for (size_t i = 0; i < b.size(); ++i)
          b[i] = std::cos(0.11f * i);
        for (size_t i = 0; i < bias.size(); ++i)
          bias[i] = 0.1f * i - 1.0f;
        auto narrow = [](const std::vector<float> &v) {
          std::vector<uint16_t> h(v.size());
          for (size_t i = 0; i < v.size(); ++i)
            h[i] = floatToBf16(v[i]);
          return bytesOf(h);
        };
        SCOPED_TRACE(std::string(gemmEpilogueName(epilogue)) +
                     (bf16 ? " bf16" : " f32") + " tB=" + (tB ? "1" : "0"));
        compareGemm(p,
                    {bf16 ? narrow(a) : bytesOf(a),
                     bf16 ? narrow(b) : bytesOf(b), bytesOf(bias)},
                    bf16 ? 1e-3 : 2e-4);
      }
}

TEST(CudaGpu, StateReadWriteAndInitCommands) {
  REQUIRE_CUDA_DEVICE();
  Plan p = copyPlan();
  StateTensor st;
  st.info = tensor("w", DType::F32, {4}, 384);
  st.parameter = "w";
  p.states.push_back(st);
  p.initCommands.push_back(makeCommand(CommandKind::Fill, {16, 0x3f}, {384}));
  p.commands.push_back(makeCommand(CommandKind::Copy, {16}, {0, 384})); // w = x
  Loaded l(p, "cuda");
  ASSERT_EQ(l.code, CLEAVE_RT_OK) << l.error;
  std::vector<uint8_t> w(16);
  ASSERT_TRUE(
      l.take(cleave_rt_executor_read_state(l.executor, 0, w.data(), 16)));
  EXPECT_EQ(w, std::vector<uint8_t>(16, 0x3f));
  std::vector<float> x = {1, 2, 3, 4};
  ASSERT_TRUE(l.set(0, x));
  ASSERT_TRUE(l.run()) << l.error;
  std::vector<float> got(4);
  ASSERT_TRUE(
      l.take(cleave_rt_executor_read_state(l.executor, 0, got.data(), 16)));
  EXPECT_EQ(got, x);
  std::vector<float> mine = {9, 8, 7, 6};
  ASSERT_TRUE(
      l.take(cleave_rt_executor_write_state(l.executor, 0, mine.data(), 16)));
  ASSERT_TRUE(
      l.take(cleave_rt_executor_read_state(l.executor, 0, got.data(), 16)));
  EXPECT_EQ(got, mine);
}

TEST(CudaGpu, RandomNormalInitMatchesCpu) {
  REQUIRE_CUDA_DEVICE();
  // The same RandomNormal init command on both backends: the same values.
  auto makePlan = [](const char *target) {
    Plan p;
    p.target = target;
    p.arenaBytes = 4096;
    p.outputs.push_back(tensor("w", DType::F32, {1000}, 0));
    p.initCommands.push_back(
        makeCommand(CommandKind::RandomNormal,
                    {1000, 5, doubleToBits(0.0), doubleToBits(0.02)}, {0}));
    return p;
  };
  Loaded gpu(makePlan("cuda-sm_90a"), "cuda"), cpu(makePlan("cpu-x86_64"));
  ASSERT_EQ(gpu.code, CLEAVE_RT_OK) << gpu.error;
  ASSERT_EQ(cpu.code, CLEAVE_RT_OK) << cpu.error;
  ASSERT_TRUE(gpu.run() && cpu.run()) << gpu.error << cpu.error;
  EXPECT_EQ(gpu.out<float>(0), cpu.out<float>(0));
}

TEST(CudaGpu, DeviceInfoNamesTheGpuAndNccl) {
  REQUIRE_CUDA_DEVICE();
  Loaded l(copyPlan(), "cuda");
  ASSERT_EQ(l.code, CLEAVE_RT_OK) << l.error;
  // NCCL is optional: the line says its version or why it is unavailable.
  std::string info = cleave_rt_executor_device_info(l.executor);
  EXPECT_EQ(info.rfind("cuda: ", 0), 0u) << info;
  EXPECT_NE(info.find(", sm_"), std::string::npos) << info;
  EXPECT_TRUE(info.find(", NCCL 2.") != std::string::npos ||
              info.find(", NCCL unavailable: ") != std::string::npos)
      << info;
  ASSERT_TRUE(l.set<float>(0, {1, 2, 3, 4}) && l.run()) << l.error;
}

TEST(CudaGpu, LaunchesACubinBuiltWithNvcc) {
  REQUIRE_CUDA_DEVICE();
  std::string nvcc = CLEAVE_TEST_NVCC;
  if (nvcc.empty())
    GTEST_SKIP() << "nvcc was not found when the tests were configured";
  TempDir dir;
  {
    std::ofstream src(dir.file("k.cu"));
    src << "extern \"C\" __global__ void axpy(const float *x, float *y) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < 1000) y[i] = 2.0f * x[i] + y[i];\n"
           "}\n";
  }
  // A cubin for sm_90a plus PTX for any other device (JIT fallback).
  std::string base = "'" + nvcc + "' '" + dir.file("k.cu") + "' -o '";
  ASSERT_EQ(std::system(
                (base + dir.file("k.cubin") + "' -cubin -arch=sm_90a").c_str()),
            0);
  ASSERT_EQ(std::system(
                (base + dir.file("k.ptx") + "' -ptx -arch=compute_80").c_str()),
            0);
  auto slurp = [&](const char *name) {
    std::ifstream f(dir.file(name), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)),
                       std::istreambuf_iterator<char>());
  };
  std::string cubin = slurp("k.cubin"), ptx = slurp("k.ptx");
  Plan p;
  p.target = "cuda-sm_90a";
  p.arenaBytes = 8192;
  p.kernelNames = {"axpy"};
  p.kernelObject.assign(cubin.begin(), cubin.end());
  p.metadata.push_back({"kernel_ptx", ptx});
  p.inputs.push_back(tensor("x", DType::F32, {1000}, 0));
  p.outputs.push_back(tensor("y", DType::F32, {1000}, 4096));
  p.initCommands.push_back(makeCommand(CommandKind::Fill, {4000, 0}, {4096}));
  p.commands.push_back(launch(0, {0, 4096}, {4, 1, 1, 256, 1, 1}));
  Loaded l(p, "cuda");
  ASSERT_EQ(l.code, CLEAVE_RT_OK) << l.error;
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i)
    x[i] = static_cast<float>(i);
  ASSERT_TRUE(l.set(0, x));
  for (int rep = 1; rep <= 3; ++rep) { // y accumulates: graph replays.
    ASSERT_TRUE(l.run()) << l.error;
    std::vector<float> y = l.out<float>(0);
    ASSERT_EQ(y.size(), 1000u);
    for (int i = 0; i < 1000; ++i)
      ASSERT_EQ(y[i], 2.0f * rep * i) << "run " << rep << " element " << i;
  }
}

TEST(CudaPlan, NvccCubinIsAValidKernelObject) {
  std::string nvcc = CLEAVE_TEST_NVCC;
  if (nvcc.empty())
    GTEST_SKIP() << "nvcc was not found when the tests were configured";
  TempDir dir;
  {
    std::ofstream src(dir.file("k.cu"));
    src << "extern \"C\" __global__ void zero(float *y) { y[threadIdx.x] = 0; "
           "}\n";
  }
  ASSERT_EQ(std::system(("'" + nvcc + "' '" + dir.file("k.cu") + "' -o '" +
                         dir.file("k.cubin") + "' -cubin -arch=sm_90a")
                            .c_str()),
            0);
  std::ifstream f(dir.file("k.cubin"), std::ios::binary);
  std::string cubin((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  Plan p;
  p.target = "cuda-sm_90a";
  p.arenaBytes = 128;
  p.kernelNames = {"zero"};
  p.kernelObject.assign(cubin.begin(), cubin.end());
  p.commands.push_back(launch(0, {0}));
  std::string error;
  EXPECT_TRUE(validates(p, &error)) << error;
}
