//===- cleave-run.cpp - Runs a compiled .cleave plan ----------------------===//
//
// cleave-run model.cleave [inputs...] [options]: reads the inputs (.npy/.pb),
// runs the plan through the runtime's C API and writes the outputs as .npy.
//
//===----------------------------------------------------------------------===//

#include "Restarts.h"
#include "RunOptions.h"

#include "cleave/CommandProfile.h"
#include "cleave/ExitCodes.h"
#include "cleave/FileUtil.h"
#include "cleave/MemoryReport.h"
#include "cleave/PipelineTrace.h"
#include "cleave/TensorFile.h"
#include "cleave/TrainingLoop.h"
#include "cleave/cleave_rt.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

using namespace cleave;
namespace run = cleave::training;
using tensorfile::HostTensor;

static int error(const std::string &message) {
  std::fprintf(stderr, "cleave-run: %serror: %s\n", run::rankPrefix().c_str(),
               message.c_str());
  return 1;
}

static int usageError(const std::string &message) {
  std::fprintf(stderr,
               "cleave-run: error: %s\n%sRun 'cleave-run --help' for "
               "the options.\n",
               message.c_str(), runUsage());
  return kExitUsage;
}

/// Converts a failed status to an error exit; frees it.
static int statusError(cleave_rt_status status) {
  std::string msg = cleave_rt_status_message(status);
  cleave_rt_status_free(status);
  return error(msg);
}

static std::string describe(uint32_t dtype, const std::vector<int64_t> &shape) {
  return "shape " + tensorfile::shapeToString(shape) + " " +
         cleave_rt_dtype_name(dtype);
}

/// Assigns a file to every input, reads it and checks it against the plan
/// (files hold global tensors; a sharded input keeps `rank`'s shard).
static int loadInputs(const RunOptions &o, cleave_rt_program program,
                      int64_t rank, std::vector<HostTensor> *tensors) {
  size_t count = cleave_rt_program_input_count(program);
  std::vector<std::string> files(count);
  for (const auto &nf : o.named) {
    size_t index;
    if (cleave_rt_status s =
            cleave_rt_program_find_input(program, nf.first.c_str(), &index))
      return statusError(s);
    if (!files[index].empty())
      return error("input '" + nf.first + "' is given twice");
    files[index] = nf.second;
  }
  size_t next = 0;
  for (const std::string &file : o.positional) {
    while (next < count && !files[next].empty())
      ++next;
    if (next == count)
      return error("too many inputs: the plan has " + std::to_string(count) +
                   " inputs, '" + file + "' is one too many");
    files[next] = file;
  }
  tensors->resize(count);
  for (size_t i = 0; i < count; ++i) {
    cleave_rt_tensor_desc_t desc;
    if (cleave_rt_status s = cleave_rt_program_input_desc(program, i, &desc))
      return statusError(s);
    if (files[i].empty())
      return error("input " + std::to_string(i) + " '" + desc.name +
                   "' is not given (" +
                   describe(desc.dtype, {desc.dims, desc.dims + desc.rank}) +
                   "); pass it positionally or "
                   "with --input " +
                   desc.name + "=FILE");
    HostTensor &t = (*tensors)[i];
    std::string err;
    if (!tensorfile::readTensorFile(files[i], &t, &err))
      return error("input '" + std::string(desc.name) + "': " + err);
    std::vector<int64_t> local(desc.dims, desc.dims + desc.rank);
    std::vector<int64_t> want(desc.rank), offsets(desc.rank);
    int sharded = 0;
    if (cleave_rt_status s = cleave_rt_program_input_shard(
            program, i, static_cast<size_t>(rank), want.data(), offsets.data(),
            &sharded))
      return statusError(s);
    // numpy has no bfloat16: bf16 data arrives as uint16 bit patterns (the
    // ONNX backend test data stores it so too) and is taken as such.
    if (desc.dtype == static_cast<uint32_t>(plan::DType::BF16) &&
        t.dtype == plan::DType::U16)
      t.dtype = plan::DType::BF16;
    if (t.shape != want || static_cast<uint32_t>(t.dtype) != desc.dtype)
      return error("input '" + std::string(desc.name) + "' from '" + files[i] +
                   "': expected " + describe(desc.dtype, want) +
                   (sharded ? " (the global tensor)" : "") + ", got " +
                   describe(static_cast<uint32_t>(t.dtype), t.shape));
    if (sharded) {
      std::vector<uint8_t> shard(desc.byte_size);
      plan::copyShard(want, local, offsets, cleave_rt_dtype_size(desc.dtype),
                      t.data.data(), shard.data(), /*toGlobal=*/false);
      t.data = std::move(shard);
      t.shape = local;
    }
  }
  return -1;
}

