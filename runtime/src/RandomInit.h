//===- RandomInit.h - Initial values of RandomNormal commands ---*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_RANDOMINIT_H
#define CLEAVE_RUNTIME_RANDOMINIT_H

#include "cleave/PlanFormat.h"

#include <cstdint>

namespace cleave::rt {

/// Writes elements [begin, end) of the sequence mean + stddev * z_i to
/// `out` (out[0] is element `begin`), z_i standard normal: Box-Muller on
/// uniforms hashed (SplitMix64) from (seed, i / 2), so each element depends
/// only on the arguments and its index, on every backend and however the
/// sequence is cut into pieces.
void fillNormal(float *out, int64_t begin, int64_t end, uint64_t seed,
                double mean, double stddev);

/// fillNormal of elements [begin, end) of a validated RandomNormal command.
void fillNormal(const plan::Command &command, int64_t begin, int64_t end,
                float *out);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_RANDOMINIT_H
