//===- NcclCollectives.cpp - A plan's collectives through NCCL ------------===//

#include "NcclCollectives.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

namespace cleave::rt::cuda {

using namespace plan;

//===----------------------------------------------------------------------===//
// Communicators
//===----------------------------------------------------------------------===//

cleave_rt_status shareNcclId(const NcclLibrary &library, int64_t rank,
                             int64_t worldSize, Communicator *comm,
                             const LaunchEnv &env, double timeoutSeconds,
                             ncclUniqueId *id) {
  // Byte 0: whether rank 0 made an id; then the id, or its error text.
  std::vector<uint8_t> blob(1 + sizeof(ncclUniqueId), 0);
  if (rank == 0) {
    ncclUniqueId made{};
    if (cleave_rt_status s = library.getUniqueId(&made)) {
      std::string why = cleave_rt_status_message(s);
      cleave_rt_status_free(s);
      std::memcpy(blob.data() + 1, why.data(),
                  std::min(why.size(), blob.size() - 2));
    } else {
      blob[0] = 1;
      std::memcpy(blob.data() + 1, &made, sizeof made);
    }
  }
  if (comm) {
    CLEAVE_RT_RETURN_IF_ERROR(communicatorBroadcast(*comm, &blob));
  } else {
    LaunchEnv world = env;
    world.rank = rank;
    world.worldSize = worldSize;
    CLEAVE_RT_RETURN_IF_ERROR(tcpBroadcast(world, &blob, timeoutSeconds));
  }
  if (blob[0] != 1) {
    blob.back() = 0;
    return makeStatus(CLEAVE_RT_UNAVAILABLE,
                      "rank " + std::to_string(rank) +
                          ": rank 0 could not make the NCCL id: " +
                          reinterpret_cast<const char *>(blob.data() + 1));
  }
  std::memcpy(id, blob.data() + 1, sizeof *id);
  return nullptr;
}

/// "rank R: <what>: <status message>", with the status's code.
static cleave_rt_status onRank(int64_t rank, const std::string &what,
                               cleave_rt_status s) {
  std::string text = cleave_rt_status_message(s);
  cleave_rt_status_code_t code = cleave_rt_status_code(s);
  cleave_rt_status_free(s);
  return makeStatus(code,
                    "rank " + std::to_string(rank) + ": " + what + ": " + text);
}

static std::string axesString(const Mesh &mesh,
                              const std::vector<uint32_t> &axes) {
  std::string s;
  for (uint32_t a : axes)
    s += (s.empty() ? "" : ",") +
         (a < mesh.axisNames.size() ? mesh.axisNames[a] : std::to_string(a));
  return "[" + s + "]";
}

/// Whether the groups over `axes` are the whole world in rank order: the
/// axes of more than one rank are all of the mesh's, in mesh order.
static bool spansWorldInOrder(const Mesh &mesh,
                              const std::vector<uint32_t> &axes) {
  std::vector<uint32_t> wide, all;
  for (uint32_t a : axes)
    if (mesh.shape[a] > 1)
      wide.push_back(a);
  for (uint32_t a = 0; a < mesh.shape.size(); ++a)
    if (mesh.shape[a] > 1)
      all.push_back(a);
  return wide == all;
}

cleave_rt_status
NcclGroups::init(const NcclLibrary &library, const Mesh &mesh, int64_t rank,
                 const std::vector<std::vector<uint32_t>> &axisLists,
                 const std::vector<std::vector<uint32_t>> &p2pLists,
                 Communicator *comm, const LaunchEnv &env,
                 double timeoutSeconds) {
  const int64_t world = mesh.worldSize();
  ncclUniqueId id{};
  CLEAVE_RT_RETURN_IF_ERROR(
      shareNcclId(library, rank, world, comm, env, timeoutSeconds, &id));
  if (cleave_rt_status s = this->world.init(library, static_cast<int>(rank),
                                            static_cast<int>(world), id))
    return onRank(rank,
                  "cannot join the NCCL world communicator of " +
                      std::to_string(world) + " ranks",
                  s);
  for (const std::vector<uint32_t> &axes : axisLists) {
    if (spansWorldInOrder(mesh, axes)) {
      groups.emplace_back(axes, nullptr); // The world itself.
      continue;
    }
    auto [color, key] = splitColorKey(mesh, axes, rank);
    auto group = std::make_unique<NcclCommunicator>();
    if (cleave_rt_status s = group->split(this->world, static_cast<int>(color),
                                          static_cast<int>(key))) {
      abortAll();
      return onRank(rank,
                    "cannot make the NCCL communicator over mesh axes " +
                        axesString(mesh, axes),
                    s);
    }
    groups.emplace_back(axes, std::move(group));
  }
  // Point to point: one communicator per direction (see the header).
  for (const std::vector<uint32_t> &axes : p2pLists) {
    auto [color, key] = splitColorKey(mesh, axes, rank);
    std::array<std::unique_ptr<NcclCommunicator>, 2> both;
    for (int up = 0; up < 2; ++up) {
      both[up] = std::make_unique<NcclCommunicator>();
      if (cleave_rt_status s = both[up]->split(
              this->world, static_cast<int>(color), static_cast<int>(key))) {
        abortAll();
        return onRank(rank,
                      std::string("cannot make the NCCL communicator of the "
                                  "sends and receives ") +
                          (up ? "up" : "down") + " mesh axes " +
                          axesString(mesh, axes),
                      s);
      }
    }
    p2p.emplace_back(axes, std::move(both));
  }
  return nullptr;
}

NcclCommunicator *NcclGroups::pointToPoint(const std::vector<uint32_t> &axes,
                                           bool up) {
  for (auto &[a, both] : p2p)
    if (a == axes)
      return both[up ? 1 : 0].get();
  return nullptr;
}

NcclCommunicator *NcclGroups::forAxes(const std::vector<uint32_t> &axes) {
  for (auto &[a, comm] : groups)
    if (a == axes)
      return comm ? comm.get() : &world;
  return nullptr;
}

cleave_rt_status NcclGroups::asyncError(NcclCommunicator **which) {
  if (world.initialized())
    if (cleave_rt_status s = world.asyncError()) {
      *which = &world;
      return s;
    }
  for (auto &[axes, comm] : groups)
    if (comm && comm->initialized())
      if (cleave_rt_status s = comm->asyncError()) {
        *which = comm.get();
        return s;
      }
  for (auto &[axes, both] : p2p)
    for (auto &comm : both)
      if (comm->initialized())
        if (cleave_rt_status s = comm->asyncError()) {
          *which = comm.get();
          return s;
        }
  return nullptr;
}

void NcclGroups::abortAll() {
  // The groups first: they were split from the world.
  for (auto &[axes, both] : p2p)
    for (auto &comm : both)
      cleave_rt_status_free(comm->abort());
  for (auto it = groups.rbegin(); it != groups.rend(); ++it)
    if (it->second)
      cleave_rt_status_free(it->second->abort());
  cleave_rt_status_free(world.abort());
}

void NcclGroups::destroyAll() {
  for (auto &[axes, both] : p2p)
    for (auto &comm : both)
      cleave_rt_status_free(comm->destroy());
  for (auto it = groups.rbegin(); it != groups.rend(); ++it)
    if (it->second)
      cleave_rt_status_free(it->second->destroy());
  cleave_rt_status_free(world.destroy());
}

//===----------------------------------------------------------------------===//
// CudaCollectives
//===----------------------------------------------------------------------===//

CudaCollectives::~CudaCollectives() {
  closeCommunicators();
  for (CUevent e : planEvents)
    cu.cuEventDestroy(e);
  for (CUevent e : doneEvents)
    cu.cuEventDestroy(e);
  for (CUevent e : {computeReady, commJoined})
    if (e)
      cu.cuEventDestroy(e);
  if (staging)
    cu.cuMemFree(staging);
  if (sendSlots)
    cu.cuMemFree(sendSlots);
  for (CUstream s : directions)
    if (s)
      cu.cuStreamDestroy(s);
  for (CUevent e : directionJoined)
    if (e)
      cu.cuEventDestroy(e);
}

std::vector<CUstream> CudaCollectives::streams() const {
  std::vector<CUstream> all = {compute, comm};
  for (CUstream s : directions)
    if (s)
      all.push_back(s);
  return all;
}

cleave_rt_status cudaMutation(std::string *out) {
  const char *v = std::getenv("CLEAVE_CUDA_MUTATION");
  *out = v ? v : "";
  if (out->empty() || *out == "drop-event-wait" ||
      *out == "free-workspace-early" || *out == "swap-collectives")
    return nullptr;
  return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                    "unknown $CLEAVE_CUDA_MUTATION '" + *out +
                        "' (a testing aid: drop-event-wait, "
                        "free-workspace-early or swap-collectives)");
}