static void printValues(uint32_t dtype, const uint8_t *p, size_t bytes) {
  size_t elem = cleave_rt_dtype_size(dtype);
  size_t n = elem ? bytes / elem : 0, shown = std::min<size_t>(n, 8);
  std::printf("[");
  for (size_t i = 0; i < shown; ++i, p += elem) {
    if (i)
      std::printf(", ");
    switch (static_cast<plan::DType>(dtype)) {
    case plan::DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      std::printf("%g", v);
      break;
    }
    case plan::DType::F64: {
      double v;
      std::memcpy(&v, p, 8);
      std::printf("%g", v);
      break;
    }
    case plan::DType::BF16: {
      uint32_t bits = uint32_t(p[0]) << 16 | uint32_t(p[1]) << 24;
      float v;
      std::memcpy(&v, &bits, 4);
      std::printf("%g", v);
      break;
    }
    case plan::DType::I8:
      std::printf("%d", int8_t(p[0]));
      break;
    case plan::DType::U8:
      std::printf("%u", p[0]);
      break;
    case plan::DType::Bool:
      std::printf("%s", p[0] ? "true" : "false");
      break;
    case plan::DType::I16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      std::printf("%d", v);
      break;
    }
    case plan::DType::U16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      std::printf("%u", v);
      break;
    }
    case plan::DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      std::printf("%" PRId32, v);
      break;
    }
    case plan::DType::U32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      std::printf("%" PRIu32, v);
      break;
    }
    case plan::DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      std::printf("%" PRId64, v);
      break;
    }
    case plan::DType::U64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      std::printf("%" PRIu64, v);
      break;
    }
    case plan::DType::F16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      std::printf("f16:0x%04x", v);
      break;
    }
    default:
      std::printf("%g",
                  plan::narrowValue(static_cast<plan::DType>(dtype), p[0]));
      break;
    }
  }
  std::printf("%s]\n", n > shown ? ", ..." : "");
}

static double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

