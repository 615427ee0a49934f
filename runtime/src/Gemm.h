//===- Gemm.h - Batched row-major GEMM through CBLAS -----------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_GEMM_H
#define CLEAVE_RUNTIME_GEMM_H

#include "cleave/PlanFormat.h"

#include <cstdint>
#include <string>

namespace cleave::rt {

/// Runs a validated Gemm command (see PlanFormat.h) on `arena`.
void runGemm(const plan::Command &command, uint8_t *arena);

/// The libraries GEMMs go to: "oneDNN 2.6.3 (f32, bf16), OpenBLAS (f64)"
/// when oneDNN loads, else "OpenBLAS" (see Gemm.cpp).
std::string gemmLibraries();

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_GEMM_H
