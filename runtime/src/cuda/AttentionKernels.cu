//===- AttentionKernels.cu - Fused attention on NVIDIA GPUs ---------------===//
//
// cleave.attention and cleave.attention_grad as kernels that never hold the
// S x S scores in memory (FlashAttention-2's scheme, in f32 on the CUDA
// cores): the same commands and results as the CPU's (Attention.cpp), up to
// the order of f32 sums and the exponential's last bits.
//
// Threads: four per query row (eight per key row in the dk/dv kernel, which
// keeps four rows per key), each holding every fourth (eighth) element of
// the row's 128-wide slices in registers; a dot product is summed over the
// lanes with shuffles. A block is 128 threads of one (batch, head): 32
// queries or 16 keys; key (or query) tiles of 32 rows are staged in shared
// memory as f32.
//
//  - cleave_attention_forward: per query row, over key tiles, the scores,
//    the online softmax (running maximum m and sum l, the accumulator
//    rescaled once per tile) and out = acc / l (0 for a row whose keys are
//    all masked). Causal tiles past the block's last query are skipped.
//  - cleave_attention_backward_rows: per query row, the log-sum-exp of its
//    scores (a forward pass without values) and rowsum(dout * out), into
//    the scratch buffers.
//  - cleave_attention_backward_dq: per query row, over key tiles:
//    p = exp(s - lse), ds = p (dout . v - rowDot) [(1 - t^2)] scale,
//    dq += ds k.
//  - cleave_attention_backward_dkdv: per key row, over its query heads and
//    query tiles: dv += p dout, dk += ds q.
// Every output element has one writer and a fixed order: no atomics, the
// same bits on every run.
//
//===----------------------------------------------------------------------===//

#include "AttentionArgs.h"

// Without nvcc, the including file supplies the CUDA built-ins instead:
// test/runtime/AttentionEmulationTest.cpp runs these kernels on host
// threads, one per CUDA thread, to check them without a GPU.
#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

using cleave::rt::cuda::AttentionArgs;

