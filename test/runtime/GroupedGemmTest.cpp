//===- GroupedGemmTest.cpp - The CPU's grouped GEMM command ---------------===//
//
// The GroupedGemm command (the expert GEMMs of a mixture of experts)
// against a plain loop: the forward and the weight gradient, with the
// weights in both layouts, negative ids (from the end), ids out of range
// (zero rows, no contribution), experts no row reaches (zero gradients),
// int32 ids, more rows than a tile, bf16 operands; bitwise the same on
// the calling thread and on the kernels' team; and the validator's refusals.
//
//===----------------------------------------------------------------------===//

#include "GroupedGemm.h"
#include "Half.h"
#include "KernelThreads.h"
#include "TestUtil.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

struct Case {
  int64_t M, K, N, E;
  bool transposeW = false;
  DType dtype = DType::F32;
  DType idType = DType::I64;
};

/// The ids: mostly in range, some negative (from the end), and with
/// `invalid`, some out of range both ways. Expert E - 1 gets no row when
/// `skipLast` (its gradient must be zeros).
std::vector<int64_t> drawIds(const Case &c, bool invalid, bool skipLast) {
  std::mt19937 gen(77);
  std::uniform_int_distribution<int64_t> pick(0, c.E - (skipLast ? 2 : 1));
  std::vector<int64_t> ids(c.M);
  for (int64_t m = 0; m < c.M; ++m) {
    ids[m] = pick(gen);
    if (m % 7 == 3)
      ids[m] -= c.E; // the same expert, counted from the end
    if (invalid && m % 11 == 5)
      ids[m] = m % 2 ? c.E + 3 : -c.E - 2;
  }
  return ids;
}

/// The expert a row reaches, or -1.
int64_t expertOf(int64_t id, int64_t E) {
  int64_t g = id < 0 ? id + E : id;
  return g >= 0 && g < E ? g : -1;
}

std::vector<float> drawValues(int64_t n, bool bf16, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> r(n);
  for (float &x : r)
    x = bf16 ? rt::bf16ToFloat(rt::floatToBf16(u(gen))) : u(gen);
  return r;
}

std::vector<uint8_t> encode(DType dtype, const std::vector<float> &v) {
  if (dtype != DType::BF16)
    return bytesOf(v);
  std::vector<uint16_t> h;
  for (float x : v)
    h.push_back(rt::floatToBf16(x));
  return bytesOf(h);
}

std::vector<float> decode(DType dtype, const std::vector<uint8_t> &b) {
  std::vector<float> r;
  if (dtype == DType::BF16) {
    for (size_t i = 0; i + 1 < b.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, &b[i], 2);
      r.push_back(rt::bf16ToFloat(h));
    }
    return r;
  }
  r.resize(b.size() / 4);
  std::memcpy(r.data(), b.data(), r.size() * 4);
  return r;
}

/// w[g] as K x N, whichever layout it is stored in.
float weightAt(const Case &c, const std::vector<float> &w, int64_t g, int64_t k,
               int64_t n) {
  return c.transposeW ? w[(g * c.N + n) * c.K + k] : w[(g * c.K + k) * c.N + n];
}

Command groupedCommand(const Case &c, bool weightGrad) {
  Command cmd;
  cmd.kind = CommandKind::GroupedGemm;
  cmd.params.assign(kGroupedNumParams, 0);
  cmd.params[kGroupedDType] = static_cast<int64_t>(c.dtype);
  cmd.params[kGroupedIdDType] = static_cast<int64_t>(c.idType);
  cmd.params[kGroupedRows] = c.M;
  cmd.params[kGroupedK] = c.K;
  cmd.params[kGroupedN] = c.N;
  cmd.params[kGroupedExperts] = c.E;
  cmd.params[kGroupedTransposeW] = c.transposeW;
  cmd.params[kGroupedWeightGrad] = weightGrad;
  return cmd;
}

