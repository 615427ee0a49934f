//===- GemmEpilogueTest.cpp - Gemm command epilogues on the CPU -----------===//
//
// Bias, gelu_bias and gelu epilogues of Gemm commands against a naive
// reference (f32, f64, batched, transposed, mixed bf16 -> f32, alpha and
// beta), and the validator's checks of the epilogue parameters.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "cleave_rt.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace cleave::plan;
using namespace cleave::test;

namespace {

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in double.
double geluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/// Appends the epilogue parameters (and the bias buffer) to a Gemm command.
Command withEpilogue(Command c, GemmEpilogue epilogue, DType outDType,
                     uint64_t bias) {
  if (c.params.size() == kGemmNumParams)
    c.params.push_back(static_cast<int64_t>(outDType));
  c.params.push_back(static_cast<int64_t>(epilogue));
  c.params.push_back(
      gemmEpilogueHasBias(epilogue) ? static_cast<int64_t>(outDType) : 0);
  if (gemmEpilogueHasBias(epilogue))
    c.buffers.push_back(bias);
  return c;
}

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

struct Case {
  GemmEpilogue epilogue;
  bool tA, tB;
  int64_t batch;
  double alpha, beta;
};

/// Runs one f32 (or f64) Gemm command with an epilogue on the CPU and
/// compares every element with the reference computed in double.
template <typename T> void checkCase(const Case &k, DType dtype) {
  const int64_t M = 7, N = 5, K = 3, batch = k.batch;
  const uint64_t e = sizeof(T);
  uint64_t aOff = 0, bOff = batch * M * K * e, biasOff = bOff + K * N * e,
           cOff = biasOff + 64;
  Plan p;
  p.arenaBytes = cOff + batch * M * N * e;
  p.inputs.push_back(tensor("a", dtype, {batch * M * K}, aOff));
  p.inputs.push_back(tensor("b", dtype, {K * N}, bOff));
  p.inputs.push_back(tensor("bias", dtype, {N}, biasOff));
  p.inputs.push_back(tensor("c", dtype, {batch * M * N}, cOff));
  p.outputs.push_back(tensor("y", dtype, {batch * M * N}, cOff));
  // B is shared by the batches (stride 0).
  p.commands.push_back(
      withEpilogue(gemm(dtype, k.tA, k.tB, M, N, K, aOff, bOff, cOff, batch,
                        M * K, 0, M * N, k.alpha, k.beta),
                   k.epilogue, dtype, biasOff));
  std::vector<T> a(batch * M * K), b(K * N), bias(N), c(batch * M * N);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = static_cast<T>(std::sin(0.7 * i));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<T>(std::cos(0.3 * i));
  for (size_t i = 0; i < bias.size(); ++i)
    bias[i] = static_cast<T>(0.25 * i - 0.5);
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = static_cast<T>(0.1 * i);
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set(0, a) && l.set(1, b) && l.set(2, bias) && l.set(3, c))
      << l.error;
  ASSERT_TRUE(l.run()) << l.error;
  std::vector<T> y = l.out<T>(0);
  ASSERT_EQ(y.size(), c.size());
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t kk = 0; kk < K; ++kk)
          acc += double(a[i * M * K + (k.tA ? kk * M + m : m * K + kk)]) *
                 double(b[k.tB ? n * K + kk : kk * N + n]);
        size_t at = i * M * N + m * N + n;
        double want = k.alpha * acc + k.beta * double(c[at]);
        if (gemmEpilogueHasBias(k.epilogue))
          want += bias[n];
        if (k.epilogue != GemmEpilogue::Bias)
          want = geluTanh(want);
        EXPECT_NEAR(double(y[at]), want, 1e-5 * (1 + std::fabs(want)))
            << gemmEpilogueName(k.epilogue) << " batch " << i << " m " << m
            << " n " << n;
      }
}

/// A valid plan with a bias epilogue: A 2x3, B 3x2, C 2x2 (f32), bias [2].
Plan epiloguePlan() {
  Plan p;
  p.arenaBytes = 256;
  p.commands.push_back(
      withEpilogue(gemm(DType::F32, false, false, 2, 2, 3, 0, 64, 128),
                   GemmEpilogue::Bias, DType::F32, 192));
  return p;
}

std::string validateError(const Plan &p) {
  std::string error;
  return validate(p, &error) ? "" : error;
}

} // namespace

TEST(GemmEpilogue, CpuMatchesReference) {
  for (GemmEpilogue epilogue :
       {GemmEpilogue::Bias, GemmEpilogue::GeluBias, GemmEpilogue::Gelu})
    for (Case k : {Case{epilogue, false, false, 1, 1.0, 0.0},
                   Case{epilogue, true, false, 3, 1.0, 0.0},
                   Case{epilogue, false, true, 2, 2.0, 0.5}}) {
      SCOPED_TRACE(std::string(gemmEpilogueName(epilogue)) + " tA=" +
                   std::to_string(k.tA) + " tB=" + std::to_string(k.tB) +
                   " batch=" + std::to_string(k.batch));
      checkCase<float>(k, DType::F32);
      checkCase<double>(k, DType::F64);
    }
}

