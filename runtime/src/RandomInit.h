//===- RandomInit.h - Initial values of RandomNormal commands ---*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_RANDOMINIT_H
#define CLEAVE_RUNTIME_RANDOMINIT_H

#include "cleave/PlanFormat.h"

#include <cstdint>

namespace cleave::rt {

/// Writes `count` f32 values mean + stddev * z_i to `out`, z_i standard
/// normal: Box-Muller on uniforms hashed (SplitMix64) from (seed, i), so the
/// values depend on nothing but the arguments, on every backend.
void fillNormal(float *out, int64_t count, uint64_t seed, double mean,
                double stddev);

/// fillNormal for a validated RandomNormal command.
void fillNormal(const plan::Command &command, float *out);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_RANDOMINIT_H