struct Buffer {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Runs `cmd` on the CPU backend with buffers inputs then one output;
/// returns the output's bytes (empty on failure, with `error` set).
std::vector<uint8_t> run(Command cmd, const std::vector<Buffer> &inputs,
                         const Buffer &output, std::string *error = nullptr) {
  Plan p;
  uint64_t next = 0;
  auto place = [&](const Buffer &b, std::string name) {
    TensorInfo info = tensor(std::move(name), b.dtype, b.shape, next);
    next += (info.byteSize() + 63) / 64 * 64 + 64;
    cmd.buffers.push_back(info.offset);
    return info;
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    p.inputs.push_back(place(inputs[i], "in" + std::to_string(i)));
  p.outputs.push_back(place(output, "out"));
  p.arenaBytes = next;
  p.target = "cpu-x86_64";
  p.commands = {cmd};
  Loaded l(p);
  if (!l.error.empty()) {
    if (error)
      *error = l.error;
    return {};
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(l.set(i, inputs[i].bytes)) << l.error;
  EXPECT_TRUE(l.run()) << l.error;
  return l.out<uint8_t>(0);
}

std::vector<uint8_t> idBytes(const Case &c, const std::vector<int64_t> &ids) {
  if (c.idType == DType::I64)
    return bytesOf(ids);
  std::vector<int32_t> narrow(ids.begin(), ids.end());
  return bytesOf(narrow);
}

/// Checks the forward and the weight gradient of `c` against plain loops
/// (in double) within `tol` relative to the largest magnitude.
void check(const Case &c, bool invalid, bool skipLast, double tol) {
  bool bf16 = c.dtype == DType::BF16;
  std::vector<int64_t> ids = drawIds(c, invalid, skipLast);
  std::vector<float> x = drawValues(c.M * c.K, bf16, 1);
  std::vector<float> w = drawValues(c.E * c.K * c.N, bf16, 2);
  std::vector<float> dy = drawValues(c.M * c.N, bf16, 3);
  std::vector<int64_t> wShape = c.transposeW
                                    ? std::vector<int64_t>{c.E, c.N, c.K}
                                    : std::vector<int64_t>{c.E, c.K, c.N};
  Buffer bx{c.dtype, {c.M, c.K}, encode(c.dtype, x)};
  Buffer bw{c.dtype, wShape, encode(c.dtype, w)};
  Buffer bids{c.idType, {c.M}, idBytes(c, ids)};
  Buffer bdy{c.dtype, {c.M, c.N}, encode(c.dtype, dy)};

  std::vector<float> out =
      decode(c.dtype, run(groupedCommand(c, false), {bx, bw, bids},
                          Buffer{c.dtype, {c.M, c.N}, {}}));
  ASSERT_EQ(out.size(), static_cast<size_t>(c.M * c.N));
  for (int64_t m = 0; m < c.M; ++m) {
    int64_t g = expertOf(ids[m], c.E);
    for (int64_t n = 0; n < c.N; ++n) {
      double want = 0;
      if (g >= 0)
        for (int64_t k = 0; k < c.K; ++k)
          want += double(x[m * c.K + k]) * weightAt(c, w, g, k, n);
      if (g < 0)
        ASSERT_EQ(out[m * c.N + n], 0.0f)
            << "row " << m << " (id " << ids[m] << ") names no expert";
      else
        ASSERT_NEAR(out[m * c.N + n], want, tol * (1 + std::fabs(want)))
            << "row " << m << " col " << n;
    }
  }

  std::vector<float> dw =
      decode(c.dtype, run(groupedCommand(c, true), {bx, bdy, bids},
                          Buffer{c.dtype, wShape, {}}));
  ASSERT_EQ(dw.size(), static_cast<size_t>(c.E * c.K * c.N));
  for (int64_t g = 0; g < c.E; ++g)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t n = 0; n < c.N; ++n) {
        double want = 0;
        for (int64_t m = 0; m < c.M; ++m)
          if (expertOf(ids[m], c.E) == g)
            want += double(x[m * c.K + k]) * dy[m * c.N + n];
        float got = weightAt(c, dw, g, k, n);
        if (skipLast && g == c.E - 1)
          ASSERT_EQ(got, 0.0f) << "expert " << g << " has no rows";
        else
          ASSERT_NEAR(got, want, tol * (1 + std::fabs(want)))
              << "expert " << g << " (" << k << ", " << n << ")";
      }
}

TEST(GroupedGemm, ForwardAndWeightGradient) {
  check({37, 12, 9, 4}, false, false, 1e-5);
}

TEST(GroupedGemm, TransposedWeights) {
  check({37, 12, 9, 4, /*transposeW=*/true}, false, false, 1e-5);
}

TEST(GroupedGemm, IdsOutOfRangeAndIdleExperts) {
  check({50, 8, 6, 5, true}, /*invalid=*/true, /*skipLast=*/true, 1e-5);
  check({50, 8, 6, 5, false, DType::F32, DType::I32}, true, true, 1e-5);
}

TEST(GroupedGemm, ManyTilesOfRowsAndColumns) {
  // More rows per expert than a tile (128) and more columns (256).
  check({700, 16, 300, 3, true}, false, false, 1e-5);
}

TEST(GroupedGemm, Bf16) {
  // Operands exact in bf16, f32 accumulation, the result rounded once.
  check({40, 16, 12, 4, true, DType::BF16}, true, false, 1e-2);
}

TEST(GroupedGemm, SameBitsOnTheCallingThreadAndTheTeam) {
  // Straight on runGroupedGemm: no threads (the calling thread) and the
  // kernels' OpenMP team (a thread per core).
  Case c{300, 24, 200, 6, true};
  std::vector<int64_t> ids = drawIds(c, false, false);
  std::vector<float> x = drawValues(c.M * c.K, false, 1);
  std::vector<float> w = drawValues(c.E * c.K * c.N, false, 2);
  std::vector<float> dy = drawValues(c.M * c.N, false, 3);
  auto arenaOf = [&](bool weightGrad) {
    std::vector<uint8_t> arena;
    Command cmd = groupedCommand(c, weightGrad);
    auto append = [&](const std::vector<uint8_t> &bytes) {
      cmd.buffers.push_back(arena.size());
      arena.insert(arena.end(), bytes.begin(), bytes.end());
      arena.resize((arena.size() + 63) / 64 * 64);
    };
    append(bytesOf(x));
    append(bytesOf(weightGrad ? dy : w));
    append(bytesOf(ids));
    append(std::vector<uint8_t>(
        static_cast<size_t>(weightGrad ? c.E * c.K * c.N : c.M * c.N) * 4));
    return std::make_pair(cmd, arena);
  };
  rt::KernelThreads team;
  for (bool weightGrad : {false, true}) {
    auto [cmd, one] = arenaOf(weightGrad);
    std::vector<uint8_t> many = one;
    rt::runGroupedGemm(cmd, one.data(), nullptr);
    rt::runGroupedGemm(cmd, many.data(), &team);
    EXPECT_EQ(one, many) << (weightGrad ? "weight gradient" : "forward")
                         << " on " << team.describe();
  }
}

TEST(GroupedGemm, ValidatorRefusals) {
  Case c{8, 4, 4, 2};
  Buffer bx{c.dtype, {8, 4}, std::vector<uint8_t>(8 * 4 * 4)};
  Buffer bw{c.dtype, {2, 4, 4}, std::vector<uint8_t>(2 * 16 * 4)};
  Buffer bids{c.idType, {8}, std::vector<uint8_t>(8 * 8)};
  Buffer out{c.dtype, {8, 4}, {}};
  std::string error;
  Command noExperts = groupedCommand(c, false);
  noExperts.params[kGroupedExperts] = 0;
  EXPECT_TRUE(run(noExperts, {bx, bw, bids}, out, &error).empty());
  EXPECT_NE(error.find("at least one expert"), std::string::npos) << error;
  Command badIds = groupedCommand(c, false);
  badIds.params[kGroupedIdDType] = static_cast<int64_t>(DType::F32);
  EXPECT_TRUE(run(badIds, {bx, bw, bids}, out, &error).empty());
  EXPECT_NE(error.find("id dtype"), std::string::npos) << error;
  Command tooBig = groupedCommand(c, false);
  tooBig.params[kGroupedN] = 4000;
  EXPECT_TRUE(run(tooBig, {bx, bw, bids}, out, &error).empty());
  EXPECT_NE(error.find("arena"), std::string::npos) << error;
}

} // namespace
