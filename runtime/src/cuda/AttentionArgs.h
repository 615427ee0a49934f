//===- AttentionArgs.h - CUDA attention kernel arguments --------*- C++ -*-===//
//
// The one argument, passed by value, of every kernel in AttentionKernels.cu;
// the runtime fills it from an Attention/AttentionBackward command. Plain
// types only, so that the host (CudaBackend.cpp) and the device code share
// the layout.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CUDA_ATTENTIONARGS_H
#define CLEAVE_RUNTIME_CUDA_ATTENTIONARGS_H

namespace cleave::rt::cuda {

/// The largest head dimension (q/k and v) the kernels take.
constexpr int kAttentionMaxHeadDim = 128;
/// Queries per block (forward, dq), keys per block (dk, dv), threads per
/// block.
constexpr int kAttentionRowsPerBlock = 32;
constexpr int kAttentionKeysPerBlock = 16;
constexpr int kAttentionThreads = 128;

struct AttentionArgs {
  // Device addresses (CUdeviceptr); bias, out, dout, dq, dk, dv, lse and
  // rowDot are 0 where the kernel does not use them.
  unsigned long long q, k, v, bias, out, dout;
  unsigned long long result, dq, dk, dv;
  /// Backward scratch, B x Hq x Sq floats each: each query row's
  /// log-sum-exp and rowsum(dout * out).
  unsigned long long lse, rowDot;
  // Plan dtype codes (F32 1, F16 10, BF16 16).
  int dtype, doutDType, gradDType, biasDType;
  int hasBias, causal;
  int B, Hq, Hkv, G, Sq, Skv, D, Dv;
  int biasB, biasH, biasSq;
  long long offset;
  float scale, softcap;
};

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_CUDA_ATTENTIONARGS_H