cleave_rt_status CudaCollectives::prepare(const std::vector<Command> &list,
                                          std::vector<Prepared> *out,
                                          bool sizeOnly, uint64_t *need) {
  out->assign(list.size(), Prepared());
  uint64_t slots = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Command &c = list[i];
    if (c.kind != CommandKind::Collective)
      continue;
    const CollectiveInfo &info = c.collective;
    Group group = groupOf(file->mesh, info.axes, myRank);
    int64_t g = static_cast<int64_t>(group.ranks.size());
    auto [src, dst] = collectiveBuffers(c, arena);
    Prepared &p = (*out)[i];
    uint64_t bytes = 0;
    if (cleave_rt_status s =
            decomposeCollective(info, g, group.index, src, dst,
                                sizeOnly ? 0 : staging, &p.steps, &bytes))
      return onRank(myRank, "command " + std::to_string(i), s);
    *need = std::max(*need, bytes);
    bool nccl = std::any_of(p.steps.begin(), p.steps.end(),
                            [](const NcclStep &s) { return s.isNccl(); });
    if (!nccl)
      continue;
    if (info.op == CollectiveOp::Send || info.op == CollectiveOp::Recv) {
      p.p2p = true;
      p.up = info.op == CollectiveOp::Send ? info.peer > group.index
                                           : info.root < group.index;
      if (info.op == CollectiveOp::Send) {
        p.slot = slots;
        slots +=
            (static_cast<uint64_t>(info.count) * dtypeSize(info.dtype) + 255) /
            256 * 256;
      }
      sendSlotBytes = std::max(sendSlotBytes, slots);
      p.comm = groups.pointToPoint(info.axes, p.up);
    } else {
      p.comm = groups.forAxes(info.axes);
    }
    if (!p.comm && !sizeOnly)
      return makeStatus(CLEAVE_RT_INTERNAL, "rank " + std::to_string(myRank) +
                                                ": no NCCL communicator for " +
                                                describe(info));
  }
  if (swapOnRank1 && myRank == 1 && !sizeOnly) {
    // The mutation: the first two NCCL collectives trade their calls.
    std::vector<size_t> nccl;
    for (size_t i = 0; i < out->size() && nccl.size() < 2; ++i)
      if ((*out)[i].comm && !(*out)[i].p2p)
        nccl.push_back(i);
    if (nccl.size() == 2)
      std::swap((*out)[nccl[0]], (*out)[nccl[1]]);
  }
  return nullptr;
}

