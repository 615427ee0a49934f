//===- GroupedGemm.h - The expert GEMMs of a mixture of experts -*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_GROUPEDGEMM_H
#define CLEAVE_RUNTIME_GROUPEDGEMM_H

#include "cleave/PlanFormat.h"

#include <cstdint>

namespace cleave::rt {

class KernelThreads;

/// Runs a validated GroupedGemm command (see PlanFormat.h) on `arena`: the
/// rows are ordered by expert (a stable counting sort), each expert's rows
/// are library GEMMs in f32, cut into tiles by their shape alone and spread
/// over `threads` (null: the calling thread), so the result does not
/// depend on the thread count.
void runGroupedGemm(const plan::Command &command, uint8_t *arena,
                    const KernelThreads *threads);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_GROUPEDGEMM_H
