//===- Attention.cpp - Fused attention on the CPU ------------------------===//
//
// cleave.attention and cleave.attention_grad as single commands that never
// hold more than a tile of the B x Hq x Sq x Skv scores (FlashAttention-2's
// scheme on the CPU):
//
//  - Forward: one task per (batch, query head, tile of kQueryTile queries).
//    Over tiles of kKeyTile keys it computes the scores with a library GEMM,
//    masks them, keeps each row's running maximum m and sum l of
//    exp(s - m) (the online softmax), rescales the output accumulator when
//    m grows and adds P V_j with another GEMM; finally out = acc / l (a
//    row with no unmasked key gives zeros).
//  - Backward: one task per (batch, key/value head), which owns dk and dv of
//    that head and dq of its query heads, so no two tasks write the same
//    element. It first recomputes each query row's log-sum-exp (a pass
//    over the key tiles) and D = rowsum(dout * out); then for each key tile
//    and each query tile it recomputes P = exp(s - lse) and accumulates
//    dv += P^T dout, ds = P (dout v^T - D), dq += ds k, dk += ds^T q (with
//    the softcap's derivative and the scale in ds).
//
// Everything is computed in f32 (bf16 and f16 operands are widened exactly)
// and rounded once, to the result's type: unlike the spelled-out bf16
// attention, the probabilities are not rounded to bf16 before the product
// with v (that rounding is for GPU tensor cores; on the CPU the product is
// f32 either way). Causal tiles
// past the diagonal are skipped. Each task computes in a fixed order and the
// GEMMs inside a task run on its thread, so results are bitwise the same for
// any thread count.
//
// The block form (one step of ring attention, kAttnBlock = 1) takes the
// global positions of its query and key rows and masks by them; a key tile
// is skipped for a query tile when its least key position is past the
// tile's greatest query position plus the offset (positions need not be
// sorted). The forward also writes each row's log-sum-exp m + log(l)
// (-FLT_MAX for a row with no key); the backward reads the whole row's
// log-sum-exp instead of recomputing it. With positions i and j and the
// forward's lse, both give bitwise the plain form's results.
//
//===----------------------------------------------------------------------===//

#include "Attention.h"
#include "FastMath.h"
#include "Gemm.h"
#include "Half.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace cleave::rt {

using namespace plan;

namespace {

constexpr int64_t kQueryTile = kCpuAttentionQueryTile;
constexpr int64_t kKeyTile = kCpuAttentionKeyTile;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
/// The block form's log-sum-exp of a row with no unmasked key.
constexpr float kEmptyRowLse = -std::numeric_limits<float>::max();

/// A command's parameters, decoded.
struct Shape {
  DType dtype, doutDType, gradDType, biasDType;
  int64_t B, Hq, Hkv, G, Sq, Skv, D, Dv;
  bool causal, hasBias, block;
  int64_t offset;
  float scale, softcap;
  int64_t biasB, biasH, biasSq;

  explicit Shape(const Command &c) {
    const std::vector<int64_t> &p = c.params;
    auto dt = [&](size_t i) {
      return static_cast<DType>(static_cast<uint32_t>(p[i]));
    };
    dtype = dt(kAttnDType);
    doutDType = dt(kAttnDoutDType);
    gradDType = dt(kAttnGradDType);
    hasBias = p[kAttnBiasDType] != 0;
    biasDType = hasBias ? dt(kAttnBiasDType) : DType::F32;
    B = p[kAttnBatch];
    Hq = p[kAttnQHeads];
    Hkv = p[kAttnKVHeads];
    G = Hq / Hkv;
    Sq = p[kAttnQLen];
    Skv = p[kAttnKVLen];
    D = p[kAttnHeadDim];
    Dv = p[kAttnValueDim];
    causal = p[kAttnCausal] != 0;
    offset = p[kAttnCausalOffset];
    scale = static_cast<float>(bitsToDouble(p[kAttnScaleBits]));
    softcap = static_cast<float>(bitsToDouble(p[kAttnSoftcapBits]));
    biasB = p[kAttnBiasBatch];
    biasH = p[kAttnBiasHeads];
    biasSq = p[kAttnBiasQLen];
    block = attentionIsBlock(c);
  }
};

/// Whether the key at position kp is masked for the query at position qp
/// (kp > qp + offset, exact for any int64 positions and offset).
bool keyMasked(int64_t kp, int64_t qp, int64_t offset) {
  return static_cast<__int128>(kp) > static_cast<__int128>(qp) + offset;
}

/// The global positions of the query and key rows (the block form's qpos
/// and kpos, else the rows' indices), with each query tile's greatest and
/// each key tile's least for skipping masked tiles.
struct Positions {
  const int64_t *q = nullptr, *k = nullptr; ///< Null: the indices.
  std::vector<int64_t> queryTileMax, keyTileMin;

