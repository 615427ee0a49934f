//===- BlockAttentionTest.cpp - Block attention for ring attention --------===//
//
// The block form of the CPU's Attention and AttentionBackward commands
// (kAttnBlock = 1: one step of ring attention, with the global positions of
// its query and key rows): with the rows' own positions it gives bitwise the
// plain command's results; the keys split into blocks (contiguous and
// zigzag, queries permuted too) and merged by their log-sum-exp give the
// whole attention, forward and backward; rows without keys give zeros and
// lse = -FLT_MAX; bf16 operands; and the validator's refusals.
//
//===----------------------------------------------------------------------===//

#include "Half.h"
#include "TestUtil.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>

using namespace cleave;
using namespace cleave::plan;
using namespace cleave::test;

namespace {

struct Case {
  int64_t B, Hq, Hkv, Sq, Skv, D, Dv;
  bool causal = false;
  int64_t offset = 0;
  double scale = 0.5, softcap = 0;
  bool bias = false; ///< A B x 1 x Sq x Skv f32 bias with some -inf.
  DType dtype = DType::F32;
};

/// An arena tensor: its dtype, shape and bytes (empty for results).
struct Tensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

Tensor floats(DType dtype, std::vector<int64_t> shape,
              const std::vector<float> &values) {
  Tensor t{dtype, std::move(shape), {}};
  if (dtype == DType::BF16) {
    std::vector<uint16_t> h;
    for (float x : values)
      h.push_back(rt::floatToBf16(x));
    t.bytes = bytesOf(h);
  } else {
    t.bytes = bytesOf(values);
  }
  return t;
}

Tensor positions(const std::vector<int64_t> &pos) {
  return {DType::I64, {static_cast<int64_t>(pos.size())}, bytesOf(pos)};
}

std::vector<float> valuesOf(const Tensor &t) {
  std::vector<float> r;
  if (t.dtype == DType::BF16) {
    for (size_t i = 0; i + 1 < t.bytes.size(); i += 2) {
      uint16_t h;
      std::memcpy(&h, &t.bytes[i], 2);
      r.push_back(rt::bf16ToFloat(h));
    }
    return r;
  }
  r.resize(t.bytes.size() / 4);
  std::memcpy(r.data(), t.bytes.data(), r.size() * 4);
  return r;
}

Command attentionCommand(const Case &c, CommandKind kind, bool block,
                         int64_t Sq, int64_t Skv) {
  bool fwd = kind == CommandKind::Attention;
  Command cmd;
  cmd.kind = kind;
  cmd.params.assign(kAttnNumParams, 0);
  cmd.params[kAttnDType] = static_cast<int64_t>(c.dtype);
  cmd.params[kAttnDoutDType] = static_cast<int64_t>(fwd ? c.dtype : DType::F32);
  cmd.params[kAttnGradDType] = static_cast<int64_t>(fwd ? c.dtype : DType::F32);
  cmd.params[kAttnBatch] = c.B;
  cmd.params[kAttnQHeads] = c.Hq;
  cmd.params[kAttnKVHeads] = c.Hkv;
  cmd.params[kAttnQLen] = Sq;
  cmd.params[kAttnKVLen] = Skv;
  cmd.params[kAttnHeadDim] = c.D;
  cmd.params[kAttnValueDim] = c.Dv;
  cmd.params[kAttnCausal] = c.causal;
  cmd.params[kAttnCausalOffset] = c.offset;
  cmd.params[kAttnScaleBits] = doubleBits(c.scale);
  cmd.params[kAttnSoftcapBits] = doubleBits(c.softcap);
  if (c.bias) {
    cmd.params[kAttnBiasDType] = static_cast<int64_t>(DType::F32);
    cmd.params[kAttnBiasBatch] = c.B;
    cmd.params[kAttnBiasHeads] = 1;
    cmd.params[kAttnBiasQLen] = Sq;
  }
  cmd.params[kAttnBlock] = block;
  return cmd;
}

/// Runs `cmd` on the CPU backend with buffers `inputs` then `outputs`
/// (their bytes filled in).
void runCommand(Command cmd, const std::vector<Tensor> &inputs,
                std::vector<Tensor> &outputs) {
  Plan p;
  uint64_t next = 0;
  auto place = [&](const Tensor &t, const char *prefix, size_t i) {
    TensorInfo info =
        tensor(prefix + std::to_string(i), t.dtype, t.shape, next);
    next += (info.byteSize() + 63) / 64 * 64 + 64;
    cmd.buffers.push_back(info.offset);
    return info;
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    p.inputs.push_back(place(inputs[i], "in", i));
  for (size_t i = 0; i < outputs.size(); ++i)
    p.outputs.push_back(place(outputs[i], "out", i));
  p.arenaBytes = next;
  p.target = "cpu-x86_64";
  p.commands = {cmd};
  Loaded l(p);
  ASSERT_EQ(l.error, "");
  for (size_t i = 0; i < inputs.size(); ++i)
    ASSERT_TRUE(l.set(i, inputs[i].bytes)) << l.error;
  ASSERT_TRUE(l.run()) << l.error;
  for (size_t i = 0; i < outputs.size(); ++i)
    outputs[i].bytes = l.out<uint8_t>(i);
}

/// Random operands of a case: q, k, v, dout (f32 values; the bf16 case's
/// rounded to bf16) and the bias.
struct Operands {
  std::vector<float> q, k, v, dout, bias;
};

Operands draw(const Case &c) {
  std::mt19937 gen(4321);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), coin(0.0f, 1.0f);
  auto values = [&](int64_t n, bool round) {
    std::vector<float> r(n);
    for (float &x : r)
      x = round ? rt::bf16ToFloat(rt::floatToBf16(u(gen))) : u(gen);
    return r;
  };
  bool bf16 = c.dtype == DType::BF16;
  Operands o;
  o.q = values(c.B * c.Hq * c.Sq * c.D, bf16);
  o.k = values(c.B * c.Hkv * c.Skv * c.D, bf16);
  o.v = values(c.B * c.Hkv * c.Skv * c.Dv, bf16);
  o.dout = values(c.B * c.Hq * c.Sq * c.Dv, false);
  if (c.bias) {
    o.bias = values(c.B * c.Sq * c.Skv, false);
    for (float &x : o.bias)
      if (coin(gen) < 0.05f)
        x = -std::numeric_limits<float>::infinity();
  }
  return o;
}

/// Rows `rows` (in that order) of each of the `outer` matrices of `inner`
/// rows x `width` in `x`.
std::vector<float> gatherRows(const std::vector<float> &x, int64_t outer,
                              int64_t inner, int64_t width,
                              const std::vector<int64_t> &rows) {
  std::vector<float> r;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : rows) {
      const float *row = &x[(o * inner + i) * width];
      r.insert(r.end(), row, row + width);
    }
  return r;
}

