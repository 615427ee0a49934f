//===- LearningRate.cpp - Learning-rate schedules -------------------------===//

#include "cleave/Training.h"

#include <algorithm>
#include <cmath>

namespace cleave::rt {

using namespace plan;

double learningRate(const TrainingInfo &info, int64_t step,
                    int64_t globalBatch) {
  double lr = info.baseLR;
  bool warming = info.schedule != LRSchedule::Constant &&
                 info.warmupSteps > 0 && step < info.warmupSteps;
  if (warming) {
    lr = info.baseLR * static_cast<double>(step + 1) /
         static_cast<double>(info.warmupSteps);
  } else if (info.schedule == LRSchedule::Cosine) {
    double span = static_cast<double>(
        std::max<int64_t>(1, info.totalSteps - info.warmupSteps));
    double progress = static_cast<double>(step - info.warmupSteps) / span;
    progress = std::clamp(progress, 0.0, 1.0);
    lr = info.minLR +
         0.5 * (info.baseLR - info.minLR) * (1.0 + std::cos(M_PI * progress));
  }
  if (info.referenceBatch > 0 && globalBatch > 0)
    lr *= static_cast<double>(globalBatch) /
          static_cast<double>(info.referenceBatch);
  return lr;
}

} // namespace cleave::rt