  Positions(const Shape &sh, const int64_t *qpos, const int64_t *kpos)
      : q(qpos), k(kpos) {
    for (int64_t i0 = 0; i0 < sh.Sq; i0 += kQueryTile) {
      int64_t end = std::min(i0 + kQueryTile, sh.Sq);
      queryTileMax.push_back(q ? *std::max_element(q + i0, q + end) : end - 1);
    }
    for (int64_t j0 = 0; j0 < sh.Skv; j0 += kKeyTile) {
      int64_t end = std::min(j0 + kKeyTile, sh.Skv);
      keyTileMin.push_back(k ? *std::min_element(k + j0, k + end) : j0);
    }
  }
};

/// n elements of `dtype` from element `first` of `base`, widened to f32.
void load(DType dtype, const uint8_t *base, int64_t first, int64_t n,
          float *dst) {
  switch (dtype) {
  case DType::BF16: {
    const auto *src = reinterpret_cast<const uint16_t *>(base) + first;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(src[i]);
    return;
  }
  case DType::F16: {
    const auto *src = reinterpret_cast<const uint16_t *>(base) + first;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(src[i]);
    return;
  }
  default:
    if (n)
      std::memcpy(dst, reinterpret_cast<const float *>(base) + first,
                  static_cast<size_t>(n) * sizeof(float));
    return;
  }
}

/// n elements of `dtype` from element `first` of `base` as f32: in place
/// for f32, else widened into `scratch` (at least n long).
const float *view(DType dtype, const uint8_t *base, int64_t first, int64_t n,
                  float *scratch) {
  if (dtype == DType::F32)
    return reinterpret_cast<const float *>(base) + first;
  load(dtype, base, first, n, scratch);
  return scratch;
}

/// n f32 values rounded to `dtype` at element `first` of `base`.
void store(DType dtype, uint8_t *base, int64_t first, int64_t n,
           const float *src) {
  switch (dtype) {
  case DType::BF16: {
    auto *dst = reinterpret_cast<uint16_t *>(base) + first;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = floatToBf16(src[i]);
    return;
  }
  case DType::F16: {
    auto *dst = reinterpret_cast<uint16_t *>(base) + first;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = floatToHalf(src[i]);
    return;
  }
  default:
    if (n)
      std::memcpy(reinterpret_cast<float *>(base) + first, src,
                  static_cast<size_t>(n) * sizeof(float));
    return;
  }
}

//===----------------------------------------------------------------------===//
// Row operations, compiled for several instruction sets (the runtime is
// built for the baseline x86-64; these loops are where the time goes
// besides the GEMMs).
//===----------------------------------------------------------------------===//

#if defined(__x86_64__) && defined(__clang__) && defined(__ELF__)
#define CLEAVE_ROW_KERNEL                                                      \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLEAVE_ROW_KERNEL
#endif

/// Reductions keep kLanes partial results (a fixed order, the same for any
/// thread count) so that they vectorize without reassociating.
constexpr int64_t kLanes = 16;

CLEAVE_ROW_KERNEL
float rowMax(const float *s, int64_t n) {
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, kNegInf);
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      lanes[l] = std::max(lanes[l], s[j + l]);
  float m = kNegInf;
  for (; j < n; ++j)
    m = std::max(m, s[j]);
  for (int64_t l = 0; l < kLanes; ++l)
    m = std::max(m, lanes[l]);
  return m;
}

/// s = exp(s - m) in place; returns the sum. m is finite.
CLEAVE_ROW_KERNEL
float expShifted(float *s, int64_t n, float m) {
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      float e = expF32(s[j + l] - m);
      s[j + l] = e;
      lanes[l] += e;
    }
  float sum = 0.0f;
  for (; j < n; ++j) {
    float e = expF32(s[j] - m);
    s[j] = e;
    sum += e;
  }
  for (int64_t l = 0; l < kLanes; ++l)
    sum += lanes[l];
  return sum;
}