/// The plain command's results (positions i and j): out, and dq, dk, dv.
struct Whole {
  std::vector<float> out, dq, dk, dv;
};

Whole runWhole(const Case &c, const Operands &o) {
  std::vector<Tensor> in = {floats(c.dtype, {c.B, c.Hq, c.Sq, c.D}, o.q),
                            floats(c.dtype, {c.B, c.Hkv, c.Skv, c.D}, o.k),
                            floats(c.dtype, {c.B, c.Hkv, c.Skv, c.Dv}, o.v)};
  if (c.bias)
    in.push_back(floats(DType::F32, {c.B, 1, c.Sq, c.Skv}, o.bias));
  std::vector<Tensor> out = {{c.dtype, {c.B, c.Hq, c.Sq, c.Dv}, {}}};
  runCommand(attentionCommand(c, CommandKind::Attention, false, c.Sq, c.Skv),
             in, out);
  Whole w;
  w.out = valuesOf(out[0]);
  in.push_back(out[0]);
  in.push_back(floats(DType::F32, {c.B, c.Hq, c.Sq, c.Dv}, o.dout));
  std::vector<Tensor> grads = {{DType::F32, {c.B, c.Hq, c.Sq, c.D}, {}},
                               {DType::F32, {c.B, c.Hkv, c.Skv, c.D}, {}},
                               {DType::F32, {c.B, c.Hkv, c.Skv, c.Dv}, {}}};
  runCommand(
      attentionCommand(c, CommandKind::AttentionBackward, false, c.Sq, c.Skv),
      in, grads);
  w.dq = valuesOf(grads[0]);
  w.dk = valuesOf(grads[1]);
  w.dv = valuesOf(grads[2]);
  return w;
}

