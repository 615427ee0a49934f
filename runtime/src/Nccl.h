//===- Nccl.h - NCCL library and communicator -------------------*- C++ -*-===//
//
// A thin C++ layer over the NCCL table of CudaApi.h: the loaded library (its
// version, errors as statuses) and a communicator that owns an ncclComm_t.
// Collectives are enqueued on a stream the caller gives (the CUDA backend's
// communication stream); nothing here synchronizes.
//
// The CUDA backend runs a plan's collectives through these classes
// (NcclCollectives.h decomposes each command into the calls below).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_NCCL_H
#define CLEAVE_RUNTIME_NCCL_H

#include "CudaApi.h"
#include "cleave/PlanFormat.h"

#include <string>

namespace cleave::rt::cuda {

/// The NCCL entry points of one loaded library.
class NcclLibrary {
public:
  /// The process-wide library (loadNccl): UNAVAILABLE, with the reason, when
  /// no NCCL library loads, when it lacks a symbol or when it is too old.
  static cleave_rt_status load(const NcclLibrary **out);
  /// The library at `path` only, not cached (tests, diagnostics).
  static cleave_rt_status loadFrom(const std::string &path, NcclLibrary *out);

  const NcclApi &api() const { return table; }
  /// NCCL_VERSION(major, minor, patch) of the library, e.g. 22809.
  int versionCode() const { return table.versionCode; }
  /// "2.28.9".
  std::string version() const { return ncclVersionString(table.versionCode); }

  /// Null for ncclSuccess, else INTERNAL naming `what` with NCCL's text.
  cleave_rt_status check(ncclResult_t r, const char *what,
                         ncclComm_t comm = nullptr) const {
    return checkNccl(table, r, what, comm);
  }
  /// A new id for rank 0 to hand to the other ranks of a communicator.
  cleave_rt_status getUniqueId(ncclUniqueId *out) const;
  /// ncclGroupStart / ncclGroupEnd: the point-to-point calls between them
  /// are issued together (an all-to-all, a permutation).
  cleave_rt_status groupStart() const;
  cleave_rt_status groupEnd() const;

private:
  NcclApi table;
};

/// The NCCL element type of a plan dtype; INVALID_ARGUMENT for bool and the
/// 16-bit integers, which NCCL has no type for.
cleave_rt_status ncclDataTypeOf(plan::DType dtype, ncclDataType_t *out);

/// The NCCL reduction of a plan reduction (avg is ncclAvg, NCCL >= 2.10).
ncclRedOp_t ncclRedOpOf(plan::ReduceOp op);

/// One rank's membership of an NCCL communicator. Destroying it (or calling
/// destroy()) waits for the rank's pending collectives to finish; abort()
/// gives up on them instead (after an error, or when a peer has died).
class NcclCommunicator {
public:
  NcclCommunicator() = default;
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;
  ~NcclCommunicator();

  /// Joins the communicator `id` of `worldSize` ranks as `rank`, on the
  /// device of the CUDA context current on the calling thread. Blocks until
  /// every rank has joined, so each rank of one process needs its own thread.
  /// `library` must outlive the communicator.
  /// INVALID_ARGUMENT for a rank outside [0, worldSize); FAILED_PRECONDITION
  /// if this object already holds a communicator.
  cleave_rt_status init(const NcclLibrary &library, int rank, int worldSize,
                        const ncclUniqueId &id);
  /// ncclCommSplit of `parent`: joins the communicator of the ranks that
  /// pass the same `color` (>= 0), as the rank ordered by `key` among them.
  /// Every rank of `parent` must call it, in the same order as the others.
  /// FAILED_PRECONDITION if this object already holds a communicator or the
  /// parent holds none.
  cleave_rt_status split(const NcclCommunicator &parent, int color, int key);
  /// ncclCommDestroy; a no-op without a communicator.
  cleave_rt_status destroy();
  /// ncclCommAbort; a no-op without a communicator.
  cleave_rt_status abort();

  bool initialized() const { return comm != nullptr; }
  int rank() const { return myRank; }
  int worldSize() const { return size; }
  ncclComm_t handle() const { return comm; }
  /// An error NCCL met asynchronously (e.g. a network failure), or null.
  cleave_rt_status asyncError() const;

  /// recv[i] = op over ranks of send[i], `count` elements on every rank.
  cleave_rt_status allReduce(CUdeviceptr send, CUdeviceptr recv, size_t count,
                             ncclDataType_t dtype, ncclRedOp_t op,
                             CUstream stream);
  /// recv (recvCount elements) = this rank's block of op over ranks of send
  /// (worldSize * recvCount elements).
  cleave_rt_status reduceScatter(CUdeviceptr send, CUdeviceptr recv,
                                 size_t recvCount, ncclDataType_t dtype,
                                 ncclRedOp_t op, CUstream stream);
  /// recv (worldSize * sendCount elements) = every rank's send, in rank
  /// order.
  cleave_rt_status allGather(CUdeviceptr send, CUdeviceptr recv,
                             size_t sendCount, ncclDataType_t dtype,
                             CUstream stream);
  /// recv (count elements) = the send buffer of the rank `root`.
  cleave_rt_status broadcast(CUdeviceptr send, CUdeviceptr recv, size_t count,
                             ncclDataType_t dtype, int root, CUstream stream);
  /// Sends `count` elements to rank `peer`, which receives them with recv()
  /// (messages between two ranks match in the order they were issued).
  cleave_rt_status send(CUdeviceptr buffer, size_t count, ncclDataType_t dtype,
                        int peer, CUstream stream);
  /// Receives `count` elements from rank `peer`.
  cleave_rt_status recv(CUdeviceptr buffer, size_t count, ncclDataType_t dtype,
                        int peer, CUstream stream);
  const NcclLibrary *lib() const { return library; }

private:
  cleave_rt_status requireComm(const char *what) const;

  const NcclLibrary *library = nullptr;
  ncclComm_t comm = nullptr;
  int myRank = 0, size = 0;
};

} // namespace cleave::rt::cuda

#endif // CLEAVE_RUNTIME_NCCL_H