cleave_rt_status
CudaCollectives::init(const Plan &plan, const Plan &wholeFile, int64_t rank,
                      Communicator *comm, double timeoutSeconds,
                      CUstream computeStream, CUstream commStream,
                      CUdeviceptr arenaBase, const NcclLibrary *nccl) {
  file = &wholeFile;
  myRank = rank;
  rankComm = comm;
  std::string mutation;
  CLEAVE_RT_RETURN_IF_ERROR(cudaMutation(&mutation));
  dropFirstWait = mutation == "drop-event-wait";
  swapOnRank1 = mutation == "swap-collectives";
  timeout = timeoutSeconds > 0 ? timeoutSeconds : 300;
  // With a CPU communicator, a timed-out collective is followed by the
  // liveness check that names the lost ranks: both fit in the timeout.
  ncclWait = timeout;
  if (comm)
    ncclWait = std::max(timeout - livenessCheckSeconds(comm->timeoutSeconds()),
                        timeout / 2);
  compute = computeStream;
  this->comm = commStream;
  arena = arenaBase;
  initList = &plan.initCommands;

  // Sizing pass: which lists need NCCL, and the staging bytes.
  uint64_t need = 0;
  CLEAVE_RT_RETURN_IF_ERROR(
      prepare(plan.initCommands, &initPrepared, true, &need));
  CLEAVE_RT_RETURN_IF_ERROR(prepare(plan.commands, &runPrepared, true, &need));
  size_t ncclCommands = 0;
  for (const auto *list : {&initPrepared, &runPrepared})
    for (const Prepared &p : *list)
      ncclCommands += std::any_of(p.steps.begin(), p.steps.end(),
                                  [](const NcclStep &s) { return s.isNccl(); });
  // Whether to make communicators is the file's to say, not this rank's
  // plan's: every rank of the world must join, even one whose stage has no
  // collective over several ranks.
  std::vector<std::vector<uint32_t>> axisLists = collectiveAxisLists(*file);
  if (!axisLists.empty()) {
    library = nccl;
    if (!library)
      CLEAVE_RT_RETURN_IF_ERROR(NcclLibrary::load(&library));
    LaunchEnv env;
    std::string why;
    if (!comm && !readLaunchEnv([](const char *v) { return std::getenv(v); },
                                &env, &why))
      return makeStatus(CLEAVE_RT_FAILED_PRECONDITION, why);
    CLEAVE_RT_RETURN_IF_ERROR(groups.init(*library, file->mesh, rank, axisLists,
                                          pointToPointAxisLists(*file), comm,
                                          env, timeout));
  }
  if (need > 0)
    CLEAVE_RT_RETURN_IF_ERROR(check(cu.cuMemAlloc(&staging, need),
                                    "cuMemAlloc (collective staging)"));
  if (sendSlotBytes > 0)
    CLEAVE_RT_RETURN_IF_ERROR(check(cu.cuMemAlloc(&sendSlots, sendSlotBytes),
                                    "cuMemAlloc (send slots)"));
  bool anyPointToPoint = false;
  for (const auto *list : {&initPrepared, &runPrepared})
    for (const Prepared &p : *list)
      anyPointToPoint |= p.p2p;
  for (int up = 0; up < 2 && anyPointToPoint; ++up) {
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuStreamCreate(&directions[up], CU_STREAM_NON_BLOCKING),
              "cuStreamCreate (sends and receives)"));
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuEventCreate(&directionJoined[up], CU_EVENT_DISABLE_TIMING),
              "cuEventCreate"));
  }
  CLEAVE_RT_RETURN_IF_ERROR(
      prepare(plan.initCommands, &initPrepared, false, &need));
  CLEAVE_RT_RETURN_IF_ERROR(prepare(plan.commands, &runPrepared, false, &need));

  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuEventCreate(&computeReady, CU_EVENT_DISABLE_TIMING),
            "cuEventCreate"));
  CLEAVE_RT_RETURN_IF_ERROR(check(
      cu.cuEventCreate(&commJoined, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  planEvents.assign(static_cast<size_t>(std::max<int64_t>(plan.numEvents, 0)),
                    nullptr);
  for (CUevent &e : planEvents)
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  doneEvents.assign(ncclCommands, nullptr);
  for (CUevent &e : doneEvents)
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
  return nullptr;
}

cleave_rt_status CudaCollectives::runSteps(const Prepared &p, CUstream stream) {
  using K = NcclStep::Kind;
  for (const NcclStep &s : p.steps) {
    switch (s.kind) {
    case K::Copy:
      CLEAVE_RT_RETURN_IF_ERROR(
          check(cu.cuMemcpyDtoDAsync(s.dst, s.src, s.bytes, stream),
                "cuMemcpyDtoDAsync (collective layout)"));
      break;
    case K::Zero:
      CLEAVE_RT_RETURN_IF_ERROR(
          check(cu.cuMemsetD8Async(s.dst, 0, s.bytes, stream),
                "cuMemsetD8Async (collective)"));
      break;
    case K::AllReduce:
      CLEAVE_RT_RETURN_IF_ERROR(
          p.comm->allReduce(s.src, s.dst, s.count, s.type, s.op, stream));
      break;
    case K::AllGather:
      CLEAVE_RT_RETURN_IF_ERROR(
          p.comm->allGather(s.src, s.dst, s.count, s.type, stream));
      break;
    case K::ReduceScatter:
      CLEAVE_RT_RETURN_IF_ERROR(
          p.comm->reduceScatter(s.src, s.dst, s.count, s.type, s.op, stream));
      break;
    case K::Broadcast:
      CLEAVE_RT_RETURN_IF_ERROR(
          p.comm->broadcast(s.src, s.dst, s.count, s.type, s.peer, stream));
      break;
    case K::GroupStart:
      CLEAVE_RT_RETURN_IF_ERROR(library->groupStart());
      break;
    case K::GroupEnd:
      CLEAVE_RT_RETURN_IF_ERROR(library->groupEnd());
      break;
    case K::Send:
      CLEAVE_RT_RETURN_IF_ERROR(
          p.comm->send(s.src, s.count, s.type, s.peer, stream));
      break;
    case K::Recv:
      CLEAVE_RT_RETURN_IF_ERROR(
          p.comm->recv(s.dst, s.count, s.type, s.peer, stream));
      break;
    }
  }
  return nullptr;
}

void CudaCollectives::beginList() {
  inFlight.clear();
  commPending = false;
}

cleave_rt_status CudaCollectives::enqueue(const std::vector<Command> &list,
                                          size_t index, bool capturing) {
  const Command &c = list[index];
  CLEAVE_RT_RETURN_IF_ERROR(usable());
  if (c.kind == CommandKind::Wait) {
    if (dropFirstWait && !waitDropped) {
      waitDropped = true; // the mutation
      return nullptr;
    }
    return check(cu.cuStreamWaitEvent(
                     compute, planEvents[static_cast<size_t>(c.event)], 0),
                 "cuStreamWaitEvent (wait)");
  }
  const Prepared &p = preparedFor(list)[index];
  const bool async = c.stream == kCommStream;
  if (!p.comm) {
    // Local copies only: in order on the compute stream.
    CLEAVE_RT_RETURN_IF_ERROR(runSteps(p, compute));
    if (async)
      return check(
          cu.cuEventRecord(planEvents[static_cast<size_t>(c.event)], compute),
          "cuEventRecord (collective event)");
    return nullptr;
  }
  if (p.p2p)
    return enqueuePointToPoint(c, p, capturing);
  // The communication stream starts after the compute stream's work so
  // far, runs the calls, and is joined back through an event.
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuEventRecord(computeReady, compute), "cuEventRecord"));
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuStreamWaitEvent(comm, computeReady, 0), "cuStreamWaitEvent"));
  commPending = true;
  if (cleave_rt_status s = runSteps(p, comm)) {
    std::string text = cleave_rt_status_message(s);
    cleave_rt_status_free(s);
    return fail(describe(c.collective) + " failed: " + text);
  }
  // The event a failure is diagnosed with (eager runs only: a graph
  // replay records no event the host could tell from the last run's).
  CUevent done = doneEvents[std::min(inFlight.size(), doneEvents.size() - 1)];
  if (!capturing)
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuEventRecord(done, comm), "cuEventRecord (collective)"));
  inFlight.push_back({&c, p.comm, done, !capturing});
  if (recorder())
    inFlight.back().enqueuedNs = FlightRecorder::nowNs();
  CUevent join = async ? planEvents[static_cast<size_t>(c.event)] : commJoined;
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuEventRecord(join, comm), "cuEventRecord (collective)"));
  if (async)
    return nullptr; // The Wait command joins.
  if (dropFirstWait && !waitDropped) {
    waitDropped = true; // the mutation: compute runs on without the result
    return nullptr;
  }
  commPending = false;
  return check(cu.cuStreamWaitEvent(compute, join, 0), "cuStreamWaitEvent");
}

