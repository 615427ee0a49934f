//===- Nccl.cpp - NCCL library and communicator ---------------------------===//

#include "Nccl.h"

#include <cstdint>
#include <mutex>

namespace cleave::rt::cuda {

//===----------------------------------------------------------------------===//
// NcclLibrary
//===----------------------------------------------------------------------===//

cleave_rt_status NcclLibrary::load(const NcclLibrary **out) {
  static NcclLibrary library;
  static std::once_flag once;
  const NcclApi *api = nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(loadNccl(&api));
  std::call_once(once, [&] { library.table = *api; });
  *out = &library;
  return nullptr;
}

cleave_rt_status NcclLibrary::loadFrom(const std::string &path,
                                       NcclLibrary *out) {
  NcclApi api;
  CLEAVE_RT_RETURN_IF_ERROR(loadNcclFrom(path, &api));
  out->table = api;
  return nullptr;
}

cleave_rt_status NcclLibrary::getUniqueId(ncclUniqueId *out) const {
  return check(table.ncclGetUniqueId(out), "ncclGetUniqueId");
}

cleave_rt_status NcclLibrary::groupStart() const {
  return check(table.ncclGroupStart(), "ncclGroupStart");
}

cleave_rt_status NcclLibrary::groupEnd() const {
  return check(table.ncclGroupEnd(), "ncclGroupEnd");
}

ncclRedOp_t ncclRedOpOf(plan::ReduceOp op) {
  switch (op) {
  case plan::ReduceOp::Sum:
    return ncclSum;
  case plan::ReduceOp::Avg:
    return ncclAvg;
  case plan::ReduceOp::Max:
    return ncclMax;
  case plan::ReduceOp::Min:
    return ncclMin;
  case plan::ReduceOp::Prod:
    return ncclProd;
  }
  return ncclSum;
}

cleave_rt_status ncclDataTypeOf(plan::DType dtype, ncclDataType_t *out) {
  using plan::DType;
  switch (dtype) {
  case DType::F32:
    *out = ncclFloat32;
    return nullptr;
  case DType::F64:
    *out = ncclFloat64;
    return nullptr;
  case DType::F16:
    *out = ncclFloat16;
    return nullptr;
  case DType::BF16:
    *out = ncclBfloat16;
    return nullptr;
  case DType::I8:
    *out = ncclInt8;
    return nullptr;
  case DType::U8:
    *out = ncclUint8;
    return nullptr;
  case DType::I32:
    *out = ncclInt32;
    return nullptr;
  case DType::U32:
    *out = ncclUint32;
    return nullptr;
  case DType::I64:
    *out = ncclInt64;
    return nullptr;
  case DType::U64:
    *out = ncclUint64;
    return nullptr;
  default: // bool, the 16-bit integers, the 8-bit floats
    break;
  }
  return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                    std::string("NCCL has no element type for ") +
                        plan::dtypeName(dtype));
}

//===----------------------------------------------------------------------===//
// NcclCommunicator
//===----------------------------------------------------------------------===//

static void *devicePointer(CUdeviceptr p) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(p));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm)
    cleave_rt_status_free(destroy());
}

cleave_rt_status NcclCommunicator::init(const NcclLibrary &lib, int rank,
                                        int worldSize, const ncclUniqueId &id) {
  if (comm)
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                      "the NCCL communicator is already initialized (rank " +
                          std::to_string(myRank) + " of " +
                          std::to_string(size) + ")");
  if (worldSize < 1 || rank < 0 || rank >= worldSize)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "NCCL rank " + std::to_string(rank) +
                          " is outside a world of " +
                          std::to_string(worldSize) + " ranks");
  ncclComm_t c = nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(lib.check(
      lib.api().ncclCommInitRank(&c, worldSize, id, rank), "ncclCommInitRank"));
  library = &lib;
  comm = c;
  myRank = rank;
  size = worldSize;
  return nullptr;
}

cleave_rt_status NcclCommunicator::split(const NcclCommunicator &parent,
                                         int color, int key) {
  if (comm)
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                      "the NCCL communicator is already initialized (rank " +
                          std::to_string(myRank) + " of " +
                          std::to_string(size) + ")");
  CLEAVE_RT_RETURN_IF_ERROR(parent.requireComm("ncclCommSplit"));
  const NcclLibrary &lib = *parent.library;
  ncclComm_t c = nullptr;
  CLEAVE_RT_RETURN_IF_ERROR(
      lib.check(lib.api().ncclCommSplit(parent.comm, color, key, &c, nullptr),
                "ncclCommSplit", parent.comm));
  if (!c) // NCCL_SPLIT_NOCOLOR: this rank joined no communicator.
    return nullptr;
  int n = 0, r = 0;
  cleave_rt_status s =
      lib.check(lib.api().ncclCommCount(c, &n), "ncclCommCount", c);
  if (!s)
    s = lib.check(lib.api().ncclCommUserRank(c, &r), "ncclCommUserRank", c);
  if (s) {
    lib.api().ncclCommAbort(c);
    return s;
  }
  library = &lib;
  comm = c;
  myRank = r;
  size = n;
  return nullptr;
}

