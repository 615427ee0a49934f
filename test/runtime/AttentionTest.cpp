//===- AttentionTest.cpp - The CPU's fused attention commands -------------===//
//
// Attention and AttentionBackward commands against attention computed in
// double from its definition (cleave.attention in CleaveOps.td), on shapes
// that cross the kernel's query and key tiles (64 and 128) with partial
// tiles, grouped-query heads, causal masks with negative offsets (rows with
// no key give zeros), broadcast biases with -inf entries, softcaps, and
// bf16 operands.
//
//===----------------------------------------------------------------------===//

#include "AttentionEmulation.h"
#include "Half.h"
#include "TestUtil.h"
#include "cuda/AttentionCommand.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <random>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

struct Case {
  int64_t B, Hq, Hkv, Sq, Skv, D, Dv;
  bool causal = false;
  int64_t offset = 0;
  double scale = 0.5, softcap = 0;
  /// Bias dims (0: no bias): biasB x biasH x biasSq x Skv.
  int64_t biasB = 0, biasH = 0, biasSq = 0;
  DType dtype = DType::F32;
};

struct Reference {
  std::vector<double> out, dq, dk, dv;
};

/// Attention and its gradients in double.
Reference reference(const Case &c, const std::vector<double> &q,
                    const std::vector<double> &k, const std::vector<double> &v,
                    const std::vector<double> &bias,
                    const std::vector<double> &dout) {
  const double inf = std::numeric_limits<double>::infinity();
  int64_t G = c.Hq / c.Hkv;
  Reference r;
  r.out.assign(c.B * c.Hq * c.Sq * c.Dv, 0);
  r.dq.assign(c.B * c.Hq * c.Sq * c.D, 0);
  r.dk.assign(c.B * c.Hkv * c.Skv * c.D, 0);
  r.dv.assign(c.B * c.Hkv * c.Skv * c.Dv, 0);
  std::vector<double> s(c.Skv), t(c.Skv), p(c.Skv), dp(c.Skv);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Sq; ++i) {
        int64_t hk = h / G;
        const double *qi = &q[((b * c.Hq + h) * c.Sq + i) * c.D];
        double m = -inf;
        for (int64_t j = 0; j < c.Skv; ++j) {
          const double *kj = &k[((b * c.Hkv + hk) * c.Skv + j) * c.D];
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d)
            dot += qi[d] * kj[d];
          s[j] = c.scale * dot;
          if (c.softcap > 0) {
            t[j] = std::tanh(s[j] / c.softcap);
            s[j] = c.softcap * t[j];
          }
          if (c.biasB) {
            int64_t bb = c.biasB == 1 ? 0 : b, hh = c.biasH == 1 ? 0 : h,
                    ii = c.biasSq == 1 ? 0 : i;
            s[j] += bias[((bb * c.biasH + hh) * c.biasSq + ii) * c.Skv + j];
          }
          if (c.causal && j > i + c.offset)
            s[j] = -inf;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < c.Skv; ++j) {
          p[j] = m == -inf ? 0 : std::exp(s[j] - m);
          sum += p[j];
        }
        for (int64_t j = 0; j < c.Skv; ++j)
          p[j] = sum > 0 ? p[j] / sum : 0;
        const double *doi = &dout[((b * c.Hq + h) * c.Sq + i) * c.Dv];
        double *oi = &r.out[((b * c.Hq + h) * c.Sq + i) * c.Dv];
        for (int64_t j = 0; j < c.Skv; ++j) {
          const double *vj = &v[((b * c.Hkv + hk) * c.Skv + j) * c.Dv];
          double *dvj = &r.dv[((b * c.Hkv + hk) * c.Skv + j) * c.Dv];
          dp[j] = 0;
          for (int64_t e = 0; e < c.Dv; ++e) {
            oi[e] += p[j] * vj[e];
            dvj[e] += p[j] * doi[e];
            dp[j] += doi[e] * vj[e];
          }
        }
        double rowDot = 0;
        for (int64_t j = 0; j < c.Skv; ++j)
          rowDot += p[j] * dp[j];
        double *dqi = &r.dq[((b * c.Hq + h) * c.Sq + i) * c.D];
        for (int64_t j = 0; j < c.Skv; ++j) {
          double ds = p[j] * (dp[j] - rowDot);
          if (c.softcap > 0)
            ds *= 1 - t[j] * t[j];
          ds *= c.scale;
          const double *kj = &k[((b * c.Hkv + hk) * c.Skv + j) * c.D];
          double *dkj = &r.dk[((b * c.Hkv + hk) * c.Skv + j) * c.D];
          for (int64_t d = 0; d < c.D; ++d) {
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
          }
        }
      }
  return r;
}