cleave_rt_status CudaCollectives::enqueuePointToPoint(const Command &c,
                                                      const Prepared &p,
                                                      bool capturing) {
  const CollectiveInfo &info = c.collective;
  CUstream stream = directions[p.up ? 1 : 0];
  const NcclStep &s = p.steps.front();
  bool send = info.op == CollectiveOp::Send;
  if (send) {
    // Buffered: the operand goes into the send's slot in compute order, so
    // later commands may overwrite it while the message waits for its
    // receiver.
    CLEAVE_RT_RETURN_IF_ERROR(check(
        cu.cuMemcpyDtoDAsync(
            sendSlots + p.slot, s.src,
            static_cast<size_t>(info.count) * dtypeSize(info.dtype), compute),
        "cuMemcpyDtoDAsync (send slot)"));
  }
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuEventRecord(computeReady, compute), "cuEventRecord"));
  CLEAVE_RT_RETURN_IF_ERROR(check(cu.cuStreamWaitEvent(stream, computeReady, 0),
                                  "cuStreamWaitEvent"));
  directionPending[p.up ? 1 : 0] = true;
  cleave_rt_status status =
      send ? p.comm->send(sendSlots + p.slot, s.count, s.type, s.peer, stream)
           : p.comm->recv(s.dst, s.count, s.type, s.peer, stream);
  if (status) {
    std::string text = cleave_rt_status_message(status);
    cleave_rt_status_free(status);
    return fail(describe(info) + " failed: " + text);
  }
  CUevent done = doneEvents[std::min(inFlight.size(), doneEvents.size() - 1)];
  if (!capturing)
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuEventRecord(done, stream), "cuEventRecord (collective)"));
  inFlight.push_back({&c, p.comm, done, !capturing});
  if (recorder())
    inFlight.back().enqueuedNs = FlightRecorder::nowNs();
  if (send)
    return nullptr; // Joined at the end of the list.
  bool async = c.stream == kCommStream;
  CUevent join = async ? planEvents[static_cast<size_t>(c.event)]
                       : directionJoined[p.up ? 1 : 0];
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuEventRecord(join, stream), "cuEventRecord (receive)"));
  if (async)
    return nullptr;
  return check(cu.cuStreamWaitEvent(compute, join, 0), "cuStreamWaitEvent");
}

