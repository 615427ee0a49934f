//===- NcclDouble.cpp - Strict host double of NCCL ------------------------===//
//
// libcleave-nccl-double.so exports NCCL's C API (CLEAVE_NCCL_SYMBOLS in
// CudaApi.h, plus ncclCommInitRankConfig, ncclCommSplit and
// ncclCommFinalize). Ranks meet in POSIX shared memory (NcclSegment.h), so
// rank threads and rank processes work alike. Each collective is queued on
// its stream through the driver double's enqueue() with the exact byte
// ranges it reads and writes, and runs on the stream's thread, where it
// waits for its peers as a GPU kernel would. Before moving data, the ranks
// compare their calls: the k-th collective of every rank must agree on
// kind, count, type, op and root, and the m-th send from a rank to a peer
// must meet the peer's m-th recv from it with the same count and type;
// the first difference is printed, naming both sides, and becomes the
// communicator's async error ncclInvalidUsage.
//
// Environment: $CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT (seconds a rank waits for
// its peers in init and split, default 60) and $CLEAVE_NCCL_DOUBLE_FAULT
// (kind=init,rank=R | kind=async,rank=R,call=N | kind=count,rank=R,call=N).
// NCCL's own variables are ignored.
//
//===----------------------------------------------------------------------===//

#include "NcclComm.h"
#include "NcclReduce.h"
#include "NcclWork.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace cleave::rt::cuda;
using namespace cleave::nccldouble;
namespace cd = cleave::cudadouble;

namespace {

/// NCCL_VERSION(2, 28, 9).
constexpr int kNcclVersion = 22809;
/// Most ranks in a communicator: a reduce-scatter chunk holds a block per
/// rank in the staging area, and the segment a mailbox per pair of ranks.
constexpr int kMaxRanks = 4096;

//===----------------------------------------------------------------------===//
// Issuing calls and groups
//===----------------------------------------------------------------------===//

struct Issued {
  Op op;
  CUstream stream;
};

thread_local int groupDepth = 0;
thread_local std::vector<Issued> groupOps;
/// ncclCommInitRank calls made inside a group: they run at ncclGroupEnd,
/// each on its own thread, so one thread can make every rank's communicator.
thread_local std::vector<std::function<ncclResult_t(std::string *)>> groupInits;

/// Queues `issued` as one piece of work per stream.
ncclResult_t submit(std::vector<Issued> issued, const char *fn) {
  std::vector<CUstream> streams;
  for (Issued &i : issued)
    if (std::find(streams.begin(), streams.end(), i.stream) == streams.end())
      streams.push_back(i.stream);
  for (CUstream s : streams) {
    std::vector<Op> ops;
    std::vector<cd::Access> accesses;
    for (Issued &i : issued) {
      if (i.stream != s)
        continue;
      addAccesses(i.op, accesses);
      ops.push_back(std::move(i.op));
    }
    std::string what = describeOp(ops[0]);
    if (ops.size() > 1) {
      what = std::string(fn) + " [" + what;
      for (size_t k = 1; k < ops.size() && k < 4; ++k)
        what += "; " + describe(ops[k].desc);
      if (ops.size() > 4)
        what += "; and " + str(ops.size() - 4) + " more";
      what += "]";
    }
    auto item = std::make_shared<WorkItem>(std::move(ops), what);
    CUresult r =
        cd::enqueue(s, what, std::move(accesses), [item] { item->run(); });
    if (r != CUDA_SUCCESS)
      return error(ncclUnhandledCudaError,
                   std::string(fn) + ": queueing " + what + " on stream " +
                       pointerString(s) + " failed with CUresult " +
                       str(uint64_t(r)));
  }
  return ncclSuccess;
}

/// Checks a call's arguments and queues it (or collects it in the group).
ncclResult_t issue(const char *fn, CallKind kind, const void *send, void *recv,
                   size_t count, ncclDataType_t dtype, ncclRedOp_t op, int root,
                   ncclComm_t comm, CUstream stream) {
  StatePtr state = lookup(comm);
  if (!state)
    return notLive(fn, comm);
  std::string name =
      std::string(fn) + " on rank " + str(state->rank) + " of " + state->label;
  if (dtypeSize(dtype) == 0)
    return error(ncclInvalidArgument,
                 name + ": data type " + str(dtype) + " is not an NCCL type");
  bool reduces = kind == CallKind::AllReduce || kind == CallKind::ReduceScatter;
  if (reduces && (op < ncclSum || op > ncclAvg))
    return error(ncclInvalidArgument,
                 name + ": reduction op " + str(op) + " is not an NCCL op");
  if ((kind == CallKind::Broadcast || isP2p(kind)) &&
      (root < 0 || root >= state->nranks))
    return error(ncclInvalidArgument,
                 name + ": " + (isP2p(kind) ? "peer " : "root ") + str(root) +
                     " is outside the " + str(state->nranks) + " ranks");
  bool readsSend = kind != CallKind::Recv &&
                   (kind != CallKind::Broadcast || root == state->rank);
  if (count > 0 && readsSend && !send)
    return error(ncclInvalidArgument, name + ": the send buffer is null");
  if (count > 0 && kind != CallKind::Send && !recv)
    return error(ncclInvalidArgument, name + ": the recv buffer is null");

  Op o;
  o.desc.kind = kind;
  o.desc.dtype = dtype;
  o.desc.op = reduces ? op : 0;
  o.desc.root = kind == CallKind::Broadcast || isP2p(kind) ? root : 0;
  o.desc.count = count;
  o.comm = std::move(state);
  o.send = CUdeviceptr(reinterpret_cast<uintptr_t>(send));
  o.recv = CUdeviceptr(reinterpret_cast<uintptr_t>(recv));
  o.command = cd::currentCommand();
  if (groupDepth > 0) {
    groupOps.push_back({std::move(o), stream});
    return ncclSuccess;
  }
  std::vector<Issued> one;
  one.push_back({std::move(o), stream});
  return submit(std::move(one), fn);
}

ncclResult_t initRank(const char *fn, ncclComm_t *comm, int nranks,
                      const ncclUniqueId &id, int rank) {
  if (!comm)
    return error(ncclInvalidArgument, std::string(fn) + ": comm is null");
  *comm = nullptr;
  if (nranks < 1 || nranks > kMaxRanks)
    return error(ncclInvalidArgument, std::string(fn) + ": nranks " +
                                          std::to_string(nranks) +
                                          " is not in 1.." + str(kMaxRanks) +
                                          " (the NCCL double's limit)");
  if (rank < 0 || rank >= nranks)
    return error(ncclInvalidArgument,
                 std::string(fn) + ": rank " + std::to_string(rank) +
                     " is outside a communicator of " + str(nranks) + " ranks");
  std::string hex = readId(id);
  if (hex.empty())
    return error(ncclInvalidArgument, std::string(fn) +
                                          ": the unique id was not made by "
                                          "ncclGetUniqueId of the NCCL double");
  Fault fault = readFault();
  if (fault.rank != rank)
    fault = Fault();
  if (fault.kind == Fault::Kind::Init)
    return error(ncclSystemError,
                 std::string(fn) + ": injected init failure of rank " +
                     str(rank) + " ($CLEAVE_NCCL_DOUBLE_FAULT)");
  auto join = [=](std::string *message) {
    StatePtr state;
    ncclResult_t r = joinComm(fn, hex, nranks, rank, fault, &state);
    if (r != ncclSuccess) {
      *message = lastErrorMessage();
      return r;
    }
    *comm = registerComm(std::move(state));
    return ncclSuccess;
  };
  if (groupDepth > 0) {
    groupInits.push_back(join);
    return ncclSuccess;
  }
  std::string message;
  return join(&message);
}

} // namespace