/// Values of `dtype` drawn uniformly from [-1, 1) (with probability
/// `maskRate` -inf instead), as the bytes a plan reads and the doubles they
/// hold exactly.
struct Data {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};
Data draw(std::mt19937 &gen, int64_t n, DType dtype, double maskRate = 0) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), coin(0.0f, 1.0f);
  Data d;
  d.bytes.resize(n * dtypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    float x =
        coin(gen) < maskRate ? -std::numeric_limits<float>::infinity() : u(gen);
    if (dtype == DType::BF16) {
      uint16_t h = rt::floatToBf16(x);
      std::memcpy(&d.bytes[i * 2], &h, 2);
      d.values.push_back(rt::bf16ToFloat(h));
    } else {
      std::memcpy(&d.bytes[i * 4], &x, 4);
      d.values.push_back(x);
    }
  }
  return d;
}

Command attentionCommand(const Case &c, CommandKind kind, DType gradType) {
  Command cmd;
  cmd.kind = kind;
  cmd.params.assign(kAttnNumParams, 0);
  cmd.params[kAttnDType] = static_cast<int64_t>(c.dtype);
  cmd.params[kAttnDoutDType] = static_cast<int64_t>(
      kind == CommandKind::Attention ? c.dtype : DType::F32);
  cmd.params[kAttnGradDType] =
      static_cast<int64_t>(kind == CommandKind::Attention ? c.dtype : gradType);
  cmd.params[kAttnBatch] = c.B;
  cmd.params[kAttnQHeads] = c.Hq;
  cmd.params[kAttnKVHeads] = c.Hkv;
  cmd.params[kAttnQLen] = c.Sq;
  cmd.params[kAttnKVLen] = c.Skv;
  cmd.params[kAttnHeadDim] = c.D;
  cmd.params[kAttnValueDim] = c.Dv;
  cmd.params[kAttnCausal] = c.causal;
  cmd.params[kAttnCausalOffset] = c.offset;
  cmd.params[kAttnScaleBits] = doubleBits(c.scale);
  cmd.params[kAttnSoftcapBits] = doubleBits(c.softcap);
  if (c.biasB) {
    cmd.params[kAttnBiasDType] = static_cast<int64_t>(DType::F32);
    cmd.params[kAttnBiasBatch] = c.biasB;
    cmd.params[kAttnBiasHeads] = c.biasH;
    cmd.params[kAttnBiasQLen] = c.biasSq;
  }
  return cmd;
}

/// Sets the inputs of `l` (Loaded or Emulated), runs it and compares its
/// outputs with `want`.
template <typename Runner>
void compareRun(const Case &c, double tolerance, Runner &l, const Data &q,
                const Data &k, const Data &v, const Data &bias,
                const Data &dout, const Reference &want) {
  ASSERT_TRUE(l.set(0, q.bytes) && l.set(1, k.bytes) && l.set(2, v.bytes) &&
              l.set(3, dout.bytes))
      << l.error;
  if (c.biasB)
    ASSERT_TRUE(l.set(4, bias.bytes)) << l.error;
  ASSERT_TRUE(l.run()) << l.error;

  std::vector<double> out;
  if (c.dtype == DType::BF16) {
    for (uint16_t h : l.template out<uint16_t>(0))
      out.push_back(rt::bf16ToFloat(h));
  } else {
    for (float x : l.template out<float>(0))
      out.push_back(x);
  }
  auto compare = [&](const char *name, const std::vector<double> &got,
                     const std::vector<double> &ref) {
    ASSERT_EQ(got.size(), ref.size()) << name;
    double scale = 0;
    for (double x : ref)
      scale = std::max(scale, std::fabs(x));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i]))
          << name << "[" << i << "] = " << got[i];
      double e = std::fabs(got[i] - ref[i]) / std::max(scale, 1e-30);
      if (e > worst) {
        worst = e;
        at = i;
      }
    }
    EXPECT_LE(worst, tolerance)
        << name << "[" << at << "]: got " << got[at] << ", want " << ref[at];
  };
  compare("out", out, want.out);
  auto f32 = [&](size_t i) {
    std::vector<double> r;
    for (float x : l.template out<float>(i))
      r.push_back(x);
    return r;
  };
  compare("dq", f32(1), want.dq);
  compare("dk", f32(2), want.dk);
  compare("dv", f32(3), want.dv);
}

