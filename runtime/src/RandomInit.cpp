//===- RandomInit.cpp - Initial values of RandomNormal commands -----------===//
//
// Hand-written (Box-Muller over SplitMix64 of the element's index) rather
// than <random>: the standard distributions' output differs between
// standard libraries, and each element must be computable alone, so that a
// rank fills only its shard and gets the same bits everywhere.
//
//===----------------------------------------------------------------------===//

#include "RandomInit.h"

#include <cmath>

namespace cleave::rt {

namespace {
uint64_t splitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
} // namespace

void fillNormal(float *out, int64_t begin, int64_t end, uint64_t seed,
                double mean, double stddev) {
  const double twoPi = 6.283185307179586476925;
  const double unit = 1.0 / 9007199254740992.0; // 2^-53
  uint64_t key = splitMix64(seed);
  for (int64_t i = begin; i < end; ++i) {
    // Elements 2k and 2k+1 are the cosine and sine of pair k.
    uint64_t pair = static_cast<uint64_t>(i / 2);
    // u1 in (0, 1] (log is finite), u2 in [0, 1).
    double u1 =
        static_cast<double>((splitMix64(key ^ (2 * pair)) >> 11) + 1) * unit;
    double u2 =
        static_cast<double>(splitMix64(key ^ (2 * pair + 1)) >> 11) * unit;
    double r = std::sqrt(-2.0 * std::log(u1));
    double angle = twoPi * u2;
    out[i - begin] = static_cast<float>(
        mean + stddev * r * (i % 2 == 0 ? std::cos(angle) : std::sin(angle)));
  }
}

void fillNormal(const plan::Command &command, int64_t begin, int64_t end,
                float *out) {
  const std::vector<int64_t> &p = command.params;
  fillNormal(out, begin, end, static_cast<uint64_t>(p[1]),
             plan::bitsToDouble(p[2]), plan::bitsToDouble(p[3]));
}

} // namespace cleave::rt
