//===- KernelThreads.cpp - Threads for the kernels' parallel loops --------===//

#include "KernelThreads.h"

#include <algorithm>
#include <dlfcn.h>

namespace cleave::rt {

namespace {
/// The parts of libgomp's ABI the kernels need. GOMP_parallel is what GCC
/// emits for `#pragma omp parallel`: it runs fn(data) on a team of
/// num_threads threads (the caller is thread 0) and returns when all have.
struct Gomp {
  void (*parallel)(void (*fn)(void *), void *data, unsigned numThreads,
                   unsigned flags) = nullptr;
  int (*threadNum)() = nullptr;
  int (*numThreads)() = nullptr;
  int (*maxThreads)() = nullptr;
  void (*setNumThreads)(int) = nullptr;
};

/// libgomp, loaded once and never unloaded (its threads outlive any plan);
/// null when it is missing.
const Gomp *gomp() {
  static const Gomp *loaded = []() -> const Gomp * {
    void *lib = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return nullptr;
    static Gomp g;
    g.parallel =
        reinterpret_cast<decltype(g.parallel)>(dlsym(lib, "GOMP_parallel"));
    g.threadNum = reinterpret_cast<decltype(g.threadNum)>(
        dlsym(lib, "omp_get_thread_num"));
    g.numThreads = reinterpret_cast<decltype(g.numThreads)>(
        dlsym(lib, "omp_get_num_threads"));
    g.maxThreads = reinterpret_cast<decltype(g.maxThreads)>(
        dlsym(lib, "omp_get_max_threads"));
    g.setNumThreads = reinterpret_cast<decltype(g.setNumThreads)>(
        dlsym(lib, "omp_set_num_threads"));
    if (!g.parallel || !g.threadNum || !g.numThreads || !g.maxThreads ||
        !g.setNumThreads)
      return nullptr;
    return &g;
  }();
  return loaded;
}

struct Job {
  const Gomp *gomp;
  plan::ParallelRangeFn range;
  void *frame;
  int64_t n;
};

/// One team member's block of [0, n): the first n % threads blocks have one
/// iteration more.
void runBlock(void *data) {
  const Job &job = *static_cast<const Job *>(data);
  int64_t id = job.gomp->threadNum(), threads = job.gomp->numThreads();
  int64_t block = job.n / threads, extra = job.n % threads;
  int64_t begin = id * block + std::min(id, extra);
  int64_t end = begin + block + (id < extra ? 1 : 0);
  if (begin < end)
    job.range(job.frame, begin, end);
}
} // namespace

KernelThreads::KernelThreads() {
  if (const Gomp *g = gomp())
    count = std::max(1, g->maxThreads());
}

std::string KernelThreads::describe() const {
  if (!gomp())
    return "1 thread (libgomp.so.1 not found)";
  return std::to_string(count) +
         (count == 1 ? " OpenMP thread" : " OpenMP threads");
}

void KernelThreads::parallelFor(void *runtime, plan::ParallelRangeFn range,
                                void *frame, int64_t n) {
  const auto *self = static_cast<const KernelThreads *>(runtime);
  int64_t threads = std::min<int64_t>(self ? self->count : 1, n);
  const Gomp *g = gomp();
  if (threads <= 1 || !g) {
    if (n > 0)
      range(frame, 0, n);
    return;
  }
  Job job{g, range, frame, n};
  g->parallel(&runBlock, &job, static_cast<unsigned>(threads), 0);
}

void KernelThreads::parallelForOneThreadEach(const KernelThreads *self,
                                             plan::ParallelRangeFn range,
                                             void *frame, int64_t n) {
  const Gomp *g = gomp();
  if (!g) {
    if (n > 0)
      range(frame, 0, n);
    return;
  }
  // Inside the team a library sees omp_in_parallel() and does not thread;
  // on the calling thread outside it (one block), the thread count set
  // here keeps it to that thread.
  int saved = g->maxThreads();
  g->setNumThreads(1);
  parallelFor(const_cast<KernelThreads *>(self), range, frame, n);
  g->setNumThreads(saved);
}

} // namespace cleave::rt
