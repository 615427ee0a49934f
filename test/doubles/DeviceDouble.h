//===- DeviceDouble.h - The device the CUDA host doubles share --*- C++ -*-===//
//
// The strict host doubles of libcuda, cuBLASLt and NCCL are test
// infrastructure: they let the CUDA executor and the NCCL communicator run
// on machines without a GPU, the way PyTorch tests distributed code with
// fake process groups. They prove host logic and call order (every byte a
// command touches lies in a live allocation, every cross-stream dependency
// is an event edge, every rank issues the same collectives); they say
// nothing of timing or of device numerics.
//
// libcleave-cuda-double.so is the driver double and owns the device:
//  - memory: device memory is host memory tracked in a table; an access
//    outside a live allocation aborts the run naming the operation and the
//    plan command, and freed memory is poisoned;
//  - streams: each stream is a worker thread running its queue, so a
//    missing event wait is a real race (TSan sees it), and a happens-before
//    checker (vector clocks computed at enqueue time, so its verdict does
//    not depend on thread timing) aborts on the first pair of unordered
//    accesses to the same bytes, naming both operations.
// The cuBLASLt and NCCL doubles link against it and queue their work
// through enqueue() below, so their accesses are checked the same way.
//
// Nothing here is part of the runtime: the runtime loads these libraries
// by path ($CLEAVE_CUDA_DRIVER_LIBRARY, $CLEAVE_CUBLASLT_LIBRARY,
// $CLEAVE_NCCL_LIBRARY; tools/cuda-double-env.sh prints the exports) and
// cannot tell them from the real ones except through the optional
// cleaveDouble* entry points, which a real driver does not export.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_DOUBLES_DEVICEDOUBLE_H
#define CLEAVE_TEST_DOUBLES_DEVICEDOUBLE_H

#include "CudaApi.h" // the runtime's declarations of the CUDA types

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cleave::cudadouble {

using cleave::rt::cuda::CUdeviceptr;
using cleave::rt::cuda::CUresult;
using cleave::rt::cuda::CUstream;

/// One byte range of device memory an operation reads or writes.
struct Access {
  CUdeviceptr address = 0;
  uint64_t bytes = 0;
  bool write = false;
  /// What the range is to the operation ("A", "send buffer"), for messages.
  std::string role;
};

/// Prints "cleave cuda double: <message>" with the plan command the calling
/// thread is enqueueing or running (if the runtime said) to stderr and
/// aborts the process. Used for every misuse the doubles detect.
[[noreturn]] void fail(const std::string &message);

/// Queues `work` on `stream` (null: the legacy stream, which the host
/// waits for before returning). Before queueing, every access must lie
/// inside one live allocation (else fail, naming `what`, the role and the
/// range), and is checked against earlier accesses to the same bytes by
/// the happens-before checker (else fail, naming both operations). While
/// the stream is being captured, the work is recorded into the graph
/// instead and runs, with the same checks, at each cuGraphLaunch.
/// `work` runs on the stream's worker thread; when it runs, the accessed
/// ranges are checked again (a buffer freed since is a use after free).
/// Returns CUDA_ERROR_INVALID_HANDLE for a stream that is not live.
CUresult enqueue(CUstream stream, const std::string &what,
                 std::vector<Access> accesses, std::function<void()> work);

/// The label of the plan command the calling thread is enqueueing (what the
/// runtime last passed to cleaveDoubleSetCommand on this thread), or "".
std::string currentCommand();

/// Host address of device address `ptr` (the doubles' device memory is host
/// memory). Null for 0.
inline void *hostPointer(CUdeviceptr ptr) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(ptr));
}

} // namespace cleave::cudadouble

/// Optional entry points the runtime looks up with dlsym on the driver
/// library it loaded; a real driver has none of them, so the runtime skips
/// them there.
extern "C" {
/// Labels the work the calling thread enqueues next ("command 12
/// (gpu_launch fused_add_3)"), for the doubles' messages; null clears it.
void cleaveDoubleSetCommand(const char *label);
/// Attaches to the kernel image at `image` (the pointer the runtime will
/// pass to cuModuleLoadData) the plan's kernels compiled for the host:
/// `object` is an x86-64 ELF shared object of `objectBytes` bytes exporting
/// `void name(void **args)` for every launch symbol of the image, and
/// `argBytes`/`argWrites` describe, per symbol in `names` order, each
/// argument's bytes and whether the kernel writes it (numArgs[i] entries
/// for symbol i, concatenated). Returns 0, or a CUresult error.
int cleaveDoubleAttachHostKernels(const void *image, const void *object,
                                  uint64_t objectBytes,
                                  const char *const *names,
                                  const uint32_t *numArgs,
                                  const uint64_t *argBytes,
                                  const uint8_t *argWrites, uint32_t numNames);
}

#endif // CLEAVE_TEST_DOUBLES_DEVICEDOUBLE_H
