//===- Collectives.cpp - Reductions shared by communicators ---------------===//

#include "Communicator.h"
#include "Half.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

namespace cleave::rt {

using namespace plan;

std::string describe(const CollectiveInfo &c) {
  std::string s = collectiveOpName(c.op);
  if (c.id != kDriverGatherId && c.id != kBootstrapId &&
      c.id != kLivenessCheckId)
    s += " #" + std::to_string(c.id);
  if (!c.source.empty())
    s += " (" + c.source + ")";
  return s;
}

std::string withinText(const CollectiveInfo &c, double timeoutSeconds) {
  char buf[96];
  if (c.id == kLivenessCheckId)
    std::snprintf(buf, sizeof buf, " within the %g s the liveness check waits",
                  arrivalSeconds(c, timeoutSeconds));
  else
    std::snprintf(buf, sizeof buf, " within the %g s communication timeout",
                  timeoutSeconds);
  return buf;
}

std::string neverReachedText(const std::string &what,
                             const std::vector<int64_t> &ranks,
                             const CollectiveInfo *c, double timeoutSeconds) {
  std::string msg;
  for (int64_t r : ranks)
    msg += (msg.empty() ? "" : "; ") + std::string("rank ") +
           std::to_string(r) + " never reached " + what;
  if (c)
    return msg + withinText(*c, timeoutSeconds);
  char buf[64];
  std::snprintf(buf, sizeof buf, " within the %g s communication timeout",
                timeoutSeconds);
  return msg + buf;
}

namespace {
template <typename T> struct Combine {
  static T apply(ReduceOp op, T a, T b) {
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return a + b;
    case ReduceOp::Prod:
      return a * b;
    case ReduceOp::Max:
      return a > b || a != a ? a : b; // NaN wins, as in NCCL and PyTorch
    case ReduceOp::Min:
      return a < b || a != a ? a : b;
    }
    return a;
  }
};

/// Integers wrap around (computed unsigned, so without undefined behavior;
/// types narrower than unsigned int are widened to it first, or they would
/// be promoted to int, where 65534 * 65534 overflows).
template <typename T, typename U> T combineInt(ReduceOp op, T a, T b) {
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
  switch (op) {
  case ReduceOp::Sum:
  case ReduceOp::Avg:
    return static_cast<T>(static_cast<W>(static_cast<U>(a)) +
                          static_cast<W>(static_cast<U>(b)));
  case ReduceOp::Prod:
    return static_cast<T>(static_cast<W>(static_cast<U>(a)) *
                          static_cast<W>(static_cast<U>(b)));
  case ReduceOp::Max:
    return std::max(a, b);
  case ReduceOp::Min:
    return std::min(a, b);
  }
  return a;
}

/// dst = srcs[0] combined with srcs[1], ..., srcs[n-1] in that order.
template <typename T, typename Combiner>
void fold(const void *const *srcs, int64_t n, T *dst, int64_t count,
          Combiner combine) {
  std::memcpy(dst, srcs[0], count * sizeof(T));
  for (int64_t k = 1; k < n; ++k) {
    const T *s = static_cast<const T *>(srcs[k]);
    for (int64_t i = 0; i < count; ++i)
      dst[i] = combine(dst[i], s[i]);
  }
}

template <typename T>
void reduceFloat(ReduceOp op, const void *const *srcs, int64_t n, void *dstV,
                 int64_t count) {
  T *dst = static_cast<T *>(dstV);
  fold(srcs, n, dst, count,
       [op](T a, T b) { return Combine<T>::apply(op, a, b); });
  if (op == ReduceOp::Avg)
    for (int64_t i = 0; i < count; ++i)
      dst[i] /= static_cast<T>(n);
}

template <typename T, typename U>
void reduceInt(ReduceOp op, const void *const *srcs, int64_t n, void *dstV,
               int64_t count) {
  fold(srcs, n, static_cast<T *>(dstV), count,
       [op](T a, T b) { return combineInt<T, U>(op, a, b); });
}

template <float (*toFloat)(uint16_t), uint16_t (*fromFloat)(float)>
void reduceHalf(ReduceOp op, const void *const *srcs, int64_t n, void *dstV,
                int64_t count) {
  std::vector<float> acc(count);
  const uint16_t *s0 = static_cast<const uint16_t *>(srcs[0]);
  for (int64_t i = 0; i < count; ++i)
    acc[i] = toFloat(s0[i]);
  for (int64_t k = 1; k < n; ++k) {
    const uint16_t *s = static_cast<const uint16_t *>(srcs[k]);
    for (int64_t i = 0; i < count; ++i)
      acc[i] = Combine<float>::apply(op, acc[i], toFloat(s[i]));
  }
  uint16_t *dst = static_cast<uint16_t *>(dstV);
  for (int64_t i = 0; i < count; ++i)
    dst[i] = fromFloat(op == ReduceOp::Avg ? acc[i] / n : acc[i]);
}
} // namespace

