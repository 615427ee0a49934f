//===- cleave-run.cpp - Runs a compiled .cleave plan ----------------------===//
//
// cleave-run model.cleave [inputs...] [options]: reads the inputs (.npy/.pb),
// runs the plan through the runtime's C API and writes the outputs as .npy.
//
//===----------------------------------------------------------------------===//

#include "RunOptions.h"

#include "cleave/CommandProfile.h"
#include "cleave/FileUtil.h"
#include "cleave/MemoryReport.h"
#include "cleave/PipelineTrace.h"
#include "cleave/TensorFile.h"
#include "cleave/TrainingLoop.h"
#include "cleave_rt.h"

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

static const char kUsage[] =
    "usage: cleave-run MODEL.cleave [INPUT...] [options]\n"
    "       TRAIN [INPUT...] [options]   (a binary from cleave-compile "
    "--emit=exe, plan inside)\n";

// clang-format off
static const char kHelp[] =
    "Runs a compiled Cleave plan on the CPU.\n"
    "\n"
    "Inputs:\n"
    "  INPUT...                 tensor files for the plan's inputs, in input\n"
    "                           order\n"
    "  --input NAME=FILE        the file for the input named NAME\n"
    "                           (repeatable; mixes with positional inputs,\n"
    "                           which fill the inputs not named, in order)\n"
    "  Every input must be given. Formats, by extension:\n"
    "    .npy  numpy format 1.0/2.0/3.0, little-endian, C order; dtypes\n"
    "          f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1\n"
    "    .pb   a serialized onnx.TensorProto (raw_data or typed fields)\n"
    "  The shape and dtype must equal the plan's exactly; a bfloat16 input\n"
    "  may be given as uint16 data holding its bit patterns.\n"
    "\n"
    "Outputs:\n"
    "  --output-dir DIR         write each output as DIR/<name>.npy (default:\n"
    "                           the current directory); characters of the name\n"
    "                           outside [A-Za-z0-9_.-] become '_'. Files are\n"
    "                           written atomically. bfloat16 outputs are written\n"
    "                           as float32 (numpy has no bfloat16), float16 as\n"
    "                           '<f2', bool as '|b1'. The directory is\n"
    "                           created if missing. For a training plan, only\n"
    "                           given explicitly: the outputs of the last step\n"
    "                           (loss, grad_norm, grad.<name> with\n"
    "                           --return-gradients).\n"
    "  --no-output              do not write output files\n"
    "  --print-outputs          print each output's name, shape, dtype and\n"
    "                           first values\n"
    "\n"
    "Execution and statistics:\n"
    "  --backend NAME           backend to run on: cpu (default) or cuda (plans\n"
    "                           compiled with --target=cuda; needs the NVIDIA\n"
    "                           driver and a GPU)\n"
    "  --threads N              threads per rank for the generated kernels'\n"
    "                           loop nests and the library GEMMs (default:\n"
    "                           OMP_NUM_THREADS, else the cores divided among\n"
    "                           the ranks on this machine); results are the\n"
    "                           same for every count\n"
    "  --weights-dir DIR        look in DIR for the files the plan references\n"
    "                           (the model's external data, by file name)\n"
    "                           instead of the folder it was compiled from\n"
    "  --warmup N               untimed runs before the timed ones (default 0)\n"
    "  --repeat N               timed runs (default 1); outputs come from the\n"
    "                           last run\n"
    "  --print-stats            print the device (for cuda: GPU, driver and\n"
    "                           NCCL versions), the plan's peak memory (arena\n"
    "                           bytes and constant bytes), the load time and\n"
    "                           the run time (min and mean over the timed\n"
    "                           runs); for a pipelined plan, each stage's\n"
    "                           commands, arena, state bytes and markers\n"
    "  --profile                time every command of the timed runs (of a\n"
    "                           training plan: of every step after the first)\n"
    "                           and print the time per run by command kind and\n"
    "                           the 20 costliest commands (cpu backend)\n"
    "  --profile-json FILE      --profile, and every command's mean time per\n"
    "                           run written to FILE as JSON (index, kind,\n"
    "                           label, ms), to set beside cleave-sim's; rank\n"
    "                           r > 0 of a multi-rank run writes FILE with\n"
    "                           .rank<r> before its extension\n"
    "  --trace FILE             for a pipelined plan or one with step markers:\n"
    "                           the last run's (or training step's) measured\n"
    "                           timeline of every rank's steps as Chrome trace\n"
    "                           JSON (chrome://tracing, Perfetto), written by\n"
    "                           rank 0 atomically, and a line with the\n"
    "                           measured pipeline bubble\n"
    "  --measure-memory         measure what the last run (or training step)\n"
    "                           writes of the arena: every byte that holds no\n"
    "                           constant, state or input is filled with a\n"
    "                           poison pattern first, and rank 0 prints per\n"
    "                           rank the highest arena offset the run wrote\n"
    "                           (the high-water mark) beside the compiler's\n"
    "                           arena and the bytes written (cpu backend only;\n"
    "                           the fill adds to that run's time)\n"
    "\n"
    "Training (plans compiled for training; each run is one step):\n"
    "  --steps N                train until step N (counted from the start,\n"
    "                           also when resuming); required for training\n"
    "  --data NAME=FILE.npy     the dataset of data input NAME, samples along\n"
    "                           the first dimension (one per data input);\n"
    "                           batch rows follow a permutation seeded by\n"
    "                           --seed, redrawn each epoch\n"
    "  --tokens FILE.bin        a token stream for a language model: each\n"
    "                           batch row takes T+1 tokens at a seeded offset,\n"
    "                           inputs = window[:T], labels = window[1:]\n"
    "  --token-dtype uint16|uint32  the token file's element type (default\n"
    "                           uint16)\n"
    "  --synthetic              random data (integers below --synthetic-vocab,\n"
    "                           default the plan's vocab_size metadata, else\n"
    "                           the fewest values a data input takes (its\n"
    "                           valid range: an embedding's rows, the classes),\n"
    "                           else 256; floats in [-1, 1))\n"
    "  --synthetic-vocab N      vocabulary size of synthetic integer data\n"
    "  --seed S                 data-order seed (default 0; a resumed run\n"
    "                           takes the checkpoint's)\n"
    "  --log-every K            log every K steps and the last (default 1)\n"
    "  --log-json FILE          also write each logged step as one JSON object\n"
    "                           per line (step, loss, lr, grad_norm,\n"
    "                           tokens_per_s or samples_per_s, step_ms,\n"
    "                           peak_bytes)\n"
    "  --save-every K           save a checkpoint every K steps into\n"
    "  --checkpoint-dir DIR     DIR/step-<N>/ (model.safetensors, index.json,\n"
    "                           manifest.json with SHA-256s), written\n"
    "                           atomically; DIR/latest names the newest\n"
    "  --resume PATH            continue from a checkpoint: PATH/step-<N>, or\n"
    "                           the newest complete one in PATH (incomplete or\n"
    "                           damaged ones are skipped with a warning)\n"
    "  --export-safetensors FILE  write the trained parameters at the end\n"
    "  --export-onnx FILE       write the source ONNX model with the trained\n"
    "                           parameters at the end\n"
    "  --onnx-model FILE        the source model for --export-onnx (default:\n"
    "                           the path recorded in the plan)\n"
    "  A line per logged step goes to stdout; a progress bar to stderr when it\n"
    "  is a terminal. A local-SGD plan (cleave-compile --sync=local:H) runs its\n"
    "  'sync' entry after every H-th step and logs rank 0's own loss.\n"
    "\n"
    "Ranks (plans compiled for a mesh, e.g. a program with cleave.mesh):\n"
    "  A pipelined plan holds one program per stage of its 'pp' mesh axis;\n"
    "  each rank runs its stage's, with the same inputs and outputs.\n"
    "  --ranks N                run the plan's N ranks as threads of this\n"
    "                           process (local communicator); N must equal the\n"
    "                           mesh's size. Input files hold global tensors;\n"
    "                           each rank reads its shard of sharded inputs,\n"
    "                           and sharded outputs are assembled into global\n"
    "                           files. In training each data-parallel rank\n"
    "                           feeds its shard of the global batch that one\n"
    "                           rank would see. Only rank 0 prints logs; error\n"
    "                           lines name their rank.\n"
    "  --bind core|none         with --ranks: rank r's thread (and its\n"
    "                           kernels' threads) runs on cores rT to\n"
    "                           rT + T - 1 of this process's CPU set, modulo\n"
    "                           its size, T the threads per rank (default\n"
    "                           core, as mpirun --bind-to core); with more\n"
    "                           ranks than cores, consecutive ranks (tp\n"
    "                           fastest) land on different cores. none\n"
    "                           leaves the placement to the OS\n"
    "  --comm-timeout S         a collective waits at most S seconds for a\n"
    "                           peer (default 300), then every rank stops with\n"
    "                           a message naming the rank that never came and\n"
    "                           the collective\n"
    "  Under mpirun or srun (OpenMPI), each process is one rank: run\n"
    "  'mpirun -np N cleave-run MODEL.cleave ...' without --ranks. Rank 0\n"
    "  writes the outputs; an error on any rank ends the job (MPI_Abort).\n"
    "  --slow-rank R:F          a straggler: after each training step (and\n"
    "                           each run of a local-SGD plan's sync entry)\n"
    "                           rank R sleeps F - 1 times the wall time that\n"
    "                           run took on it, so its steps take F times as\n"
    "                           long (F >= 1; for measurements)\n"
    "  --debug-fault R:STEP:MODE  testing aid: rank R fails at the start of\n"
    "                           training step STEP; MODE exit (leaves\n"
    "                           silently), hang (stops answering), stop\n"
    "                           (SIGSTOP: the whole process) or crash\n"
    "                           (SIGKILL)\n"
    "\n"
    "  --help                   print this help\n"
    "\n"
    "Exit status: 0 on success, 1 on any error, 2 on a bad command line.\n";