/// Runs rank ctx.rank of the plan (all of it for a one-rank plan).
static int runRank(const RunOptions &o, cleave_rt_program file,
                   const run::RankContext &ctx, double loadMs) {
  cleave_rt_training_info_t training;
  if (cleave_rt_status s = cleave_rt_program_training_info(file, &training))
    return statusError(s);
  if (training.enabled || run::anyTrainingOption(o.train))
    return run::runTraining(o.train, file, o.backend, ctx);
  // The plan this rank runs (its stage of a pipelined plan) and its
  // executor.
  cleave_rt::Program program;
  cleave_rt::Executor executor;
  if (cleave_rt_status s = cleave_rt_program_stage(
          file, static_cast<size_t>(ctx.rank), program.out()))
    return statusError(s);

  std::vector<HostTensor> inputs;
  int rc = loadInputs(o, program, ctx.rank, &inputs);
  if (rc >= 0)
    return rc;

  auto t0 = std::chrono::steady_clock::now();
  if (cleave_rt_status s = cleave_rt_executor_create_ranked(
          program, o.backend.c_str(), ctx.comm, executor.out()))
    return statusError(s);
  double createMs = msSince(t0);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (cleave_rt_status s = cleave_rt_executor_set_input(
            executor, i, inputs[i].data.data(), inputs[i].data.size()))
      return statusError(s);

  for (long i = 0; i < o.warmup; ++i)
    if (cleave_rt_status s = cleave_rt_executor_run(executor))
      return statusError(s);
  if (o.train.profile)
    if (cleave_rt_status s = cleave_rt_executor_set_profiling(executor, 1))
      return statusError(s);
  double minMs = 0, totalMs = 0;
  for (long i = 0; i < o.repeat; ++i) {
    // --trace: the markers of the last run.
    if (!o.train.tracePath.empty() && i + 1 == o.repeat)
      if (cleave_rt_status s = cleave_rt_executor_set_tracing(executor, 1))
        return statusError(s);
    // --measure-memory: what the last run writes of the arena.
    if (o.train.measureMemory && i + 1 == o.repeat)
      if (cleave_rt_status s = cleave_rt_executor_measure_memory(executor, 1))
        return statusError(s);
    t0 = std::chrono::steady_clock::now();
    if (cleave_rt_status s = cleave_rt_executor_run(executor))
      return statusError(s);
    double ms = msSince(t0);
    minMs = i == 0 ? ms : std::min(minMs, ms);
    totalMs += ms;
  }

  bool leader = run::isLeader();
  for (size_t i = 0;
       leader && o.printOutputs && i < cleave_rt_program_output_count(program);
       ++i) {
    cleave_rt_tensor_desc_t desc;
    const void *data;
    size_t bytes;
    if (cleave_rt_status s = cleave_rt_program_output_desc(program, i, &desc))
      return statusError(s);
    if (cleave_rt_status s =
            cleave_rt_executor_output(executor, i, &data, &bytes))
      return statusError(s);
    std::vector<int64_t> shape(desc.dims, desc.dims + desc.rank);
    std::printf("%s: %s ", desc.name, describe(desc.dtype, shape).c_str());
    printValues(desc.dtype, static_cast<const uint8_t *>(data), bytes);
  }
  if (!o.noOutput) {
    rc = run::writeOutputs(program, executor, o.outputDir, ctx);
    if (rc >= 0)
      return rc;
  }
  if (!o.train.tracePath.empty()) {
    rc = run::writePipelineTrace(file, executor, o.train.tracePath, ctx);
    if (rc >= 0)
      return rc;
  }
  if (o.train.measureMemory) {
    rc = run::reportMemory(file, executor, "run", ctx);
    if (rc >= 0)
      return rc;
  }

  if (o.printStats && leader) {
    std::printf("device: %s\n", cleave_rt_executor_device_info(executor));
    if (ctx.worldSize > 1)
      std::printf("ranks: %" PRId64 " (mesh %s, %s communicator), "
                  "%zu collectives\n",
                  ctx.worldSize, cleave_rt_program_mesh(program),
                  cleave_rt_communicator_kind(ctx.comm),
                  cleave_rt_program_collective_count(program));
    std::printf("peak memory: %" PRIu64 " bytes (arena), of which %" PRIu64
                " bytes of constants\n",
                cleave_rt_program_peak_bytes(program),
                cleave_rt_program_constant_bytes(program));
    for (const std::string &line : run::describeStages(file))
      std::printf("pipeline %s\n", line.c_str());
    std::printf("load time: %.3f ms (plan) + %.3f ms (executor)\n", loadMs,
                createMs);
    std::printf("run time: min %.3f ms, mean %.3f ms over %ld run%s "
                "(%ld warmup)\n",
                minMs, totalMs / o.repeat, o.repeat, o.repeat == 1 ? "" : "s",
                o.warmup);
  }
  if (o.train.profile && leader) {
    rc = run::printProfile(executor, "run");
    if (rc >= 0)
      return rc;
  }
  if (!o.train.profileJson.empty() &&
      (rc = run::writeProfileJson(
           executor, "run",
           run::profileJsonPath(o.train.profileJson, ctx.rank))) >= 0)
    return rc;
  return 0;
}