/// Host arena runs of a plan's attention commands through the CUDA
/// kernels' emulation (AttentionEmulation.cpp), with Loaded's interface.
struct Emulated {
  const Plan &plan;
  std::vector<uint8_t> arena;
  std::string error;
  explicit Emulated(const Plan &p) : plan(p), arena(p.arenaBytes) {}
  bool set(size_t i, const std::vector<uint8_t> &bytes) {
    std::memcpy(arena.data() + plan.inputs[i].offset, bytes.data(),
                bytes.size());
    return true;
  }
  bool run() {
    for (const Command &c : plan.commands)
      emulateAttention(rt::cuda::attentionArgsOf(
                           c, reinterpret_cast<uintptr_t>(arena.data())),
                       c.kind == CommandKind::AttentionBackward);
    return true;
  }
  template <typename T> std::vector<T> out(size_t i) {
    const TensorInfo &t = plan.outputs[i];
    std::vector<T> v(t.byteSize() / sizeof(T));
    std::memcpy(v.data(), arena.data() + t.offset, t.byteSize());
    return v;
  }
};

/// Runs the forward and backward commands of `c` (the backward reading the
/// forward's output) on `backend` ("cpu", "cuda", or "cuda-emulated": the
/// CUDA kernels on host threads) and compares out, dq, dk, dv with the
/// reference; on cuda twice (enqueued, then replayed from a CUDA graph).
/// Skips when the backend cannot be made here (cuda without a GPU).
void check(const Case &c, double tolerance, const char *backend = "cpu") {
  std::mt19937 gen(1234);
  int64_t nq = c.B * c.Hq * c.Sq * c.D, nk = c.B * c.Hkv * c.Skv * c.D,
          nv = c.B * c.Hkv * c.Skv * c.Dv, no = c.B * c.Hq * c.Sq * c.Dv,
          nb = c.biasB * c.biasH * c.biasSq * c.Skv;
  Data q = draw(gen, nq, c.dtype), k = draw(gen, nk, c.dtype),
       v = draw(gen, nv, c.dtype), bias = draw(gen, nb, DType::F32, 0.05),
       dout = draw(gen, no, DType::F32);
  Reference want =
      reference(c, q.values, k.values, v.values, bias.values, dout.values);

  Plan p;
  uint64_t next = 0;
  auto place = [&](int64_t elements, DType dtype) {
    uint64_t at = next;
    next += (elements * dtypeSize(dtype) + 63) / 64 * 64 + 64;
    return at;
  };
  uint64_t oq = place(nq, c.dtype), ok = place(nk, c.dtype),
           ov = place(nv, c.dtype), ob = place(nb, DType::F32),
           oout = place(no, c.dtype), odout = place(no, DType::F32),
           odq = place(nq, DType::F32), odk = place(nk, DType::F32),
           odv = place(nv, DType::F32);
  p.arenaBytes = next;
  p.inputs = {tensor("q", c.dtype, {c.B, c.Hq, c.Sq, c.D}, oq),
              tensor("k", c.dtype, {c.B, c.Hkv, c.Skv, c.D}, ok),
              tensor("v", c.dtype, {c.B, c.Hkv, c.Skv, c.Dv}, ov),
              tensor("dout", DType::F32, {c.B, c.Hq, c.Sq, c.Dv}, odout)};
  if (c.biasB)
    p.inputs.push_back(
        tensor("bias", DType::F32, {c.biasB, c.biasH, c.biasSq, c.Skv}, ob));
  p.outputs = {tensor("out", c.dtype, {c.B, c.Hq, c.Sq, c.Dv}, oout),
               tensor("dq", DType::F32, {c.B, c.Hq, c.Sq, c.D}, odq),
               tensor("dk", DType::F32, {c.B, c.Hkv, c.Skv, c.D}, odk),
               tensor("dv", DType::F32, {c.B, c.Hkv, c.Skv, c.Dv}, odv)};
  Command fwd = attentionCommand(c, CommandKind::Attention, c.dtype);
  Command bwd = attentionCommand(c, CommandKind::AttentionBackward, DType::F32);
  fwd.buffers = {oq, ok, ov};
  bwd.buffers = {oq, ok, ov};
  if (c.biasB) {
    fwd.buffers.push_back(ob);
    bwd.buffers.push_back(ob);
  }
  fwd.buffers.push_back(oout);
  bwd.buffers.insert(bwd.buffers.end(), {oout, odout, odq, odk, odv});
  p.commands = {fwd, bwd};
  bool cuda = std::string(backend) == "cuda";
  p.target = cuda ? "cuda-sm_90a" : "cpu-x86_64";
  if (std::string(backend) == "cuda-emulated") {
    Emulated e(p);
    compareRun(c, tolerance, e, q, k, v, bias, dout, want);
    return;
  }
  Loaded l(p, backend);
  if (cuda && l.code == CLEAVE_RT_UNAVAILABLE)
    GTEST_SKIP() << "no usable CUDA device: " << l.error;
  ASSERT_EQ(l.error, "");
  compareRun(c, tolerance, l, q, k, v, bias, dout, want);
  if (cuda)
    compareRun(c, tolerance, l, q, k, v, bias, dout, want); // graph replay
}

} // namespace