/// One block: the queries `qrows` and keys `krows` of the case (global
/// indices, which are their positions), gathered in that order.
struct Block {
  std::vector<int64_t> qrows, krows;
};

struct BlockForward {
  std::vector<float> out, lse; ///< Rows in qrows' order.
};

/// The operands of `blk` as the block form's inputs, up to kpos.
std::vector<Tensor> blockInputs(const Case &c, const Operands &o,
                                const Block &blk) {
  int64_t sq = blk.qrows.size(), skv = blk.krows.size();
  std::vector<Tensor> in = {
      floats(c.dtype, {c.B, c.Hq, sq, c.D},
             gatherRows(o.q, c.B * c.Hq, c.Sq, c.D, blk.qrows)),
      floats(c.dtype, {c.B, c.Hkv, skv, c.D},
             gatherRows(o.k, c.B * c.Hkv, c.Skv, c.D, blk.krows)),
      floats(c.dtype, {c.B, c.Hkv, skv, c.Dv},
             gatherRows(o.v, c.B * c.Hkv, c.Skv, c.Dv, blk.krows))};
  if (c.bias) {
    // Queries, then keys, of each batch's bias.
    std::vector<float> rows = gatherRows(o.bias, c.B, c.Sq, c.Skv, blk.qrows),
                       bias;
    for (size_t r = 0; r < rows.size() / c.Skv; ++r)
      for (int64_t j : blk.krows)
        bias.push_back(rows[r * c.Skv + j]);
    in.push_back(floats(DType::F32, {c.B, 1, sq, skv}, bias));
  }
  in.push_back(positions(blk.qrows));
  in.push_back(positions(blk.krows));
  return in;
}

BlockForward runBlockForward(const Case &c, const Operands &o,
                             const Block &blk) {
  int64_t sq = blk.qrows.size(), skv = blk.krows.size();
  std::vector<Tensor> out = {{c.dtype, {c.B, c.Hq, sq, c.Dv}, {}},
                             {DType::F32, {c.B, c.Hq, sq}, {}}};
  runCommand(attentionCommand(c, CommandKind::Attention, true, sq, skv),
             blockInputs(c, o, blk), out);
  return {valuesOf(out[0]), valuesOf(out[1])};
}

/// The block's dq, dk, dv given the whole rows' lse and out (f32, in the
/// global query order).
Whole runBlockBackward(const Case &c, const Operands &o, const Block &blk,
                       const std::vector<float> &lse,
                       const std::vector<float> &out) {
  int64_t sq = blk.qrows.size(), skv = blk.krows.size();
  std::vector<Tensor> in = blockInputs(c, o, blk);
  in.push_back(floats(DType::F32, {c.B, c.Hq, sq},
                      gatherRows(lse, c.B * c.Hq, c.Sq, 1, blk.qrows)));
  in.push_back(floats(c.dtype, {c.B, c.Hq, sq, c.Dv},
                      gatherRows(out, c.B * c.Hq, c.Sq, c.Dv, blk.qrows)));
  in.push_back(floats(DType::F32, {c.B, c.Hq, sq, c.Dv},
                      gatherRows(o.dout, c.B * c.Hq, c.Sq, c.Dv, blk.qrows)));
  std::vector<Tensor> grads = {{DType::F32, {c.B, c.Hq, sq, c.D}, {}},
                               {DType::F32, {c.B, c.Hkv, skv, c.D}, {}},
                               {DType::F32, {c.B, c.Hkv, skv, c.Dv}, {}}};
  runCommand(attentionCommand(c, CommandKind::AttentionBackward, true, sq, skv),
             in, grads);
  return {{}, valuesOf(grads[0]), valuesOf(grads[1]), valuesOf(grads[2])};
}