namespace {

constexpr int kLanes = 4;
constexpr int kSlice = cleave::rt::cuda::kAttentionMaxHeadDim / kLanes;
constexpr int kRows = cleave::rt::cuda::kAttentionRowsPerBlock;
constexpr int kTile = 32;
constexpr int kWidth = cleave::rt::cuda::kAttentionMaxHeadDim;
constexpr int kThreads = cleave::rt::cuda::kAttentionThreads;
static_assert(kRows * kLanes == kThreads, "four threads per row");
constexpr int kKeyLanes = 8;
constexpr int kKeyRows = cleave::rt::cuda::kAttentionKeysPerBlock;
static_assert(kKeyRows * kKeyLanes == kThreads, "eight threads per key");

constexpr int kF16 = 10, kBF16 = 16;

__device__ __forceinline__ float negInf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ float loadAt(unsigned long long base, long long i,
                                        int dtype) {
  if (dtype == kBF16)
    return __uint_as_float(
        static_cast<unsigned>(reinterpret_cast<const unsigned short *>(base)[i])
        << 16);
  if (dtype == kF16)
    return __half2float(reinterpret_cast<const __half *>(base)[i]);
  return reinterpret_cast<const float *>(base)[i];
}

__device__ __forceinline__ void storeAt(unsigned long long base, long long i,
                                        int dtype, float v) {
  if (dtype == kBF16)
    reinterpret_cast<__nv_bfloat16 *>(base)[i] = __float2bfloat16_rn(v);
  else if (dtype == kF16)
    reinterpret_cast<__half *>(base)[i] = __float2half_rn(v);
  else
    reinterpret_cast<float *>(base)[i] = v;
}

/// The sum of `v` over the L lanes of a row (every thread calls it).
template <int L = kLanes> __device__ __forceinline__ float laneSum(float v) {
#pragma unroll
  for (int o = 1; o < L; o *= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Score of query i (head h of batch b) and key j from their dot product:
/// scaled, soft-capped (t gets tanh for the derivative), biased; -inf when
/// masked (causal, or past either length).
__device__ __forceinline__ float score(const AttentionArgs &a, float dot, int b,
                                       int h, long long i, long long j,
                                       float *t) {
  if (i >= a.Sq || j >= a.Skv || (a.causal && j > i + a.offset)) {
    *t = 0.0f;
    return negInf();
  }
  float s = a.scale * dot;
  *t = 0.0f;
  if (a.softcap > 0.0f) {
    *t = tanhf(s / a.softcap);
    s = a.softcap * *t;
  }
  if (a.hasBias) {
    long long bb = a.biasB == 1 ? 0 : b, hh = a.biasH == 1 ? 0 : h,
              ii = a.biasSq == 1 ? 0 : i;
    s += loadAt(a.bias, ((bb * a.biasH + hh) * a.biasSq + ii) * a.Skv + j,
                a.biasDType);
  }
  return s;
}

/// Loads `rows` rows of `width` elements from row `first` of a packed
/// tensor into tile (kTile x kWidth, zero past the rows and the width).
__device__ __forceinline__ void loadTile(float (*tile)[kWidth],
                                         unsigned long long base, int dtype,
                                         long long first, long long rows,
                                         int width) {
  for (int x = threadIdx.x; x < kTile * kWidth; x += kThreads) {
    int r = x / kWidth, d = x % kWidth;
    tile[r][d] = r < rows && d < width
                     ? loadAt(base, (first + r) * width + d, dtype)
                     : 0.0f;
  }
}

/// This thread's slice (every L-th element from `lane`) of row `row` of a
/// packed tensor, zero past it.
template <int L = kLanes>
__device__ __forceinline__ void
loadSlice(float (&out)[kWidth / L], unsigned long long base, int dtype,
          long long row, bool live, int width, int lane) {
#pragma unroll
  for (int e = 0; e < kWidth / L; ++e) {
    int d = lane + L * e;
    out[e] = live && d < width ? loadAt(base, row * width + d, dtype) : 0.0f;
  }
}

/// Stores this thread's slice of row `row` (its elements below `width`).
template <int L = kLanes>
__device__ __forceinline__ void storeSlice(const float (&in)[kWidth / L],
                                           unsigned long long base, int dtype,
                                           long long row, int width, int lane) {
#pragma unroll
  for (int e = 0; e < kWidth / L; ++e) {
    int d = lane + L * e;
    if (d < width)
      storeAt(base, row * width + d, dtype, in[e]);
  }
}

/// The dot product of a row's slices with a row of a shared tile.
template <int L = kLanes>
__device__ __forceinline__ float dotSlice(const float (&x)[kWidth / L],
                                          const float *row, int lane) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < kWidth / L; ++e)
    s += x[e] * row[lane + L * e];
  return laneSum<L>(s);
}

/// Runs the online softmax of query row i over every key, calling
/// `each(m, alpha, s[], tile, rows)` per key tile after m grew (alpha
/// rescales what was accumulated). Returns through m and l.
template <typename Each>
__device__ __forceinline__ void
onlineSoftmax(const AttentionArgs &a, const float (&q)[kSlice], int b, int h,
              long long i0, long long i, int lane, float (*ks)[kWidth],
              float (*vs)[kWidth], float &m, float &l, Each each) {
  long long kvBase = (static_cast<long long>(b) * a.Hkv + h / a.G) * a.Skv;
  m = negInf();
  l = 0.0f;
  for (long long j0 = 0; j0 < a.Skv; j0 += kTile) {
    if (a.causal && j0 > i0 + kRows - 1 + a.offset)
      break; // every key from here on is masked for the whole block
    long long rows = min(static_cast<long long>(kTile), a.Skv - j0);
    __syncthreads();
    loadTile(ks, a.k, a.dtype, kvBase + j0, rows, a.D);
    if (vs)
      loadTile(vs, a.v, a.dtype, kvBase + j0, rows, a.Dv);
    __syncthreads();
    float s[kTile];
    float tileMax = negInf();
#pragma unroll
    for (int r = 0; r < kTile; ++r) {
      float t;
      s[r] = score(a, dotSlice(q, ks[r], lane), b, h, i, j0 + r, &t);
      tileMax = fmaxf(tileMax, s[r]);
    }
    float mNew = fmaxf(m, tileMax);
    if (mNew == negInf())
      continue; // every key so far masked
    float alpha = m == negInf() ? 0.0f : expf(m - mNew);
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < kTile; ++r) {
      s[r] = s[r] == negInf() ? 0.0f : expf(s[r] - mNew);
      sum += s[r];
    }
    l = l * alpha + sum;
    m = mNew;
    each(alpha, s);
  }
}

