//===- AttentionEmulation.cpp - The CUDA attention kernels on host threads ===//
//
// Compiles runtime/src/cuda/AttentionKernels.cu as C++ with the CUDA
// built-ins it uses supplied here, and runs a grid one block at a time, each
// CUDA thread a coroutine (ucontext) on one host thread: __syncthreads
// switches to the next thread until all have arrived, a warp shuffle is an
// exchange through the block's slots between two barriers (every call site
// is reached by all threads of the block), __shared__ arrays are the
// kernel's statics (one block at a time).
// Not a model of the GPU's speed or memory system; it checks what the
// kernels compute (indexing, masks, the online softmax, the backward's
// three passes) where no GPU is.
//
//===----------------------------------------------------------------------===//

#include "AttentionEmulation.h"
#include "Half.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ucontext.h>
#include <vector>

namespace {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
Dim3 threadIdx, blockIdx;

/// The block's threads as coroutines: each runs until its next barrier,
/// then the next one runs; threadIdx is the running one's.
struct Block {
  static constexpr size_t kStack = 256 * 1024;
  ucontext_t scheduler;
  std::vector<ucontext_t> threads;
  std::vector<std::unique_ptr<char[]>> stacks;
  unsigned running = 0;
};
Block block;
float shuffleSlots[1024];

void __syncthreads() {
  swapcontext(&block.threads[block.running], &block.scheduler);
}

float __shfl_xor_sync(unsigned, float v, int laneMask) {
  shuffleSlots[threadIdx.x] = v;
  __syncthreads();
  float r = shuffleSlots[threadIdx.x ^ static_cast<unsigned>(laneMask)];
  __syncthreads();
  return r;
}

float __int_as_float(int bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
float __uint_as_float(unsigned bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// float16 and bfloat16 as their bits, converted as the CPU backend does.
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
float __half2float(__half h) { return cleave::rt::halfToFloat(h.bits); }
__half __float2half_rn(float f) { return {cleave::rt::floatToHalf(f)}; }
__nv_bfloat16 __float2bfloat16_rn(float f) {
  return {cleave::rt::floatToBf16(f)};
}

template <typename T> T min(T a, T b) { return b < a ? b : a; }

} // namespace

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

#include "cuda/AttentionKernels.cu"

namespace cleave::test {

using rt::cuda::AttentionArgs;

namespace {
void (*currentKernel)(AttentionArgs);
const AttentionArgs *currentArgs;
std::vector<bool> finished;

void threadMain() {
  currentKernel(*currentArgs);
  finished[block.running] = true;
  // Returning resumes uc_link: the scheduler.
}
} // namespace

/// Runs every block of the grid, its threads interleaved at each barrier.
static void runGrid(void (*kernel)(AttentionArgs), const AttentionArgs &a,
                    unsigned gx, unsigned gy, unsigned gz) {
  const unsigned threads = rt::cuda::kAttentionThreads;
  block.threads.resize(threads);
  while (block.stacks.size() < threads)
    block.stacks.emplace_back(new char[Block::kStack]);
  currentKernel = kernel;
  currentArgs = &a;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        blockIdx = {x, y, z};
        finished.assign(threads, false);
        for (unsigned t = 0; t < threads; ++t) {
          ucontext_t &c = block.threads[t];
          getcontext(&c);
          c.uc_stack.ss_sp = block.stacks[t].get();
          c.uc_stack.ss_size = Block::kStack;
          c.uc_link = &block.scheduler;
          makecontext(&c, threadMain, 0);
        }
        // Round robin from barrier to barrier until every thread returned.
        for (bool done = false; !done;) {
          done = true;
          for (unsigned t = 0; t < threads; ++t) {
            if (finished[t])
              continue;
            block.running = t;
            threadIdx = {t, 0, 0};
            swapcontext(&block.scheduler, &block.threads[t]);
            done &= finished[t];
          }
        }
      }
}

void emulateAttention(AttentionArgs a, bool backward) {
  auto blocks = [](int n, int per) {
    return static_cast<unsigned>((n + per - 1) / per);
  };
  unsigned qx = blocks(a.Sq, rt::cuda::kAttentionRowsPerBlock),
           kx = blocks(a.Skv, rt::cuda::kAttentionKeysPerBlock);
  unsigned hq = static_cast<unsigned>(a.Hq), hkv = static_cast<unsigned>(a.Hkv),
           b = static_cast<unsigned>(a.B);
  if (!backward) {
    runGrid(cleave_attention_forward, a, qx, hq, b);
    return;
  }
  std::vector<float> lse(static_cast<size_t>(a.B) * a.Hq * a.Sq),
      rowDot(lse.size());
  a.lse = reinterpret_cast<uintptr_t>(lse.data());
  a.rowDot = reinterpret_cast<uintptr_t>(rowDot.data());
  runGrid(cleave_attention_backward_rows, a, qx, hq, b);
  runGrid(cleave_attention_backward_dq, a, qx, hq, b);
  runGrid(cleave_attention_backward_dkdv, a, kx, hkv, b);
}

} // namespace cleave::test
