//===- FastMath.h - Branch-free f32 math for runtime kernels ----*- C++ -*-===//
//
// The elementwise functions the runtime's own kernels (GEMM epilogues, fused
// attention) apply per element: branch-free, so the loops around them
// vectorize where a libm call per element would dominate them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_FASTMATH_H
#define CLEAVE_RUNTIME_FASTMATH_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace cleave::rt {

/// tanh in f32 as Eigen's rational approximation (the one MLIR's polynomial
/// approximation of math.tanh uses too, so generated kernels agree): within
/// a few ulp of std::tanh.
inline float tanhF32(float x) {
  const float bound = 7.90531110763549805f; // tanh(bound) rounds to 1.
  float c = std::min(std::max(x, -bound), bound);
  float c2 = c * c;
  float p = -2.76076847742355e-16f;
  p = p * c2 + 2.00018790482477e-13f;
  p = p * c2 - 8.60467152213735e-11f;
  p = p * c2 + 5.12229709037114e-08f;
  p = p * c2 + 1.48572235717979e-05f;
  p = p * c2 + 6.37261928875436e-04f;
  p = p * c2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * c2 + 1.18534705686654e-04f;
  q = q * c2 + 2.26843463243900e-03f;
  q = q * c2 + 4.89352518554385e-03f;
  float t = c * p / q;
  return std::fabs(x) < 0.0004f ? x : t; // tanh(x) = x to f32 precision.
}

/// exp in f32 within about 2 ulp (Cephes' expf: 2^n exp(r) with
/// |r| <= ln 2 / 2 and a degree-6 polynomial); 0 below -87.3 (and for
/// -inf), so masked scores give exact zeros.
inline float expF32(float x) {
  float c = std::min(std::max(x, -87.33654f), 88.37626f);
  float n = std::floor(c * 1.44269504088896341f + 0.5f);
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two;
  std::memcpy(&two, &bits, sizeof(two));
  return x < -87.33654f ? 0.0f : y * two;
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_FASTMATH_H
