//===- CleaveRandom.cpp - Counter-based random bits -------------*- C++ -*-===//
//
// Random ops (training-mode dropout) draw their bits as a pure function of
// a key and each element's global linear index, like Philox in cuRAND and
// JAX's threefry: no generator state to carry between steps or ranks, a
// partitioned program's shards draw exactly the bits of their elements
// (the partitioner offsets each rank's iotas), microbatches draw their own
// rows' bits, and recomputation redraws the same bits. The mixing function
// is splitmix64's (Steele et al., "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a bijection of 64-bit values whose outputs
// for the Weyl sequence key + i * golden pass BigCrush.
//
//===----------------------------------------------------------------------===//

#include "Cleave/IR/CleaveOps.h"

using namespace mlir;
using namespace mlir::cleave;

static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
static constexpr uint64_t kMul1 = 0xBF58476D1CE4E5B9ull;
static constexpr uint64_t kMul2 = 0x94D049BB133111EBull;

uint64_t cleave::mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * kMul1;
  z = (z ^ (z >> 27)) * kMul2;
  return z ^ (z >> 31);
}

uint64_t cleave::stepKeyValue(uint64_t step, uint64_t salt) {
  return mix64(salt ^ mix64(step * kGolden + kGolden));
}

/// A ui64 splat of `v`'s type.
static Value splatLike(OpBuilder &b, Location loc, Value like, uint64_t c) {
  auto type = cast<RankedTensorType>(like.getType());
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, APInt(64, c)));
}

static Value binary(OpBuilder &b, Location loc, BinaryKind kind, Value x,
                    Value y) {
  return BinaryOp::create(b, loc, kind, x, y);
}

Value cleave::buildMix64(OpBuilder &b, Location loc, Value z) {
  auto xorShift = [&](Value v, uint64_t s) {
    return binary(b, loc, BinaryKind::lxor, v,
                  binary(b, loc, BinaryKind::shr, v, splatLike(b, loc, v, s)));
  };
  z = binary(b, loc, BinaryKind::mul, xorShift(z, 30),
             splatLike(b, loc, z, kMul1));
  z = binary(b, loc, BinaryKind::mul, xorShift(z, 27),
             splatLike(b, loc, z, kMul2));
  return xorShift(z, 31);
}

Value cleave::buildStepKey(OpBuilder &b, Location loc, Value step,
                           uint64_t salt) {
  auto u64 = RankedTensorType::get(
      {}, IntegerType::get(b.getContext(), 64, IntegerType::Unsigned));
  Value s = ConvertOp::create(b, loc, u64, step);
  s = binary(b, loc, BinaryKind::add,
             binary(b, loc, BinaryKind::mul, s, splatLike(b, loc, s, kGolden)),
             splatLike(b, loc, s, kGolden));
  s = binary(b, loc, BinaryKind::lxor, buildMix64(b, loc, s),
             splatLike(b, loc, s, salt));
  return buildMix64(b, loc, s);
}

Value cleave::buildRandomBits(OpBuilder &b, Location loc, Value key,
                              ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(
      shape, IntegerType::get(b.getContext(), 64, IntegerType::Unsigned));
  Value index;
  int64_t stride = 1;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] != 1) {
      Value i = IotaOp::create(b, loc, type, b.getI64IntegerAttr(d));
      if (stride != 1)
        i = binary(b, loc, BinaryKind::mul, i, splatLike(b, loc, i, stride));
      index = index ? binary(b, loc, BinaryKind::add, index, i) : i;
    }
    stride *= shape[d];
  }
  if (!index)
    index =
        ConstantOp::create(b, loc, DenseElementsAttr::get(type, APInt(64, 0)));
  Value keys =
      BroadcastInDimOp::create(b, loc, type, key, b.getDenseI64ArrayAttr({}));
  return buildMix64(b, loc,
                    binary(b, loc, BinaryKind::add,
                           binary(b, loc, BinaryKind::mul, index,
                                  splatLike(b, loc, index, kGolden)),
                           keys));
}