/// The error loading a plan of `cmd` alone gives ("" if none).
std::string loadError(const Command &cmd, uint64_t arenaBytes,
                      const char *target = "cpu-x86_64") {
  Plan p;
  p.target = target;
  p.arenaBytes = arenaBytes;
  p.commands = {cmd};
  Loaded l(p);
  return l.error;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> r(n);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

/// Sequence [0, n) cut into `blocks` blocks: contiguous ranges, or zigzag
/// (2 x blocks chunks, block r holding chunks r and 2 blocks - 1 - r, as
/// context parallelism balances causal work).
std::vector<std::vector<int64_t>> split(int64_t n, int64_t blocks,
                                        bool zigzag) {
  std::vector<std::vector<int64_t>> r(blocks);
  int64_t chunks = zigzag ? 2 * blocks : blocks;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    int64_t owner = ch < blocks ? ch : chunks - 1 - ch;
    for (int64_t i = ch * n / chunks; i < (ch + 1) * n / chunks; ++i)
      r[owner].push_back(i);
  }
  return r;
}

/// max |got - want| over max(1, max |want|), and where.
void expectClose(const char *name, const std::vector<double> &got,
                 const std::vector<float> &want, double tolerance) {
  ASSERT_EQ(got.size(), want.size()) << name;
  double scale = 1, worst = 0;
  size_t at = 0;
  for (float w : want)
    scale = std::max(scale, std::fabs(double(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << name << "[" << i << "]";
    double e = std::fabs(got[i] - want[i]) / scale;
    if (e > worst) {
      worst = e;
      at = i;
    }
  }
  EXPECT_LE(worst, tolerance)
      << name << "[" << at << "]: got " << got[at] << ", want " << want[at];
}

/// The log-sum-exp of each row's masked scores in double (-inf for none).
std::vector<double> referenceLse(const Case &c, const Operands &o) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> r;
  int64_t G = c.Hq / c.Hkv;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Sq; ++i) {
        std::vector<double> s;
        for (int64_t j = 0; j < c.Skv; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.D; ++d)
            dot += double(o.q[((b * c.Hq + h) * c.Sq + i) * c.D + d]) *
                   o.k[((b * c.Hkv + h / G) * c.Skv + j) * c.D + d];
          double x = c.scale * dot;
          if (c.softcap > 0)
            x = c.softcap * std::tanh(x / c.softcap);
          if (c.bias)
            x += o.bias[(b * c.Sq + i) * c.Skv + j];
          if (!(c.causal && j > i + c.offset) && x > -inf)
            s.push_back(x);
        }
        double m = -inf, sum = 0;
        for (double x : s)
          m = std::max(m, x);
        for (double x : s)
          sum += std::exp(x - m);
        r.push_back(s.empty() ? -inf : m + std::log(sum));
      }
  return r;
}

/// Block form with positions i and j against the plain command: out and
/// the gradients bitwise, lse against the double reference.
void checkIdentity(const Case &c) {
  Operands o = draw(c);
  Whole whole = runWhole(c, o);
  Block all{iota(c.Sq), iota(c.Skv)};
  BlockForward fwd = runBlockForward(c, o, all);
  ASSERT_EQ(fwd.out.size(), whole.out.size());
  EXPECT_EQ(std::memcmp(fwd.out.data(), whole.out.data(), 4 * fwd.out.size()),
            0);
  std::vector<double> want = referenceLse(c, o);
  ASSERT_EQ(fwd.lse.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(fwd.lse[i], -FLT_MAX) << "lse[" << i << "]";
      continue;
    }
    EXPECT_NEAR(fwd.lse[i], want[i], 1e-5 * std::max(1.0, std::fabs(want[i])))
        << "lse[" << i << "]";
  }
  Whole grads = runBlockBackward(c, o, all, fwd.lse, fwd.out);
  for (auto [got, ref] :
       {std::pair(&grads.dq, &whole.dq), std::pair(&grads.dk, &whole.dk),
        std::pair(&grads.dv, &whole.dv)}) {
    ASSERT_EQ(got->size(), ref->size());
    EXPECT_EQ(std::memcmp(got->data(), ref->data(), 4 * got->size()), 0);
  }
}