cleave_rt_status NcclCommunicator::destroy() {
  if (!comm)
    return nullptr;
  ncclComm_t c = comm;
  comm = nullptr;
  return library->check(library->api().ncclCommDestroy(c), "ncclCommDestroy");
}

cleave_rt_status NcclCommunicator::abort() {
  if (!comm)
    return nullptr;
  ncclComm_t c = comm;
  comm = nullptr;
  return library->check(library->api().ncclCommAbort(c), "ncclCommAbort");
}

cleave_rt_status NcclCommunicator::requireComm(const char *what) const {
  if (comm)
    return nullptr;
  return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                    std::string(what) +
                        " on an NCCL communicator that is not initialized");
}

cleave_rt_status NcclCommunicator::asyncError() const {
  CLEAVE_RT_RETURN_IF_ERROR(requireComm("ncclCommGetAsyncError"));
  ncclResult_t async = ncclSuccess;
  CLEAVE_RT_RETURN_IF_ERROR(
      library->check(library->api().ncclCommGetAsyncError(comm, &async),
                     "ncclCommGetAsyncError", comm));
  return library->check(async, "an asynchronous NCCL operation", comm);
}

cleave_rt_status NcclCommunicator::allReduce(CUdeviceptr send, CUdeviceptr recv,
                                             size_t count, ncclDataType_t dtype,
                                             ncclRedOp_t op, CUstream stream) {
  CLEAVE_RT_RETURN_IF_ERROR(requireComm("ncclAllReduce"));
  return library->check(library->api().ncclAllReduce(devicePointer(send),
                                                     devicePointer(recv), count,
                                                     dtype, op, comm, stream),
                        "ncclAllReduce", comm);
}

cleave_rt_status
NcclCommunicator::reduceScatter(CUdeviceptr send, CUdeviceptr recv,
                                size_t recvCount, ncclDataType_t dtype,
                                ncclRedOp_t op, CUstream stream) {
  CLEAVE_RT_RETURN_IF_ERROR(requireComm("ncclReduceScatter"));
  return library->check(
      library->api().ncclReduceScatter(devicePointer(send), devicePointer(recv),
                                       recvCount, dtype, op, comm, stream),
      "ncclReduceScatter", comm);
}

cleave_rt_status NcclCommunicator::allGather(CUdeviceptr send, CUdeviceptr recv,
                                             size_t sendCount,
                                             ncclDataType_t dtype,
                                             CUstream stream) {
  CLEAVE_RT_RETURN_IF_ERROR(requireComm("ncclAllGather"));
  return library->check(
      library->api().ncclAllGather(devicePointer(send), devicePointer(recv),
                                   sendCount, dtype, comm, stream),
      "ncclAllGather", comm);
}

cleave_rt_status NcclCommunicator::broadcast(CUdeviceptr send, CUdeviceptr recv,
                                             size_t count, ncclDataType_t dtype,
                                             int root, CUstream stream) {
  CLEAVE_RT_RETURN_IF_ERROR(requireComm("ncclBroadcast"));
  return library->check(library->api().ncclBroadcast(devicePointer(send),
                                                     devicePointer(recv), count,
                                                     dtype, root, comm, stream),
                        "ncclBroadcast", comm);
}

cleave_rt_status NcclCommunicator::send(CUdeviceptr buffer, size_t count,
                                        ncclDataType_t dtype, int peer,
                                        CUstream stream) {
  CLEAVE_RT_RETURN_IF_ERROR(requireComm("ncclSend"));
  return library->check(library->api().ncclSend(devicePointer(buffer), count,
                                                dtype, peer, comm, stream),
                        "ncclSend", comm);
}

cleave_rt_status NcclCommunicator::recv(CUdeviceptr buffer, size_t count,
                                        ncclDataType_t dtype, int peer,
                                        CUstream stream) {
  CLEAVE_RT_RETURN_IF_ERROR(requireComm("ncclRecv"));
  return library->check(library->api().ncclRecv(devicePointer(buffer), count,
                                                dtype, peer, comm, stream),
                        "ncclRecv", comm);
}

} // namespace cleave::rt::cuda
