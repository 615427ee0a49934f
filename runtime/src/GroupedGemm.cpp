//===- GroupedGemm.cpp - The expert GEMMs of a mixture of experts ---------===//
//
// A GroupedGemm command multiplies each row by the weights of the expert its
// id names (the forward), or sums each expert's rows into its weight
// gradient. Rows are ordered by expert with a stable counting sort and
// copied, widened to f32, into contiguous blocks (f32 weights are read and
// an f32 weight gradient written in place); each expert's block is
// then ordinary GEMMs (sgemm: oneDNN or OpenBLAS), cut into tiles of the
// result by their shape alone, one single-threaded call per tile, spread
// over the kernels' team (as runGemm does): what a tile computes does not
// depend on the thread count. The weight gradient's tiles are of the
// expert's K x N (or N x K) result, each summing over all of the expert's
// rows in their order.
//
// Each expert's weights are read once per tile of its rows, not once per
// row as the spelled-out form (a gather of every row's weights, then a
// batched matrix-vector product) reads them.
//
//===----------------------------------------------------------------------===//

#include "GroupedGemm.h"
#include "Gemm.h"
#include "Half.h"
#include "KernelThreads.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace cleave::rt {

using namespace plan;

namespace {

/// Rows and columns of a result tile: one sgemm each.
constexpr int64_t kTileRows = 128;
constexpr int64_t kTileCols = 256;

float loadFloat(const uint8_t *base, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, base + 2 * i, 2);
    return bf16ToFloat(h);
  }
  case DType::F16: {
    uint16_t h;
    std::memcpy(&h, base + 2 * i, 2);
    return halfToFloat(h);
  }
  default: {
    float f;
    std::memcpy(&f, base + 4 * i, 4);
    return f;
  }
  }
}

void storeFloat(uint8_t *base, DType dtype, int64_t i, float f) {
  switch (dtype) {
  case DType::BF16: {
    uint16_t h = floatToBf16(f);
    std::memcpy(base + 2 * i, &h, 2);
    return;
  }
  case DType::F16: {
    uint16_t h = floatToHalf(f);
    std::memcpy(base + 2 * i, &h, 2);
    return;
  }
  default:
    std::memcpy(base + 4 * i, &f, 4);
  }
}

/// `count` elements from `src` (of `dtype`) into f32 at `dst`.
void widen(const uint8_t *src, DType dtype, int64_t count, float *dst) {
  if (dtype == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(count) * 4);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    dst[i] = loadFloat(src, dtype, i);
}

/// The rows in expert order: rows[offsets[e] .. offsets[e + 1]) are those
/// routed to expert e, in their original order. Rows whose id names no
/// expert are left out.
struct Routing {
  std::vector<int64_t> rows;
  std::vector<int64_t> offsets;
};

Routing route(const uint8_t *ids, DType idType, int64_t M, int64_t E) {
  std::vector<int64_t> expertOf(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    int64_t g;
    if (idType == DType::I32) {
      int32_t v;
      std::memcpy(&v, ids + 4 * m, 4);
      g = v;
    } else {
      std::memcpy(&g, ids + 8 * m, 8);
    }
    if (g < 0)
      g += E;
    expertOf[m] = g >= 0 && g < E ? g : -1;
  }
  Routing r;
  r.offsets.assign(static_cast<size_t>(E) + 1, 0);
  for (int64_t g : expertOf)
    if (g >= 0)
      ++r.offsets[g + 1];
  for (int64_t e = 0; e < E; ++e)
    r.offsets[e + 1] += r.offsets[e];
  r.rows.resize(static_cast<size_t>(r.offsets[E]));
  std::vector<int64_t> next(r.offsets.begin(), r.offsets.end() - 1);
  for (int64_t m = 0; m < M; ++m)
    if (expertOf[m] >= 0)
      r.rows[next[expertOf[m]]++] = m;
  return r;
}

/// One sgemm: a tile of one expert's result.
struct Tile {
  int64_t expert, r0, rows, c0, cols;
};

/// Cuts each expert's result of `rowsOf(e)` x `cols` into tiles.
template <typename RowsOf>
std::vector<Tile> tilesOf(int64_t E, int64_t cols, RowsOf rowsOf) {
  std::vector<Tile> tiles;
  for (int64_t e = 0; e < E; ++e) {
    int64_t rows = rowsOf(e);
    for (int64_t r0 = 0; r0 < rows; r0 += kTileRows)
      for (int64_t c0 = 0; c0 < cols; c0 += kTileCols)
        tiles.push_back({e, r0, std::min(kTileRows, rows - r0), c0,
                         std::min(kTileCols, cols - c0)});
  }
  return tiles;
}

struct Job {
  const std::vector<Tile> *tiles;
  const Routing *routing;
  const float *x;  ///< the rows of x in expert order, M' x K
  const float *dy; ///< the weight gradient's dy in expert order, M' x N
  const float *w;  ///< the forward's weights, E x (K x N | N x K)
  float *out;      ///< forward: M' x N in expert order; gradient: E x K x N
  int64_t K, N;
  bool transposeW;
};

void forwardTiles(void *data, int64_t begin, int64_t end) {
  const Job &j = *static_cast<const Job *>(data);
  for (int64_t t = begin; t < end; ++t) {
    const Tile &tile = (*j.tiles)[t];
    int64_t first = j.routing->offsets[tile.expert] + tile.r0;
    const float *w = j.w + tile.expert * j.K * j.N;
    // W is K x N, or N x K read transposed: column c0 starts at row c0.
    const float *b = j.transposeW ? w + tile.c0 * j.K : w + tile.c0;
    sgemm(false, j.transposeW, tile.rows, tile.cols, j.K, 1.0f,
          j.x + first * j.K, j.K, b, j.transposeW ? j.K : j.N, 0.0f,
          j.out + first * j.N + tile.c0, j.N);
  }
}

