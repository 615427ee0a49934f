//===- Training.h - Learning-rate schedules of training plans --*- C++ -*-===//

#ifndef CLEAVE_TRAINING_H
#define CLEAVE_TRAINING_H

#include "cleave/PlanFormat.h"

namespace cleave::rt {

/// The learning rate of 0-based `step` under `info`'s schedule, times
/// globalBatch / referenceBatch when both are positive (linear scaling).
///  - Constant:     baseLR.
///  - LinearWarmup: baseLR * (step + 1) / warmupSteps while step < warmupSteps,
///                  then baseLR.
///  - Cosine:       the same warmup, then minLR + 0.5 * (baseLR - minLR) *
///                  (1 + cos(pi * progress)) with progress = (step - warmup) /
///                  max(1, totalSteps - warmup) clamped to [0, 1].
double learningRate(const plan::TrainingInfo &info, int64_t step,
                    int64_t globalBatch);

} // namespace cleave::rt

#endif // CLEAVE_TRAINING_H