/// The keys in `blocks` blocks (contiguous or zigzag; with zigzag the
/// queries are in zigzag order too), each block's (out, lse) merged in
/// double by the log-sum-exp, and the blocks' gradients given the merged
/// (lse, out) summed: the plain command's results within 1e-6.
void checkSplit(const Case &c, int64_t blocks, bool zigzag) {
  SCOPED_TRACE(std::to_string(blocks) + (zigzag ? " zigzag" : " contiguous") +
               " blocks" + (c.causal ? ", causal" : ""));
  Operands o = draw(c);
  Whole whole = runWhole(c, o);
  std::vector<int64_t> qrows;
  for (const std::vector<int64_t> &part : split(c.Sq, blocks, zigzag))
    qrows.insert(qrows.end(), part.begin(), part.end());
  std::vector<Block> parts;
  std::vector<BlockForward> fwds;
  for (const std::vector<int64_t> &krows : split(c.Skv, blocks, zigzag)) {
    parts.push_back({qrows, krows});
    fwds.push_back(runBlockForward(c, o, parts.back()));
  }
  // Merge: lse = m + log sum_b exp(lse_b - m), out = sum_b exp(lse_b -
  // lse) out_b, in the global query order.
  int64_t rows = c.B * c.Hq * c.Sq;
  std::vector<double> out(rows * c.Dv), lse(rows);
  for (int64_t bh = 0; bh < c.B * c.Hq; ++bh)
    for (int64_t r = 0; r < c.Sq; ++r) {
      int64_t row = bh * c.Sq + qrows[r], at = bh * c.Sq + r;
      double m = -DBL_MAX, sum = 0;
      for (const BlockForward &f : fwds)
        m = std::max(m, double(f.lse[at]));
      for (const BlockForward &f : fwds)
        sum += std::exp(f.lse[at] - m);
      lse[row] = m + std::log(sum);
      for (const BlockForward &f : fwds)
        for (int64_t e = 0; e < c.Dv; ++e)
          out[row * c.Dv + e] +=
              std::exp(f.lse[at] - lse[row]) * f.out[at * c.Dv + e];
    }
  expectClose("out", out, whole.out, 1e-6);

  std::vector<float> lse32(lse.begin(), lse.end()),
      out32(out.begin(), out.end());
  std::vector<double> dq(whole.dq.size()), dk(whole.dk.size()),
      dv(whole.dv.size());
  for (const Block &blk : parts) {
    Whole g = runBlockBackward(c, o, blk, lse32, out32);
    int64_t skv = blk.krows.size();
    for (int64_t bh = 0; bh < c.B * c.Hq; ++bh)
      for (int64_t r = 0; r < c.Sq; ++r)
        for (int64_t d = 0; d < c.D; ++d)
          dq[(bh * c.Sq + qrows[r]) * c.D + d] +=
              g.dq[(bh * c.Sq + r) * c.D + d];
    for (int64_t bh = 0; bh < c.B * c.Hkv; ++bh)
      for (int64_t r = 0; r < skv; ++r) {
        int64_t j = bh * c.Skv + blk.krows[r], at = bh * skv + r;
        for (int64_t d = 0; d < c.D; ++d)
          dk[j * c.D + d] += g.dk[at * c.D + d];
        for (int64_t e = 0; e < c.Dv; ++e)
          dv[j * c.Dv + e] += g.dv[at * c.Dv + e];
      }
  }
  expectClose("dq", dq, whole.dq, 1e-6);
  expectClose("dk", dk, whole.dk, 1e-6);
  expectClose("dv", dv, whole.dv, 1e-6);
}

} // namespace

TEST(BlockAttention, IdentityPositionsMatchThePlainCommand) {
  // Across full and partial tiles of queries (64) and keys (128).
  checkIdentity({2, 2, 2, 70, 150, 8, 5});
  // Grouped heads; offset -3 leaves the first three rows without keys.
  Case g{1, 4, 2, 67, 131, 6, 7};
  g.causal = true;
  g.offset = -3;
  checkIdentity(g);
  g.offset = 64;
  checkIdentity(g);
  // A bias with -inf entries and a softcap.
  Case b{2, 3, 3, 66, 129, 4, 4};
  b.bias = true;
  b.softcap = 2.0;
  b.scale = 0.7;
  b.causal = true;
  checkIdentity(b);
}

TEST(BlockAttention, MergedBlocksMatchTheWholeAttention) {
  // Grouped heads, Sq != Skv: 100 queries (two query tiles) over 320 keys
  // (blocks of 160 keys cross a key tile), queries the last 100 positions
  // of the sequence when causal.
  Case c{2, 4, 2, 100, 320, 8, 6};
  for (bool causal : {false, true})
    for (int64_t blocks : {2, 4})
      for (bool zigzag : {false, true}) {
        c.causal = causal;
        c.offset = causal ? 220 : 0;
        checkSplit(c, blocks, zigzag);
      }
  // Offset 0: many rows see no key of a block (lse = -FLT_MAX merges to
  // nothing) and some blocks' tiles are skipped entirely.
  c.causal = true;
  c.offset = 0;
  checkSplit(c, 4, true);
  checkSplit(c, 2, false);
}