// clang-format on

namespace {
/// Owns the runtime objects so every exit path releases them.
struct Session {
  cleave_rt_program program = nullptr;
  cleave_rt_executor executor = nullptr;
  ~Session() {
    cleave_rt_executor_destroy(executor);
    cleave_rt_program_destroy(program);
  }
};
} // namespace

static int error(const std::string &message) {
  std::fprintf(stderr, "cleave-run: %serror: %s\n",
               run::rankPrefix().c_str(), message.c_str());
  return 1;
}



static int usageError(const std::string &message) {
  std::fprintf(stderr, "cleave-run: error: %s\n%sRun 'cleave-run --help' for "
               "the options.\n",
               message.c_str(), kUsage);
  return 2;
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
                   "' is not given (" + describe(desc.dtype, {desc.dims,
                   desc.dims + desc.rank}) + "); pass it positionally or "
                   "with --input " + desc.name + "=FILE");
    HostTensor &t = (*tensors)[i];
    std::string err;
    if (!tensorfile::readTensorFile(files[i], &t, &err))
      return error("input '" + std::string(desc.name) + "': " + err);
    std::vector<int64_t> local(desc.dims, desc.dims + desc.rank);
    std::vector<int64_t> want(desc.rank), offsets(desc.rank);
    int sharded = 0;
    if (cleave_rt_status s = cleave_rt_program_input_shard(
            program, i, static_cast<size_t>(rank), want.data(),
            offsets.data(), &sharded))
      return statusError(s);
    // numpy has no bfloat16: bf16 data arrives as uint16 bit patterns (the
    // ONNX backend test data stores it so too) and is taken as such.
    if (desc.dtype == static_cast<uint32_t>(plan::DType::BF16) &&
        t.dtype == plan::DType::U16)
      t.dtype = plan::DType::BF16;
    if (t.shape != want || static_cast<uint32_t>(t.dtype) != desc.dtype)
      return error("input '" + std::string(desc.name) + "' from '" +
                   files[i] + "': expected " + describe(desc.dtype, want) +
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
    case plan::DType::F32: { float v; std::memcpy(&v, p, 4); std::printf("%g", v); break; }
    case plan::DType::F64: { double v; std::memcpy(&v, p, 8); std::printf("%g", v); break; }
    case plan::DType::BF16: {
      uint32_t bits = uint32_t(p[0]) << 16 | uint32_t(p[1]) << 24;
      float v; std::memcpy(&v, &bits, 4); std::printf("%g", v); break;
    }
    case plan::DType::I8: std::printf("%d", int8_t(p[0])); break;
    case plan::DType::U8: std::printf("%u", p[0]); break;
    case plan::DType::Bool: std::printf("%s", p[0] ? "true" : "false"); break;
    case plan::DType::I16: { int16_t v; std::memcpy(&v, p, 2); std::printf("%d", v); break; }
    case plan::DType::U16: { uint16_t v; std::memcpy(&v, p, 2); std::printf("%u", v); break; }
    case plan::DType::I32: { int32_t v; std::memcpy(&v, p, 4); std::printf("%" PRId32, v); break; }
    case plan::DType::U32: { uint32_t v; std::memcpy(&v, p, 4); std::printf("%" PRIu32, v); break; }
    case plan::DType::I64: { int64_t v; std::memcpy(&v, p, 8); std::printf("%" PRId64, v); break; }
    case plan::DType::U64: { uint64_t v; std::memcpy(&v, p, 8); std::printf("%" PRIu64, v); break; }
    case plan::DType::F16: { uint16_t v; std::memcpy(&v, p, 2); std::printf("f16:0x%04x", v); break; }
    default: std::printf("%g", plan::narrowValue(static_cast<plan::DType>(dtype), p[0])); break;
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
  // The plan this rank runs (its stage of a pipelined plan); the session
  // owns it and the executor.
  Session session;
  if (cleave_rt_status s = cleave_rt_program_stage(
          file, static_cast<size_t>(ctx.rank), &session.program))
    return statusError(s);
  cleave_rt_program program = session.program;

  std::vector<HostTensor> inputs;
  int rc = loadInputs(o, program, ctx.rank, &inputs);
  if (rc >= 0)
    return rc;

  auto t0 = std::chrono::steady_clock::now();
  if (cleave_rt_status s = cleave_rt_executor_create_ranked(
          program, o.backend.c_str(), ctx.comm, &session.executor))
    return statusError(s);
  double createMs = msSince(t0);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (cleave_rt_status s = cleave_rt_executor_set_input(
            session.executor, i, inputs[i].data.data(), inputs[i].data.size()))
      return statusError(s);

  for (long i = 0; i < o.warmup; ++i)
    if (cleave_rt_status s = cleave_rt_executor_run(session.executor))
      return statusError(s);
  if (o.train.profile)
    if (cleave_rt_status s =
            cleave_rt_executor_set_profiling(session.executor, 1))
      return statusError(s);
  double minMs = 0, totalMs = 0;
  for (long i = 0; i < o.repeat; ++i) {
    // --trace: the markers of the last run.
    if (!o.train.tracePath.empty() && i + 1 == o.repeat)
      if (cleave_rt_status s =
              cleave_rt_executor_set_tracing(session.executor, 1))
        return statusError(s);
    // --measure-memory: what the last run writes of the arena.
    if (o.train.measureMemory && i + 1 == o.repeat)
      if (cleave_rt_status s =
              cleave_rt_executor_measure_memory(session.executor, 1))
        return statusError(s);
    t0 = std::chrono::steady_clock::now();
    if (cleave_rt_status s = cleave_rt_executor_run(session.executor))
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
            cleave_rt_executor_output(session.executor, i, &data, &bytes))
      return statusError(s);
    std::vector<int64_t> shape(desc.dims, desc.dims + desc.rank);
    std::printf("%s: %s ", desc.name, describe(desc.dtype, shape).c_str());
    printValues(desc.dtype, static_cast<const uint8_t *>(data), bytes);
  }
  if (!o.noOutput) {
    rc = run::writeOutputs(program, session.executor, o.outputDir, ctx);
    if (rc >= 0)
      return rc;
  }
  if (!o.train.tracePath.empty()) {
    rc =
        run::writePipelineTrace(file, session.executor, o.train.tracePath, ctx);
    if (rc >= 0)
      return rc;
  }
  if (o.train.measureMemory) {
    rc = run::reportMemory(file, session.executor, "run", ctx);
    if (rc >= 0)
      return rc;
  }

  if (o.printStats && leader) {
    std::printf("device: %s\n",
                cleave_rt_executor_device_info(session.executor));
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
    rc = run::printProfile(session.executor, "run");
    if (rc >= 0)
      return rc;
  }
  if (!o.train.profileJson.empty() &&
      (rc = run::writeProfileJson(
           session.executor, "run",
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

/// Runs every rank of a plan over a mesh as a thread of this process, rank
/// r bound to rankCpus(..., r, threadsPerRank) unless --bind none.
static int runLocalRanks(const RunOptions &o, cleave_rt_program program,
                         int64_t world, double loadMs, long threadsPerRank) {
  cleave_rt_local_world localWorld = nullptr;
  if (cleave_rt_status s = cleave_rt_local_world_create(
          static_cast<size_t>(world), o.commTimeout, &localWorld))
    return statusError(s);
  // Shared with the rank threads, which may outlive this function when one
  // of them hangs (see below).
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int> codes;
    int64_t finished = 0;
    bool failed = false;
  };
  auto shared = std::make_shared<Shared>();
  shared->codes.assign(world, 0);
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
    threads.emplace_back([&o, &cpus, program, loadMs, world, localWorld, shared,
                          r, threadsPerRank] {
      if (o.bindRanks && !bindThread(rankCpus(cpus, r, threadsPerRank)) &&
          r == 0)
        std::fprintf(stderr, "cleave-run: warning: --bind core: the rank "
                             "threads could not be bound to cores; the OS "
                             "places them\n");
      run::setRank(r, world);
      cleave_rt_communicator comm = nullptr;
      int code = 0;
      if (cleave_rt_status s = cleave_rt_communicator_create_local(
              localWorld, static_cast<size_t>(r), &comm)) {
        code = statusError(s);
      } else {
        run::RankContext ctx{comm, r, world};
        int rc = runRank(o, program, ctx, loadMs);
        code = rc < 0 ? 0 : rc;
        if (code != 0 && !run::leftByFault())
          cleave_rt_communicator_abort(comm, "it stopped with an error");
        cleave_rt_communicator_destroy(comm);
      }
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->codes[r] = code;
      shared->failed |= code != 0;
      ++shared->finished;
      shared->cv.notify_all();
    });
  {
    // After a failure the other ranks stop within the communication
    // timeout; one that does not (it hangs outside any collective) is
    // reported, and the process ends without it.
    std::unique_lock<std::mutex> lock(shared->mu);
    shared->cv.wait(lock, [&] { return shared->failed || shared->finished == world; });
    if (shared->finished < world &&
        !shared->cv.wait_for(
            lock, std::chrono::duration<double>(o.commTimeout + 5.0),
            [&] { return shared->finished == world; })) {
      std::string hung;
      for (int64_t r = 0; r < world; ++r)
        if (shared->codes[r] == 0)
          hung += (hung.empty() ? "" : ", ") + std::to_string(r);
      std::fprintf(stderr, "cleave-run: error: rank(s) %s did not stop after "
                   "the failure; exiting without them\n", hung.c_str());
      std::fflush(stdout);
      std::_Exit(1);
    }
  }
  for (std::thread &t : threads)
    t.join();
  cleave_rt_local_world_destroy(localWorld);
  for (int code : shared->codes)
    if (code != 0)
      return code;
  return 0;
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

/// How many processes of this MPI job run on this machine (1 if the
/// launcher does not say).
static long localRanks() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                           "SLURM_NTASKS_PER_NODE"}) {
    const char *value = std::getenv(name);
    char *end = nullptr;
    long n = value ? std::strtol(value, &end, 10) : 0;
    if (value && end && *end == '\0' && n > 0)
      return n;
  }
  return 1;
}