cleave_rt_status CudaCollectives::finishList() {
  for (int up = 0; up < 2; ++up) {
    if (!directionPending[up])
      continue;
    directionPending[up] = false;
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuEventRecord(directionJoined[up], directions[up]),
              "cuEventRecord (join)"));
    CLEAVE_RT_RETURN_IF_ERROR(
        check(cu.cuStreamWaitEvent(compute, directionJoined[up], 0),
              "cuStreamWaitEvent (join)"));
  }
  if (!commPending)
    return nullptr;
  // A valid plan waits for every asynchronous collective; joining again
  // costs nothing and keeps a capture whole even if it did not.
  commPending = false;
  CLEAVE_RT_RETURN_IF_ERROR(
      check(cu.cuEventRecord(commJoined, comm), "cuEventRecord (join)"));
  return check(cu.cuStreamWaitEvent(compute, commJoined, 0),
               "cuStreamWaitEvent (join)");
}

cleave_rt_status CudaCollectives::fail(const std::string &what,
                                       bool checkPeers) {
  clean = false;
  groups.abortAll();
  // Aborted NCCL work ends: give the streams a bounded time to drain, so
  // nothing of this run writes the arena after the error is returned.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::vector<CUstream> all = streams();
  while (std::chrono::steady_clock::now() < until &&
         std::any_of(all.begin(), all.end(), [&](CUstream s) {
           return cu.cuStreamQuery(s) == CUDA_ERROR_NOT_READY;
         }))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // After the abort, so that peers blocked in a collective with this rank
  // are released and can make the check too.
  recordEnd(0, inFlight.size(), /*ok=*/false);
  std::string message = what + (checkPeers ? lostRanks() : std::string());
  if (failure.empty())
    failure = message;
  if (recorder())
    FlightRecorder::dumpAll("rank " + std::to_string(myRank) + ": " + message);
  return makeStatus(CLEAVE_RT_UNAVAILABLE,
                    "rank " + std::to_string(myRank) + ": " + message);
}