/// Where a thread of a query-row kernel (forward, backward rows, dq) is:
/// its lane in the row, the batch and query head of its block, the block's
/// first query, its own query (live: it exists) and (b, h) as a row index
/// of q, out and dout.
struct QueryRow {
  int lane, b, h;
  long long i0, i, bh;
  bool live;
  __device__ explicit QueryRow(const AttentionArgs &a)
      : lane(threadIdx.x % kLanes), b(blockIdx.z), h(blockIdx.y),
        i0(static_cast<long long>(blockIdx.x) * kRows),
        i(i0 + threadIdx.x / kLanes), bh(static_cast<long long>(b) * a.Hq + h),
        live(i < a.Sq) {}
};

} // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    cleave_attention_forward(AttentionArgs a) {
  __shared__ float ks[kTile][kWidth];
  __shared__ float vs[kTile][kWidth];
  const QueryRow row(a);
  const int lane = row.lane, b = row.b, h = row.h;
  const long long i0 = row.i0, i = row.i, bh = row.bh;
  const bool live = row.live;
  float q[kSlice], acc[kSlice];
  loadSlice(q, a.q, a.dtype, bh * a.Sq + i, live, a.D, lane);
#pragma unroll
  for (int e = 0; e < kSlice; ++e)
    acc[e] = 0.0f;
  float m, l;
  onlineSoftmax(a, q, b, h, i0, i, lane, ks, vs, m, l,
                [&](float alpha, const float (&p)[kTile]) {
#pragma unroll
                  for (int e = 0; e < kSlice; ++e) {
                    float v = acc[e] * alpha;
#pragma unroll
                    for (int r = 0; r < kTile; ++r)
                      v += p[r] * vs[r][lane + kLanes * e];
                    acc[e] = v;
                  }
                });
  if (!live)
    return;
  float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int e = 0; e < kSlice; ++e)
    acc[e] *= inv;
  storeSlice(acc, a.result, a.dtype, bh * a.Sq + i, a.Dv, lane);
}

extern "C" __global__ void __launch_bounds__(kThreads)
    cleave_attention_backward_rows(AttentionArgs a) {
  __shared__ float ks[kTile][kWidth];
  const QueryRow row(a);
  const int lane = row.lane, b = row.b, h = row.h;
  const long long i0 = row.i0, i = row.i, bh = row.bh;
  const bool live = row.live;
  float x[kSlice];
  loadSlice(x, a.q, a.dtype, bh * a.Sq + i, live, a.D, lane);
  float m, l;
  onlineSoftmax(a, x, b, h, i0, i, lane, ks, nullptr, m, l,
                [](float, const float (&)[kTile]) {});
  // rowsum(dout * out), with x reused for dout.
  float dot = 0.0f;
#pragma unroll
  for (int e = 0; e < kSlice; ++e) {
    int d = lane + kLanes * e;
    if (live && d < a.Dv)
      dot += loadAt(a.dout, (bh * a.Sq + i) * a.Dv + d, a.doutDType) *
             loadAt(a.out, (bh * a.Sq + i) * a.Dv + d, a.dtype);
  }
  dot = laneSum(dot);
  if (live && lane == 0) {
    reinterpret_cast<float *>(a.lse)[bh * a.Sq + i] =
        l > 0.0f ? m + logf(l) : negInf();
    reinterpret_cast<float *>(a.rowDot)[bh * a.Sq + i] = dot;
  }
}