TEST(BlockAttention, RowsWithoutKeysGiveZerosAndLowestLse) {
  // Keys at positions 5..44 in descending order, queries at 0..69: rows
  // 0..4 see no key, inside a tile that is computed.
  Case c{1, 2, 1, 70, 45, 4, 3};
  c.causal = true;
  Operands o = draw(c);
  Block blk{iota(70), {}};
  for (int64_t j = 44; j >= 5; --j)
    blk.krows.push_back(j);
  BlockForward f = runBlockForward(c, o, blk);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 70; ++i) {
      float lse = f.lse[h * 70 + i];
      if (i < 5) {
        EXPECT_EQ(lse, -FLT_MAX) << "row " << i;
        for (int64_t e = 0; e < 3; ++e)
          EXPECT_EQ(f.out[(h * 70 + i) * 3 + e], 0.0f) << "row " << i;
      } else {
        EXPECT_TRUE(std::isfinite(lse) && lse > -FLT_MAX) << "row " << i;
      }
    }
  // No row sees a key: every tile is skipped.
  Case late = c;
  late.offset = -1000;
  BlockForward none = runBlockForward(late, o, blk);
  for (float x : none.lse)
    EXPECT_EQ(x, -FLT_MAX);
  for (float x : none.out)
    EXPECT_EQ(x, 0.0f);
  // Backward: a row whose keys are all masked in this block gets dq = 0,
  // whether the whole row's lse is finite or -FLT_MAX; nothing is NaN.
  std::vector<float> lse(2 * 70, 0.5f), out(2 * 70 * 3, 0.25f);
  lse[1] = -FLT_MAX;
  Whole g = runBlockBackward(c, o, blk, lse, out);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t d = 0; d < 4; ++d)
        EXPECT_EQ(g.dq[(h * 70 + i) * 4 + d], 0.0f) << "row " << i;
  for (const std::vector<float> *x : {&g.dq, &g.dk, &g.dv})
    for (float y : *x)
      EXPECT_TRUE(std::isfinite(y));
}

TEST(BlockAttention, Bf16Operands) {
  // bf16 q, k, v widened exactly: lse as the f32 command's on the same
  // values, out rounded once to bf16; the f32 gradients close to the f32
  // command's (out enters them rounded to bf16).
  Case c{1, 4, 2, 65, 140, 16, 16};
  c.causal = true;
  c.offset = 20;
  Case f = c;
  c.dtype = DType::BF16;
  Operands o = draw(c); // bf16-exact values, used by both
  // Queries in zigzag order, the keys of the second of two zigzag blocks.
  Block blk{{}, split(140, 2, true)[1]};
  for (const std::vector<int64_t> &part : split(65, 2, true))
    blk.qrows.insert(blk.qrows.end(), part.begin(), part.end());
  BlockForward lo = runBlockForward(c, o, blk), hi = runBlockForward(f, o, blk);
  std::vector<double> lse(lo.lse.begin(), lo.lse.end()),
      out(lo.out.begin(), lo.out.end());
  expectClose("lse", lse, hi.lse, 1e-6);
  expectClose("out", out, hi.out, 4e-3);
  // Backward with the f32 run's lse and out (bf16-rounded for bf16's).
  std::vector<float> wholeLse(4 * 65, 1.0f), wholeOut(4 * 65 * 16, 0.0f);
  for (size_t r = 0; r < blk.qrows.size(); ++r)
    for (int64_t h = 0; h < 4; ++h) {
      int64_t at = h * 65 + r, row = h * 65 + blk.qrows[r];
      wholeLse[row] = hi.lse[at];
      for (int64_t e = 0; e < 16; ++e)
        wholeOut[row * 16 + e] = hi.out[at * 16 + e];
    }
  Whole glo = runBlockBackward(c, o, blk, wholeLse, wholeOut),
        ghi = runBlockBackward(f, o, blk, wholeLse, wholeOut);
  for (auto [name, a, b] :
       {std::tuple("dq", &glo.dq, &ghi.dq), std::tuple("dk", &glo.dk, &ghi.dk),
        std::tuple("dv", &glo.dv, &ghi.dv)})
    expectClose(name, std::vector<double>(a->begin(), a->end()), *b, 4e-3);
}