/// The CPUs of rank `rank` under --bind core: `threads` of `allowed` (the
/// process's CPU set, in order) from rank * threads on, wrapping around.
static std::vector<int> rankCpus(const std::vector<int> &allowed, int64_t rank,
                                 long threads) {
  std::vector<int> cpus;
  // More threads than CPUs wrap around onto the same CPUs: each once.
  long distinct = std::min<long>(threads, long(allowed.size()));
  for (long j = 0; j < distinct; ++j)
    cpus.push_back(allowed[(rank * threads + j) % allowed.size()]);
  return cpus;
}

/// Binds the calling thread to `cpus`; false if there are none or the OS
/// refuses.
static bool bindThread(const std::vector<int> &cpus) {
  if (cpus.empty())
    return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    CPU_SET(c, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

/// The CPUs this process may run on, in order.
static std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set))
        cpus.push_back(c);
  return cpus;
}

/// --flight-recorder DIR: `comm` records its collectives.
static cleave_rt_status setFlightRecorder(const RunOptions &o,
                                          cleave_rt_communicator comm) {
  if (o.flightRecorder.empty())
    return nullptr;
  return cleave_rt_communicator_set_flight_recorder(
      comm, o.flightRecorder.c_str(),
      static_cast<size_t>(o.flightRecorderSize));
}

/// How this thread's rank ended, from runRank's code.
static RankOutcome rankOutcome(int code) {
  RankOutcome out;
  out.code = code;
  out.stepsDone = run::lastStepsDone();
  std::string error = run::takeLastError(), note = run::takeInjectedFaultNote();
  out.reason = !note.empty() ? note : error;
  return out;
}

/// Runs every rank of a plan over a mesh as a thread of this process, rank
/// r bound to rankCpus(..., r, threadsPerRank) unless --bind none; one
/// attempt of runWithRestarts. With `retry`, a failure releases the ranks
/// an injected hang holds, for the restart.
static std::vector<RankOutcome> runLocalRanks(const RunOptions &o,
                                              cleave_rt_program program,
                                              int64_t world, double loadMs,
                                              long threadsPerRank, bool retry) {
  cleave_rt::LocalWorld localWorld;
  if (cleave_rt_status s = cleave_rt_local_world_create(
          static_cast<size_t>(world), o.commTimeout, localWorld.out()))
    return {RankOutcome{statusError(s), 0, ""}};
  // Shared with the rank threads, which may outlive this function when one
  // of them hangs (see below).
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<RankOutcome> outcomes;
    std::vector<bool> done;
    int64_t finished = 0;
    bool failed = false;
  };
  auto shared = std::make_shared<Shared>();
  shared->outcomes.resize(world);
  shared->done.assign(world, false);
  std::vector<std::thread> threads;
  std::vector<int> cpus = o.bindRanks ? allowedCpus() : std::vector<int>();
  if (o.bindRanks && o.printStats && !cpus.empty()) {
    std::string where;
    for (int64_t r = 0; r < world; ++r) {
      where += (r ? "; " : "") + std::to_string(r) + ":";
      const char *sep = " ";
      for (int c : rankCpus(cpus, r, threadsPerRank)) {
        where += sep + std::to_string(c);
        sep = ",";
      }
    }
    std::printf("ranks bound to CPUs (--bind core): %s\n", where.c_str());
  }
  for (int64_t r = 0; r < world; ++r)
    threads.emplace_back([&o, &cpus, program, loadMs, world,
                          localWorld = localWorld.get(), shared, r,
                          threadsPerRank] {
      if (o.bindRanks && !bindThread(rankCpus(cpus, r, threadsPerRank)) &&
          r == 0)
        std::fprintf(stderr, "cleave-run: warning: --bind core: the rank "
                             "threads could not be bound to cores; the OS "
                             "places them\n");
      run::setRank(r, world);
      int code = 0;
      if (cleave_rt::Communicator comm;
          cleave_rt_status s = cleave_rt_communicator_create_local(
              localWorld, static_cast<size_t>(r), comm.out())) {
        code = statusError(s);
      } else if (cleave_rt_status s = setFlightRecorder(o, comm)) {
        code = statusError(s);
      } else {
        run::RankContext ctx{comm, r, world};
        int rc = runRank(o, program, ctx, loadMs);
        code = rc < 0 ? 0 : rc;
        if (code != 0 && !run::leftByFault())
          cleave_rt_communicator_abort(comm, "it stopped with an error");
      }
      RankOutcome outcome = rankOutcome(code);
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->outcomes[r] = outcome;
      shared->done[r] = true;
      shared->failed |= code != 0;
      ++shared->finished;
      shared->cv.notify_all();
    });
  {
    // After a failure the other ranks stop within the communication
    // timeout; one that does not (it hangs outside any collective) is
    // reported, and the process ends without it. Before a restart, the
    // ranks an injected hang holds are released.
    std::unique_lock<std::mutex> lock(shared->mu);
    shared->cv.wait(
        lock, [&] { return shared->failed || shared->finished == world; });
    if (shared->finished < world && retry)
      run::releaseInjectedHangs();
    if (shared->finished < world &&
        !shared->cv.wait_for(
            lock, std::chrono::duration<double>(o.commTimeout + 5.0),
            [&] { return shared->finished == world; })) {
      std::string hung;
      for (int64_t r = 0; r < world; ++r)
        if (!shared->done[r])
          hung += (hung.empty() ? "" : ", ") + std::to_string(r);
      std::fprintf(stderr,
                   "cleave-run: error: rank(s) %s did not stop after "
                   "the failure; exiting without them\n",
                   hung.c_str());
      std::fflush(stdout);
      std::_Exit(combinedExit(shared->outcomes));
    }
  }
  for (std::thread &t : threads)
    t.join();
  return shared->outcomes;
}