cleave_rt_status CudaCollectives::wait(const char *what) {
  using Clock = std::chrono::steady_clock;
  if (groups.empty())
    return check(cu.cuStreamSynchronize(compute), what);
  recordStart();
  auto progressAt = Clock::now();
  // inFlight[pending] is the first collective not known complete; `before`
  // is what pending was at the previous poll.
  size_t pending = 0, before = 0;
  bool trackable = std::all_of(inFlight.begin(), inFlight.end(),
                               [](const InFlight &f) { return f.tracked; });
  auto untracked = [&]() -> std::string {
    if (inFlight.empty())
      return std::string(what);
    std::string list;
    for (size_t i = 0; i < inFlight.size() && i < 3; ++i)
      list += (i ? ", " : "") + describe(inFlight[i].command->collective);
    return "one of the run's collectives (" + list +
           (inFlight.size() > 3 ? ", ..." : "") + ")";
  };
  // The collective an asynchronous error of `which` belongs to: NCCL does
  // not say, and a failed call completes (so do the calls after it): the
  // first on that communicator not complete at the previous poll, else the
  // last on it.
  auto failedOn = [&](NcclCommunicator *which) -> std::string {
    if (!trackable)
      return untracked();
    const InFlight *last = nullptr;
    for (size_t k = 0; k < inFlight.size(); ++k) {
      if (inFlight[k].comm != which)
        continue;
      if (k >= before)
        return describe(inFlight[k].command->collective);
      last = &inFlight[k];
    }
    return last ? describe(last->command->collective) : untracked();
  };
  auto asyncFailure = [&]() -> cleave_rt_status {
    NcclCommunicator *which = nullptr;
    cleave_rt_status s = groups.asyncError(&which);
    if (!s)
      return nullptr;
    std::string text = cleave_rt_status_message(s);
    cleave_rt_status_free(s);
    // A peer's abort (or a network error) is also when a lost rank shows:
    // the check names it, as after a timeout.
    return fail(failedOn(which) + " did not complete: " + text,
                /*checkPeers=*/true);
  };
  for (int polls = 0;; ++polls) {
    bool allIdle = true;
    for (CUstream stream : streams()) {
      CUresult r = cu.cuStreamQuery(stream);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
        clean = false;
        return check(r, what);
      }
      allIdle &= r == CUDA_SUCCESS;
    }
    // Failed (or aborted) NCCL calls complete too: idle streams are a
    // success only without an asynchronous error.
    if (allIdle) {
      cleave_rt_status s = asyncFailure();
      recordEnd(0, inFlight.size(), /*ok=*/true);
      return s;
    }
    CLEAVE_RT_RETURN_IF_ERROR(asyncFailure());
    before = pending;
    while (trackable && pending < inFlight.size() &&
           cu.cuEventQuery(inFlight[pending].done) == CUDA_SUCCESS) {
      recordEnd(pending, pending + 1, /*ok=*/true);
      ++pending;
      progressAt = Clock::now();
    }
    // A timeout counts from the last collective that completed, and only
    // while one is pending (long compute work is no collective's wait).
    bool inCollective = !trackable || pending < inFlight.size();
    if (!inCollective)
      progressAt = Clock::now();
    double idle =
        std::chrono::duration<double>(Clock::now() - progressAt).count();
    if (inCollective && idle > ncclWait) {
      std::string stuck =
          (trackable ? describe(inFlight[pending].command->collective)
                     : untracked()) +
          " did not complete within " + timeoutText();
      return fail(stuck, /*checkPeers=*/true);
    }
    std::this_thread::sleep_for(polls < 200 ? std::chrono::microseconds(20)
                                            : std::chrono::microseconds(500));
  }
}

