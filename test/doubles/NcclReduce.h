//===- NcclReduce.h - Reductions of the NCCL double -------------*- C++ -*-===//
//
// The NCCL double reduces in rank order (rank 0 first), 16-bit floats
// accumulating in float and rounding once, so a result is bitwise the same
// on every rank and in every run. Integers wrap as on the GPU.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_DOUBLES_NCCLREDUCE_H
#define CLEAVE_TEST_DOUBLES_NCCLREDUCE_H

#include "CudaApi.h"
#include "Half.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cleave::nccldouble {

using namespace cleave::rt::cuda;

/// Bytes of one element of `dtype`, or 0 when it is not an NCCL type.
inline size_t dtypeSize(ncclDataType_t dtype) { return ncclTypeSize(dtype); }

/// "float32", "bf16", ... for messages; "dtype(<n>)" when not an NCCL type.
inline const char *dtypeName(ncclDataType_t dtype) {
  static const char *const names[] = {"int8",    "uint8",  "int32", "uint32",
                                      "int64",   "uint64", "f16",   "float32",
                                      "float64", "bf16"};
  if (dtype >= 0 && dtype <= ncclBfloat16)
    return names[dtype];
  return "invalid dtype";
}

/// "sum", "prod", "max", "min", "avg"; "invalid op" otherwise.
inline const char *opName(ncclRedOp_t op) {
  static const char *const names[] = {"sum", "prod", "max", "min", "avg"};
  if (op >= 0 && op <= ncclAvg)
    return names[op];
  return "invalid op";
}

namespace detail {

template <typename T> inline T load(const void *p, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char *>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T> inline void store(void *p, size_t i, T v) {
  std::memcpy(static_cast<char *>(p) + i * sizeof(T), &v, sizeof(T));
}

/// Integers: arithmetic in the unsigned type, so overflow wraps.
template <typename T> struct IntTraits {
  using Acc = T;
  using U = std::make_unsigned_t<T>;
  static Acc get(const void *p, size_t i) { return load<T>(p, i); }
  static void put(void *p, size_t i, Acc v) { store<T>(p, i, v); }
  static Acc add(Acc a, Acc b) { return static_cast<T>(U(a) + U(b)); }
  static Acc mul(Acc a, Acc b) { return static_cast<T>(U(a) * U(b)); }
  static Acc div(Acc a, int n) { return static_cast<T>(a / static_cast<T>(n)); }
};

template <typename T> struct FloatTraits {
  using Acc = T;
  static Acc get(const void *p, size_t i) { return load<T>(p, i); }
  static void put(void *p, size_t i, Acc v) { store<T>(p, i, v); }
  static Acc add(Acc a, Acc b) { return a + b; }
  static Acc mul(Acc a, Acc b) { return a * b; }
  static Acc div(Acc a, int n) { return a / static_cast<T>(n); }
};

/// f16 and bf16: accumulate in float, round once when storing.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct HalfTraits {
  using Acc = float;
  static Acc get(const void *p, size_t i) {
    return ToFloat(load<uint16_t>(p, i));
  }
  static void put(void *p, size_t i, Acc v) {
    store<uint16_t>(p, i, FromFloat(v));
  }
  static Acc add(Acc a, Acc b) { return a + b; }
  static Acc mul(Acc a, Acc b) { return a * b; }
  static Acc div(Acc a, int n) { return a / static_cast<float>(n); }
};

template <typename Traits>
void reduceTyped(ncclRedOp_t op, const void *const *inputs, int n, void *out,
                 size_t count) {
  using Acc = typename Traits::Acc;
  for (size_t i = 0; i < count; ++i) {
    Acc acc = Traits::get(inputs[0], i);
    for (int q = 1; q < n; ++q) {
      Acc v = Traits::get(inputs[q], i);
      switch (op) {
      case ncclProd:
        acc = Traits::mul(acc, v);
        break;
      case ncclMax:
        acc = v > acc ? v : acc;
        break;
      case ncclMin:
        acc = v < acc ? v : acc;
        break;
      default: // sum, avg
        acc = Traits::add(acc, v);
        break;
      }
    }
    if (op == ncclAvg)
      acc = Traits::div(acc, n);
    Traits::put(out, i, acc);
  }
}

} // namespace detail

/// out[i] = inputs[0][i] op inputs[1][i] op ... op inputs[n-1][i] for
/// `count` elements of `dtype` (avg: the sum divided by n; integers
/// truncate). `out` may be one of the inputs. dtype and op must be valid.
inline void reduce(ncclDataType_t dtype, ncclRedOp_t op,
                   const void *const *inputs, int n, void *out, size_t count) {
  using namespace detail;
  switch (dtype) {
  case ncclInt8:
    return reduceTyped<IntTraits<int8_t>>(op, inputs, n, out, count);
  case ncclUint8:
    return reduceTyped<IntTraits<uint8_t>>(op, inputs, n, out, count);
  case ncclInt32:
    return reduceTyped<IntTraits<int32_t>>(op, inputs, n, out, count);
  case ncclUint32:
    return reduceTyped<IntTraits<uint32_t>>(op, inputs, n, out, count);
  case ncclInt64:
    return reduceTyped<IntTraits<int64_t>>(op, inputs, n, out, count);
  case ncclUint64:
    return reduceTyped<IntTraits<uint64_t>>(op, inputs, n, out, count);
  case ncclFloat16:
    return reduceTyped<
        HalfTraits<cleave::rt::halfToFloat, cleave::rt::floatToHalf>>(
        op, inputs, n, out, count);
  case ncclBfloat16:
    return reduceTyped<
        HalfTraits<cleave::rt::bf16ToFloat, cleave::rt::floatToBf16>>(
        op, inputs, n, out, count);
  case ncclFloat32:
    return reduceTyped<FloatTraits<float>>(op, inputs, n, out, count);
  case ncclFloat64:
    return reduceTyped<FloatTraits<double>>(op, inputs, n, out, count);
  default:
    return;
  }
}

} // namespace cleave::nccldouble

#endif // CLEAVE_TEST_DOUBLES_NCCLREDUCE_H