void reduceBuffers(ReduceOp op, DType dtype, const void *const *srcs, int64_t n,
                   void *dst, int64_t count) {
  if (count == 0 || n == 0)
    return;
  switch (dtype) {
  case DType::F32:
    return reduceFloat<float>(op, srcs, n, dst, count);
  case DType::F64:
    return reduceFloat<double>(op, srcs, n, dst, count);
  case DType::F16:
    return reduceHalf<halfToFloat, floatToHalf>(op, srcs, n, dst, count);
  case DType::BF16:
    return reduceHalf<bf16ToFloat, floatToBf16>(op, srcs, n, dst, count);
  case DType::I8:
    return reduceInt<int8_t, uint8_t>(op, srcs, n, dst, count);
  case DType::U8:
    return reduceInt<uint8_t, uint8_t>(op, srcs, n, dst, count);
  case DType::I16:
    return reduceInt<int16_t, uint16_t>(op, srcs, n, dst, count);
  case DType::U16:
    return reduceInt<uint16_t, uint16_t>(op, srcs, n, dst, count);
  case DType::I32:
    return reduceInt<int32_t, uint32_t>(op, srcs, n, dst, count);
  case DType::U32:
    return reduceInt<uint32_t, uint32_t>(op, srcs, n, dst, count);
  case DType::I64:
    return reduceInt<int64_t, uint64_t>(op, srcs, n, dst, count);
  case DType::U64:
    return reduceInt<uint64_t, uint64_t>(op, srcs, n, dst, count);
  case DType::Bool: {
    // sum and max: any; prod and min: all.
    bool any = op == ReduceOp::Sum || op == ReduceOp::Max;
    uint8_t *d = static_cast<uint8_t *>(dst);
    for (int64_t i = 0; i < count; ++i) {
      bool v = static_cast<const uint8_t *>(srcs[0])[i] != 0;
      for (int64_t k = 1; k < n; ++k) {
        bool b = static_cast<const uint8_t *>(srcs[k])[i] != 0;
        v = any ? (v || b) : (v && b);
      }
      d[i] = v;
    }
    return;
  }
  }
}

uint64_t collectiveResultBytes(const CollectiveInfo &c, int64_t g) {
  uint64_t bytes = static_cast<uint64_t>(c.count) * dtypeSize(c.dtype);
  switch (c.op) {
  case CollectiveOp::AllGather:
    return bytes * g;
  case CollectiveOp::ReduceScatter:
  case CollectiveOp::AllSlice:
    return bytes / g;
  case CollectiveOp::Send:
    return 0;
  default:
    return bytes;
  }
}

void sliceShard(const CollectiveInfo &c, int64_t index, int64_t g,
                const void *srcV, void *dstV) {
  // dst [outer, inner] <- src's [o, index, :].
  const auto *src = static_cast<const uint8_t *>(srcV);
  auto *dst = static_cast<uint8_t *>(dstV);
  size_t run = static_cast<size_t>(c.splitInner) * dtypeSize(c.dtype);
  for (int64_t o = 0; o < c.splitOuter && run; ++o)
    std::memcpy(dst + o * run, src + (o * g + index) * run, run);
}

void computeCollective(const CollectiveInfo &c, int64_t index, int64_t g,
                       const void *const *srcs, void *dstV) {
  const size_t elem = dtypeSize(c.dtype);
  uint8_t *dst = static_cast<uint8_t *>(dstV);
  const size_t bytes = static_cast<size_t>(c.count) * elem;
  auto src = [&](int64_t k) { return static_cast<const uint8_t *>(srcs[k]); };
  switch (c.op) {
  case CollectiveOp::AllReduce:
    reduceBuffers(c.reduce, c.dtype, srcs, g, dst, c.count);
    return;
  case CollectiveOp::AllGather: {
    // dst [outer, g, inner] <- member k's [outer, inner].
    size_t run = static_cast<size_t>(c.splitInner) * elem;
    for (int64_t o = 0; o < c.splitOuter; ++o)
      for (int64_t k = 0; k < g; ++k)
        if (run)
          std::memcpy(dst + (o * g + k) * run, src(k) + o * run, run);
    return;
  }
  case CollectiveOp::ReduceScatter: {
    // dst [outer, inner] <- reduce over members of their [o, index, :].
    size_t run = static_cast<size_t>(c.splitInner) * elem;
    std::vector<const void *> rows(g);
    for (int64_t o = 0; o < c.splitOuter; ++o) {
      for (int64_t k = 0; k < g; ++k)
        rows[k] = src(k) + (o * g + index) * run;
      reduceBuffers(c.reduce, c.dtype, rows.data(), g, dst + o * run,
                    c.splitInner);
    }
    return;
  }
  case CollectiveOp::AllSlice:
    sliceShard(c, index, g, src(index), dst);
    return;
  case CollectiveOp::AllToAll: {
    // Member k's slice `index` (its [:, index, :] of the split view), in
    // row-major order, goes to dst's [:, k, :] of the concat view.
    size_t sRun = static_cast<size_t>(c.splitInner) * elem;
    size_t cRun = static_cast<size_t>(c.concatInner) * elem;
    std::vector<uint8_t> chunk(static_cast<size_t>(c.splitOuter) * sRun);
    for (int64_t k = 0; k < g; ++k) {
      for (int64_t o = 0; o < c.splitOuter; ++o)
        if (sRun)
          std::memcpy(chunk.data() + o * sRun, src(k) + (o * g + index) * sRun,
                      sRun);
      for (int64_t o = 0; o < c.concatOuter; ++o)
        if (cRun)
          std::memcpy(dst + (o * g + k) * cRun, chunk.data() + o * cRun, cRun);
    }
    return;
  }
  case CollectiveOp::Broadcast:
    if (bytes)
      std::memcpy(dst, src(c.root), bytes);
    return;
  case CollectiveOp::Permute:
    for (size_t i = 0; i + 1 < c.pairs.size(); i += 2)
      if (c.pairs[i + 1] == index) {
        if (bytes)
          std::memcpy(dst, src(c.pairs[i]), bytes);
        return;
      }
    if (bytes)
      std::memset(dst, 0, bytes);
    return;
  case CollectiveOp::Send:
  case CollectiveOp::Recv:
    return; // point to point: not a group computation
  }
}

} // namespace cleave::rt
