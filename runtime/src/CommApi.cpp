//===- CommApi.cpp - cleave_rt_local_world_* and cleave_rt_communicator_* -===//

#include "Communicator.h"
#include "Launch.h"

#include "cleave/FileUtil.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cleave_rt.h"

using namespace cleave::rt;

struct cleave_rt_local_world_t {
  std::shared_ptr<LocalWorld> world;
  size_t size;
};

/// The arguments every communicator constructor of the C API checks.
static cleave_rt_status checkCreateArgs(double timeoutSeconds, const void *out,
                                        const char *outName) {
  if (!out)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      std::string(outName) + " is NULL");
  if (!(timeoutSeconds > 0))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "the communication timeout must be positive");
  return nullptr;
}

extern "C" {

cleave_rt_status
cleave_rt_local_world_create(size_t ranks, double timeout_seconds,
                             cleave_rt_local_world *out_world) {
  CLEAVE_RT_RETURN_IF_ERROR(
      checkCreateArgs(timeout_seconds, out_world, "out_world"));
  if (ranks < 1 || ranks > 4096)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "a local world has 1 to 4096 ranks, not " +
                          std::to_string(ranks));
  *out_world = new cleave_rt_local_world_t{
      createLocalWorld(static_cast<int64_t>(ranks), timeout_seconds), ranks};
  return nullptr;
}

void cleave_rt_local_world_destroy(cleave_rt_local_world world) {
  delete world;
}

cleave_rt_status
cleave_rt_communicator_create_local(cleave_rt_local_world world, size_t rank,
                                    cleave_rt_communicator *out_comm) {
  if (!world || !out_comm)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "world and out_comm must not be NULL");
  if (rank >= world->size)
    return makeStatus(CLEAVE_RT_OUT_OF_RANGE,
                      "rank " + std::to_string(rank) +
                          " is out of range (the world has " +
                          std::to_string(world->size) + " ranks)");
  *out_comm = new cleave_rt_communicator_t{
      localCommunicator(world->world, static_cast<int64_t>(rank))};
  return nullptr;
}

cleave_rt_status
cleave_rt_communicator_create_mpi(double timeout_seconds,
                                  cleave_rt_communicator *out_comm) {
  CLEAVE_RT_RETURN_IF_ERROR(
      checkCreateArgs(timeout_seconds, out_comm, "out_comm"));
  std::unique_ptr<Communicator> impl;
  CLEAVE_RT_RETURN_IF_ERROR(createMpiCommunicator(timeout_seconds, &impl));
  *out_comm = new cleave_rt_communicator_t{std::move(impl)};
  return nullptr;
}

cleave_rt_status
cleave_rt_communicator_create_gloo(double timeout_seconds,
                                   cleave_rt_communicator *out_comm) {
  CLEAVE_RT_RETURN_IF_ERROR(
      checkCreateArgs(timeout_seconds, out_comm, "out_comm"));
  auto getenv = [](const char *v) { return std::getenv(v); };
  LaunchEnv env;
  std::string error;
  if (!readLaunchEnv(getenv, &env, &error))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, error);
  if (env.launcher.empty())
    return makeStatus(CLEAVE_RT_FAILED_PRECONDITION,
                      "the gloo communicator needs a launch: RANK, "
                      "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT "
                      "(torchrun sets them)");
  // mpirun and srun say nothing of a rendezvous: the job script exports
  // MASTER_ADDR and MASTER_PORT.
  if (env.masterAddr.empty() && !readRendezvous(getenv, &env, &error))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, error);
  std::unique_ptr<Communicator> impl;
  CLEAVE_RT_RETURN_IF_ERROR(
      createGlooCommunicator(env, timeout_seconds, &impl));
  *out_comm = new cleave_rt_communicator_t{std::move(impl)};
  return nullptr;
}

void cleave_rt_communicator_destroy(cleave_rt_communicator comm) {
  delete comm;
}

size_t cleave_rt_communicator_rank(cleave_rt_communicator comm) {
  return comm ? static_cast<size_t>(comm->impl->rank()) : 0;
}

size_t cleave_rt_communicator_size(cleave_rt_communicator comm) {
  return comm ? static_cast<size_t>(comm->impl->worldSize()) : 1;
}

const char *cleave_rt_communicator_kind(cleave_rt_communicator comm) {
  return comm ? comm->impl->name() : "";
}

cleave_rt_status cleave_rt_communicator_gather(cleave_rt_communicator comm,
                                               const void *data, size_t bytes,
                                               void *out) {
  if (!comm || (!data && bytes) || (!out && bytes))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "NULL argument");
  cleave::plan::CollectiveInfo c;
  c.op = cleave::plan::CollectiveOp::AllGather;
  c.dtype = cleave::plan::DType::U8;
  c.count = static_cast<int64_t>(bytes);
  c.splitOuter = 1;
  c.splitInner = static_cast<int64_t>(bytes);
  c.id = kDriverGatherId;
  c.source = "gather of outputs or state";
  cleave::plan::Group group;
  int64_t size = comm->impl->worldSize();
  for (int64_t r = 0; r < size; ++r)
    group.ranks.push_back(r);
  group.index = comm->impl->rank();
  return comm->impl->run(c, group, data, out);
}

cleave_rt_status cleave_rt_read_launch_env(cleave_rt_launch_env_t *out) {
  if (!out)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "out is NULL");
  LaunchEnv env;
  std::string error;
  if (!readLaunchEnv([](const char *v) { return std::getenv(v); }, &env,
                     &error))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, error);
  std::memset(out, 0, sizeof *out);
  std::strncpy(out->launcher, env.launcher.c_str(), sizeof out->launcher - 1);
  out->rank = env.rank;
  out->world_size = env.worldSize;
  out->local_rank = env.localRank;
  return nullptr;
}

void cleave_rt_communicator_abort(cleave_rt_communicator comm,
                                  const char *reason) {
  if (!comm)
    return;
  // Before MPI's abort ends the process.
  if (FlightRecorder *r = comm->impl->flightRecorder()) {
    std::string err;
    if (!r->dump(std::string("abort: ") + (reason ? reason : "aborted"), &err))
      std::fprintf(stderr, "cleave: flight recorder: %s\n", err.c_str());
  }
  comm->impl->abort(reason ? reason : "aborted");
}

void cleave_rt_communicator_abort_with_code(cleave_rt_communicator comm,
                                            const char *reason, int exit_code) {
  if (!comm)
    return;
  comm->impl->setAbortExitCode(exit_code);
  cleave_rt_communicator_abort(comm, reason);
}

cleave_rt_status
cleave_rt_communicator_set_flight_recorder(cleave_rt_communicator comm,
                                           const char *dir, size_t capacity) {
  if (!comm || !dir || !*dir)
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "comm and dir must not be NULL or empty");
  if (capacity < 1 || capacity > (size_t(1) << 24))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT,
                      "a flight recorder keeps 1 to 16777216 records, not " +
                          std::to_string(capacity));
  std::string err;
  if (!cleave::makeDirectories(dir, &err))
    return makeStatus(CLEAVE_RT_INVALID_ARGUMENT, "--flight-recorder: " + err);
  comm->impl->setFlightRecorder(std::make_unique<FlightRecorder>(
      dir, comm->impl->rank(), comm->impl->worldSize(), capacity));
  return nullptr;
}

double cleave_rt_communicator_timeout(cleave_rt_communicator comm) {
  return comm ? comm->impl->timeoutSeconds() : 0;
}

} // extern "C"
