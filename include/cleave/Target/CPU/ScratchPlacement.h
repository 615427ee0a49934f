//===- ScratchPlacement.h - CPU kernels' scratch in the arena --*- C++ -*-===//
//
// The CPU target's step on the plan after code generation: the kernels that
// keep temporaries get their scratch buffer in the arena.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TARGET_CPU_SCRATCHPLACEMENT_H
#define CLEAVE_TARGET_CPU_SCRATCHPLACEMENT_H

#include "cleave/PlanFormat.h"

#include <cstdint>
#include <map>
#include <string>

namespace cleave {

/// Gives the kernels of `plan` that have temporaries (`scratch`: kernel
/// name -> bytes, CPUKernelObject::scratchBytes) their scratch buffer: one
/// region of the arena after the planned buffers, as large as the largest
/// kernel's, passed as the last argument of each Kernel command (step and
/// init) that needs it. Records its size as `cpu_scratch_bytes`.
void placeCPUScratch(plan::Plan &plan,
                     const std::map<std::string, uint64_t> &scratch);

} // namespace cleave

#endif // CLEAVE_TARGET_CPU_SCRATCHPLACEMENT_H