/// Sets how many threads each rank on this machine runs: the generated
/// kernels' parallel loop nests and oneDNN's GEMMs run on an OpenMP team of
/// OMP_NUM_THREADS threads (read when libgomp loads, after this), and
/// OpenBLAS is told through openblas_set_num_threads (it read its variables
/// when it loaded). `threads` (--threads) sets both; else each of
/// OMP_NUM_THREADS and OPENBLAS_NUM_THREADS that is set explicitly is kept
/// and each that is not gets the ranks' share of the cores: otherwise every
/// rank starts a thread per core, and N ranks spin N times as many threads
/// as there are cores (a step of the small GPT at dp=2 x tp=2 took 20-100
/// ms instead of 10; at pp=2 with only OPENBLAS_NUM_THREADS=1 set, 10 ms
/// instead of 2.4). Ranks that are threads of this process each get an
/// OpenMP team of that size. Returns the size of a rank's team.
static long shareThreads(long ranksOnThisMachine, long threads) {
  bool forced = threads > 0;
  if (!forced) {
    long cores = std::max(1u, std::thread::hardware_concurrency());
    if (ranksOnThisMachine <= 1)
      return cores;
    threads = std::max(1L, cores / ranksOnThisMachine);
  }
  std::string count = std::to_string(threads);
  if (forced || !std::getenv("OMP_NUM_THREADS"))
    setenv("OMP_NUM_THREADS", count.c_str(), 1);
  if (forced || !std::getenv("OPENBLAS_NUM_THREADS")) {
    setenv("OPENBLAS_NUM_THREADS", count.c_str(), 1);
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(
            dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
      set(static_cast<int>(threads));
  }
  // The kernels' team: OMP_NUM_THREADS as now set (an explicit value wins).
  long team = std::strtol(std::getenv("OMP_NUM_THREADS"), nullptr, 10);
  return team > 0 ? team : threads;
}

/// How many processes of this job run on this machine (1 if the launcher
/// does not say).
static long localRanks() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                           "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"}) {
    const char *value = std::getenv(name);
    char *end = nullptr;
    long n = value ? std::strtol(value, &end, 10) : 0;
    if (value && end && *end == '\0' && n > 0)
      return n;
  }
  return 1;
}

