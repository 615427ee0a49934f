//===- Attention.h - Fused attention on the CPU -----------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_ATTENTION_H
#define CLEAVE_RUNTIME_ATTENTION_H

#include "KernelThreads.h"

#include "cleave/PlanFormat.h"

#include <cstdint>

namespace cleave::rt {

/// Runs a validated Attention or AttentionBackward command (see
/// PlanFormat.h) on `arena`, its tasks spread over `threads`. Results are
/// bitwise the same for every thread count.
void runAttention(const plan::Command &command, uint8_t *arena,
                  KernelThreads &threads);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_ATTENTION_H