void weightGradTiles(void *data, int64_t begin, int64_t end) {
  const Job &j = *static_cast<const Job *>(data);
  for (int64_t t = begin; t < end; ++t) {
    const Tile &tile = (*j.tiles)[t];
    int64_t first = j.routing->offsets[tile.expert];
    int64_t count = j.routing->offsets[tile.expert + 1] - first;
    float *dw = j.out + tile.expert * j.K * j.N;
    // dW = x^T dy (K x N), or its transpose dy^T x (N x K): the tile's
    // rows are of the first factor's columns.
    const float *a = j.transposeW ? j.dy + first * j.N : j.x + first * j.K;
    const float *b = j.transposeW ? j.x + first * j.K : j.dy + first * j.N;
    int64_t lda = j.transposeW ? j.N : j.K, ldb = j.transposeW ? j.K : j.N;
    int64_t ldc = j.transposeW ? j.K : j.N;
    sgemm(true, false, tile.rows, tile.cols, count, 1.0f, a + tile.r0, lda,
          b + tile.c0, ldb, 0.0f, dw + tile.r0 * ldc + tile.c0, ldc);
  }
}

} // namespace

void runGroupedGemm(const Command &command, uint8_t *arena,
                    const KernelThreads *threads) {
  const std::vector<int64_t> &p = command.params;
  auto dtype = static_cast<DType>(p[kGroupedDType]);
  auto idType = static_cast<DType>(p[kGroupedIdDType]);
  int64_t M = p[kGroupedRows], K = p[kGroupedK], N = p[kGroupedN],
          E = p[kGroupedExperts];
  bool transposeW = p[kGroupedTransposeW] != 0;
  bool weightGrad = p[kGroupedWeightGrad] != 0;
  const uint8_t *x = arena + command.buffers[0];
  const uint8_t *second = arena + command.buffers[1];
  const uint8_t *ids = arena + command.buffers[2];
  uint8_t *result = arena + command.buffers[3];
  size_t elem = dtypeSize(dtype);

  Routing routing = route(ids, idType, M, E);
  int64_t routed = static_cast<int64_t>(routing.rows.size());
  // The routed rows of x (and of dy), in expert order, in f32.
  std::vector<float> xs(static_cast<size_t>(routed * K));
  for (int64_t i = 0; i < routed; ++i)
    widen(x + routing.rows[i] * K * elem, dtype, K, xs.data() + i * K);

  Job job{};
  job.routing = &routing;
  job.x = xs.data();
  job.K = K;
  job.N = N;
  job.transposeW = transposeW;
  bool f32 = dtype == DType::F32;
  if (!weightGrad) {
    // f32 weights are read in place; bf16 and f16 ones widened once.
    std::vector<float> wide;
    const float *w = reinterpret_cast<const float *>(second);
    if (!f32) {
      wide.resize(static_cast<size_t>(E * K * N));
      widen(second, dtype, E * K * N, wide.data());
      w = wide.data();
    }
    std::vector<float> ys(static_cast<size_t>(routed * N));
    std::vector<Tile> tiles = tilesOf(E, N, [&](int64_t e) {
      return routing.offsets[e + 1] - routing.offsets[e];
    });
    job.tiles = &tiles;
    job.w = w;
    job.out = ys.data();
    KernelThreads::parallelForOneThreadEach(threads, forwardTiles, &job,
                                            static_cast<int64_t>(tiles.size()));
    // Rows that name no expert are zeros; the others come back in place.
    std::memset(result, 0, static_cast<size_t>(M * N) * elem);
    for (int64_t i = 0; i < routed; ++i) {
      uint8_t *row = result + routing.rows[i] * N * elem;
      for (int64_t n = 0; n < N; ++n)
        storeFloat(row, dtype, n, ys[i * N + n]);
    }
    return;
  }

  std::vector<float> dys(static_cast<size_t>(routed * N));
  for (int64_t i = 0; i < routed; ++i)
    widen(second + routing.rows[i] * N * elem, dtype, N, dys.data() + i * N);
  // Each expert's K x N (N x K) gradient; zeros where no row is routed.
  // An f32 gradient is written in place, a bf16 or f16 one rounded once.
  std::vector<float> narrow;
  float *dw = reinterpret_cast<float *>(result);
  if (!f32) {
    narrow.resize(static_cast<size_t>(E * K * N));
    dw = narrow.data();
  }
  std::fill(dw, dw + E * K * N, 0.0f);
  int64_t rows = transposeW ? N : K, cols = transposeW ? K : N;
  std::vector<Tile> tiles = tilesOf(E, cols, [&](int64_t e) {
    return routing.offsets[e + 1] > routing.offsets[e] ? rows : 0;
  });
  job.tiles = &tiles;
  job.dy = dys.data();
  job.out = dw;
  KernelThreads::parallelForOneThreadEach(threads, weightGradTiles, &job,
                                          static_cast<int64_t>(tiles.size()));
  if (!f32)
    for (int64_t i = 0, n = E * K * N; i < n; ++i)
      storeFloat(result, dtype, i, dw[i]);
}

} // namespace cleave::rt