TEST(BlockAttention, ValidatorRefusesBadCommands) {
  // q and out 128 bytes, k and v 64, qpos, kpos and lse 32.
  Case c{1, 2, 1, 4, 4, 4, 4};
  Command fwd = attentionCommand(c, CommandKind::Attention, true, 4, 4);
  fwd.buffers = {0, 128, 192, 256, 288, 320, 448};
  EXPECT_EQ(loadError(fwd, 480), "");
  auto refused = [](Command cmd, uint64_t arena, const std::string &message) {
    std::string error = loadError(cmd, arena);
    EXPECT_NE(error.find(message), std::string::npos) << error;
  };
  Command noLse = fwd;
  noLse.buffers.pop_back();
  refused(noLse, 480,
          "command 0 (attention): has 6 buffers, expected 7 for block "
          "attention (q, k, v, [bias], qpos, kpos, out, lse)");
  Command flag = fwd;
  flag.params[kAttnBlock] = 2;
  refused(flag, 480,
          "command 0 (attention): block flag 2 is not 0 (attention) or 1 "
          "(block attention)");
  Command few = fwd;
  few.params.resize(kAttnNumParams - 2);
  refused(few, 480,
          "has 17 parameters, expected 19 (18 without the block flag)");
  // lse (B x Hq x Sq floats) past the arena's end; kpos (8 x Skv bytes)
  // too; qpos not aligned to its int64 elements.
  refused(fwd, 470, "command 0 (attention) lse: buffer offset 448");
  Command farKpos = fwd;
  farKpos.buffers[4] = 460;
  refused(farKpos, 480, "kpos: buffer offset 460");
  Command oddQpos = fwd;
  oddQpos.buffers[3] = 260;
  refused(oddQpos, 480, "qpos: buffer offset 260");
  // The backward: q, k, v, qpos, kpos, lse, out, dout, then dq, dk, dv.
  Command bwd = attentionCommand(c, CommandKind::AttentionBackward, true, 4, 4);
  bwd.buffers = {0, 128, 192, 256, 288, 320, 352, 480, 608, 736, 800};
  EXPECT_EQ(loadError(bwd, 864), "");
  bwd.buffers.pop_back();
  refused(bwd, 864,
          "command 0 (attention_backward): has 10 buffers, expected 11 for "
          "block attention (q, k, v, [bias], qpos, kpos, lse, out, dout, dq, "
          "dk, dv)");
}

TEST(BlockAttention, PlansWithoutTheBlockFlagStillRun) {
  // A plain command with kAttnNumParams - 1 parameters (plans written
  // before the block flag) gives the same out as with the flag at 0.
  Case c{1, 2, 1, 9, 11, 4, 3};
  c.causal = true;
  Operands o = draw(c);
  std::vector<Tensor> in = {floats(c.dtype, {1, 2, 9, 4}, o.q),
                            floats(c.dtype, {1, 1, 11, 4}, o.k),
                            floats(c.dtype, {1, 1, 11, 3}, o.v)};
  std::vector<Tensor> a = {{DType::F32, {1, 2, 9, 3}, {}}}, b = a;
  Command cmd = attentionCommand(c, CommandKind::Attention, false, 9, 11);
  runCommand(cmd, in, a);
  cmd.params.pop_back();
  runCommand(cmd, in, b);
  EXPECT_EQ(a[0].bytes, b[0].bytes);
}

TEST(BlockAttention, CudaPlansRefuseTheBlockForm) {
  // The CUDA kernels take no positions: the validator refuses the command
  // before any device is needed.
  Case c{1, 1, 1, 2, 2, 4, 4};
  Command cmd = attentionCommand(c, CommandKind::Attention, true, 2, 2);
  cmd.buffers = {0, 64, 128, 192, 256, 320, 384};
  EXPECT_NE(loadError(cmd, 512, "cuda-sm_90a")
                .find("command 0 (attention): block attention (ring context "
                      "parallelism) runs on the CPU backend only"),
            std::string::npos)
      << loadError(cmd, 512, "cuda-sm_90a");
}
