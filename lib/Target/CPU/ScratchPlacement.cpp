//===- ScratchPlacement.cpp - The CPU kernels' scratch in the arena -------===//
//
// A step on the plan, not an IR pass: how much scratch each kernel needs is
// known only once its code is generated (--cleave-cpu-temporaries-to-scratch
// counts it), and where it goes is a place in the plan's arena. Commands run
// one after another, so every kernel shares one region after the planned
// buffers, as large as the largest kernel's.
//
//===----------------------------------------------------------------------===//

#include "cleave/Target/CPU/ScratchPlacement.h"
#include "cleave/Target/CPU/CPUCodegen.h"

#include <algorithm>

namespace cleave {

void placeCPUScratch(plan::Plan &p,
                     const std::map<std::string, uint64_t> &scratch) {
  uint64_t alignment = std::max<uint64_t>(p.alignment, kCPUScratchAlignment);
  uint64_t base = (p.arenaBytes + alignment - 1) / alignment * alignment;
  uint64_t bytes = 0;
  for (const auto &[name, kernelBytes] : scratch)
    bytes = std::max(bytes, kernelBytes);
  if (bytes == 0)
    return;
  for (std::vector<plan::Command> *list : {&p.commands, &p.initCommands})
    for (plan::Command &cmd : *list) {
      if (cmd.kind != plan::CommandKind::Kernel)
        continue;
      auto it = scratch.find(p.kernelNames[cmd.params[0]]);
      if (it != scratch.end() && it->second > 0)
        cmd.buffers.push_back(base);
    }
  p.arenaBytes = base + bytes;
  plan::addMetadata(p, plan::meta::kCpuScratchBytes, bytes);
}

} // namespace cleave