TEST(GemmEpilogue, GeluAcrossTheRange) {
  // C = x (a K = 1 product with B = [1]), then gelu: tiny, moderate and
  // saturated arguments, infinities and NaN (the formula gives NaN at -inf,
  // -inf * 0, as the imported ops do).
  std::vector<float> x = {0.0f,  1e-6f, -3e-4f,   5e-4f,     -0.1f,
                          0.5f,  -1.0f, 2.0f,     -3.0f,     4.0f,
                          -5.5f, 7.0f,  -9.0f,    12.0f,     -30.0f,
                          1e4f,  -1e4f, INFINITY, -INFINITY, NAN};
  const int64_t M = x.size();
  Plan p;
  p.arenaBytes = 512;
  p.inputs.push_back(tensor("x", DType::F32, {M}, 0));
  p.outputs.push_back(tensor("y", DType::F32, {M}, 256));
  p.constants.push_back(
      {tensor("one", DType::F32, {1}, 128), bytesOf(std::vector<float>{1.0f})});
  p.commands.push_back(
      withEpilogue(gemm(DType::F32, false, false, M, 1, 1, 0, 128, 256),
                   GemmEpilogue::Gelu, DType::F32, 0));
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set(0, x)) << l.error;
  ASSERT_TRUE(l.run()) << l.error;
  std::vector<float> y = l.out<float>(0);
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double want = geluTanh(x[i]);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(y[i])) << "x = " << x[i];
    else if (std::isinf(want))
      EXPECT_EQ(y[i], want) << "x = " << x[i];
    else
      EXPECT_NEAR(y[i], want, 2e-6 * (1 + std::fabs(want))) << "x = " << x[i];
  }
}

TEST(GemmEpilogue, MixedBf16WithF32Bias) {
  const int64_t M = 4, N = 6, K = 8;
  Plan p;
  p.arenaBytes = 1024;
  p.inputs.push_back(tensor("a", DType::BF16, {M, K}, 0));
  p.inputs.push_back(tensor("b", DType::BF16, {K, N}, 128));
  p.inputs.push_back(tensor("bias", DType::F32, {N}, 256));
  p.outputs.push_back(tensor("y", DType::F32, {M, N}, 512));
  Command c = gemm(DType::BF16, false, false, M, N, K, 0, 128, 512);
  c.params.push_back(static_cast<int64_t>(DType::F32));
  p.commands.push_back(
      withEpilogue(c, GemmEpilogue::GeluBias, DType::F32, 256));
  std::vector<uint16_t> a(M * K), b(K * N);
  std::vector<float> bias(N);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = floatToBf16(std::sin(0.3f * i));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = floatToBf16(std::cos(0.7f * i));
  for (size_t i = 0; i < bias.size(); ++i)
    bias[i] = 0.5f - 0.2f * i;
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  ASSERT_TRUE(l.set(0, a) && l.set(1, b) && l.set(2, bias)) << l.error;
  ASSERT_TRUE(l.run()) << l.error;
  std::vector<float> y = l.out<float>(0);
  ASSERT_EQ(y.size(), static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(bf16ToFloat(a[m * K + k])) * bf16ToFloat(b[k * N + n]);
      double want = geluTanh(acc + bias[n]);
      EXPECT_NEAR(y[m * N + n], want, 1e-5 * (1 + std::fabs(want)));
    }
}

// bf16 operands and a bf16 result: the product accumulates in f32 and is
// rounded once (to nearest even), batched, with beta reading the old C.
TEST(GemmEpilogue, Bf16ResultRoundsOnce) {
  const int64_t M = 3, N = 5, K = 64, batch = 2;
  Plan p;
  p.arenaBytes = 4096;
  uint64_t aOff = 0, bOff = 1024, cOff = 3072;
  p.inputs.push_back(tensor("a", DType::BF16, {batch * M * K}, aOff));
  p.inputs.push_back(tensor("b", DType::BF16, {batch * K * N}, bOff));
  p.inputs.push_back(tensor("c", DType::BF16, {batch * M * N}, cOff));
  p.outputs.push_back(tensor("y", DType::BF16, {batch * M * N}, cOff));
  for (double beta : {0.0, 1.0}) {
    p.commands = {gemm(DType::BF16, false, true, M, N, K, aOff, bOff, cOff,
                       batch, M * K, K * N, M * N, 1.0, beta)};
    p.commands[0].params.push_back(static_cast<int64_t>(DType::BF16));
    std::vector<uint16_t> a(batch * M * K), b(batch * K * N), c(batch * M * N);
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = floatToBf16(std::sin(0.37f * i));
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = floatToBf16(std::cos(0.21f * i));
    for (size_t i = 0; i < c.size(); ++i)
      c[i] = floatToBf16(0.5f - 0.125f * i);
    Loaded l(p);
    ASSERT_EQ(l.error, "");
    ASSERT_TRUE(l.set(0, a) && l.set(1, b) && l.set(2, c)) << l.error;
    ASSERT_TRUE(l.run()) << l.error;
    std::vector<uint16_t> y = l.out<uint16_t>(0);
    ASSERT_EQ(y.size(), c.size());
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          // B transposed: N x K per batch.
          float acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += bf16ToFloat(a[i * M * K + m * K + k]) *
                   bf16ToFloat(b[i * K * N + n * K + k]);
          size_t at = i * M * N + m * N + n;
          float want = acc + float(beta) * bf16ToFloat(c[at]);
          // One rounding of the f32 sum: within half a bf16 ulp of it, up
          // to the f32 summation order.
          EXPECT_NEAR(bf16ToFloat(y[at]), want,
                      std::fabs(want) * (1.0 / 256) + 1e-4)
              << "beta " << beta << " at " << at;
        }
  }
  // A bf16 result takes no epilogue.
  p.commands[0].params.push_back(static_cast<int64_t>(GemmEpilogue::Gelu));
  p.commands[0].params.push_back(0);
  EXPECT_NE(validateError(p).find("a bfloat16 result takes no epilogue"),
            std::string::npos)
      << validateError(p);
}