/// s = softcap tanh(s / softcap); t (if not null) gets the tanh.
CLEAVE_ROW_KERNEL
void capRow(float *s, float *t, int64_t n, float softcap) {
  float inv = 1.0f / softcap;
  for (int64_t j = 0; j < n; ++j) {
    float th = tanhF32(s[j] * inv);
    if (t)
      t[j] = th;
    s[j] = softcap * th;
  }
}

/// ds = p (dp - d) [(1 - t^2)] scale, in place in dp.
CLEAVE_ROW_KERNEL
void softmaxBackwardRow(const float *p, float *dp, const float *t, int64_t n,
                        float d, float scale) {
  if (t) {
    for (int64_t j = 0; j < n; ++j)
      dp[j] = p[j] * (dp[j] - d) * (1.0f - t[j] * t[j]) * scale;
  } else {
    for (int64_t j = 0; j < n; ++j)
      dp[j] = p[j] * (dp[j] - d) * scale;
  }
}

CLEAVE_ROW_KERNEL
void scaleRow(float *x, int64_t n, float a) {
  for (int64_t j = 0; j < n; ++j)
    x[j] *= a;
}

CLEAVE_ROW_KERNEL
float dotRow(const float *a, const float *b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      lanes[l] += a[j + l] * b[j + l];
  float sum = 0.0f;
  for (; j < n; ++j)
    sum += a[j] * b[j];
  for (int64_t l = 0; l < kLanes; ++l)
    sum += lanes[l];
  return sum;
}

//===----------------------------------------------------------------------===//
// Scores
//===----------------------------------------------------------------------===//

struct Buffers {
  const uint8_t *q, *k, *v, *bias, *out, *dout;
  const int64_t *qpos, *kpos; ///< The block form's, else null.
  const float *lseIn;         ///< The block form's backward: the whole rows'.
  float *lseOut;              ///< The block form's forward.
  uint8_t *result, *dq, *dk, *dv;
};

Buffers buffersOf(const Command &c, const Shape &sh, uint8_t *arena) {
  Buffers r{};
  size_t i = 0;
  auto next = [&] { return arena + c.buffers[i++]; };
  r.q = next();
  r.k = next();
  r.v = next();
  r.bias = sh.hasBias ? next() : nullptr;
  if (sh.block) {
    r.qpos = reinterpret_cast<const int64_t *>(next());
    r.kpos = reinterpret_cast<const int64_t *>(next());
  }
  if (c.kind == CommandKind::Attention) {
    r.result = next();
    if (sh.block)
      r.lseOut = reinterpret_cast<float *>(next());
    return r;
  }
  if (sh.block)
    r.lseIn = reinterpret_cast<const float *>(next());
  r.out = next();
  r.dout = next();
  r.dq = next();
  r.dk = next();
  r.dv = next();
  return r;
}

struct Job {
  const Shape *shape;
  const Buffers *buffers;
  const Positions *positions;
};

/// Whether every key of the tile from j0 is masked for every query of the
/// tile from i0.
bool tileMasked(const Job &job, int64_t i0, int64_t j0) {
  return job.shape->causal &&
         keyMasked(job.positions->keyTileMin[j0 / kKeyTile],
                   job.positions->queryTileMax[i0 / kQueryTile],
                   job.shape->offset);
}