//===----------------------------------------------------------------------===//
// The C API
//===----------------------------------------------------------------------===//

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  if (!version)
    return error(ncclInvalidArgument, "ncclGetVersion: version is null");
  *version = kNcclVersion;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t comm) {
  if (comm) {
    StatePtr s = lookup(comm);
    if (s && s->asyncError() != ncclSuccess)
      return s->errorMessage();
  }
  return lastErrorMessage();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id)
    return error(ncclInvalidArgument, "ncclGetUniqueId: id is null");
  writeId(id, newIdHex());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  return initRank("ncclCommInitRank", comm, nranks, id, rank);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank, void *config) {
  (void)config; // a null config means the defaults, as in NCCL
  return initRank("ncclCommInitRankConfig", comm, nranks, id, rank);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, void *config) {
  (void)config;
  StatePtr parent = lookup(comm);
  if (!parent)
    return notLive("ncclCommSplit", comm);
  if (!newcomm)
    return error(ncclInvalidArgument, "ncclCommSplit: newcomm is null");
  *newcomm = nullptr;
  if (color < -1)
    return error(ncclInvalidArgument,
                 "ncclCommSplit: color " + std::to_string(color) +
                     " is negative and not NCCL_SPLIT_NOCOLOR (-1)");
  std::lock_guard<std::mutex> lock(parent->splitMutex);
  const uint64_t k = parent->splitCount++;
  const int n = parent->nranks;
  RankSlot &me = parent->slot(parent->rank);
  me.splitColor[k % kRing] = color;
  me.splitKey[k % kRing] = key;
  me.splits.store(k + 1, std::memory_order_release);

  double timeout = readInitTimeout();
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout));
  std::string what = "ncclCommSplit #" + str(k + 1) + " of " + parent->label;
  Backoff backoff;
  while (!parent->allAtLeast(&RankSlot::splits, k + 1)) {
    if (!parent->usable())
      return error(parent->asyncError() == ncclSuccess ? ncclInvalidUsage
                                                       : parent->asyncError(),
                   what + ": the parent failed: " +
                       (parent->asyncError() == ncclSuccess
                            ? std::string("this rank aborted it")
                            : std::string(parent->errorMessage())));
    if (Clock::now() > deadline) {
      std::vector<int> missing;
      for (int q = 0; q < n; ++q)
        if (parent->slot(q).splits.load() < k + 1)
          missing.push_back(q);
      return error(ncclSystemError,
                   what + ": " + rankList(missing) +
                       " never called it within the init timeout "
                       "($CLEAVE_NCCL_DOUBLE_INIT_TIMEOUT)");
    }
    backoff.pause();
  }
  if (color == -1)
    return ncclSuccess;
  std::vector<std::pair<int, int>> members; // (key, parent rank)
  for (int q = 0; q < n; ++q)
    if (parent->slot(q).splitColor[k % kRing] == color)
      members.push_back({parent->slot(q).splitKey[k % kRing], q});
  std::sort(members.begin(), members.end());
  int newRank = 0;
  while (members[newRank].second != parent->rank)
    ++newRank;
  std::string hex = splitIdHex(parent->hex, k, color);
  StatePtr state;
  ncclResult_t r = joinComm("ncclCommSplit", hex, int(members.size()), newRank,
                            Fault(), &state);
  if (r != ncclSuccess)
    return r;
  *newcomm = registerComm(std::move(state));
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  StatePtr s = lookup(comm);
  if (!s)
    return notLive("ncclCommFinalize", comm);
  s->waitPending();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  StatePtr s = lookup(comm);
  if (!s)
    return notLive("ncclCommDestroy", comm);
  s->waitPending();
  s->destroyed.store(true);
  unregister(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  StatePtr s = unregister(comm);
  if (!s)
    return notLive("ncclCommAbort", comm);
  s->aborted.store(true, std::memory_order_release);
  int32_t expected = 0;
  s->header().abortedBy.compare_exchange_strong(expected, s->rank + 1);
  // Work running on this rank returns at its next wait: wait for that (a
  // second at most: it may be waiting on another communicator of its
  // group), so that no running work touches the buffers once this returns.
  // Queued work returns as soon as it runs, touching nothing.
  auto deadline = Clock::now() + std::chrono::seconds(1);
  Backoff backoff;
  while (!s->execMutex.try_lock()) {
    if (Clock::now() > deadline)
      return ncclSuccess;
    backoff.pause();
  }
  s->execMutex.unlock();
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  StatePtr s = lookup(comm);
  if (!s)
    return notLive("ncclCommGetAsyncError", comm);
  if (!asyncError)
    return error(ncclInvalidArgument,
                 "ncclCommGetAsyncError: asyncError is null");
  *asyncError = s->asyncError();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(ncclComm_t comm, int *count) {
  StatePtr s = lookup(comm);
  if (!s)
    return notLive("ncclCommCount", comm);
  if (!count)
    return error(ncclInvalidArgument, "ncclCommCount: count is null");
  *count = s->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(ncclComm_t comm, int *rank) {
  StatePtr s = lookup(comm);
  if (!s)
    return notLive("ncclCommUserRank", comm);
  if (!rank)
    return error(ncclInvalidArgument, "ncclCommUserRank: rank is null");
  *rank = s->rank;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, CUstream stream) {
  return issue("ncclAllReduce", CallKind::AllReduce, sendbuff, recvbuff, count,
               datatype, op, 0, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               CUstream stream) {
  return issue("ncclReduceScatter", CallKind::ReduceScatter, sendbuff, recvbuff,
               recvcount, datatype, op, 0, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, CUstream stream) {
  return issue("ncclAllGather", CallKind::AllGather, sendbuff, recvbuff,
               sendcount, datatype, ncclSum, 0, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           CUstream stream) {
  return issue("ncclBroadcast", CallKind::Broadcast, sendbuff, recvbuff, count,
               datatype, ncclSum, root, comm, stream);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count,
                      ncclDataType_t datatype, int peer, ncclComm_t comm,
                      CUstream stream) {
  return issue("ncclSend", CallKind::Send, sendbuff, nullptr, count, datatype,
               ncclSum, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, CUstream stream) {
  return issue("ncclRecv", CallKind::Recv, nullptr, recvbuff, count, datatype,
               ncclSum, peer, comm, stream);
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return error(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth > 0)
    return ncclSuccess;
  auto inits = std::move(groupInits);
  groupInits.clear();
  auto ops = std::move(groupOps);
  groupOps.clear();
  if (!inits.empty()) {
    std::vector<ncclResult_t> results(inits.size(), ncclSuccess);
    std::vector<std::string> messages(inits.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < inits.size(); ++i)
      threads.emplace_back([&, i] { results[i] = inits[i](&messages[i]); });
    for (std::thread &t : threads)
      t.join();
    for (size_t i = 0; i < inits.size(); ++i)
      if (results[i] != ncclSuccess)
        return error(results[i], messages[i]);
  }
  if (ops.empty())
    return ncclSuccess;
  return submit(std::move(ops), "ncclGroupEnd");
}

} // extern "C"
