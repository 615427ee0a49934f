//===- AttentionEmulation.h - CUDA attention on the host --------*- C++ -*-===//

#ifndef CLEAVE_TEST_RUNTIME_ATTENTIONEMULATION_H
#define CLEAVE_TEST_RUNTIME_ATTENTIONEMULATION_H

#include "cuda/AttentionArgs.h"

namespace cleave::test {

/// Runs the CUDA attention kernels of one Attention (or, with `backward`,
/// AttentionBackward) command on host threads, one per CUDA thread, with
/// `args` holding host addresses; the backward's scratch is allocated here.
void emulateAttention(rt::cuda::AttentionArgs args, bool backward);

} // namespace cleave::test

#endif // CLEAVE_TEST_RUNTIME_ATTENTIONEMULATION_H