/// The masked scores of `rows` queries from i0 (q: rows x D, f32) against
/// `cols` keys from j0 (k: cols x D) of batch b and query head h, into s
/// (rows x cols, leading dimension kKeyTile); t (if not null) gets
/// tanh(scale q.k / softcap) for the softcap's derivative.
void scoreTile(const Job &job, int64_t b, int64_t h, int64_t i0, int64_t rows,
               int64_t j0, int64_t cols, const float *q, const float *k,
               float *s, float *t, std::vector<float> &biasRow) {
  const Shape &sh = *job.shape;
  const Positions &pos = *job.positions;
  sgemm(false, true, rows, cols, sh.D, sh.scale, q, sh.D, k, sh.D, 0.0f, s,
        kKeyTile);
  for (int64_t r = 0; r < rows; ++r) {
    float *row = s + r * kKeyTile;
    if (sh.softcap > 0)
      capRow(row, t ? t + r * kKeyTile : nullptr, cols, sh.softcap);
    int64_t i = i0 + r;
    if (sh.hasBias) {
      int64_t bb = sh.biasB == 1 ? 0 : b, hh = sh.biasH == 1 ? 0 : h,
              ii = sh.biasSq == 1 ? 0 : i;
      int64_t first = ((bb * sh.biasH + hh) * sh.biasSq + ii) * sh.Skv + j0;
      biasRow.resize(static_cast<size_t>(cols));
      load(sh.biasDType, job.buffers->bias, first, cols, biasRow.data());
      for (int64_t j = 0; j < cols; ++j)
        row[j] += biasRow[j];
    }
    if (sh.causal && pos.k) {
      // Keys at positions past the query's position + offset are masked.
      for (int64_t j = 0; j < cols; ++j)
        if (keyMasked(pos.k[j0 + j], pos.q[i], sh.offset))
          row[j] = kNegInf;
    } else if (sh.causal) {
      // Keys j > i + offset are masked.
      int64_t firstMasked = std::max<int64_t>(i + sh.offset + 1 - j0, 0);
      for (int64_t j = firstMasked; j < cols; ++j)
        row[j] = kNegInf;
    }
  }
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

void forwardTasks(void *frame, int64_t begin, int64_t end) {
  const Job &job = *static_cast<Job *>(frame);
  const Shape &sh = *job.shape;
  const Buffers &buf = *job.buffers;
  int64_t tiles = (sh.Sq + kQueryTile - 1) / kQueryTile;
  std::vector<float> q(kQueryTile * sh.D), k(kKeyTile * sh.D),
      v(kKeyTile * sh.Dv), s(kQueryTile * kKeyTile), acc(kQueryTile * sh.Dv),
      m(kQueryTile), l(kQueryTile), biasRow;
  for (int64_t task = begin; task < end; ++task) {
    int64_t tile = task % tiles, bh = task / tiles;
    int64_t b = bh / sh.Hq, h = bh % sh.Hq, hk = h / sh.G;
    int64_t i0 = tile * kQueryTile, rows = std::min(kQueryTile, sh.Sq - i0);
    const float *qt =
        view(sh.dtype, buf.q, (bh * sh.Sq + i0) * sh.D, rows * sh.D, q.data());
    std::fill(m.begin(), m.end(), kNegInf);
    std::fill(l.begin(), l.end(), 0.0f);
    std::fill(acc.begin(), acc.end(), 0.0f);
    int64_t kvBase = (b * sh.Hkv + hk) * sh.Skv;
    for (int64_t j0 = 0; j0 < sh.Skv; j0 += kKeyTile) {
      if (tileMasked(job, i0, j0))
        continue;
      int64_t cols = std::min(kKeyTile, sh.Skv - j0);
      const float *kt =
          view(sh.dtype, buf.k, (kvBase + j0) * sh.D, cols * sh.D, k.data());
      const float *vt =
          view(sh.dtype, buf.v, (kvBase + j0) * sh.Dv, cols * sh.Dv, v.data());
      scoreTile(job, b, h, i0, rows, j0, cols, qt, kt, s.data(), nullptr,
                biasRow);
      for (int64_t r = 0; r < rows; ++r) {
        float *row = s.data() + r * kKeyTile;
        float mNew = std::max(m[r], rowMax(row, cols));
        if (mNew == kNegInf) {
          // Every key so far masked: nothing to add.
          std::fill(row, row + cols, 0.0f);
          continue;
        }
        float alpha = m[r] == kNegInf ? 0.0f : expF32(m[r] - mNew);
        l[r] = l[r] * alpha + expShifted(row, cols, mNew);
        if (alpha != 1.0f)
          scaleRow(acc.data() + r * sh.Dv, sh.Dv, alpha);
        m[r] = mNew;
      }
      sgemm(false, false, rows, sh.Dv, cols, 1.0f, s.data(), kKeyTile, vt,
            sh.Dv, 1.0f, acc.data(), sh.Dv);
    }
    for (int64_t r = 0; r < rows; ++r)
      scaleRow(acc.data() + r * sh.Dv, sh.Dv, l[r] > 0 ? 1.0f / l[r] : 0.0f);
    store(sh.dtype, buf.result, (bh * sh.Sq + i0) * sh.Dv, rows * sh.Dv,
          acc.data());
    if (buf.lseOut)
      for (int64_t r = 0; r < rows; ++r)
        buf.lseOut[bh * sh.Sq + i0 + r] =
            l[r] > 0 ? m[r] + std::log(l[r]) : kEmptyRowLse;
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// Each row's log-sum-exp over its unmasked keys (-inf if none) of query
/// head h (queries qh: Sq x D, keys k: Skv x D, f32) into lse (Sq).
void rowLogSumExp(const Job &job, int64_t b, int64_t h, const float *qh,
                  const float *k, float *lse, float *p,
                  std::vector<float> &biasRow) {
  const Shape &sh = *job.shape;
  for (int64_t i0 = 0; i0 < sh.Sq; i0 += kQueryTile) {
    int64_t rows = std::min(kQueryTile, sh.Sq - i0);
    float *m = lse + i0;
    float l[kQueryTile];
    std::fill(m, m + rows, kNegInf);
    std::fill(l, l + rows, 0.0f);
    for (int64_t j0 = 0; j0 < sh.Skv; j0 += kKeyTile) {
      if (tileMasked(job, i0, j0))
        continue;
      int64_t cols = std::min(kKeyTile, sh.Skv - j0);
      scoreTile(job, b, h, i0, rows, j0, cols, qh + i0 * sh.D, k + j0 * sh.D, p,
                nullptr, biasRow);
      for (int64_t r = 0; r < rows; ++r) {
        float *row = p + r * kKeyTile;
        float mNew = std::max(m[r], rowMax(row, cols));
        if (mNew == kNegInf)
          continue;
        float alpha = m[r] == kNegInf ? 0.0f : expF32(m[r] - mNew);
        l[r] = l[r] * alpha + expShifted(row, cols, mNew);
        m[r] = mNew;
      }
    }
    for (int64_t r = 0; r < rows; ++r)
      m[r] = l[r] > 0 ? m[r] + std::log(l[r]) : kNegInf;
  }
}

void backwardTasks(void *frame, int64_t begin, int64_t end) {
  const Job &job = *static_cast<Job *>(frame);
  const Shape &sh = *job.shape;
  const Buffers &buf = *job.buffers;
  const int64_t Sq = sh.Sq, Skv = sh.Skv, D = sh.D, Dv = sh.Dv, G = sh.G;
  std::vector<float> q(G * Sq * D), dout(G * Sq * Dv), dq(G * Sq * D),
      lse(G * Sq), rowDot(G * Sq), k(Skv * D), v(Skv * Dv), dk(kKeyTile * D),
      dv(kKeyTile * Dv), p(kQueryTile * kKeyTile), dp(kQueryTile * kKeyTile),
      t(sh.softcap > 0 ? kQueryTile * kKeyTile : 0), outRow(Dv), biasRow;
  float *tanhTile = sh.softcap > 0 ? t.data() : nullptr;
  for (int64_t task = begin; task < end; ++task) {
    int64_t b = task / sh.Hkv, hk = task % sh.Hkv;
    int64_t kvBase = (b * sh.Hkv + hk) * Skv;
    load(sh.dtype, buf.k, kvBase * D, Skv * D, k.data());
    load(sh.dtype, buf.v, kvBase * Dv, Skv * Dv, v.data());
    std::fill(dq.begin(), dq.end(), 0.0f);
    // Per query head of the group: q, dout, D = rowsum(dout * out), and
    // each row's log-sum-exp: the block form's given one (over every
    // block), else recomputed over the unmasked keys.
    for (int64_t g = 0; g < G; ++g) {
      int64_t h = hk * G + g, bh = b * sh.Hq + h;
      float *qh = q.data() + g * Sq * D, *doh = dout.data() + g * Sq * Dv;
      load(sh.dtype, buf.q, bh * Sq * D, Sq * D, qh);
      load(sh.doutDType, buf.dout, bh * Sq * Dv, Sq * Dv, doh);
      for (int64_t i = 0; i < Sq; ++i) {
        load(sh.dtype, buf.out, (bh * Sq + i) * Dv, Dv, outRow.data());
        rowDot[g * Sq + i] = dotRow(doh + i * Dv, outRow.data(), Dv);
      }
      if (buf.lseIn)
        std::copy(buf.lseIn + bh * Sq, buf.lseIn + (bh + 1) * Sq,
                  lse.data() + g * Sq);
      else
        rowLogSumExp(job, b, h, qh, k.data(), lse.data() + g * Sq, p.data(),
                     biasRow);
    }
    // Gradients, a key tile at a time.
    for (int64_t j0 = 0; j0 < Skv; j0 += kKeyTile) {
      int64_t cols = std::min(kKeyTile, Skv - j0);
      const float *kt = k.data() + j0 * D, *vt = v.data() + j0 * Dv;
      std::fill(dk.begin(), dk.end(), 0.0f);
      std::fill(dv.begin(), dv.end(), 0.0f);
      for (int64_t g = 0; g < G; ++g) {
        int64_t h = hk * G + g;
        const float *qh = q.data() + g * Sq * D,
                    *doh = dout.data() + g * Sq * Dv;
        for (int64_t i0 = 0; i0 < Sq; i0 += kQueryTile) {
          int64_t rows = std::min(kQueryTile, Sq - i0);
          if (tileMasked(job, i0, j0))
            continue;
          scoreTile(job, b, h, i0, rows, j0, cols, qh + i0 * D, kt, p.data(),
                    tanhTile, biasRow);
          for (int64_t r = 0; r < rows; ++r) {
            float *row = p.data() + r * kKeyTile;
            float rowLse = lse[g * Sq + i0 + r];
            // A row without keys: -inf, or the block form's -FLT_MAX.
            if (rowLse == kNegInf || (sh.block && rowLse == kEmptyRowLse))
              std::fill(row, row + cols, 0.0f);
            else
              expShifted(row, cols, rowLse);
          }
          // dv += P^T dout; dp = dout v^T.
          sgemm(true, false, cols, Dv, rows, 1.0f, p.data(), kKeyTile,
                doh + i0 * Dv, Dv, 1.0f, dv.data(), Dv);
          sgemm(false, true, rows, cols, Dv, 1.0f, doh + i0 * Dv, Dv, vt, Dv,
                0.0f, dp.data(), kKeyTile);
          for (int64_t r = 0; r < rows; ++r)
            softmaxBackwardRow(p.data() + r * kKeyTile,
                               dp.data() + r * kKeyTile,
                               tanhTile ? tanhTile + r * kKeyTile : nullptr,
                               cols, rowDot[g * Sq + i0 + r], sh.scale);
          // dq += ds k; dk += ds^T q.
          sgemm(false, false, rows, D, cols, 1.0f, dp.data(), kKeyTile, kt, D,
                1.0f, dq.data() + (g * Sq + i0) * D, D);
          sgemm(true, false, cols, D, rows, 1.0f, dp.data(), kKeyTile,
                qh + i0 * D, D, 1.0f, dk.data(), D);
        }
      }
      store(sh.gradDType, buf.dk, (kvBase + j0) * D, cols * D, dk.data());
      store(sh.gradDType, buf.dv, (kvBase + j0) * Dv, cols * Dv, dv.data());
    }
    for (int64_t g = 0; g < G; ++g) {
      int64_t bh = b * sh.Hq + hk * G + g;
      store(sh.gradDType, buf.dq, bh * Sq * D, Sq * D, dq.data() + g * Sq * D);
    }
  }
}

} // namespace

void runAttention(const Command &command, uint8_t *arena,
                  KernelThreads &threads) {
  Shape sh(command);
  Buffers buf = buffersOf(command, sh, arena);
  Positions pos(sh, buf.qpos, buf.kpos);
  Job job{&sh, &buf, &pos};
  if (command.kind == CommandKind::Attention) {
    int64_t tiles = (sh.Sq + kQueryTile - 1) / kQueryTile;
    KernelThreads::parallelFor(&threads, forwardTasks, &job,
                               sh.B * sh.Hq * tiles);
    return;
  }
  KernelThreads::parallelFor(&threads, backwardTasks, &job, sh.B * sh.Hkv);
}

} // namespace cleave::rt