/// The size of the job this process was started in (mpirun, srun or
/// torchrun), 0 without one, or -1 after printing why the launcher's
/// environment is unusable. *gloo: whether its ranks talk over Gloo
/// (torchrun, or CLEAVE_COMM=gloo) rather than MPI (CLEAVE_COMM=mpi).
static long launchedWorldSize(bool *gloo) {
  cleave_rt_launch_env_t env;
  if (cleave_rt_status s = cleave_rt_read_launch_env(&env)) {
    statusError(s);
    return -1;
  }
  std::string launcher = env.launcher;
  *gloo = launcher == "torchrun";
  if (const char *comm = std::getenv("CLEAVE_COMM"); comm && *comm) {
    if (std::string(comm) != "gloo" && std::string(comm) != "mpi") {
      error(std::string("CLEAVE_COMM='") + comm +
            "': the ranks of a launched job communicate over 'mpi' or "
            "'gloo'");
      return -1;
    }
    *gloo = std::string(comm) == "gloo";
  }
  return launcher.empty() ? 0 : static_cast<long>(env.world_size);
}

/// This process is one rank of a launched job: over Gloo, else MPI.
static int runLaunchedRank(const RunOptions &o, cleave_rt_program program,
                           int64_t world, double loadMs, bool gloo) {
  cleave_rt::Communicator comm;
  if (cleave_rt_status s =
          gloo ? cleave_rt_communicator_create_gloo(o.commTimeout, comm.out())
               : cleave_rt_communicator_create_mpi(o.commTimeout, comm.out()))
    return statusError(s);
  int64_t rank = static_cast<int64_t>(cleave_rt_communicator_rank(comm));
  run::setRank(rank, world);
  if (cleave_rt_status s = setFlightRecorder(o, comm))
    return statusError(s);
  if (static_cast<int64_t>(cleave_rt_communicator_size(comm)) != world)
    return error(std::string(gloo ? "the launcher's world" : "MPI_COMM_WORLD") +
                 " has " + std::to_string(cleave_rt_communicator_size(comm)) +
                 " ranks but the plan's mesh " +
                 cleave_rt_program_mesh(program) + " has " +
                 std::to_string(world));
  run::RankContext ctx{comm, rank, world};
  int rc = runRank(o, program, ctx, loadMs);
  // The job ends with this rank's code: a peer failure stays retryable.
  if (rc > 0 && !run::leftByFault())
    cleave_rt_communicator_abort_with_code(comm, "it stopped with an error",
                                           rc);
  return rc > 0 ? rc : 0;
}

