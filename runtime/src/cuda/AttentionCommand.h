//===- AttentionCommand.h - An attention command's args ---------*- C++ -*-===//
//
// Host side only: the AttentionArgs of an Attention or AttentionBackward
// command whose buffers are offsets from `arena` (a device address in the
// CUDA backend, a host one in the kernels' emulation test).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDA_ATTENTIONCOMMAND_H
#define CLEAVE_RUNTIME_CUDA_ATTENTIONCOMMAND_H

#include "AttentionArgs.h"
#include "cleave/PlanFormat.h"

namespace cleave::rt::cuda {

/// The command's arguments; lse and rowDot (backward scratch) are left 0.
inline AttentionArgs attentionArgsOf(const plan::Command &c,
                                     unsigned long long arena) {
  using namespace plan;
  const std::vector<int64_t> &p = c.params;
  AttentionArgs a{};
  size_t i = 0;
  auto next = [&] { return arena + c.buffers[i++]; };
  a.hasBias = p[kAttnBiasDType] != 0;
  a.q = next();
  a.k = next();
  a.v = next();
  a.bias = a.hasBias ? next() : 0;
  if (c.kind == CommandKind::Attention) {
    a.result = next();
  } else {
    a.out = next();
    a.dout = next();
    a.dq = next();
    a.dk = next();
    a.dv = next();
  }
  a.dtype = static_cast<int>(p[kAttnDType]);
  a.doutDType = static_cast<int>(p[kAttnDoutDType]);
  a.gradDType = static_cast<int>(p[kAttnGradDType]);
  a.biasDType = a.hasBias ? static_cast<int>(p[kAttnBiasDType]) : 0;
  a.causal = p[kAttnCausal] != 0;
  a.B = static_cast<int>(p[kAttnBatch]);
  a.Hq = static_cast<int>(p[kAttnQHeads]);
  a.Hkv = static_cast<int>(p[kAttnKVHeads]);
  a.G = a.Hq / a.Hkv;
  a.Sq = static_cast<int>(p[kAttnQLen]);
  a.Skv = static_cast<int>(p[kAttnKVLen]);
  a.D = static_cast<int>(p[kAttnHeadDim]);
  a.Dv = static_cast<int>(p[kAttnValueDim]);
  a.biasB = static_cast<int>(p[kAttnBiasBatch]);
  a.biasH = static_cast<int>(p[kAttnBiasHeads]);
  a.biasSq = static_cast<int>(p[kAttnBiasQLen]);
  a.offset = p[kAttnCausalOffset];
  a.scale = static_cast<float>(bitsToDouble(p[kAttnScaleBits]));
  a.softcap = static_cast<float>(bitsToDouble(p[kAttnSoftcapBits]));
  return a;
}

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_CUDA_ATTENTIONCOMMAND_H
