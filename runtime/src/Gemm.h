//===- Gemm.h - Batched row-major GEMM through CBLAS -----------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_GEMM_H
#define CLEAVE_RUNTIME_GEMM_H

#include "cleave/PlanFormat.h"

#include <cstdint>

namespace cleave::rt {

/// Runs a validated Gemm command (see PlanFormat.h) on `arena`.
void runGemm(const plan::Command &command, uint8_t *arena);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_GEMM_H