int main(int argc, char **argv) {
  run::setProgramName("cleave-run");
  // A binary from cleave-compile --emit=exe carries its plan.
  std::vector<uint8_t> embeddedPlan;
  bool embedded = false;
  std::string embedError;
  if (!plan::readEmbeddedPlan("/proc/self/exe", &embeddedPlan, &embedded,
                              &embedError))
    return error(embedError);
  RunOptions o;
  std::string problem;
  switch (parseRunArgs(argc, argv, embedded, &o, &problem)) {
  case RunArgs::Help:
    std::fputs(runHelp().c_str(), stdout);
    return 0;
  case RunArgs::Usage:
    return usageError(problem);
  case RunArgs::Run:
    break;
  }

  cleave_rt::Program program;
  auto t0 = std::chrono::steady_clock::now();
  if (embedded) {
    if (cleave_rt_status s = cleave_rt_program_load_memory(
            embeddedPlan.data(), embeddedPlan.size(), program.out()))
      return statusError(s);
    embeddedPlan.clear();
    embeddedPlan.shrink_to_fit();
  } else if (cleave_rt_status s =
                 cleave_rt_program_load_file(o.model.c_str(), program.out())) {
    return statusError(s);
  }
  double loadMs = msSince(t0);
  if (!o.weightsDir.empty())
    if (cleave_rt_status s =
            cleave_rt_program_set_weights_dir(program, o.weightsDir.c_str()))
      return statusError(s);
  // --resume=auto: a checkpoint directory, or a fresh start.
  if (std::string err; !run::resolveAutoResume(&o.train, &err))
    return error(err);
  // A resumed run overwrites every state: the initial values the plan
  // references from the model's files are not read.
  if (!o.train.resume.empty())
    if (cleave_rt_status s = cleave_rt_program_skip_referenced_values(program))
      return statusError(s);

  // A plan over a mesh runs as many ranks as the mesh has, no more, no less.
  int64_t world = static_cast<int64_t>(cleave_rt_program_world_size(program));
  std::string mesh = cleave_rt_program_mesh(program);
  bool gloo = false;
  long launched = launchedWorldSize(&gloo);
  if (launched < 0)
    return 1;
  if (launched > 0 && o.ranks > 0)
    return error("--ranks runs ranks as threads of one process; under "
                 "mpirun, srun or torchrun every process is one rank: drop "
                 "--ranks");
  if (launched > 0 && launched != world)
    return error("the launcher started " + std::to_string(launched) +
                 " processes but the plan's mesh " +
                 (mesh.empty() ? std::string("(none: one rank)") : mesh) +
                 " has " + std::to_string(world) + " rank" +
                 (world == 1 ? "" : "s"));
  if (o.ranks > 0 && o.ranks != world)
    return error(
        "--ranks " + std::to_string(o.ranks) + " but the plan's mesh " +
        (mesh.empty() ? std::string("(none: one rank)") : mesh) + " has " +
        std::to_string(world) + " rank" + (world == 1 ? "" : "s"));
  size_t stages = cleave_rt_program_stage_count(program);
  if (o.ranks == 0 && world > 1 && launched <= 0)
    return error(
        (stages ? "the plan is pipelined over pp=" + std::to_string(stages) +
                      " (mesh " + mesh + ", " + std::to_string(world) +
                      " ranks, each running its stage)"
                : "the plan is partitioned over mesh " + mesh + " (" +
                      std::to_string(world) + " ranks)") +
        ": run it with --ranks " + std::to_string(world) +
        " (threads of one process) or under mpirun -np " +
        std::to_string(world));
  if (!o.train.tracePath.empty() && stages == 0 &&
      cleave_rt_program_marker_count(program) == 0)
    return error("--trace needs a pipelined plan or a plan with step "
                 "markers, and this plan has neither (nothing would be "
                 "measured)");

  cleave_rt_training_info_t training;
  if (cleave_rt_status s = cleave_rt_program_training_info(program, &training))
    return statusError(s);
  bool isTraining = training.enabled || run::anyTrainingOption(o.train);
  if (isTraining) {
    if (!o.positional.empty() || !o.named.empty())
      return error("a training plan takes its inputs from --data, --tokens "
                   "or --synthetic, not from input files");
    if (o.outputDirGiven)
      o.train.outputDir = o.outputDir;
  } else {
    // Output file names are checked before running, so a collision costs
    // nothing and no file is half-written.
    std::string outputError;
    if (!o.noOutput &&
        !run::prepareOutputDir(program, o.outputDir, &outputError))
      return error(outputError);
  }
  long threadsPerRank =
      shareThreads(launched > 0 ? localRanks() : world, o.threads);
  if (launched > 0 && o.maxRestarts > 0)
    return error("--max-restarts restarts ranks of this process (--ranks); "
                 "under mpirun or srun the job script restarts the job: "
                 "loop on exit status 75 with --resume=auto "
                 "(docs/guide/cleave-run.md#restarts)");
  if (o.maxRestarts > 0 && !isTraining)
    return error("--max-restarts restarts training runs, and this plan is "
                 "not a training plan");
  if (world > 1 && launched > 0)
    return runLaunchedRank(o, program, world, loadMs, gloo);
  if (world > 1)
    return runWithRestarts(o, [&](const RunOptions &now, bool retry) {
      return runLocalRanks(now, program, world, loadMs, threadsPerRank, retry);
    });
  return runWithRestarts(o, [&](const RunOptions &now, bool) {
    int rc = runRank(now, program, {}, loadMs);
    return std::vector<RankOutcome>{rankOutcome(rc < 0 ? 0 : rc)};
  });
}
