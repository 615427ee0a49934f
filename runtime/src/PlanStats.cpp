//===- PlanStats.cpp - What a plan holds, counted -------------------------===//

#include "cleave/PlanFormat.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace cleave::plan {

PlanStats statistics(const Plan &plan) {
  PlanStats s;
  s.commands = plan.commands.size();
  for (const Command &c : plan.commands) {
    s.kernels +=
        c.kind == CommandKind::Kernel || c.kind == CommandKind::GpuLaunch;
    if (c.kind == CommandKind::Gemm) {
      ++s.gemms;
      size_t epilogue = static_cast<size_t>(gemmEpilogueOf(c));
      if (epilogue < 4)
        ++s.gemmEpilogues[epilogue];
    }
    s.attentions += c.kind == CommandKind::Attention ||
                    c.kind == CommandKind::AttentionBackward;
    s.groupedGemms += c.kind == CommandKind::GroupedGemm;
    if (c.kind == CommandKind::Collective) {
      ++s.collectives;
      s.asyncCollectives += c.stream == kCommStream;
    }
  }
  s.arenaBytes = plan.arenaBytes;
  s.kernelObjectBytes = plan.kernelObject.size();
  std::set<std::string> files;
  for (const Constant &c : plan.constants) {
    s.constantBytes += c.data.size();
    if (!c.file.empty()) {
      TensorInfo global = c.info;
      global.shape = globalShape(c.info, plan.mesh);
      s.referencedBytes += global.byteSize();
      files.insert(c.file);
    }
  }
  s.referencedFiles.assign(files.begin(), files.end());
  for (const StateTensor &st : plan.states)
    (st.kind == StateKind::Parameter        ? s.parameterBytes
     : st.kind == StateKind::OptimizerState ? s.optimizerStateBytes
                                            : s.bufferBytes) +=
        st.info.byteSize();
  s.flops = getMetadata(plan, meta::kFlops).value_or(0);
  return s;
}

} // namespace cleave::plan
