//===- KernelThreads.h - Threads for kernels' parallel loops ----*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_KERNELTHREADS_H
#define CLEAVE_RUNTIME_KERNELTHREADS_H

#include "cleave/PlanFormat.h"

#include <cstdint>
#include <string>

namespace cleave::rt {

/// Runs the parallel loop nests of a plan's CPU kernels (the kernel object's
/// plan::kParallelForSymbol) on an OpenMP team, through libgomp loaded with
/// dlopen: the runtime oneDNN's GEMMs use, so kernels and GEMMs share one
/// team of threads instead of two pools spinning over the same cores.
///
/// Each nest's range [0, n) is split into one contiguous block per thread;
/// kernels compute each iteration the same way whichever thread runs it, so
/// results are bitwise the same for every thread count.
///
/// The team has OpenMP's default size: OMP_NUM_THREADS, else a thread per
/// core (cleave-run's --threads sets OMP_NUM_THREADS; it gives ranks on one
/// machine cores / ranks each). Without libgomp every nest runs on the
/// calling thread.
class KernelThreads {
public:
  KernelThreads();
  /// Threads a nest is split over (1: the calling thread only).
  int threads() const { return count; }
  /// "2 OpenMP threads", or why kernels run on one thread.
  std::string describe() const;
  /// The function the kernel object's kParallelForSymbol points at, with
  /// `runtime` a KernelThreads.
  static void parallelFor(void *runtime, plan::ParallelRangeFn range,
                          void *frame, int64_t n);
  /// parallelFor for ranges whose iterations call a threaded library
  /// (oneDNN's GEMMs): each call runs on the one thread that makes it,
  /// also where a single block runs on the calling thread outside the team
  /// (its OpenMP thread count is 1 meanwhile), so what a call computes does
  /// not depend on the team's size. `self` may be null (one thread).
  static void parallelForOneThreadEach(const KernelThreads *self,
                                       plan::ParallelRangeFn range, void *frame,
                                       int64_t n);

private:
  int count = 1;
};

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_KERNELTHREADS_H
