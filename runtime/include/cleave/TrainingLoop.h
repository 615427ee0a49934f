//===- TrainingLoop.h - The training loop drivers share ---------*- C++ -*-===//
//
// The loop that trains a training plan: data (npy, token stream, synthetic;
// each data-parallel rank its shard of the global batch), the learning-rate
// schedule, step logs (text and JSON, rank 0 only), checkpoints and resume,
// exports (safetensors, ONNX). cleave-run, binaries written by
// cleave-compile --emit=exe and MPI launches all drive it, over the C API.

#ifndef CLEAVE_TRAININGLOOP_H
#define CLEAVE_TRAININGLOOP_H

#include "cleave_rt.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cleave::training {

struct TrainOptions {
  long steps = -1; ///< Total steps to reach (a resumed run continues to it).
  std::vector<std::pair<std::string, std::string>> data; ///< --data NAME=FILE
  std::string tokens, tokenDType = "uint16";
  bool synthetic = false;
  long syntheticVocab = -1; ///< -1: metadata "vocab_size", else 256.
  uint64_t seed = 0;
  bool seedGiven = false;
  long logEvery = 1;
  std::string logJson;
  long saveEvery = 0;
  std::string checkpointDir, resume, exportPath;
  /// --export-onnx OUT: the source model (--onnx-model, default the plan's
  /// `source_model` metadata) with the trained parameters written back.
  std::string exportOnnx, onnxModel;
  /// --debug-fault RANK:STEP:MODE (for tests of failure handling): rank RANK
  /// fails at the start of step STEP (1-based): `exit` leaves without a
  /// word to its peers, `hang` stops answering, `crash` kills the process.
  int64_t faultRank = -1, faultStep = 0;
  std::string faultMode;
  /// --output-dir DIR: every output of the last step (loss, grad_norm and,
  /// in plans compiled with --return-gradients, grad.<name>) as .npy.
  std::string outputDir;
  /// --trace FILE: the last step's measured pipeline timeline
  /// (writePipelineTrace).
  std::string tracePath;
  /// --measure-memory: the last step is measured
  /// (cleave_rt_executor_measure_memory) and every rank's figures printed
  /// (reportMemory).
  bool measureMemory = false;
  /// --slow-rank R:F (a straggler, for measurements): after each step (and
  /// each run of the plan's sync entry) rank R sleeps (F - 1) times the
  /// wall time that run took on it, so its compute takes F times as long.
  int64_t slowRank = -1;
  double slowFactor = 1.0;
};

/// The file name an output is written to: `<name>.npy`, with characters
/// other than letters, digits, '_', '.' and '-' replaced by '_'.
std::string outputFileName(const std::string &name);

/// Checks that no two outputs of `program` would be written to one file and
/// creates `dir`; on failure sets *error.
bool prepareOutputDir(cleave_rt_program program, const std::string &dir,
                      std::string *error);

/// The rank this thread runs for (a plan over a mesh runs one rank per
/// thread with --ranks, or one per process under mpirun).
struct RankContext {
  cleave_rt_communicator comm = nullptr; ///< Null for a one-rank run.
  int64_t rank = 0, worldSize = 1;
};

/// Writes every output of the executor's last run as DIR/<name>.npy
/// (atomically, bfloat16 as float32); returns an exit code on failure, else
/// -1. Over several ranks every rank calls it: a sharded output's parts are
/// gathered through ctx.comm and rank 0 writes the global tensor; a
/// replicated output is rank 0's copy.
int writeOutputs(cleave_rt_program program, cleave_rt_executor executor,
                 const std::string &dir, const RankContext &ctx = {});

/// True if any training option was given (so the plan must be a training
/// plan).
bool anyTrainingOption(const TrainOptions &o);

/// One line per stage of a pipelined plan ("stage 1: 42 commands, arena
/// 4096 bytes, states 1024 bytes, 8 markers"); none for a plan that is not
/// pipelined.
std::vector<std::string> describeStages(cleave_rt_program program);

/// The name messages start with ("cleave-run: error: ..."); "cleave" by
/// default.
void setProgramName(const std::string &name);
const std::string &programName();

/// Sets this thread's rank: with more than one rank every message is
/// prefixed "rank R: ", and only rank 0 prints logs and writes files.
void setRank(int64_t rank, int64_t worldSize);
/// "rank R: " or "".
const std::string &rankPrefix();
/// True on rank 0.
bool isLeader();
/// True if this thread's rank left through --debug-fault ...:exit (its
/// driver must not abort the peers: they are to find out by themselves).
bool leftByFault();

/// Runs the training loop of a training plan for `ctx`'s rank; returns the
/// exit code. `program` is the plan as loaded (of a pipelined plan the
/// whole file: the rank runs its stage, and checkpoints and exports cover
/// every stage's states). Every rank feeds its shard of the same global
/// batch a one-rank run would see. With o.resume, rank 0 chooses and verifies
/// the checkpoint and every rank reads only its shards of it; a driver calls
/// cleave_rt_program_skip_referenced_values first (once, before the ranks
/// start) so that the plan's initial values are not read for nothing.
int runTraining(const TrainOptions &o, cleave_rt_program program,
                const std::string &backend, const RankContext &ctx = {});

} // namespace cleave::training

#endif // CLEAVE_TRAININGLOOP_H