void CudaCollectives::recordStart() {
  FlightRecorder *r = recorder();
  if (!r || !file)
    return;
  for (InFlight &f : inFlight) {
    const CollectiveInfo &c = f.command->collective;
    f.record = r->begin(c, groupOf(file->mesh, c.axes, myRank),
                        static_cast<uint64_t>(c.count) * dtypeSize(c.dtype),
                        f.tracked ? f.enqueuedNs : 0);
  }
}

void CudaCollectives::recordEnd(size_t from, size_t to, bool ok) {
  FlightRecorder *r = recorder();
  for (size_t k = from; r && k < to && k < inFlight.size(); ++k)
    if (inFlight[k].record) {
      r->end(inFlight[k].record, ok);
      inFlight[k].record = 0;
    }
}

std::string CudaCollectives::timeoutText() const {
  char buf[160];
  if (ncclWait < timeout)
    std::snprintf(buf, sizeof buf,
                  "%g s (the %g s communication timeout less the %g s of the "
                  "liveness check)",
                  ncclWait, timeout, timeout - ncclWait);
  else
    std::snprintf(buf, sizeof buf, "the %g s communication timeout", timeout);
  return buf;
}

std::string CudaCollectives::lostRanks() {
  if (!rankComm || !file)
    return "";
  CollectiveInfo check;
  check.op = CollectiveOp::AllReduce;
  check.dtype = DType::F32;
  check.count = 1;
  check.id = kLivenessCheckId;
  check.source = "liveness check after an NCCL failure";
  for (uint32_t a = 0; a < file->mesh.shape.size(); ++a)
    check.axes.push_back(a);
  Group world = groupOf(file->mesh, check.axes, myRank);
  float in = 1, out = 0;
  cleave_rt_status s = rankComm->run(check, world, &in, &out);
  if (!s)
    return "; every rank is alive and reached the liveness check after it "
           "(the ranks' NCCL calls may differ)";
  std::string text = cleave_rt_status_message(s);
  cleave_rt_status_free(s);
  return "; " + text;
}

cleave_rt_status CudaCollectives::usable() const {
  if (failure.empty())
    return nullptr;
  return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                    "rank " + std::to_string(myRank) +
                        ": the NCCL communicators were aborted after an "
                        "earlier failure (" +
                        failure + ")");
}

void CudaCollectives::closeCommunicators() {
  if (groups.empty())
    return;
  if (clean)
    groups.destroyAll();
  else
    groups.abortAll();
}

} // namespace cleave::rt::cuda