/// The size of the MPI job this process was started in (mpirun or srun),
/// 0 without one, or -1 after printing why the launcher's environment is
/// unusable.
static long mpiWorldSize() {
  cleave_rt_launch_env_t env;
  if (cleave_rt_status s = cleave_rt_read_launch_env(&env)) {
    statusError(s);
    return -1;
  }
  std::string launcher = env.launcher;
  if (launcher == "torchrun") {
    error("launched by torchrun (RANK=" + std::to_string(env.rank) +
          ", WORLD_SIZE=" + std::to_string(env.world_size) +
          "): CPU plans run their ranks under mpirun or srun (MPI) or with "
          "--ranks, and so does the cuda backend (its NCCL communicators "
          "bootstrap over MPI or the --ranks threads); torchrun launches, "
          "without MPI, are not supported yet");
    return -1;
  }
  return launcher.empty() ? 0 : static_cast<long>(env.world_size);
}

/// This process is one rank of an MPI job.
static int runMpiRank(const RunOptions &o, cleave_rt_program program,
                      int64_t world, double loadMs) {
  cleave_rt_communicator comm = nullptr;
  if (cleave_rt_status s =
          cleave_rt_communicator_create_mpi(o.commTimeout, &comm))
    return statusError(s);
  struct Closer {
    cleave_rt_communicator c;
    ~Closer() { cleave_rt_communicator_destroy(c); }
  } closer{comm};
  int64_t rank = static_cast<int64_t>(cleave_rt_communicator_rank(comm));
  run::setRank(rank, world);
  if (static_cast<int64_t>(cleave_rt_communicator_size(comm)) != world)
    return error("MPI_COMM_WORLD has " +
                 std::to_string(cleave_rt_communicator_size(comm)) +
                 " ranks but the plan's mesh " +
                 cleave_rt_program_mesh(program) + " has " +
                 std::to_string(world));
  run::RankContext ctx{comm, rank, world};
  int rc = runRank(o, program, ctx, loadMs);
  if (rc > 0 && !run::leftByFault())
    cleave_rt_communicator_abort(comm, "it stopped with an error");
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
    std::printf("%s\n%s", kUsage, kHelp);
    return 0;
  case RunArgs::Usage:
    return usageError(problem);
  case RunArgs::Run:
    break;
  }

  Session session;
  auto t0 = std::chrono::steady_clock::now();
  if (embedded) {
    if (cleave_rt_status s = cleave_rt_program_load_memory(
            embeddedPlan.data(), embeddedPlan.size(), &session.program))
      return statusError(s);
    embeddedPlan.clear();
    embeddedPlan.shrink_to_fit();
  } else if (cleave_rt_status s = cleave_rt_program_load_file(
                 o.model.c_str(), &session.program)) {
    return statusError(s);
  }
  double loadMs = msSince(t0);
  cleave_rt_program program = session.program;
  if (!o.weightsDir.empty())
    if (cleave_rt_status s = cleave_rt_program_set_weights_dir(
            program, o.weightsDir.c_str()))
      return statusError(s);
  // A resumed run overwrites every state: the initial values the plan
  // references from the model's files are not read.
  if (!o.train.resume.empty())
    if (cleave_rt_status s = cleave_rt_program_skip_referenced_values(program))
      return statusError(s);

  // A plan over a mesh runs as many ranks as the mesh has, no more, no less.
  int64_t world = static_cast<int64_t>(cleave_rt_program_world_size(program));
  std::string mesh = cleave_rt_program_mesh(program);
  long launched = mpiWorldSize();
  if (launched < 0)
    return 1;
  if (launched > 0 && o.ranks > 0)
    return error("--ranks runs ranks as threads of one process; under "
                 "mpirun or srun every process is one rank: drop --ranks");
  if (launched > 0 && launched != world)
    return error("the launcher started " + std::to_string(launched) +
                 " processes but the plan's mesh " +
                 (mesh.empty() ? std::string("(none: one rank)") : mesh) +
                 " has " + std::to_string(world) + " rank" +
                 (world == 1 ? "" : "s"));
  if (o.ranks > 0 && o.ranks != world)
    return error("--ranks " + std::to_string(o.ranks) + " but the plan's mesh " +
                 (mesh.empty() ? std::string("(none: one rank)") : mesh) +
                 " has " + std::to_string(world) + " rank" +
                 (world == 1 ? "" : "s"));
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
  if (world > 1 && launched > 0)
    return runMpiRank(o, program, world, loadMs);
  if (world > 1)
    return runLocalRanks(o, program, world, loadMs, threadsPerRank);
  return runRank(o, program, {}, loadMs);
}