TEST(Attention, MultiHeadAcrossTiles) {
  // 70 queries: a full and a partial query tile; 150 keys: a full and a
  // partial key tile.
  check({2, 2, 2, 70, 150, 8, 5}, 2e-5);
}

TEST(Attention, GroupedCausalWithEmptyRows) {
  // Offset -3: the first three queries see no key (zeros in both
  // directions); whole key tiles past the diagonal are skipped.
  Case c{1, 4, 2, 67, 131, 6, 7};
  c.causal = true;
  c.offset = -3;
  check(c, 2e-5);
  c.offset = 64; // a KV cache: every query sees 64 more keys
  check(c, 2e-5);
}

TEST(Attention, BroadcastBiasWithMasksAndSoftcap) {
  // A bias of batch x 1 x queries x keys with some -inf entries, and a
  // softcap.
  Case c{2, 3, 3, 66, 129, 4, 4};
  c.biasB = 2;
  c.biasH = 1;
  c.biasSq = 66;
  c.softcap = 2.0;
  c.scale = 0.7;
  check(c, 2e-5);
  Case h = c; // one bias row for every query, per head
  h.biasB = 1;
  h.biasH = 3;
  h.biasSq = 1;
  h.causal = true;
  check(h, 2e-5);
}

TEST(Attention, Bf16Operands) {
  // bf16 q, k, v widened exactly and computed in f32; out rounded to bf16
  // (half an ulp, 2^-9 of its magnitude), the f32 gradients as accurate as
  // f32 ones.
  Case c{1, 2, 1, 65, 140, 16, 16};
  c.dtype = DType::BF16;
  c.causal = true;
  check(c, 4e-3);
}