TEST(GemmEpilogue, RoundTrips) {
  Plan p = epiloguePlan();
  ASSERT_EQ(validateError(p), "");
  std::vector<uint8_t> bytes = serialize(p);
  Plan q;
  std::string error;
  ASSERT_TRUE(deserialize(bytes.data(), bytes.size(), &q, &error)) << error;
  ASSERT_EQ(q.commands.size(), 1u);
  EXPECT_EQ(q.commands[0].params, p.commands[0].params);
  EXPECT_EQ(q.commands[0].buffers, p.commands[0].buffers);
  EXPECT_EQ(gemmEpilogueOf(q.commands[0]), GemmEpilogue::Bias);
  EXPECT_STREQ(gemmEpilogueName(GemmEpilogue::GeluBias), "gelu_bias");
  EXPECT_STREQ(gemmEpilogueName(static_cast<GemmEpilogue>(9)), "unknown");
}

TEST(GemmEpilogue, ValidatorChecksTheEpilogue) {
  // Same-type GEMMs may carry outDType = dtype (16 parameters too).
  Plan p = epiloguePlan();
  p.commands[0].params.resize(kGemmNumParams + 1);
  p.commands[0].buffers.resize(3);
  EXPECT_EQ(validateError(p), "");

  p = epiloguePlan();
  p.commands[0].params.pop_back();
  EXPECT_NE(validateError(p).find("has 17 parameters, expected 15 (16 with "
                                  "the output dtype, 18 with an epilogue)"),
            std::string::npos)
      << validateError(p);

  p = epiloguePlan();
  p.commands[0].params[kGemmEpilogue] = 7;
  EXPECT_NE(validateError(p).find("command 0 (gemm): unknown epilogue 7"),
            std::string::npos)
      << validateError(p);

  p = epiloguePlan();
  p.commands[0].buffers.pop_back();
  EXPECT_NE(validateError(p).find("has 3 buffers, expected 4 (A, B, C and "
                                  "the bias)"),
            std::string::npos)
      << validateError(p);

  p = epiloguePlan();
  p.commands[0].params[kGemmEpilogue] =
      static_cast<int64_t>(GemmEpilogue::Gelu);
  EXPECT_NE(validateError(p).find("expected 3 (A, B and C)"), std::string::npos)
      << validateError(p);
  p.commands[0].buffers.pop_back();
  EXPECT_NE(validateError(p).find("epilogue gelu reads no bias but names "
                                  "bias dtype 1"),
            std::string::npos)
      << validateError(p);
  p.commands[0].params[kGemmBiasDType] = 0;
  EXPECT_EQ(validateError(p), "");

  p = epiloguePlan();
  p.commands[0].params[kGemmBiasDType] = static_cast<int64_t>(DType::F64);
  EXPECT_NE(validateError(p).find("bias dtype code 11 differs from the "
                                  "result's float32"),
            std::string::npos)
      << validateError(p);

  p = epiloguePlan();
  p.commands[0].buffers[3] = 252; // 2 f32 elements at 252 > 256.
  EXPECT_NE(validateError(p).find("command 0 (gemm) bias of 2 elements: "
                                  "buffer offset 252 + 8 bytes lies outside "
                                  "the arena of 256 bytes"),
            std::string::npos)
      << validateError(p);
  p.commands[0].buffers[3] = 193;
  EXPECT_NE(validateError(p).find("bias: offset 193 is not a multiple"),
            std::string::npos)
      << validateError(p);

  // A different outDType still needs a mixed-precision pair.
  p = epiloguePlan();
  p.commands[0].params[kGemmOutDType] = static_cast<int64_t>(DType::F64);
  p.commands[0].params[kGemmBiasDType] = static_cast<int64_t>(DType::F64);
  EXPECT_NE(validateError(p).find("unsupported mixed dtypes float32 -> "
                                  "float64"),
            std::string::npos)
      << validateError(p);
}
