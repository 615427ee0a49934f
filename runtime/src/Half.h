//===- Half.h - IEEE half and bfloat16 conversions --------------*- C++ -*-===//
//
// Hand-written: the runtime is C++17 (std::float16_t and std::bfloat16_t
// are C++23), and these few exact or round-to-nearest-even conversions need
// no library.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_HALF_H
#define CLEAVE_RUNTIME_HALF_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cleave::rt {

/// IEEE half to float (exact).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400),
                   static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

/// bfloat16 to float (exact: bfloat16 is a float's high half).
inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// float to bfloat16, rounding to nearest even; NaN stays NaN.
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if (std::isnan(f))
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

/// float to IEEE half, rounding to nearest even; overflow gives infinity.
inline uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  if (std::isnan(f))
    return sign | 0x7e00;
  float a = std::fabs(f);
  if (a >= 65520.0f) // rounds to infinity
    return sign | 0x7c00;
  if (a < 6.103515625e-05f) {
    // Subnormal (or zero): a multiple of 2^-24, rounded to nearest even.
    float q = a * 16777216.0f; // a / 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(q));
  }
  int e;
  float m = std::frexp(a, &e); // a = m 2^e, m in [0.5, 1)
  // 11 significant bits: mantissa = m * 2^11 rounded to nearest even.
  uint32_t mant = static_cast<uint32_t>(std::nearbyint(std::ldexp(m, 11)));
  if (mant == 2048) { // rounding carried into the next binade
    mant = 1024;
    ++e;
  }
  uint32_t exp = static_cast<uint32_t>(e + 14);
  if (exp >= 31)
    return sign | 0x7c00;
  return sign | static_cast<uint16_t>((exp << 10) | (mant & 0x3ff));
}

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_HALF_H