extern "C" __global__ void __launch_bounds__(kThreads)
    cleave_attention_backward_dq(AttentionArgs a) {
  __shared__ float ks[kTile][kWidth];
  __shared__ float vs[kTile][kWidth];
  const QueryRow row(a);
  const int lane = row.lane, b = row.b, h = row.h;
  const long long i0 = row.i0, i = row.i, bh = row.bh;
  const bool live = row.live;
  float q[kSlice], dout[kSlice], dq[kSlice];
  loadSlice(q, a.q, a.dtype, bh * a.Sq + i, live, a.D, lane);
  loadSlice(dout, a.dout, a.doutDType, bh * a.Sq + i, live, a.Dv, lane);
#pragma unroll
  for (int e = 0; e < kSlice; ++e)
    dq[e] = 0.0f;
  float lse =
      live ? reinterpret_cast<const float *>(a.lse)[bh * a.Sq + i] : negInf();
  float rowDot =
      live ? reinterpret_cast<const float *>(a.rowDot)[bh * a.Sq + i] : 0.0f;
  long long kvBase = (static_cast<long long>(b) * a.Hkv + h / a.G) * a.Skv;
  for (long long j0 = 0; j0 < a.Skv; j0 += kTile) {
    if (a.causal && j0 > i0 + kRows - 1 + a.offset)
      break;
    long long rows = min(static_cast<long long>(kTile), a.Skv - j0);
    __syncthreads();
    loadTile(ks, a.k, a.dtype, kvBase + j0, rows, a.D);
    loadTile(vs, a.v, a.dtype, kvBase + j0, rows, a.Dv);
    __syncthreads();
#pragma unroll 1 // four 32-float slices live already: no room for more
    for (int r = 0; r < kTile; ++r) {
      float t;
      float s = score(a, dotSlice(q, ks[r], lane), b, h, i, j0 + r, &t);
      float p = s == negInf() || lse == negInf() ? 0.0f : expf(s - lse);
      float dp = dotSlice(dout, vs[r], lane);
      float ds = p * (dp - rowDot) * a.scale;
      if (a.softcap > 0.0f)
        ds *= 1.0f - t * t;
#pragma unroll
      for (int e = 0; e < kSlice; ++e)
        dq[e] += ds * ks[r][lane + kLanes * e];
    }
  }
  if (live)
    storeSlice(dq, a.dq, a.gradDType, bh * a.Sq + i, a.D, lane);
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    cleave_attention_backward_dkdv(AttentionArgs a) {
  __shared__ float qs[kTile][kWidth];
  __shared__ float dos[kTile][kWidth];
  __shared__ float lses[kTile], dots[kTile];
  // Eight lanes per key (16 keys per block): four 128-wide rows (k, v and
  // their gradients) live per key, 64 registers a thread.
  constexpr int L = kKeyLanes, S = kWidth / L;
  int lane = threadIdx.x % L;
  int b = blockIdx.z, hk = blockIdx.y;
  long long j0 = static_cast<long long>(blockIdx.x) * kKeyRows;
  long long j = j0 + threadIdx.x / L;
  bool live = j < a.Skv;
  long long kvRow = (static_cast<long long>(b) * a.Hkv + hk) * a.Skv + j;
  float k[S], v[S], dk[S], dv[S];
  loadSlice<L>(k, a.k, a.dtype, kvRow, live, a.D, lane);
  loadSlice<L>(v, a.v, a.dtype, kvRow, live, a.Dv, lane);
#pragma unroll
  for (int e = 0; e < S; ++e)
    dk[e] = dv[e] = 0.0f;
  for (int g = 0; g < a.G; ++g) {
    int h = hk * a.G + g;
    long long bh = static_cast<long long>(b) * a.Hq + h;
    for (long long i0 = 0; i0 < a.Sq; i0 += kTile) {
      // Key j is masked for query i when j > i + offset: the whole tile
      // when even its last query comes before the block's first key.
      if (a.causal && j0 > i0 + kTile - 1 + a.offset)
        continue;
      long long rows = min(static_cast<long long>(kTile), a.Sq - i0);
      __syncthreads();
      loadTile(qs, a.q, a.dtype, bh * a.Sq + i0, rows, a.D);
      loadTile(dos, a.dout, a.doutDType, bh * a.Sq + i0, rows, a.Dv);
      if (threadIdx.x < kTile) {
        bool in = threadIdx.x < rows;
        long long row = bh * a.Sq + i0 + threadIdx.x;
        lses[threadIdx.x] =
            in ? reinterpret_cast<const float *>(a.lse)[row] : negInf();
        dots[threadIdx.x] =
            in ? reinterpret_cast<const float *>(a.rowDot)[row] : 0.0f;
      }
      __syncthreads();
#pragma unroll 4
      for (int r = 0; r < kTile; ++r) {
        float t;
        float s = score(a, dotSlice<L>(k, qs[r], lane), b, h, i0 + r, j, &t);
        float lse = lses[r];
        float p =
            !live || s == negInf() || lse == negInf() ? 0.0f : expf(s - lse);
        float dp = dotSlice<L>(v, dos[r], lane);
        float ds = p * (dp - dots[r]) * a.scale;
        if (a.softcap > 0.0f)
          ds *= 1.0f - t * t;
#pragma unroll
        for (int e = 0; e < S; ++e) {
          dv[e] += p * dos[r][lane + L * e];
          dk[e] += ds * qs[r][lane + L * e];
        }
      }
    }
  }
  if (!live)
    return;
  storeSlice<L>(dk, a.dk, a.gradDType, kvRow, a.D, lane);
  storeSlice<L>(dv, a.dv, a.gradDType, kvRow, a.Dv, lane);
}
