//===- Backend.h - Interface every executor backend implements -*- C++ -*-===//
//
// The executor (Executor.cpp) does the device-independent work: argument
// checks, input bookkeeping. A backend owns the arena on its device and runs
// the commands. A CUDA backend implements the same interface (arena in device
// memory, readTensor copying to a host staging buffer); the CPU backend runs
// collectives through the Communicator handed to the factory, the CUDA
// backend through NCCL (bootstrapped over that Communicator).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_BACKEND_H
#define CLEAVE_RUNTIME_BACKEND_H

#include "Communicator.h"
#include "Status.h"
#include "cleave/PlanFormat.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cleave::rt {

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// Copies tensor.byteSize() bytes from host `data` to the tensor's place.
  virtual cleave_rt_status writeTensor(const plan::TensorInfo &tensor,
                                       const void *data) = 0;
  /// Runs every command of the plan, in order.
  virtual cleave_rt_status run() = 0;
  /// Host-readable pointer to the tensor's bytes, valid until the next run.
  virtual cleave_rt_status readTensor(const plan::TensorInfo &tensor,
                                      const void **out_data) = 0;
  /// Copies the tensor's bytes into host `dst` (tensor.byteSize() bytes):
  /// readTensor and a copy, unless the backend copies straight into `dst`.
  virtual cleave_rt_status readTensorInto(const plan::TensorInfo &tensor,
                                          void *dst) {
    const void *src = nullptr;
    if (cleave_rt_status s = readTensor(tensor, &src))
      return s;
    if (tensor.byteSize())
      std::memcpy(dst, src, tensor.byteSize());
    return nullptr;
  }
  /// Host memory that readTensorInto fills at the device's full speed
  /// (page-locked on a GPU); freed with freeHost.
  virtual cleave_rt_status allocHost(size_t bytes, void **out) {
    *out = std::malloc(bytes ? bytes : 1);
    return *out ? nullptr
                : makeStatus(CLEAVE_RT_RESOURCE_EXHAUSTED,
                             "cannot allocate " + std::to_string(bytes) +
                                 " bytes of host memory");
  }
  virtual void freeHost(void *data) { std::free(data); }

  /// One line for cleave_rt_executor_device_info; the backend's name unless
  /// it says more.
  virtual std::string deviceInfo() const { return name(); }

  /// Bytes of initial values this backend read from files referenced by the
  /// plan (this rank's shards only).
  uint64_t initialBytesRead() const { return bytesReadFromFiles; }

  /// The arena in host memory, for cleave_rt_executor_measure_memory; null
  /// when it lies in device memory.
  virtual uint8_t *hostArena() { return nullptr; }

  /// Whether setTracing can record markers on this backend.
  virtual bool supportsTracing() const { return true; }
  /// With `on`, later runs record their Marker commands.
  void setTracing(bool on) { tracing = on; }
  /// The markers of the last traced run, in order.
  const std::vector<cleave_rt_marker_record_t> &markers() const {
    return markerRecords;
  }
  /// The steady-clock time (ns) the last traced run started.
  int64_t runStartNs() const { return runStart; }

  /// Whether setProfiling can time commands on this backend.
  virtual bool supportsProfiling() const { return false; }
  /// With `on`, later runs add each step command's time to its total
  /// (cleave_rt_executor_set_profiling); turning it on clears the totals.
  virtual void setProfiling(bool /*on*/) {}
  /// Per step command, in plan order; empty unless profiling.
  const std::vector<cleave_rt_command_profile_t> &profile() const {
    return profileRecords;
  }
  int64_t profiledRuns() const { return profileRuns; }

protected:
  /// Called by run() first: forgets the last run's markers.
  void beginRun() {
    markerRecords.clear();
    if (tracing)
      runStart = nowNs();
  }
  /// Executes a Marker command: nothing unless tracing.
  void mark(const plan::Command &c) {
    if (tracing)
      markerRecords.push_back({c.params[0], c.params[1], nowNs()});
  }
  static int64_t nowNs();

  uint64_t bytesReadFromFiles = 0;
  bool tracing = false;
  std::vector<cleave_rt_marker_record_t> markerRecords;
  std::vector<cleave_rt_command_profile_t> profileRecords;
  int64_t profileRuns = 0;
  int64_t runStart = 0;
};

/// Writes rank `rank`'s value of every constant of `plan` with data or a
/// file reference to host memory: fn(constant, bytes) is called with
/// constant.info.byteSize() bytes (its shard). File references are read
/// shard by shard (each file opened once, its size checked against the
/// plan's); *bytesRead gets the bytes read from files.
cleave_rt_status forEachConstantValue(
    const plan::Plan &plan, int64_t rank,
    const std::function<cleave_rt_status(const plan::Constant &,
                                         const uint8_t *)> &fn,
    uint64_t *bytesRead);

using PlanRef = std::shared_ptr<const plan::Plan>;

/// The CPU backend (CpuBackend.cpp): arena in host memory, kernels from the
/// plan's ELF object, GEMMs through CBLAS, collectives through `comm` (null
/// for a one-rank plan). Asynchronous collectives run on a communication
/// thread beside the commands.
cleave_rt_status createCpuBackend(PlanRef plan, Communicator *comm,
                                  std::unique_ptr<Backend> *out);

/// The CUDA backend (CudaBackend.cpp): arena in device memory, cubin kernels
/// through the driver API, GEMMs through cuBLASLt, collectives through NCCL
/// (NcclCollectives.h), all loaded with dlopen. `comm` (null: one rank, or
/// a torchrun launch, whose rank comes from the environment) hands out the
/// NCCL id and gives the communication timeout; `file` is the whole plan
/// file `plan` belongs to (a pipelined file's stage, an entry), whose
/// collectives decide the NCCL communicators (null: `plan` itself).
/// UNAVAILABLE without libcuda.so.1 or a device.
cleave_rt_status createCudaBackend(PlanRef plan, Communicator *comm,
                                   const plan::Plan *file,
                                   std::unique_ptr<Backend> *out);

/// Creates the backend named `name` ("cpu" or "cuda") for the rank of
/// `comm` (null: one rank). `file`: see createCudaBackend.
cleave_rt_status createBackend(const std::string &name, PlanRef plan,
                               Communicator *comm,
                               std::unique_ptr<Backend> *out,
                               const plan::Plan *file = nullptr);

} // namespace cleave::rt

#endif // CLEAVE_RUNTIME_BACKEND_H