/// The CPU tests' cases and tolerances, plus head dimensions at the CUDA
/// kernels' limit of 128, on `backend`. `small` shrinks the lengths for the
/// host emulation, still past a block of queries (32) and of keys (16) and
/// past a key tile (32) with partial ones.
void checkCudaCases(const char *backend, bool small) {
  auto len = [&](int64_t n, int64_t s) { return small ? s : n; };
  check({2, 2, 2, len(70, 37), len(150, 45), 8, 5}, 2e-5, backend);
  Case g{1, 4, 2, len(67, 35), len(131, 50), 6, 7};
  g.causal = true;
  g.offset = -3;
  check(g, 2e-5, backend);
  g.offset = len(64, 10);
  check(g, 2e-5, backend);
  Case b{2, 3, 3, len(66, 34), len(129, 33), 4, 4};
  b.biasB = 2;
  b.biasH = 1;
  b.biasSq = b.Sq;
  b.softcap = 2.0;
  b.scale = 0.7;
  check(b, 2e-5, backend);
  Case h{1, 2, 1, len(65, 33), len(140, 40), 16, 16};
  h.dtype = DType::BF16;
  h.causal = true;
  check(h, 4e-3, backend);
  Case wide{1, 2, 2, len(40, 20), len(33, 18), 128, 128};
  wide.causal = true;
  check(wide, 2e-5, backend);
}

// The CUDA kernels (runtime/src/cuda/AttentionKernels.cu) on a GPU; skipped
// without one (the GPU check runs them).
TEST(CudaGpu, AttentionMatchesReference) { checkCudaCases("cuda", false); }

// The same kernels on host threads, one per CUDA thread
// (AttentionEmulation.cpp): what they compute, checked where no GPU is.
TEST(Attention, CudaKernelsEmulatedOnTheHost) {
  checkCudaCases("cuda-emulated", true);
}

TEST(Attention, ValidatorRefusesBadCommands) {
  Case c{1, 3, 2, 4, 4, 4, 4}; // 3 query heads over 2 key/value heads
  Plan p;
  p.arenaBytes = 4096;
  Command cmd = attentionCommand(c, CommandKind::Attention, DType::F32);
  cmd.buffers = {0, 256, 512, 768};
  p.commands = {cmd};
  Loaded l(p);
  EXPECT_NE(l.error.find("query heads are not a multiple"), std::string::npos)
      << l.error;
  Case small{1, 1, 1, 4, 4, 4, 4}; // 64 bytes each
  Command far = attentionCommand(small, CommandKind::Attention, DType::F32);
  far.buffers = {0, 64, 128, 4064}; // out runs past the arena's end
  p.commands = {far};
  Loaded m(p);
  EXPECT_NE(m.error.find("out: buffer offset 4064"), std::string::npos)
      << m.error;
  Case big{1, 1, 1, 64, 64, 64, 64}; // 16 KiB each
  Command huge = attentionCommand(big, CommandKind::Attention, DType::F32);
  huge.buffers = {0, 0, 0, 0};
  p.commands = {huge};
  Loaded n(p);
  EXPECT_NE(n.error.find("q: larger than the arena"), std::string::npos)
      << n.error;
  Command bias = attentionCommand(small, CommandKind::Attention, DType::F32);
  bias.params[kAttnBiasDType] = static_cast<int64_t>(DType::F32);
  bias.params[kAttnBiasBatch] = 2; // neither 1 nor the batch
  bias.params[kAttnBiasHeads] = 1;
  bias.params[kAttnBiasQLen] = 1;
  bias.buffers = {0, 64, 128, 192, 256};
  p.commands = {bias};
  Loaded o(p);
  EXPECT_NE(o.error.find("bias dimensions 2 x 1 x 1"), std::string::npos)
      << o.error;
  // A CUDA plan's attention with a head dimension past the kernels' 128.
  Case wide{1, 1, 1, 2, 2, 256, 256}; // 2 KiB each
  Command w = attentionCommand(wide, CommandKind::Attention, DType::F32);
  w.buffers = {0, 2048, 4096, 6144};
  Plan cp;
  cp.target = "cuda-sm_90a";
  cp.arenaBytes = 8192;
  cp.commands = {w};
  Loaded q(cp);
  EXPECT_NE(q.error.find("head dimensions up to 128, got 256 and 256"),
            std::string::npos)
      << q.error;
}
